"""Writing one version: pseudonymous chunks, inverted indexes, pseudonym maps, manifests.

Every chunk gets a random id, every subrecord a per-chunk pseudonym, a keyed function of
(chunk id, record id) (:func:`pseudonyms`); public chunks and their indexes go to the public zone,
private chunks, the pseudonym maps, the record ids and the full manifest to the private zone.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, BinaryIO

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from .. import chunkformat as fmt
from .. import releases
from ..anonymity import Partition, partition
from ..blas import one_thread
from ..dataset import Records, key_type
from ..overlay.layout import Layout, LayoutParams, LeafMembers, PhaseProgress
from ..process_pool import process_pool
from ..query.termindex import (SHARD_RECORDS, IndexPart, TermIndexBuilder, layout_from_manifest,
                               write_parts)
from ..releases import Release, signing
from ..releases.commit import MAIN_GUARD
from ..releases.log import Added, keys_of, record_digests
from ..store import Store, StoreError
from .batch import collector_paused
from .carried import NOTHING, CarriedLines, private_lines

if TYPE_CHECKING:
    from ..query.view import Publication

KEY_FILE = "owner.key"
# Below this, starting worker processes costs more than it saves: two spawned ones took 2.3 s
# of CPU (and 2.6 s of wall) more than partitioning BMS-WebView-1 (59,602 records) in process.
PARALLEL_FROM_RECORDS = 250_000
IN_FLIGHT_PER_WORKER = 4
BROKEN_POOL_WAIT = 5.0  # seconds a broken pool's manager has to finish on its own


def pseudonyms(key: bytes, chunk_id: str, digests: np.ndarray) -> np.ndarray:
    """Each record's pseudonym in the chunk, from its digest (``releases.record_digests``):
    AES-128 of the digest under the chunk's key, keyed BLAKE2b(owner key; chunk id), its
    first 80 bits in hex (ASCII, ``S20``).  AES under a secret key is a pseudorandom
    permutation, so of distinct record ids this is a PRF like the HMAC-SHA256 the design
    names, computed for the whole chunk in one call (a keyed hash per member was 2.1 s of a
    publish of 1M records: 2.45M of them)."""
    chunk_key = hashlib.blake2b(chunk_id.encode(), key=key, digest_size=16,
                                person=b"chunk key").digest()
    encryptor = Cipher(algorithms.AES(chunk_key), modes.ECB()).encryptor()
    blocks = np.frombuffer(encryptor.update(digests.tobytes()) + encryptor.finalize(),
                           dtype=np.uint8).reshape(-1, 16)
    return np.frombuffer(blocks[:, :fmt.PSEUDONYM_HEX // 2].tobytes().hex().encode("ascii"),
                         dtype=f"S{fmt.PSEUDONYM_HEX}")


@dataclass(frozen=True, eq=False)  # numpy fields: compared by identity
class Subrecords:
    """Members' subrecords, each distinct one held once (a chunk holds few: on 1M records,
    about 25 members each): member i holds row ``which[i]`` of ``distinct``, whose term ids
    follow name order within each row."""

    distinct: Records
    which: np.ndarray

    @classmethod
    def of(cls, subrecords: Iterable[Iterable[str]]) -> Subrecords:
        found: dict[tuple[str, ...], int] = {}
        which = [found.setdefault(tuple(sorted(sub)), len(found)) for sub in subrecords]
        return cls(Records.build(found), np.array(which, dtype=np.intp))

    def __len__(self) -> int:
        return len(self.which)

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(member, term id) of every term of every member."""
        return self.distinct.rows(self.which)

    def pair_count(self) -> int:
        return int(np.diff(self.distinct.indptr)[self.which].sum())

    @cached_property
    def terms(self) -> list[tuple[str, ...]]:
        """The distinct subrecords' sorted terms."""
        return self.distinct.sorted_terms()

    def counted(self) -> Counter:
        """The multiset of the subrecords, each as its sorted terms."""
        counts = np.bincount(self.which, minlength=len(self.distinct)).tolist()
        return Counter(dict(zip(self.terms, counts)))


@dataclass(frozen=True, eq=False)  # numpy fields: compared by identity
class ChunkMembers:
    """A chunk's members: record id, record position, subrecord and record digest of each."""

    record_ids: Sequence[str]  # a list, or an object array
    positions: np.ndarray
    subrecords: Subrecords
    digests: np.ndarray

    @classmethod
    def of(cls, members: Sequence[tuple[str, int, Iterable[str]]] | ChunkMembers
           ) -> ChunkMembers:
        """``members``: (record id, record position, subrecord terms), or as they are."""
        if isinstance(members, ChunkMembers):
            return members
        record_ids = [record_id for record_id, _, _ in members]
        return cls(record_ids,
                   np.array([position for _, position, _ in members], dtype=np.int64),
                   Subrecords.of(sub for _, _, sub in members), record_digests(record_ids))

    def __len__(self) -> int:
        return len(self.record_ids)

    def added(self) -> Added:
        """What the members add to the release log."""
        return Added(keys_of(self.digests), self.subrecords.counted())


@dataclass(frozen=True, eq=False)  # numpy fields: compared by identity
class BuiltChunk:
    """One chunk's files, built from its members (what either engine then writes)."""

    chunk_id: str
    members: ChunkMembers
    names: list[str]   # the pseudonyms, sorted: the chunk's lines
    order: np.ndarray  # the member on each line
    chunk: bytes
    index: bytes

    @cached_property  # the manifest and the release log both name it
    def sha256(self) -> dict[str, str]:
        return {"chunk": hashlib.sha256(self.chunk).hexdigest(),
                "index": hashlib.sha256(self.index).hexdigest()}

    def files(self) -> list[tuple[str, bytes]]:
        return [(f"{fmt.CHUNK_DIR}/{self.chunk_id}.tsv", self.chunk),
                (f"{fmt.INDEX_DIR}/{self.chunk_id}.tsv", self.index)]

    def map_lines(self, with_ids: bool = False) -> bytes:
        """The pseudonym map's lines of the chunk: (chunk id, pseudonym, record position)
        each; ``with_ids`` (a private chunk's) adds each record id."""
        return fmt.encode_map_lines(self.chunk_id, *self._map_columns(with_ids))

    def _map_columns(self, with_ids: bool) -> list[Sequence]:
        columns = [self.names, self.members.positions[self.order].tolist()]
        if with_ids:
            columns.append(np.asarray(self.members.record_ids, dtype=object)[self.order].tolist())
        return columns

    def entry(self, unit: int, private: bool, terms: Iterable[str]) -> dict:
        """The chunk's entry in the private manifest."""
        return {"unit": unit, "priLabel": private, "terms": sorted(terms),
                "subrecords": len(self.names), "sha256": self.sha256}


def build_chunk(key: bytes, chunk_id: str,
                members: Sequence[tuple[str, int, Iterable[str]]] | ChunkMembers
                ) -> BuiltChunk | None:
    """``members``: (record id, record position, subrecord terms), or as
    :class:`ChunkMembers`.  None if two of them got the same pseudonym (the caller draws
    another chunk id)."""
    return build_chunks(key, [chunk_id], [ChunkMembers.of(members)])[0]


def build_drawn(key: bytes, chunks: Sequence[ChunkMembers], draw: Callable[[int, int], str]
                ) -> list[BuiltChunk]:
    """:func:`build_chunks`, chunk j under the id ``draw(j, attempt)``, drawn again (attempt
    1, 2, ...) while two of its members get one pseudonym.  Raises ValueError for a chunk
    that holds a record twice: its two members get one pseudonym under every id."""
    built: list[BuiltChunk | None] = [None] * len(chunks)
    todo, attempt = list(range(len(chunks))), 0
    while todo:
        ids = [draw(j, attempt) for j in todo]
        for j, chunk in zip(todo, build_chunks(key, ids, [chunks[j] for j in todo])):
            built[j] = chunk
        todo, attempt = [j for j in todo if built[j] is None], attempt + 1
        for j in todo:  # clashed: by chance (80-bit pseudonyms), or for ever
            _check_distinct(chunks[j], j)
    return built


def _check_distinct(members: ChunkMembers, j: int) -> None:
    _, first, count = np.unique(members.digests, return_index=True, return_counts=True)
    if (count > 1).any():
        twice = int(first[count > 1][0])
        raise ValueError(f"chunk {j} holds record {members.record_ids[twice]!r} (position "
                         f"{int(members.positions[twice])}) more than once: its members would "
                         "share a pseudonym under any chunk id (a duplicated member)")


def build_chunks(key: bytes, chunk_ids: Sequence[str], chunks: Sequence[ChunkMembers]
                 ) -> list[BuiltChunk | None]:
    """Each chunk's files under its id, a unit's chunks at once: one sort of all their
    pseudonyms, one decoding, one pass over their terms (a chunk at a time, the numpy calls
    of 7,534 chunks cost more than their work on 1M records).  None for a chunk two of whose
    members got one pseudonym (the caller draws another id for it)."""
    sizes = np.array([len(members) for members in chunks], dtype=np.int64)
    cuts = np.concatenate(([0], np.cumsum(sizes))).tolist()
    names = np.concatenate([pseudonyms(key, chunk_id, members.digests)
                            for chunk_id, members in zip(chunk_ids, chunks)])
    chunk = np.repeat(np.arange(len(chunks)), sizes)
    order = np.lexsort((names, chunk))  # by chunk, then pseudonym: the lines of each
    names = names[order]
    # (chunk[order] is chunk; two equal names of two chunks merely redraw the second's id)
    clashed = set(chunk[1:][names[1:] == names[:-1]].tolist())
    text = _strings(names)
    distinct = [members.subrecords.distinct for members in chunks]
    firsts = np.concatenate(([0], np.cumsum([len(d) for d in distinct]))).tolist()
    lines = np.concatenate([members.subrecords.which + first
                            for members, first in zip(chunks, firsts)])[order]
    chunk_bytes = fmt.encode_chunks_lines(
        text, [terms for members in chunks for terms in members.subrecords.terms], lines, cuts)
    indexes = _indexes(chunk_ids, distinct, text, lines, chunk)
    return [None if j in clashed else
            BuiltChunk(chunk_ids[j], chunks[j], text[a:b], order[a:b] - a, chunk_bytes[j],
                       indexes[j]) for j, (a, b) in enumerate(zip(cuts, cuts[1:]))]


def _indexes(chunk_ids: Sequence[str], distinct: Sequence[Records], text: list[str],
             lines: np.ndarray, chunk: np.ndarray) -> list[bytes]:
    """Each chunk's inverted index: each of its terms' pseudonyms in line order (``text``,
    ``lines``, ``chunk``: the pseudonym, the subrecord among all chunks' ``distinct`` ones
    and the chunk of each line, chunk after chunk)."""
    rows, terms = Records.joined(distinct).rows(lines)  # (each chunk's term ids its own)
    width = max(len(d.names) for d in distinct)
    keys = chunk[rows].astype(key_type(len(distinct) * width)) * width + terms
    by_term = np.argsort(keys, kind="stable")  # lines stay in order within a term
    held = np.array(text, dtype=object)[rows[by_term]].tolist()
    keys = keys[by_term]
    starts = _run_starts(keys).tolist()
    out: list[list[str]] = [[] for _ in chunk_ids]
    for key, start, stop in zip(keys[starts].tolist(), starts, [*starts[1:], len(held)]):
        j, term = divmod(key, width)
        out[j].append(fmt.index_line(chunk_ids[j], distinct[j].names[term], held[start:stop]))
    return ["".join(lines_of).encode("utf-8") for lines_of in out]


def _strings(names: np.ndarray) -> list[str]:
    """Pseudonyms (``S20``) as strings: decoded at once, then cut."""
    text, width = names.tobytes().decode("ascii"), fmt.PSEUDONYM_HEX
    return [text[at:at + width] for at in range(0, len(text), width)]


def owner_key(store: Store) -> bytes:
    """The owner's pseudonym key, created on first use; it never leaves the private zone."""
    if store.exists("private", KEY_FILE):
        return bytes.fromhex(store.read("private", KEY_FILE).decode().strip())
    key = secrets.token_bytes(32)
    store.write("private", KEY_FILE, key.hex().encode() + b"\n", pri_label=True)
    return key


class VersionWriter:
    """Writes one basket version's files into a :class:`~cocktail.releases.Release` and keeps
    the running totals.  Files are produced cluster by cluster; the release writes them in a
    random order with one common time, so nothing groups the public chunks by cluster."""

    def __init__(self, release: Release, key: bytes, log: releases.ReleaseBuilder,
                 index_shard: int = SHARD_RECORDS) -> None:
        self.out, self.key, self.release = release, key, log
        self.index_shard = index_shard  # record positions per part of the term index at most
        self.index_seconds = 0.0  # spent on the term index: its own phase in the report
        self.version, self.staging = release.version, release.staging
        self.chunks: dict[str, dict] = {}
        self.unit_map: list[bytes] = []  # the open unit's pseudonym map, chunk by chunk
        self.maps_written: set[int] = set()  # units whose pseudonym map this version wrote
        self.terms = TermIndexBuilder()  # the version's term index, chunk by chunk
        # Files of earlier versions that the previous version referenced and this one no longer
        # does (zone, path): what pruning the previous version may delete (releases.versions).
        self.superseded: list[tuple[str, str]] = []
        self.record_segments: list[dict] = []  # home, start, stop (and keys) of each segment
        self.carried_index: tuple[IndexPart, ...] = ()  # the previous version's parts
        # Carried parts this version merged into a part of its own: what the previous version
        # referenced and this one does not (their files stay in their homes).
        self.index_superseded: list[IndexPart] = []

    def _fresh_id(self, *_: int) -> str:
        """A random chunk id no chunk of the version has (64 bits: a repeat is a formality)."""
        while True:
            chunk_id = secrets.token_hex(fmt.CHUNK_ID_HEX // 2)
            if chunk_id not in self.chunks:
                return chunk_id

    def add_chunk(self, unit: int, unit_kind: str, private: bool, terms: frozenset[str],
                  members: Sequence[tuple[str, int, Iterable[str]]] | ChunkMembers) -> None:
        """``members``: (record id, record position, subrecord terms) of every non-empty
        subrecord, or as :class:`ChunkMembers`; their terms go into the term index."""
        members = ChunkMembers.of(members)
        self._index(members)
        self.add_chunks(unit, unit_kind, [terms], [members], public=0 if private else 1)

    def add_chunks(self, unit: int, unit_kind: str, chunk_terms: Sequence[frozenset[str]],
                   chunks: Sequence[ChunkMembers], public: int) -> None:
        """A unit's chunks, the first ``public`` of them public, under fresh random ids; their
        members' terms are in the term index already (a unit indexes them once for all)."""
        for i, built in enumerate(build_drawn(self.key, chunks, self._fresh_id)):
            private, terms = i >= public, chunk_terms[i]
            zone = "private" if private else "public"
            for name, data in built.files():
                self.out.put(zone, name, data)
            self.unit_map.append(built.map_lines(with_ids=private))
            self.chunks[built.chunk_id] = built.entry(unit, private, terms)
            self.release.add_chunk(built.chunk_id, unit, unit_kind, private, terms,
                                   built.members.added(), built.sha256["chunk"])

    def extend_chunk(self, chunk_id: str, home: str, unit: int, unit_kind: str, private: bool,
                     terms: Sequence[str], old: tuple[bytes, bytes],
                     members: Sequence[tuple[str, int, list[str]]]) -> None:
        """An existing chunk (its files in version ``home``, ``old``: their bytes) with new
        subrecords: the same id, so old records keep their pseudonyms and their lines byte for
        byte; the new lines merged in pseudonym order, written in this version."""
        old_chunk, old_index = old
        self.drop_chunk(chunk_id, home, private)
        members = ChunkMembers.of(members)
        added = build_chunk(self.key, chunk_id, members)
        before = fmt.chunk_pseudonyms(old_chunk)
        if added is None or set(before).intersection(added.names):
            raise StoreError(f"pseudonym collision in chunk {chunk_id}: append again")
        zone = "private" if private else "public"
        chunk_bytes = fmt.merge_chunk(old_chunk, added.chunk)
        index_bytes = fmt.merge_index(old_index, chunk_id, added.index)
        self.out.put(zone, f"{fmt.CHUNK_DIR}/{chunk_id}.tsv", chunk_bytes)
        self.out.put(zone, f"{fmt.INDEX_DIR}/{chunk_id}.tsv", index_bytes)
        self.unit_map.append(added.map_lines(with_ids=private))
        self._index(members)
        self.chunks[chunk_id] = {
            "unit": unit, "priLabel": private, "terms": sorted(terms),
            "subrecords": len(before) + len(members),
            "sha256": {"chunk": hashlib.sha256(chunk_bytes).hexdigest(),
                       "index": hashlib.sha256(index_bytes).hexdigest()},
        }
        self.release.add_chunk(chunk_id, unit, unit_kind, private, terms, members.added(),
                               self.chunks[chunk_id]["sha256"]["chunk"],
                               carried_sha256=hashlib.sha256(old_chunk).hexdigest(),
                               carried_subrecords=len(before))

    def _index(self, members: ChunkMembers) -> None:
        rows, terms = members.subrecords.pairs()
        self.index_pairs(members.subrecords.distinct.names, terms, members.positions[rows])

    def index_pairs(self, names: Sequence[str], terms: np.ndarray, positions: np.ndarray
                    ) -> None:
        """(record position, term) pairs into the term index: ``names[terms[i]]`` at
        ``positions[i]``."""
        started = time.perf_counter()
        self.terms.add_pairs(names, terms, positions)
        self.index_seconds += time.perf_counter() - started

    def keep_chunk(self, chunk_id: str, entry: dict, home: str) -> None:
        """An existing chunk no new record touches: carried by reference, its files left where
        they are (in version ``home``), read from there by every later version."""
        self.chunks[chunk_id] = entry | {"home": home}

    def drop_chunk(self, chunk_id: str, home: str, private: bool) -> None:
        """An existing chunk's files (in version ``home``) this version no longer shows."""
        zone = "private" if private else "public"
        self.superseded += [(zone, fmt.chunk_path(home, chunk_id)),
                            (zone, fmt.index_path(home, chunk_id))]

    def close_unit(self, unit: int, earlier: bytes = b"", replaces: str | None = None) -> None:
        """Write the unit's pseudonym map: the ``earlier`` rows (of chunks it had before, as
        they were written) first; ``replaces``: the version holding the map this one
        replaces."""
        self.out.put("private", f"{fmt.PSEUDONYM_DIR}/{unit}.tsv",
                     earlier + b"".join(self.unit_map))
        self.maps_written.add(unit)
        if replaces is not None:
            self.superseded.append(("private", fmt.pseudonym_map_path(replaces, unit)))
        self.unit_map = []
        self.release.settle(unit)

    def supersede_version(self, version: str, manifest: dict) -> None:
        """This version follows ``version`` (an append): it carries what that one referenced,
        but not that one's own files (manifests, the list of its term index's parts; the
        parts it merges away :meth:`finish` adds)."""
        own = [fmt.MANIFEST, fmt.SUPERSEDED,
               *([fmt.TERM_PARTS] if "parts" in (manifest.get("term_index") or {}) else [])]
        self.superseded += [("public", fmt.manifest_path(version))] + \
            [("private", f"{version}/{name}") for name in own]

    def write_records(self, start: int, stop: int, data: bytes | BinaryIO,
                      keys: bytes | str | None = None) -> None:
        """The ``[record id, cluster]`` lines of positions [start, stop), as a segment of this
        version (replacing one of the same start, whose file the caller supersedes), with the
        sorted keys of its ids where known (or the home of a keys file that still holds)."""
        self.out.write_private(fmt.records_name(start), data)
        segment = {"home": self.version, "start": start, "stop": stop}
        if isinstance(keys, bytes):
            self.out.write_private(fmt.record_keys_name(start), keys)
            segment["keys"] = self.version
        elif keys is not None:
            segment["keys"] = keys
        self.record_segments.append(segment)

    def carry_records(self, segment: dict) -> None:
        """A segment of record ids carried by reference."""
        self.record_segments.append(dict(segment))

    def homed_units(self, units: list[dict]) -> list[dict]:
        """The units' manifest entries, where a map this version wrote needs no home (its
        own); the others keep the home they were given."""
        return [{k: v for k, v in u.items() if k != "map"} if u["id"] in self.maps_written else u
                for u in units]

    def public_manifest(self, created: str, k: int, m: int) -> dict:
        """What the public cloud may know of the version: its public chunks, by random id
        (those this writer wrote or carried; an append splices in the others' lines)."""
        return {"format": fmt.FORMAT, "version": self.version, "created": created,
                "k": k, "m": m,
                "chunks": [{"id": cid, "priLabel": False, "subrecords": c["subrecords"],
                            "terms": len(c["terms"]), "sha256": c["sha256"]}
                           | {"home": c.get("home", self.version)}
                           for cid, c in sorted(self.chunks.items()) if not c["priLabel"]]}

    def finish(self, public_manifest: dict, private_manifest: dict,
               records: bytes | BinaryIO | None, count: int, release_entry: dict, keep: int,
               seconds: dict[str, float],
               carried: CarriedLines = NOTHING) -> None:
        """Write every file, then commit: ``seconds`` gets the time of each.  ``count``: the
        version's records; ``records``: their ``[id, cluster]`` lines, unless segments were
        written and carried already; ``carried``: the manifest lines of the chunks an append
        or an erasure leaves as they were, spliced in unparsed (:mod:`.carried`)."""
        started = time.perf_counter()
        if records is not None:
            self.write_records(0, count, records)
        # by random id: nothing groups them
        public_lines = fmt.spliced(carried.public, (),
                                   map(fmt.chunk_line, public_manifest.pop("chunks")))
        self.out.put("public", fmt.MANIFEST, fmt.encode_manifest(public_manifest, public_lines,
                                                                 listed=True))
        del public_lines
        signing.sign(self.out, signing.signing_key(self.out.store))  # the owner vouches for it
        index_started = time.perf_counter()
        private_manifest["term_index"] = self._write_term_index(count)
        encoding = time.perf_counter() - index_started
        self.superseded += self.superseded_index_files
        if self.superseded:
            self.out.write_private(fmt.SUPERSEDED, fmt.encode_superseded(self.superseded))
        private_manifest["records"] = {"count": count, "segments": sorted(
            self.record_segments, key=lambda segment: segment["start"])}
        # How many of each unit's records hold a published term, as the log counts them; a
        # unit the entry does not list kept its count, or, new and without chunks, has none.
        logged = release_entry.get("units", {})
        lines, counts = private_lines(carried, {
            chunk_id: {"home": self.version} | entry
            for chunk_id, entry in private_manifest.pop("chunks").items()},
            private_manifest["units"])
        private_manifest["units"] = [
            u | {"public_records": logged[str(u["id"])]["public_records"]
                 if str(u["id"]) in logged else u.get("public_records", 0),
                 "chunk_count": count}
            for u, count in zip(private_manifest["units"], counts)]
        private_manifest["chunk_order"] = "unit"  # docs/publication-format.md
        self.out.put("private", fmt.MANIFEST, fmt.encode_manifest(private_manifest, lines,
                                                                  listed=False))
        self.out.commit(release_entry, keep)
        # The index is a phase of its own, taken out of the phases it was built in.
        seconds["term_index"] = self.index_seconds + encoding
        if "write" in seconds:
            seconds["write"] -= self.index_seconds
        seconds["commit"] = time.perf_counter() - started - encoding

    def carry_term_index(self, publication: Publication) -> None:
        """An append: the previous version's index parts become this version's first parts,
        by reference (neither read nor copied); :meth:`finish` adds parts for the new records.
        Pairs of old records the builder still receives (records placed anew) are left out
        then: the carried parts hold them, and a record's terms never change.  A version
        written before there was an index has its pairs resolved from its chunks instead."""
        listed = publication.head.get("term_index")
        if listed:
            where = f"private/{fmt.manifest_path(publication.version)}"
            layout = layout_from_manifest(publication.version, listed, where)
            # (A version written before record segments has no count but the index's.)
            counted = (publication.head.get("records") or {}).get("count", layout.records)
            problem = layout.gaps() or (None if layout.records == counted else
                                        f"the index counts {layout.records} records, the "
                                        f"version holds {counted}")
            if problem:
                raise StoreError(f"{where}: term index: {problem} (`cocktail audit --releases`)")
            self.carried_index = layout.parts
        else:
            self.terms.update(publication.resolved_term_records())

    @property
    def superseded_index_files(self) -> list[tuple[str, str]]:
        """(zone, path) of the files of the carried parts this version merged away: pruning
        the previous version may delete them (no later version lists them)."""
        return [("private", path) for part in self.index_superseded
                for path in part.all_paths()]

    def _write_term_index(self, count: int) -> dict:
        """The index's new parts into the private zone, its parts list beside them; its
        manifest entry (docs/publication-format.md)."""
        layout, self.index_superseded = write_parts(
            self.out.store, self.version, self.carried_index, self.terms, count,
            self.index_shard, self.out.write_private)
        entry = layout.entry()
        self.out.write_private(fmt.TERM_PARTS, fmt.encode_json(entry, compact=True))
        return entry


def unit_chunks(records: Records, positions: np.ndarray, ids: Sequence[str],
                chunk_terms: Sequence[frozenset[str]]
                ) -> tuple[list[ChunkMembers], tuple[np.ndarray, np.ndarray]]:
    """A unit's members (``records``, with their record positions and ids) as each chunk's
    members, and the (row, term id) pairs of them all (the term index's); terms in no chunk
    (a private part passed up the tree) are left out.  Both engines build a unit's chunks
    from this."""
    ids = np.asarray(ids, dtype=object)  # picked per chunk in C
    digests = record_digests(ids)  # each record hashed once, not once per chunk it meets
    chunks, pairs = split_records(records, chunk_terms)
    return [ChunkMembers(ids[rows], positions[rows], subrecords, digests[rows])
            for rows, subrecords in chunks], pairs


def unit_records(members: LeafMembers | Iterable[tuple[int, frozenset[str]]]
                 ) -> tuple[np.ndarray, Records]:
    """A unit's members: their record positions and their terms, a row each (a leaf's read
    off the dataset's arrays, without a set per record)."""
    if isinstance(members, LeafMembers) and isinstance(members.records, Records):
        positions = np.asarray(members.positions, dtype=np.int64)
        return positions, members.records.take(positions)
    members = list(members)
    return (np.array([position for position, _ in members], dtype=np.int64),
            Records.build(terms for _, terms in members))


def split_records(records: Records, chunk_terms: Sequence[frozenset[str]]
                  ) -> tuple[list[tuple[np.ndarray, Subrecords]], tuple[np.ndarray, np.ndarray]]:
    """For each chunk, the rows of ``records`` that meet it (in order) and their subrecords
    there; and the (row, term id) pairs of them all.  Terms in no chunk are left out."""
    chunk, rank = _chunk_ranks(records, chunk_terms)
    row = np.repeat(np.arange(len(records)), np.diff(records.indptr))
    kept = np.flatnonzero(chunk >= 0)
    chunk, row, rank = chunk[kept], row[kept], rank[kept]
    # Each member's pairs together, by chunk and row, its terms in name order (rank order):
    # one sort on a combined key (a lexsort of three keys is several times slower).
    width = int(rank.max()) + 1 if len(kept) else 1
    dtype = key_type(len(chunk_terms) * len(records) * width)
    order = np.argsort(((chunk * len(records) + row) * width + rank).astype(dtype))
    kept, chunk, row, rank = kept[order], chunk[order], row[order], rank[order]
    starts = _run_starts(chunk, row)
    members = Records(records.names, np.append(starts, len(kept)), records.indices[kept])
    member_chunk, member_row = chunk[starts], row[starts]
    which, first = _distinct(member_chunk, rank, starts)
    distinct = members.take(first)
    cuts = np.arange(len(chunk_terms) + 1)
    member_cuts = np.searchsorted(member_chunk, cuts).tolist()
    distinct_cuts = np.searchsorted(member_chunk[first], cuts).tolist()
    return [(member_row[a:b], Subrecords(distinct[c:d], which[a:b] - c)) for a, b, c, d
            in zip(member_cuts, member_cuts[1:], distinct_cuts, distinct_cuts[1:])], \
        (row, members.indices)


def _chunk_ranks(records: Records, chunk_terms: Sequence[frozenset[str]]
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Each (row, term) pair's chunk (-1: none; a term in two chunks goes to the last) and
    its term's rank among that chunk's terms, in name order."""
    owner: dict[int, int] = {}
    for i, terms in enumerate(chunk_terms):
        owner.update(dict.fromkeys(records.ids_of(terms), i))
    if not owner:
        return np.full(records.pairs(), -1, dtype=np.int64), np.zeros(records.pairs(), np.int64)
    ids = np.array(sorted(owner), dtype=records.indices.dtype)  # the chunks' terms
    chunk = np.array([owner[t] for t in ids.tolist()], dtype=np.int64)
    by_chunk = np.argsort(chunk, kind="stable")
    rank = np.empty(len(ids), dtype=np.int64)
    rank[by_chunk] = np.arange(len(ids)) - np.searchsorted(chunk[by_chunk], chunk[by_chunk])
    at = np.minimum(np.searchsorted(ids, records.indices), len(ids) - 1)
    found = ids[at] == records.indices
    return np.where(found, chunk[at], -1), np.where(found, rank[at], 0)


def _distinct(chunk: np.ndarray, rank: np.ndarray, starts: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Members numbered so that two get one number when they are in one chunk (``chunk``,
    each member's) with the same subrecord, numbers in chunk order: each member's number and
    the first member of each.  ``rank``: the chunk rank of each pair's term, members' pairs
    from ``starts`` on.  A subrecord is compared as a bit per rank, in 64-bit words."""
    if not len(starts):
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    member = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(rank))))
    word = rank >> 6
    bits = np.left_shift(np.uint64(1), (rank & 63).astype(np.uint64))
    cut = _run_starts(member, word)
    masks = np.zeros((int(word.max()) + 1, len(starts)), dtype=np.uint64)
    masks[word[cut], member[cut]] = np.bitwise_or.reduceat(bits, cut)
    which, dtype = chunk, key_type(len(starts) ** 2)
    for mask in masks:  # dense numbers of (chunk, words so far): below len(starts) ** 2
        which = _dense((which * len(starts) + _dense(mask)).astype(dtype))
    return which, np.unique(which, return_index=True)[1]


def _run_starts(*keys: np.ndarray) -> np.ndarray:
    """Where each run of equal values of ``keys`` (side by side) starts."""
    new = np.zeros(len(keys[0]), dtype=bool)
    new[:1] = True
    for key in keys:
        new[1:] |= key[1:] != key[:-1]
    return np.flatnonzero(new)


def _dense(values: np.ndarray) -> np.ndarray:
    """Each value's rank among the distinct values."""
    return np.unique(values, return_inverse=True)[1].reshape(-1)


def _partition_job(job: tuple[str, list[frozenset[str]], int, int, frozenset[str]]
                   ) -> tuple[Partition, float]:
    method, records, k, m, apart = job
    started = time.process_time()
    with collector_paused():
        return partition(method, records, k, m, apart), time.process_time() - started


def partitions(clusters: Iterable[list[frozenset[str]]], params: LayoutParams,
               workers: int, records: int) -> Iterator[tuple[Partition, float]]:
    """Each cluster's partition and its CPU seconds, in cluster order; clusters are
    independent, so in parallel.  ``clusters`` is read lazily and only a few clusters per
    worker are in flight, so the records are never all held as sets at once."""
    apart = frozenset(params.sensitive)
    jobs = ((params.method, cluster, params.k, params.m, apart) for cluster in clusters)
    if workers == 1 or records < PARALLEL_FROM_RECORDS:
        yield from map(_partition_job, jobs)
        return
    pool = process_pool(workers, __name__, one_thread)
    try:
        in_flight: deque = deque()
        for job in jobs:
            in_flight.append(pool.submit(_partition_job, job))
            if len(in_flight) >= IN_FLIGHT_PER_WORKER * workers:
                yield in_flight.popleft().result()
        while in_flight:
            yield in_flight.popleft().result()
    except BrokenProcessPool as exc:
        _free_broken(pool)
        raise BrokenProcessPool(
            "a partitioning worker process ended abruptly: killed (out of memory?), or it "
            f"failed while importing the main script (its error is above; {MAIN_GUARD})"
        ) from exc
    finally:
        pool.shutdown(cancel_futures=True)


def _free_broken(pool: ProcessPoolExecutor) -> None:
    """Python 3.11 before the fix of gh-94777 (Debian 12's 3.11.2 among them): a worker that
    dies while the pool's feeder thread writes it a job (a cluster's arrays fill the pipe)
    leaves the pool's manager thread waiting for that feeder for ever, and the shutdown
    waiting for the manager.  Later Pythons close the queue's reading end, which fails the
    write; so does this, when the manager is still there seconds after the break (a closed
    end is closed once: the connection forgets its handle)."""
    manager = getattr(pool, "_executor_manager_thread", None)
    if manager is not None:
        manager.join(BROKEN_POOL_WAIT)
        if manager.is_alive():
            pool._call_queue._reader.close()


def write_layout(writer: VersionWriter, record_ids: Sequence[str], layout: Layout,
                 where: Placement | None = None,
                 progress: PhaseProgress | None = None) -> dict[str, int]:
    """Write every unit of ``layout``; ``where`` places a layout built over some records
    (an append's) among all of the publication's."""
    where = where or Placement()
    if isinstance(record_ids, (tuple, list)):
        record_ids = np.array(record_ids, dtype=object)  # a unit's picked in C
    totals = {"public": 0, "private": 0, "public_subrecords": 0, "private_subrecords": 0,
              "public_pairs": 0, "private_pairs": 0}
    for unit in layout.units:
        split = unit.partition
        stored_private = [split.private] if unit.keeps_private and split.private else []
        chunk_terms = [*split.public, *stored_private]
        positions, records = unit_records(unit.members)
        placed = where.records_of(positions)
        ids = record_ids[placed] if isinstance(record_ids, np.ndarray) \
            else [record_ids[p] for p in placed.tolist()]
        chunks, (pair_rows, pair_terms) = unit_chunks(records, placed, ids, chunk_terms)
        writer.index_pairs(records.names, pair_terms, placed[pair_rows])
        writer.add_chunks(where.unit(unit.id), unit.kind, chunk_terms, chunks, len(split.public))
        for i, members in enumerate(chunks):
            kind = "private" if i >= len(split.public) else "public"
            totals[kind] += 1
            totals[f"{kind}_subrecords"] += len(members)
            totals[f"{kind}_pairs"] += members.subrecords.pair_count()
        writer.close_unit(where.unit(unit.id))
        if progress:
            progress("write", unit.id + 1, len(layout.units))
    return totals


@dataclass(frozen=True)
class Placement:
    """Where a layout's local numbers land in the whole publication."""

    records: Sequence[int] | None = None  # layout position -> publication position
    units: int = 0                        # offset of unit ids
    nodes: int = 0                        # offset of tree node ids (a grafted tree's)

    def record(self, position: int) -> int:
        return position if self.records is None else self.records[position]

    def records_of(self, positions: np.ndarray) -> np.ndarray:
        """:meth:`record` of each of ``positions``."""
        if self.records is None:
            return positions
        return np.fromiter(map(self.record, positions.tolist()), dtype=np.int64,
                           count=len(positions))

    def unit(self, unit: int) -> int:
        return unit + self.units


def units_manifest(layout: Layout, where: Placement | None = None) -> list[dict]:
    where = where or Placement()
    return [{"id": where.unit(u.id), "kind": u.kind, "node": u.node + where.nodes,
             "members": len(u.members),
             "passed_up": sorted(u.partition.private) if not u.keeps_private else [],
             "notes": u.partition.notes} for u in layout.units]
