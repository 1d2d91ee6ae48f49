"""The term index: every term's record positions as a roaring bitmap, what the fast path
intersects.  Written once per version into the private zone (``terms.roaring``, codec in
:mod:`cocktail.chunkformat`), so that a reader deserializes it instead of resolving every
chunk's index through the pseudonym maps; :func:`cocktail.audit.audit_term_indexes` is the
owner's check that it agrees with the chunks.

The index numbers records in an order of its own (``terms.order`` maps it back): sorted by
which of the ``ORDER_TERMS`` most frequent terms they hold, so that those terms' bitmaps are a
few long runs.  A count does not depend on how records are numbered; in this order the index
is a third smaller and a conjunction is counted about twice as fast (1M records:
docs/engines.md).  Record positions are what an append and the audit need
(:func:`record_numbering`).

A large version's index is cut into shards of index positions (``SHARD_RECORDS`` each by
default): one machine unions them, a cluster job counts each shard in its own task and sums
(:mod:`cocktail.query.backends.shards`), since every record lies in exactly one shard."""

from __future__ import annotations

import array
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
from pyroaring import BitMap, FrozenBitMap

from .. import chunkformat as fmt
from ..store import Store

SHARD_RECORDS = 1 << 24  # index positions per shard: ~80 MB of index at 5 terms a record
ORDER_TERMS = 16  # the most frequent terms whose presence orders the index's records


class TermIndex(Mapping[str, FrozenBitMap]):
    """term -> record positions, read from the shards' files: each bitmap is deserialized
    (and its shards' parts unioned) the first time it is asked for, so a reader pays only for
    the terms its queries name."""

    def __init__(self, shards: Sequence[fmt.TermIndexShard], name: str = fmt.TERM_INDEX) -> None:
        check_shards(shards, name)
        self.records = shards[0].records
        self._serialized: dict[str, list[memoryview]] = {}
        for shard in shards:
            for term, data in shard.bitmaps.items():
                self._serialized.setdefault(term, []).append(data)
        self._open: dict[str, FrozenBitMap] = {}

    @classmethod
    def decode(cls, data: bytes, name: str = fmt.TERM_INDEX) -> TermIndex:
        """An index stored in one shard."""
        return cls([fmt.decode_term_index(data, name)], name)

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


def check_shards(shards: Sequence[fmt.TermIndexShard], name: str) -> None:
    """The shards, in order, tile the version's record positions."""
    if not shards:
        raise fmt.FormatError(f"{name}: no shard")
    records, count, at = shards[0].records, shards[0].shards, 0
    for number, shard in enumerate(shards):
        if (shard.records, shard.shards, shard.shard, shard.start) != (records, count, number, at):
            raise fmt.FormatError(f"{name}: shard {number} of {len(shards)} does not follow "
                                  f"its predecessors (records {shard.records}, shard "
                                  f"{shard.shard} of {shard.shards} from position {shard.start})")
        at = shard.stop
    if len(shards) != count or at != records:
        raise fmt.FormatError(f"{name}: {len(shards)} shard(s) over positions 0..{at}, the "
                              f"index says {count} over {records} records")


def stored_shards(store: Store, version: str) -> Iterator[tuple[str, bytes]]:
    """(path, bytes) of each stored shard, in order, each yielded before it is decoded (the
    audit checks its sha256 first): none for a version written before there was an index.
    The first shard's header names how many follow."""
    path = fmt.term_index_path(version)
    if not store.exists("private", path):
        return
    data = store.read("private", path)
    yield path, data
    for number in range(1, fmt.decode_term_index(data, f"private/{path}").shards):
        path = fmt.term_index_path(version, number)
        yield path, store.read("private", path)


def read_term_index(store: Store, version: str) -> TermIndex | None:
    """The version's stored index (None when it was written before there was one)."""
    shards = [fmt.decode_term_index(data, f"private/{path}")
              for path, data in stored_shards(store, version)]
    return TermIndex(shards, f"private/{fmt.term_index_path(version)}") if shards else None


def count_conjunction(index: Mapping[str, FrozenBitMap], terms: Sequence[str]) -> int:
    """Records (of the index, or of one shard) holding all of ``terms``, at least one."""
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


class TermIndexBuilder:
    """Collects (term, positions) while a version's chunks are written, or merges the
    indexes of parts (a Spark task's units)."""

    def __init__(self) -> None:
        self.bitmaps: dict[str, BitMap] = {}

    def add_members(self, members: Iterable[tuple[int, Sequence[str]]]) -> None:
        """(record position, its terms in one chunk)."""
        postings: dict[str, list[int]] = {}
        for position, terms in members:
            for term in terms:
                postings.setdefault(term, []).append(position)
        for term, positions in postings.items():
            self.bitmaps.setdefault(term, BitMap()).update(positions)

    def update(self, index: Mapping[str, BitMap | FrozenBitMap]) -> None:
        for term, positions in index.items():
            if term in self.bitmaps:
                self.bitmaps[term] |= positions
            else:
                self.bitmaps[term] = BitMap(positions)

    def discard(self, positions: BitMap) -> None:
        """Forget these records (an append places its buffer's records anew)."""
        for term in list(self.bitmaps):
            self.bitmaps[term].difference_update(positions)
            if not self.bitmaps[term]:
                del self.bitmaps[term]

    def encode(self, records: int, shard_records: int = SHARD_RECORDS
               ) -> tuple[bytes, Iterator[bytes]]:
        """The index order, and the shards one at a time (each over a range of index
        positions).  The builder is spent: its bitmaps now hold index positions."""
        order = index_order(self.bitmaps, records)
        renumber = np.empty(records, dtype=np.uint32)
        renumber[order] = np.arange(records, dtype=np.uint32)
        for term, positions in self.bitmaps.items():
            self.bitmaps[term] = bitmap_of(renumber[as_array(positions)])
        return fmt.encode_term_order(order), self._shards(records, shard_records)

    def encode_part(self) -> bytes:
        """Everything in one piece and by record position, to be merged into a version's
        index (a Spark task's part): the count, order and shards are the driver's to give."""
        return next(self._shards(0, 1))

    def _shards(self, records: int, shard_records: int) -> Iterator[bytes]:
        for bitmap in self.bitmaps.values():
            bitmap.run_optimize()
        count = max(1, -(-records // shard_records))
        for shard in range(count):
            start, stop = shard * shard_records, min(records, (shard + 1) * shard_records)
            window = None if count == 1 else BitMap(range(start, stop))
            parts = ((term, self.bitmaps[term] if window is None else self.bitmaps[term] & window)
                     for term in sorted(self.bitmaps))
            yield fmt.encode_term_index(records, ((t, b.serialize()) for t, b in parts if b),
                                        shard, count, start, stop)


def index_order(bitmaps: Mapping[str, BitMap | FrozenBitMap], records: int) -> np.ndarray:
    """The record positions in index order: by the presence of the ``ORDER_TERMS`` most
    frequent terms (the most frequent first, holders before the others), then by position.
    A function of the index alone, so both engines number records alike."""
    frequent = sorted(bitmaps, key=lambda term: (-len(bitmaps[term]), term))[:ORDER_TERMS]
    key = np.zeros(records, dtype=np.uint32)
    for bit, term in enumerate(frequent):
        key[as_array(bitmaps[term])] |= np.uint32(1 << (31 - bit))
    return np.argsort(~key, kind="stable").astype(np.uint32)


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
