"""The term index: every term's record positions as a roaring bitmap, what the fast path
intersects.  Kept in the private zone (codec in :mod:`cocktail.chunkformat`), so that a reader
deserializes it instead of resolving every chunk's index through the pseudonym maps;
:func:`cocktail.audit.audit_term_indexes` is the owner's check that it agrees with the chunks.

**Parts.**  A version's index is a list of parts (:class:`IndexLayout`), each over a range
``[start, stop)`` of record positions; in order they tile ``[0, records)``.  A part is written
once, by one version (its *home*, whose directory holds its files), and later versions list it
in their manifests without copying or reading it: a record's terms never change once published,
so the index over old positions never changes, and an append only adds a part for its new
positions ``[n, N)`` (:func:`plan_parts`).  A fresh publish writes parts of at most
``index_shard`` records (``SHARD_RECORDS`` by default, so most publications have one).

**Merging.**  So that daily appends do not pile up parts, after adding its new part an append
merges the last two parts while the second-to-last holds at most ``MERGE_RATIO`` (2) times the
last's records and together they fit in ``index_shard``: the merged part is written by the
appending version, from the merged parts' bitmaps read back to record positions.  Sizes then
fall by more than half from each part to the next, so a version has at most about log2(N / b)
+ 1 parts for batches of b records (plus N / index_shard full ones), and a record is rewritten
O(log N) times over its life: an append costs O(batch · log N) amortized; the append that
carries the counter over rewrites the parts it merges (at most ``index_shard`` records).

**Order.**  A part numbers its records in an order of its own (its order file maps it back):
sorted by which of the part's ``ORDER_TERMS`` most frequent terms they hold, ties by position,
so that those terms' bitmaps are a few long runs.  A count does not depend on how records are
numbered; in this order the index is a third smaller and a conjunction is counted about twice
as fast (1M records: docs/engines.md).  A part's bitmaps hold *index positions* in its own
range, so the union over parts needs no shifting, and the parts' orders end to end are the
version's numbering (:meth:`IndexLayout` / ``Publication.index_order``).  Record positions are
what the audit needs (:func:`record_numbering`).

A cluster job counts each part's file in its own map task and sums
(:mod:`cocktail.query.backends.shards`), since every record lies in exactly one part.

Versions written before parts hold one index over all records, in shards of index positions
with one order (or none: records numbered by position); they are read, served, audited and
appended to as one part at home in that version."""

from __future__ import annotations

import array
import hashlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from pyroaring import BitMap, FrozenBitMap

from .. import chunkformat as fmt
from ..store import Store

SHARD_RECORDS = 1 << 24  # record positions per part at most: ~80 MB of index at 5 terms a record
ORDER_TERMS = 16  # the most frequent terms whose presence orders a part's records
MERGE_RATIO = 2  # merge the last two parts while the first holds at most this times the last

Read = Callable[[str], bytes]  # a private path -> its bytes


# -- what a version's index is made of ------------------------------------------------------

@dataclass(frozen=True)
class IndexPart:
    """One part: its bitmaps ``files`` (one; several for a sharded index written before
    parts) and its ``order`` (None: records numbered by position), paths relative to the
    directory of version ``home``."""

    home: str
    start: int
    stop: int
    files: tuple[str, ...]
    sha256: tuple[str, ...]
    order: str | None
    order_sha256: str | None

    @property
    def records(self) -> int:
        return self.stop - self.start

    def paths(self) -> list[str]:
        """The bitmaps files' paths in the private zone."""
        return [f"{self.home}/{name}" for name in self.files]

    @property
    def order_path(self) -> str | None:
        return None if self.order is None else f"{self.home}/{self.order}"

    def all_paths(self) -> list[str]:
        """Every file of the part in the private zone: its bitmaps and its order, if any."""
        return [*self.paths(), *([self.order_path] if self.order_path else [])]

    def entry(self) -> dict:
        return {"home": self.home, "start": self.start, "stop": self.stop,
                "files": list(self.files), "sha256": list(self.sha256),
                "order": self.order, "order_sha256": self.order_sha256}

    @classmethod
    def from_entry(cls, entry: object, name: str) -> IndexPart:
        try:
            if not isinstance(entry, dict):
                raise TypeError("not an object")
            files, digests = entry["files"], entry["sha256"]
            if not isinstance(files, list) or not isinstance(digests, list) or not files or \
                    not all(isinstance(f, str) for f in files + digests):
                raise TypeError("files and sha256 must be lists of strings")
            order, order_sha = entry["order"], entry["order_sha256"]
            if not isinstance(order, (str, type(None))) or \
                    not isinstance(order_sha, (str, type(None))):
                raise TypeError("order and order_sha256 must be strings or null")
            start, stop, home = entry["start"], entry["stop"], entry["home"]
            if not isinstance(start, int) or not isinstance(stop, int) or \
                    not isinstance(home, str):
                raise TypeError("home must be a string, start and stop integers")
        except (KeyError, TypeError) as exc:
            raise fmt.FormatError(f"{name}: unreadable term index part: {exc}") from None
        if any(".." in f.split("/") or f.startswith("/") for f in [*files, order or ""]):
            raise fmt.FormatError(f"{name}: a part's file leaves its home's directory")
        return cls(home, start, stop, tuple(files), tuple(digests), order, order_sha)


@dataclass(frozen=True)
class IndexLayout:
    """A version's index: its record count and its parts, in order.  ``legacy``: written
    before parts, one part over every record (its manifest entry has no parts)."""

    records: int
    parts: tuple[IndexPart, ...]
    shard_records: int | None = None
    legacy: bool = False

    def entry(self) -> dict:
        """The private manifest's ``term_index`` (and ``terms/parts.json``)."""
        return {"records": self.records, "shard_records": self.shard_records,
                "parts": [part.entry() for part in self.parts]}

    def gaps(self) -> str | None:
        """What is wrong with how the parts tile ``[0, records)``, None if nothing."""
        at = 0
        for number, part in enumerate(self.parts):
            if part.start != at or part.stop < part.start:
                kind = "overlaps its predecessor" if part.start < at else \
                    "leaves a gap after its predecessor" if part.start > at else "is empty"
                return (f"part {number} ({part.home}, positions {part.start}..{part.stop}) "
                        f"{kind}: it should start at {at}")
            at = part.stop
        if at != self.records:
            return f"the parts cover positions 0..{at}, the index counts {self.records} records"
        return None


def layout_from_manifest(version: str, entry: object, name: str = "term_index") -> IndexLayout:
    """The layout a manifest's ``term_index`` (or ``terms/parts.json``) describes; an entry
    without parts is an index written before them, one part at home in ``version``."""
    if not isinstance(entry, dict) or not isinstance(entry.get("records"), int):
        raise fmt.FormatError(f"{name}: no record count")
    if "parts" in entry:
        if not isinstance(entry["parts"], list):
            raise fmt.FormatError(f"{name}: parts must be a list")
        return IndexLayout(entry["records"],
                           tuple(IndexPart.from_entry(p, name) for p in entry["parts"]),
                           entry.get("shard_records"))
    digests = entry.get("sha256") or []
    digests = [digests] if isinstance(digests, str) else list(digests)
    files = tuple(fmt.term_index_name(n) for n in range(max(1, len(digests))))
    order_sha = entry.get("order_sha256")
    return IndexLayout(entry["records"], (IndexPart(
        version, 0, entry["records"], files, tuple(digests), fmt.TERM_ORDER if order_sha else None,
        order_sha),), entry.get("shard_records"), legacy=True)


def stored_layout(store: Store, version: str, read: Read | None = None) -> IndexLayout | None:
    """The version's index as its own files say, without its manifest: ``terms/parts.json``,
    or for an index written before parts its first shard's header (read through ``read``, so
    a caller may keep the bytes); None for a version written before there was an index."""
    read = read or (lambda path: store.read("private", path))
    parts = f"{version}/{fmt.TERM_PARTS}"
    if store.exists("private", parts):
        return layout_from_manifest(version, fmt.decode_json(read(parts), f"private/{parts}"),
                                    f"private/{parts}")
    first = fmt.term_index_path(version)
    if not store.exists("private", first):
        return None
    header = fmt.decode_term_index(read(first), f"private/{first}")
    records = header.stop if header.records is None else header.records
    order = fmt.TERM_ORDER if store.exists("private", fmt.term_order_path(version)) else None
    files = tuple(fmt.term_index_name(n) for n in range(header.shards))
    return IndexLayout(records, (IndexPart(version, 0, records, files, (), order, None),),
                       legacy=True)


# -- reading ---------------------------------------------------------------------------------

def check_files(files: Sequence[fmt.TermIndexFile], start: int, stop: int, name: str,
                numbered: bool = True) -> None:
    """The files, in order, tile the index positions ``[start, stop)``; shards of an index
    written before parts (one part's files, ``numbered``) also number themselves in order and
    name its record count."""
    at = start
    for number, file in enumerate(files):
        if numbered and file.records is not None and (file.records, file.shards, file.shard) \
                != (stop, len(files), number) or file.start != at:
            raise fmt.FormatError(
                f"{name}: file {number} of {len(files)} does not follow its predecessors "
                f"(positions from {file.start}, expected from {at}"
                + ("" if file.records is None else
                   f"; shard {file.shard} of {file.shards} over {file.records} records") + ")")
        at = file.stop
    if at != stop:
        raise fmt.FormatError(f"{name}: {len(files)} file(s) over positions {start}..{at}, "
                              f"the part covers {start}..{stop}")


def read_part(store: Store, part: IndexPart, read: Read | None = None
              ) -> list[fmt.TermIndexFile]:
    """A part's bitmaps files, checked to tile its range."""
    read = read or (lambda path: store.read("private", path))
    _check_home(part)
    files = [fmt.decode_term_index(read(path), f"private/{path}") for path in part.paths()]
    check_files(files, part.start, part.stop, f"private/{part.paths()[0]}")
    return files


def _check_home(part: IndexPart) -> None:
    """A reader goes nowhere but into a version's directory (the audit names the part)."""
    if not fmt.VERSION_RE.match(part.home):
        raise fmt.FormatError(f"a term index part's home {part.home!r} is not a version")


def read_order(store: Store, part: IndexPart) -> np.ndarray:
    """The record position at each of the part's index positions (its order file; the
    identity for a part written in record order)."""
    _check_home(part)
    if part.order_path is None:
        return np.arange(part.start, part.stop, dtype=np.uint32)
    return fmt.decode_term_order(store.read("private", part.order_path), part.records,
                                 f"private/{part.order_path}")


class TermIndex(Mapping[str, FrozenBitMap]):
    """term -> index positions, read from the parts' files: each bitmap is deserialized (and
    its parts' pieces unioned) the first time it is asked for, so a reader pays only for the
    terms its queries name."""

    def __init__(self, files: Sequence[fmt.TermIndexFile], records: int | None = None,
                 name: str = fmt.TERM_INDEX) -> None:
        numbered = records is None  # one index written before parts, in its shards
        if numbered:
            if not files:
                raise fmt.FormatError(f"{name}: no shard")
            records = files[0].stop if files[0].records is None else files[0].records
        check_files(files, 0, records, name, numbered)
        self.records = records
        self._serialized: dict[str, list[memoryview]] = {}
        for file in files:
            for term, data in file.bitmaps.items():
                self._serialized.setdefault(term, []).append(data)
        self._open: dict[str, FrozenBitMap] = {}

    @classmethod
    def decode(cls, data: bytes, name: str = fmt.TERM_INDEX) -> TermIndex:
        """An index stored in one file from position 0."""
        return cls([fmt.decode_term_index(data, name)], None, name)

    def __getitem__(self, term: str) -> FrozenBitMap:
        found = self._open.get(term)
        if found is None:
            parts = self._serialized[term]
            found = FrozenBitMap.deserialize(parts[0]) if len(parts) == 1 else \
                FrozenBitMap(BitMap.union(*(BitMap.deserialize(p) for p in parts)))
            self._open[term] = found
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._serialized)

    def __len__(self) -> int:
        return len(self._serialized)


def read_term_index(store: Store, layout: IndexLayout, read: Read | None = None) -> TermIndex:
    """The index of ``layout``: every part's files (each part checked to tile its range, the
    parts to tile the version's)."""
    problem = layout.gaps()
    name = f"private/{layout.parts[0].paths()[0]}" if layout.parts else "term index"
    if problem:
        raise fmt.FormatError(f"{name}: {problem}")
    files = [file for part in layout.parts for file in read_part(store, part, read)]
    return TermIndex(files, layout.records, name)


def index_order(store: Store, layout: IndexLayout) -> np.ndarray | None:
    """The record position at each index position of the version (the parts' orders end to
    end), None when every part numbers its records by position."""
    if all(part.order is None for part in layout.parts):
        return None
    return np.concatenate([read_order(store, part) for part in layout.parts]) \
        if layout.parts else np.empty(0, dtype=np.uint32)


def part_postings(store: Store, part: IndexPart) -> dict[str, BitMap]:
    """A part's bitmaps back in record positions (to merge it into a new part)."""
    order, found = read_order(store, part), {}
    for file in read_part(store, part):
        for term, data in file.bitmaps.items():
            positions = order[as_array(BitMap.deserialize(data)) - part.start]
            found.setdefault(term, []).append(positions)
    return {term: bitmap_of(np.concatenate(pieces)) for term, pieces in found.items()}


def count_conjunction(index: Mapping[str, FrozenBitMap], terms: Sequence[str]) -> int:
    """Records (of the index, or of one part) holding all of ``terms``, at least one."""
    found = [index.get(term) for term in terms]
    if any(f is None for f in found):
        return 0
    if len(found) == 1:
        return len(found[0])
    found.sort(key=len)
    common = found[0]
    for other in found[1:-1]:
        common = common & other
    return common.intersection_cardinality(found[-1])


# -- writing ---------------------------------------------------------------------------------

class TermIndexBuilder:
    """Collects (term, record positions) while a version's chunks are written, or merges the
    pieces of a Spark job's tasks."""

    # Pairs held as arrays (8 bytes each, and the sort's copies) before they are added: at 1M
    # records, 4M of them raised the publish's peak from 426 MB to 484 MB.
    PENDING_PAIRS = 1 << 20

    def __init__(self) -> None:
        self._bitmaps: dict[str, BitMap] = {}
        self._pending: list[tuple[Sequence[str], np.ndarray, np.ndarray]] = []
        self._pending_pairs = 0

    @property
    def bitmaps(self) -> dict[str, BitMap]:
        self._flush()
        return self._bitmaps

    def add_pairs(self, names: Sequence[str], terms: np.ndarray, positions: np.ndarray) -> None:
        """(record position, term) pairs as arrays: the term of pair i is
        ``names[terms[i]]``.  Gathered, and added millions at a time: one sort and one
        bitmap update per term for them all rather than per chunk or unit."""
        self._pending.append((names, terms, positions.astype(np.uint32)))
        self._pending_pairs += len(terms)
        if self._pending_pairs >= self.PENDING_PAIRS:
            self._flush()

    def _flush(self) -> None:
        for _, run in itertools.groupby(self._pending, key=lambda pending: id(pending[0])):
            run = list(run)
            terms = np.concatenate([terms for _, terms, _ in run])
            positions = np.concatenate([positions for _, _, positions in run])
            names = run[0][0]
            # Stable sorts of 16-bit keys are radix sorts: linear in the pairs.
            order = np.argsort(terms.astype(np.min_scalar_type(len(names))), kind="stable")
            terms, held = terms[order], positions[order].tobytes()
            starts = np.flatnonzero(np.diff(terms, prepend=-1)).tolist()
            for term, start, stop in zip(terms[starts].tolist(), starts,
                                         [*starts[1:], len(terms)]):
                self._add(names[term], array.array("I", held[4 * start:4 * stop]))
        self._pending, self._pending_pairs = [], 0

    def _add(self, term: str, positions: array.array) -> None:
        # An array.array of uint32 is what roaring takes without a Python int per value.
        if term in self._bitmaps:
            self._bitmaps[term].update(positions)
        else:
            self._bitmaps[term] = BitMap(positions)

    def update(self, index: Mapping[str, BitMap | FrozenBitMap]) -> None:
        for term, positions in index.items():
            if term in self._bitmaps:
                self._bitmaps[term] |= positions
            else:
                self._bitmaps[term] = BitMap(positions)

    def encode_piece(self) -> bytes:
        """Everything by record position in one file: a Spark task's piece, which the driver
        merges (:meth:`add_piece`) into the version's builder."""
        bitmaps = self.bitmaps
        top = max((b.max() for b in bitmaps.values() if b), default=-1)
        return fmt.encode_term_part(((t, bitmaps[t].serialize()) for t in sorted(bitmaps)),
                                    0, top + 1)

    def add_piece(self, data: bytes) -> None:
        piece = fmt.decode_term_index(data, "term index piece")
        self.update({term: BitMap.deserialize(b) for term, b in piece.bitmaps.items()})

    def within(self, start: int, stop: int) -> dict[str, BitMap]:
        """The terms' record positions in ``[start, stop)`` (the builder's own bitmaps when
        they lie inside)."""
        window, found = None, {}
        for term, positions in self.bitmaps.items():
            if positions and start <= positions.min() and positions.max() < stop:
                found[term] = positions
                continue
            if window is None:
                window = BitMap()
                window.add_range(start, stop)
            inside = positions & window
            if inside:
                found[term] = inside
        return found


@dataclass(frozen=True)
class PendingPart:
    """A part the writing version makes: over ``[start, stop)``, from the records of the
    carried parts it ``merged`` and the builder's records past them."""

    start: int
    stop: int
    merged: tuple[IndexPart, ...] = ()

    @property
    def records(self) -> int:
        return self.stop - self.start


def plan_parts(carried: Sequence[IndexPart], records: int, shard_records: int
               ) -> list[IndexPart | PendingPart]:
    """A version's parts: the ``carried`` ones (tiling the positions before the new records),
    then new parts of at most ``shard_records`` over the rest, each new part merged with the
    last while the last holds at most ``MERGE_RATIO`` times its records and they fit in
    ``shard_records`` together (module docstring)."""
    parts: list[IndexPart | PendingPart] = list(carried)
    at = carried[-1].stop if carried else 0
    if at > records:
        raise ValueError(f"the carried parts cover {at} records, the version holds {records}")
    while at < records:
        parts.append(PendingPart(at, min(records, at + shard_records)))
        at = parts[-1].stop
        while len(parts) >= 2 and parts[-2].records <= MERGE_RATIO * parts[-1].records and \
                parts[-2].records + parts[-1].records <= shard_records:
            last, before = parts.pop(), parts.pop()
            parts.append(PendingPart(before.start, last.stop,
                                     _merged(before) + _merged(last)))
    return parts


def _merged(part: IndexPart | PendingPart) -> tuple[IndexPart, ...]:
    return part.merged if isinstance(part, PendingPart) else (part,)


def encode_part(bitmaps: Mapping[str, BitMap | FrozenBitMap], start: int, stop: int
                ) -> tuple[bytes, bytes]:
    """A part over ``[start, stop)`` from its terms' record positions (all inside it): its
    bitmaps file (index positions) and its order file."""
    order = part_order(bitmaps, start, stop)
    renumber = np.empty(stop - start, dtype=np.uint32)  # record -> index position
    renumber[order - start] = np.arange(start, stop, dtype=np.uint32)
    pieces = []
    for term in sorted(bitmaps):
        if bitmaps[term]:
            numbered = bitmap_of(renumber[as_array(bitmaps[term]) - start])
            numbered.run_optimize()
            pieces.append((term, numbered.serialize()))
    return fmt.encode_term_part(pieces, start, stop), fmt.encode_term_order(order)


def part_order(bitmaps: Mapping[str, BitMap | FrozenBitMap], start: int, stop: int
               ) -> np.ndarray:
    """The record positions of ``[start, stop)`` in the part's index order: by the presence
    of its ``ORDER_TERMS`` most frequent terms (the most frequent first, holders before the
    others), then by position.  A function of the records alone, so both engines number
    records alike."""
    frequent = sorted(bitmaps, key=lambda term: (-len(bitmaps[term]), term))[:ORDER_TERMS]
    key = np.zeros(stop - start, dtype=np.uint32)
    for bit, term in enumerate(frequent):
        key[as_array(bitmaps[term]) - start] |= np.uint32(1 << (31 - bit))
    return (np.argsort(~key, kind="stable") + start).astype(np.uint32)


def write_parts(store: Store, version: str, carried: Sequence[IndexPart],
                builder: TermIndexBuilder, records: int, shard_records: int,
                write: Callable[[str, bytes], None]) -> tuple[IndexLayout, list[IndexPart]]:
    """Plan the parts of ``version``, write the new ones through ``write`` (name in the
    version's directory, bytes) from the builder's records past the carried parts and from
    the carried parts they merge; the layout, and the carried parts merged away."""
    floor = carried[-1].stop if carried else 0
    parts, merged = [], []
    for planned in plan_parts(carried, records, shard_records):
        if isinstance(planned, IndexPart):
            parts.append(planned)
            continue
        # The builder also holds pairs of old records an append placed anew (its buffer's,
        # a promotion's): the carried parts hold them already, a record's terms never change.
        bitmaps = builder.within(max(floor, planned.start), planned.stop)
        for source in planned.merged:
            for term, positions in part_postings(store, source).items():
                bitmaps[term] = bitmaps[term] | positions if term in bitmaps else positions
        index, order = encode_part(bitmaps, planned.start, planned.stop)
        files = fmt.term_part_names(planned.start, planned.stop)
        write(files[0], index)
        write(files[1], order)
        parts.append(IndexPart(version, planned.start, planned.stop, (files[0],),
                               (hashlib.sha256(index).hexdigest(),), files[1],
                               hashlib.sha256(order).hexdigest()))
        merged += planned.merged
    return IndexLayout(records, tuple(parts), shard_records), merged


def part_without(part: IndexPart, postings: Mapping[str, BitMap], version: str,
                 positions: BitMap, write: Callable[[str, bytes], None]) -> IndexPart:
    """``part`` (its ``postings``, :func:`part_postings`) rewritten without the records at
    ``positions`` (an erasure), as a part of ``version`` over the same range: its bitmaps and
    its order, written through ``write``."""
    bitmaps = {term: held - positions for term, held in postings.items()}
    index, order = encode_part({t: b for t, b in bitmaps.items() if b}, part.start, part.stop)
    files = fmt.term_part_names(part.start, part.stop)
    write(files[0], index)
    write(files[1], order)
    return IndexPart(version, part.start, part.stop, (files[0],),
                     (hashlib.sha256(index).hexdigest(),), files[1],
                     hashlib.sha256(order).hexdigest())


def record_numbering(index: Mapping[str, FrozenBitMap], order: np.ndarray | None
                     ) -> dict[str, FrozenBitMap]:
    """The index by record position (``order``: the record at each index position; None for
    an index written in record order)."""
    if order is None:
        return {term: index[term] for term in index}
    return {term: FrozenBitMap(bitmap_of(order[as_array(index[term])])) for term in index}


def as_array(positions: BitMap | FrozenBitMap) -> np.ndarray:
    return np.frombuffer(positions.to_array(), dtype=np.uint32)


def bitmap_of(values: np.ndarray) -> BitMap:
    """A bitmap of uint32 values in any order (sorted first: roaring adds those fastest)."""
    return BitMap(array.array("I", np.sort(values).tobytes()))


class ResolvedIndex(dict):
    """term -> positions, resolved from chunks; ``repeated`` counts the (record, term) pairs
    that more than one chunk held (none in a sound version: the audit's check)."""

    repeated = 0


def build_term_index(chunks: Iterable[tuple[dict[str, int], Iterable[tuple[str, list[str]]]]]
                     ) -> ResolvedIndex:
    """The index resolved from chunks: per chunk, its pseudonym -> position map and its
    inverted index, (term, pseudonyms).  Each (record, term) pair sits in exactly one chunk,
    so the union over chunks is exact."""
    records: dict[str, BitMap] = {}
    read = 0
    for names, postings in chunks:
        for term, pseudonyms in postings:
            records.setdefault(term, BitMap()).update(names[p] for p in pseudonyms)
            read += len(pseudonyms)
    resolved = ResolvedIndex((term, FrozenBitMap(found)) for term, found in records.items())
    resolved.repeated = read - sum(map(len, records.values()))
    return resolved
