"""Taking records back: erase people (``forget``) or a whole bad release (``retract``), as one
new release that the public cloud cannot diff against the last to re-associate what
disassociation split (docs/releases.md, "Taking it back").

The public cloud keeps every version.  Dropping an erased record's lines would show, chunk by
chunk, which subrecords vanished together: the record's terms, re-associated across the chunks
of its cluster.  Fresh pseudonyms or a fresh line order do not help, since the difference of
two chunks' multisets of subrecords is the erased subrecord whatever the lines are called.
So a release that erases **retires** every cluster (unit) in which an erased record had a
public line: all of that unit's public chunks leave the public zone, and their remaining lines
stay in the private zone as private chunks, under the same ids, marked ``retired``.  The
public cloud sees whole clusters vanish and no chunk change: the remaining public chunks are
the ones it had, byte for byte.  A retired chunk's pairs are never published again (the
promotion leaves them out: publishing them anew would be a second chunking of the same
records).  Units where erased records were private only are rewritten in the private zone.

Everything else the erased records left goes too: their lines in private chunks, their rows in
the pseudonym maps, their ids (a position keeps a ``null`` placeholder, so that no other
record moves) and keys, their positions in the term index, their place in the buffer.  The
files that held them are superseded, and pruned with the versions that referenced them: by
default every older version at once (``keep=1``), so that the erasure is complete when the
call returns.  The release log records the count and the reason, never an id or a term.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np
from pyroaring import BitMap

from .. import chunkformat as fmt
from .. import releases
from ..overlay.planner import aggregates_above
from ..query.termindex import IndexPart, layout_from_manifest, part_postings, part_without
from ..query.view import Publication
from ..store import Store, StoreError
from . import log_legacy_release, refuse_derived
from .append import _carried_units, _old_segments, _pairs
from .batch import collector_paused
from .carried import carried_lines
from .writer import VersionWriter, owner_key

@dataclass(frozen=True)
class ErasureReport:
    """The receipt for the data-protection officer: what was erased, never whose."""

    store: str
    version: str               # the release that erased
    kind: str                  # forget or retract
    reason: str
    retracted: str | None      # the release taken back (retract)
    records_erased: int
    retired_clusters: int      # clusters whose public chunks left the public zone
    retired_chunks: int
    rewritten_private_chunks: int
    public_chunks: int
    public_coverage: float | None
    files_removed: int         # files of earlier versions this release superseded (those that
    #                            held erased records among them), deleted from both zones
    files_pending: int         # such files a kept older version still references
    kept_versions: list[str]   # the versions that remain (files_pending is theirs)
    seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def forget(store: Store, record_ids: Iterable[str], reason: str, keep: int = 1
           ) -> ErasureReport:
    """Erase the records named by ``record_ids`` (the ids the publication gives them: the
    input's, or ``v000003:17`` for a FIMI or SPMF line) from the current release, as a new
    release; ``keep``: versions kept afterwards (1: the erasure is complete on return)."""
    wanted = list(dict.fromkeys(record_ids))
    if not wanted:
        raise ValueError("no record id to forget: nothing written")
    return _erase(store, "forget", reason, keep,
                  lambda publication: _positions_of(publication, wanted))


def retract(store: Store, version: str, reason: str, keep: int = 1) -> ErasureReport:
    """Erase every record that release ``version`` added (those not erased since), as a new
    release."""
    def added(publication: Publication) -> dict[int, tuple[str, int]]:
        logged = [e for e in releases.read_log(publication.store, publication.version)
                  if e["version"] == version]
        if not logged or logged[0]["kind"] not in ("fresh", "append", "rebase", "imported"):
            raise ValueError(f"{version} is no release of records in {publication.store.url}: "
                             "nothing written")
        entry = logged[0]
        start = entry["records"] - entry["appended"]
        return _rows_at(publication, range(start, entry["records"]))
    return _erase(store, "retract", reason, keep, added, retracted=version)


def _erase(store: Store, kind: str, reason: str, keep: int, find, retracted: str | None = None
           ) -> ErasureReport:
    started = time.perf_counter()
    if not reason.strip():
        raise ValueError("say why (a reason goes in the release log): nothing written")
    with releases.begin(store) as out, collector_paused():
        if out.current is None:
            raise StoreError(f"{store.url} holds no publication: nothing to erase")
        refuse_derived(store, out.current)
        log_legacy_release(store, out.current)
        run = _Erasure(out, store, kind)
        erased = find(run.publication)
        if not erased:
            raise ValueError(f"{'release ' + retracted if retracted else 'those records'}: "
                             "no record left to erase, nothing written")
        run.erase(erased)
        return run.commit(reason, keep, retracted, started)


def _positions_of(publication: Publication, wanted: list[str]) -> dict[int, tuple[str, int]]:
    """position -> (record id, leaf unit) of each wanted id; an id the publication does not
    hold (never published, or erased already) is refused, naming it."""
    found: dict[int, tuple[str, int]] = {}
    left = {json.encoder.encode_basestring(i).encode("utf-8"): i for i in wanted}
    for segment in _old_segments(publication, publication.record_count):
        data = _segment_bytes(publication, segment)
        if len(left) <= 64:  # a few ids: found by searching the bytes
            for quoted in list(left):
                needle = b"[" + quoted + b", "
                at = 0 if data.startswith(needle) else data.find(b"\n" + needle) + 1
                if at or data.startswith(needle):  # at 0: the first line, or not found
                    line = data[at:data.index(b"\n", at)]
                    found[segment["start"] + data.count(b"\n", 0, at)] = \
                        (left.pop(quoted), json.loads(line)[1])
        else:
            for offset, line in enumerate(data.split(b"\n")[:-1]):
                quoted = line[1:line.rindex(b", ")]
                if quoted in left:
                    found[segment["start"] + offset] = (left.pop(quoted), json.loads(line)[1])
        if not left:
            return found
    raise ValueError(f"record id {next(iter(left.values()))!r} is not in the publication (never "
                     "published, or erased already): nothing written")


def _rows_at(publication: Publication, positions: range) -> dict[int, tuple[str, int]]:
    """position -> (record id, leaf unit) of the records still held in ``positions``."""
    found = {}
    for segment in _old_segments(publication, publication.record_count):
        if segment["stop"] <= positions.start or segment["start"] >= positions.stop:
            continue
        rows = fmt.decode_records(_segment_bytes(publication, segment), "records")
        for offset, (rid, unit) in enumerate(rows):
            if segment["start"] + offset in positions and rid is not None:
                found[segment["start"] + offset] = (rid, unit)
    return found


def _placeholders(data: bytes, lines: list[int]) -> bytes:
    """A segment's bytes with ``[null, null]`` for each of ``lines`` (numbered from 0)."""
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n"))
    pieces, at = [], 0
    for line in sorted(lines):
        start = int(ends[line - 1]) + 1 if line else 0
        pieces += [data[at:start], b"[null, null]"]
        at = int(ends[line])
    return b"".join([*pieces, data[at:]])


def _segment_bytes(publication: Publication, segment: dict) -> bytes:
    return publication.store.read("private",
                                  f"{segment['home']}/{fmt.records_name(segment['start'])}")


class _Erasure:
    """One erasure: what it retires and rewrites, the commit and the receipt."""

    def __init__(self, out: releases.Release, store: Store, kind: str) -> None:
        self.out, self.kind = out, kind
        self.publication = Publication.open(store, out.current)
        self.writer = VersionWriter(out, owner_key(store), releases.ReleaseBuilder(kind),
                                    self.publication.head["params"]["index_shard"])
        if "term_index" not in self.publication.head:
            raise StoreError(f"{store.url}: {out.current} was written before the term index; "
                             "append to it once (that writes one), then erase")
        self.parts = layout_from_manifest(self.publication.version,
                                          self.publication.head["term_index"]).parts
        self.postings: dict[IndexPart, dict[str, BitMap]] = {}  # the parts erased from
        self.units = _carried_units(self.publication)
        self.records = self.publication.record_count
        self.erased: dict[int, tuple[str, int]] = {}
        self.retired: set[int] = set()
        self.replaced: set[str] = set()
        self.totals = _pairs(self.publication)

    def erase(self, erased: dict[int, tuple[str, int]]) -> None:
        """Retire every unit an erased record had a public line in, rewrite the private chunks
        that held one, and write the maps, record ids and term index without them."""
        publication, writer = self.publication, self.writer
        self.erased = erased
        lines = self._lines(erased)  # chunk -> erased pseudonyms in it
        chunk_unit = {c: publication.chunk_unit(c) for c in lines}
        self.retired = {chunk_unit[c] for c in lines if not publication.is_private(c)}
        touched = set(chunk_unit.values())
        writer.supersede_version(publication.version, publication.head)
        self.rewritten = 0
        for uid in sorted(touched):
            unit = publication.units[uid]
            gone: set[str] = set()
            for chunk in publication.unit_chunk_infos(uid):
                retiring = uid in self.retired and not chunk.private
                if not retiring and chunk.id not in lines:
                    continue
                self._rewrite(chunk, lines.get(chunk.id, set()), retiring)
                gone |= lines.get(chunk.id, set())
            writer.close_unit(uid, fmt.map_without_rows(self.maps[uid], gone),
                              replaces=publication.map_home(uid))
            left = 0 if uid in self.retired else self.units[uid]["public_records"]
            writer.release.carry(uid, unit["kind"], left)
            self.units[uid]["public_records"] = left
        for position, (_, leaf) in erased.items():
            self._leave(position, leaf)
        self._records()
        self._term_index()

    def _lines(self, erased: dict[int, tuple[str, int]]) -> dict[str, set[str]]:
        """Every line the erased records hold, chunk by chunk: their rows in the pseudonym
        maps of their leaf (or buffer) unit and of every aggregated unit above it, checked
        against the term index (a pair left behind would stay published)."""
        publication = self.publication
        parents = publication.tree.parents()
        by_unit: dict[int, set[int]] = {}
        for position, (_, leaf) in erased.items():
            chain = [leaf] if publication.units[leaf]["kind"] == "buffer" else \
                [leaf, *aggregates_above(publication.tree, publication.units[leaf]["node"],
                                         parents)]
            for uid in chain:
                by_unit.setdefault(uid, set()).add(position)
        lines: dict[str, set[str]] = {}
        pairs = 0
        self.rows_in: dict[int, set[int]] = {}  # unit -> erased positions it has rows of
        self.maps = {uid: publication.map_bytes(uid) for uid in by_unit}  # read once: large
        for uid, positions in by_unit.items():
            for chunk, pseudonym, at in fmt.map_rows_at(self.maps[uid], positions):
                lines.setdefault(chunk, set()).add(pseudonym)
                self.rows_in.setdefault(uid, set()).add(at)
        for chunk, pseudonyms in lines.items():
            for pseudonym, terms in publication.subrecords(chunk):
                if pseudonym in pseudonyms:
                    pairs += len(terms)
        held = BitMap(erased)
        indexed = sum(len(held & bitmap) for postings in self._postings(held).values()
                      for bitmap in postings.values())
        if pairs != indexed:
            raise StoreError(f"the erased records hold {indexed} (record, term) pairs in the "
                             f"term index and {pairs} in the chunks found: nothing written "
                             "(`cocktail audit --releases`)")
        return lines

    def _postings(self, positions: BitMap) -> dict[IndexPart, dict[str, BitMap]]:
        """The postings of the term index's parts that hold ``positions``, read once."""
        for part in self.parts:
            if part not in self.postings and positions.intersection_cardinality(
                    BitMap(range(part.start, part.stop))):
                self.postings[part] = part_postings(self.publication.store, part)
        return self.postings

    def _rewrite(self, chunk, gone: set[str], retiring: bool) -> None:
        """A chunk without the erased lines, in the private zone (a retired public chunk, or a
        private one), under its own id; its public files superseded."""
        old_chunk, old_index = self.publication.chunk_files(chunk.id)
        data = fmt.chunk_without(old_chunk, gone)
        index = fmt.index_without(old_index, chunk.id, gone)
        self.writer.drop_chunk(chunk.id, chunk.home, chunk.private)
        self.out.put("private", f"{fmt.CHUNK_DIR}/{chunk.id}.tsv", data)
        self.out.put("private", f"{fmt.INDEX_DIR}/{chunk.id}.tsv", index)
        entry = self.publication.chunk_entry(chunk.id)
        left = len(fmt.chunk_pseudonyms(data))
        self.totals["public_pairs" if not chunk.private else "private_pairs"] -= \
            fmt.index_pairs(old_index)
        self.totals["private_pairs"] += fmt.index_pairs(index)
        self.writer.chunks[chunk.id] = {
            "unit": chunk.unit, "priLabel": True, "terms": sorted(chunk.terms),
            "subrecords": left,
            "sha256": {"chunk": hashlib.sha256(data).hexdigest(),
                       "index": hashlib.sha256(index).hexdigest()},
            **({"retired": entry.get("retired", self.out.version)}
               if retiring or entry.get("retired") else {})}
        self.replaced.add(chunk.id)
        self.rewritten += not retiring

    def _leave(self, position: int, leaf: int) -> None:
        """The erased record leaves its cluster (or the buffer's list), and the aggregated
        clusters it had subrecords in."""
        unit = self.units[leaf]
        unit["members"] -= 1
        if unit["kind"] == "buffer":
            unit["positions"] = [p for p in unit["positions"] if p != position]
        for uid, positions in self.rows_in.items():
            if uid != leaf and position in positions:
                self.units[uid]["members"] -= 1

    def _records(self) -> None:
        """Segments holding erased records rewritten with a ``null`` placeholder at their
        positions (no other record moves), their keys without the erased ids'."""
        writer, publication = self.writer, self.publication
        for segment in _old_segments(publication, self.records):
            inside = [p for p in self.erased if segment["start"] <= p < segment["stop"]]
            if not inside:
                writer.carry_records(segment)
                continue
            keys = self._keys_without(segment, inside) if "keys" in segment else None
            writer.write_records(segment["start"], segment["stop"],
                                 _placeholders(_segment_bytes(publication, segment),
                                               [p - segment["start"] for p in inside]), keys)
            writer.superseded.append(("private", f"{segment['home']}/"
                                                 f"{fmt.records_name(segment['start'])}"))
            if "keys" in segment:
                writer.superseded.append(("private", f"{segment['keys']}/"
                                                     f"{fmt.record_keys_name(segment['start'])}"))

    def _keys_without(self, segment: dict, inside: list[int]) -> bytes:
        """The segment's sorted keys without those of its erased ids (a segment written before
        keys has none: an append makes them from the ids left)."""
        path = f"{segment['keys']}/{fmt.record_keys_name(segment['start'])}"
        keys = fmt.decode_record_keys(self.publication.store.read("private", path), path)
        keep = np.ones(len(keys), dtype=bool)
        for p in inside:
            hits = np.flatnonzero((keys == releases.member_key(self.erased[p][0])) & keep)
            if len(hits):
                keep[hits[0]] = False
        return fmt.encode_record_keys(keys[keep])

    def _term_index(self) -> None:
        """The index parts holding erased positions rewritten without them; the others
        carried by reference."""
        held, parts = BitMap(self.erased), []
        for part in self.parts:
            if part not in self.postings:
                parts.append(part)
                continue
            parts.append(part_without(part, self.postings[part], self.out.version, held,
                                      self.out.write_private))
            self.writer.superseded += [("private", path) for path in part.all_paths()]
        self.writer.carried_index = tuple(parts)

    def commit(self, reason: str, keep: int, retracted: str | None, started: float
               ) -> ErasureReport:
        publication, writer, out, kind = self.publication, self.writer, self.out, self.kind
        head = publication.head
        params = head["params"]
        public_manifest = writer.public_manifest(out.created, params["k"], params["m"])
        carried = carried_lines(publication, self.replaced)
        public_chunks = len(carried.public)
        batches = {d: v for d, v in head.get("batches", {}).items() if v != retracted}
        private_manifest = {
            "format": fmt.FORMAT, "version": out.version, "created": out.created,
            "params": params, "source": head["source"],
            "erased_records": head.get("erased_records", 0) + len(self.erased),
            "tree": head["tree"], "roots": head["roots"],
            "units": writer.homed_units(self.units), "aggregation": head["aggregation"],
            "batches": batches, "chunks": writer.chunks,
            "pairs": {"public": self.totals["public_pairs"],
                      "private": self.totals["private_pairs"]}}
        buffered = sum(len(u.get("positions", [])) for u in self.units if u["kind"] == "buffer")
        entry = writer.release.entry(
            out.version, out.created, params["k"], params["m"], method=params["method"],
            records=self.records, appended=0, buffered=buffered, carries=publication.version,
            erased={"records": len(self.erased), "reason": reason},
            retired=sorted(c for c, e in writer.chunks.items()
                           if e.get("retired") == out.version),
            **({"retracted": retracted} if retracted else {}))
        releases.forget_members(publication.store,
                                (releases.member_key(rid) for rid, _ in self.erased.values()))
        writer.finish(public_manifest, private_manifest, None, self.records, entry, keep, {},
                      carried)
        store = publication.store
        # what this version supersedes, its own new files aside (finish adds the index's)
        old = {s for s in writer.superseded if not s[1].startswith(out.version + "/")}
        left = sum(store.exists(zone, path) for zone, path in old)
        gone = len(old) - left
        pairs = self.totals["public_pairs"] + self.totals["private_pairs"]
        retired = entry["retired"]
        return ErasureReport(
            store=store.url, version=out.version, kind=kind, reason=reason,
            retracted=retracted, records_erased=len(self.erased),
            retired_clusters=len(self.retired), retired_chunks=len(retired),
            rewritten_private_chunks=self.rewritten, public_chunks=public_chunks,
            public_coverage=round(self.totals["public_pairs"] / pairs, 6) if pairs else None,
            files_removed=gone, files_pending=left,
            kept_versions=releases.committed_versions(store),
            seconds=round(time.perf_counter() - started, 3))

