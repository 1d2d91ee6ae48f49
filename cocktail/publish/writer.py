"""Writing one version: pseudonymous chunks, inverted indexes, pseudonym maps, manifests.

Every chunk gets a random id, every subrecord a per-chunk pseudonym, a keyed hash of (chunk
id, record id) (:func:`pseudonyms`); public chunks and their indexes go to the public zone,
private chunks, the pseudonym maps, the record ids and the full manifest to the private zone.
"""

from __future__ import annotations

import hashlib
import itertools
import multiprocessing
import secrets
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO

from .. import chunkformat as fmt
from .. import releases
from ..anonymity import Partition, partition
from ..blas import one_thread
from ..overlay.layout import Layout, LayoutParams, PhaseProgress
from ..query.termindex import (SHARD_RECORDS, IndexPart, TermIndexBuilder, layout_from_manifest,
                               write_parts)
from ..releases import Release, signing
from ..store import Store, StoreError
from .batch import collector_paused

if TYPE_CHECKING:
    from ..query.view import Publication

KEY_FILE = "owner.key"
# Below this, starting worker processes costs more than it saves: spawning two took 2.3 s of
# CPU (and 2.6 s of wall) more than partitioning BMS-WebView-1 (59,602 records) in process.
PARALLEL_FROM_RECORDS = 250_000
IN_FLIGHT_PER_WORKER = 4


def pseudonyms(key: bytes, chunk_id: str, record_ids: Iterable[str]) -> list[str]:
    """Each record's pseudonym in the chunk: keyed BLAKE2b(owner key; chunk id || 0 || record
    id), 80 bits in hex.  A keyed BLAKE2b is a PRF like the HMAC-SHA256 the design names, at a
    fraction of the cost: the chunk's prefix is hashed once and the state copied per record."""
    prefix = hashlib.blake2b(key=key, digest_size=fmt.PSEUDONYM_HEX // 2)
    prefix.update(chunk_id.encode() + b"\x00")
    names = []
    for record_id in record_ids:
        state = prefix.copy()
        state.update(record_id.encode("utf-8", "surrogatepass"))
        names.append(state.hexdigest())
    return names


@dataclass(frozen=True)
class BuiltChunk:
    """One chunk's files, built from its members (what either engine then writes)."""

    chunk_id: str
    rows: list[tuple[str, tuple[str, int, list[str]]]]  # (pseudonym, member), by pseudonym
    chunk: bytes
    index: bytes

    @property
    def sha256(self) -> dict[str, str]:
        return {"chunk": hashlib.sha256(self.chunk).hexdigest(),
                "index": hashlib.sha256(self.index).hexdigest()}

    def files(self) -> list[tuple[str, bytes]]:
        return [(f"{fmt.CHUNK_DIR}/{self.chunk_id}.tsv", self.chunk),
                (f"{fmt.INDEX_DIR}/{self.chunk_id}.tsv", self.index)]

    def map_rows(self, with_ids: bool = False) -> list[tuple]:
        """The pseudonym map's (chunk id, pseudonym, record position) rows; ``with_ids``
        (a private chunk's) adds each record id."""
        return [(self.chunk_id, name, position, *((record_id,) if with_ids else ()))
                for name, (record_id, position, _) in self.rows]

    def entry(self, unit: int, private: bool, terms: Iterable[str]) -> dict:
        """The chunk's entry in the private manifest."""
        return {"unit": unit, "priLabel": private, "terms": sorted(terms),
                "subrecords": len(self.rows), "sha256": self.sha256}


def build_chunk(key: bytes, chunk_id: str, members: Sequence[tuple[str, int, list[str]]]
                ) -> BuiltChunk | None:
    """``members``: (record id, record position, subrecord terms).  None if two of them got
    the same pseudonym (the caller draws another chunk id)."""
    names = pseudonyms(key, chunk_id, [record_id for record_id, _, _ in members])
    if len(set(names)) != len(names):
        return None
    rows = sorted(zip(names, members))
    subrecords = [(name, sorted(sub)) for name, (_, _, sub) in rows]
    return BuiltChunk(chunk_id, rows, fmt.encode_chunk(subrecords),
                      fmt.encode_index(chunk_id, fmt.build_index(subrecords)))


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
        self.unit_map: list[tuple[str, str, int]] = []  # the open unit's pseudonym map
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

    def _new_chunk(self, members: Sequence[tuple[str, int, list[str]]]) -> BuiltChunk:
        """The chunk's files under a fresh random id whose pseudonyms are distinct."""
        while True:
            chunk_id = secrets.token_hex(fmt.CHUNK_ID_HEX // 2)
            built = build_chunk(self.key, chunk_id, members) if chunk_id not in self.chunks \
                else None
            if built is not None:
                return built

    def add_chunk(self, unit: int, unit_kind: str, private: bool, terms: frozenset[str],
                  members: Sequence[tuple[str, int, list[str]]]) -> None:
        """``members``: (record id, record position, subrecord terms) of every non-empty
        subrecord."""
        built = self._new_chunk(members)
        zone = "private" if private else "public"
        for name, data in built.files():
            self.out.put(zone, name, data)
        self.unit_map.extend(built.map_rows(with_ids=private))
        self._index(members)
        self.chunks[built.chunk_id] = built.entry(unit, private, terms)
        self.release.add_chunk(built.chunk_id, unit, unit_kind, private, terms,
                               [(record_id, sub) for record_id, _, sub in members],
                               built.sha256["chunk"])

    def extend_chunk(self, chunk_id: str, home: str, unit: int, unit_kind: str, private: bool,
                     terms: Sequence[str], old: tuple[bytes, bytes],
                     members: Sequence[tuple[str, int, list[str]]]) -> None:
        """An existing chunk (its files in version ``home``, ``old``: their bytes) with new
        subrecords: the same id, so old records keep their pseudonyms and their lines byte for
        byte; the new lines merged in pseudonym order, written in this version."""
        old_chunk, old_index = old
        self.drop_chunk(chunk_id, home, private)
        names = pseudonyms(self.key, chunk_id, [record_id for record_id, _, _ in members])
        before = fmt.chunk_pseudonyms(old_chunk)
        if set(before).intersection(names) or len(set(names)) != len(names):
            raise StoreError(f"pseudonym collision in chunk {chunk_id}: append again")
        new_rows = sorted(zip(names, members))
        added = [(name, sorted(sub)) for name, (_, _, sub) in new_rows]
        zone = "private" if private else "public"
        chunk_bytes = fmt.merge_chunk(old_chunk, fmt.encode_chunk(added))
        index_bytes = fmt.merge_index(old_index, chunk_id, fmt.build_index(added))
        self.out.put(zone, f"{fmt.CHUNK_DIR}/{chunk_id}.tsv", chunk_bytes)
        self.out.put(zone, f"{fmt.INDEX_DIR}/{chunk_id}.tsv", index_bytes)
        self.unit_map.extend((chunk_id, name, position, *((record_id,) if private else ()))
                             for name, (record_id, position, _) in new_rows)
        self._index(members)
        self.chunks[chunk_id] = {
            "unit": unit, "priLabel": private, "terms": sorted(terms),
            "subrecords": len(before) + len(added),
            "sha256": {"chunk": hashlib.sha256(chunk_bytes).hexdigest(),
                       "index": hashlib.sha256(index_bytes).hexdigest()},
        }
        self.release.add_chunk(chunk_id, unit, unit_kind, private, terms,
                               [(record_id, sub) for record_id, _, sub in members],
                               self.chunks[chunk_id]["sha256"]["chunk"],
                               carried_sha256=hashlib.sha256(old_chunk).hexdigest(),
                               carried_subrecords=len(before))

    def _index(self, members: Sequence[tuple[str, int, list[str]]]) -> None:
        started = time.perf_counter()
        self.terms.add_members((position, sub) for _, position, sub in members)
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
                     earlier + fmt.encode_pseudonym_map(self.unit_map))
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
                           | ({"home": c["home"]} if "home" in c else {})
                           for cid, c in sorted(self.chunks.items()) if not c["priLabel"]]}

    def finish(self, public_manifest: dict, private_manifest: dict,
               records: bytes | BinaryIO | None, count: int, release_entry: dict, keep: int,
               seconds: dict[str, float],
               carried: tuple[Iterable[bytes], Iterable[bytes]] = ((), ())) -> None:
        """Write every file, then commit: ``seconds`` gets the time of each.  ``count``: the
        version's records; ``records``: their ``[id, cluster]`` lines, unless segments were
        written and carried already; ``carried``: the (private, public) manifest lines of the
        chunks an append leaves as they were, spliced in unparsed."""
        started = time.perf_counter()
        if records is not None:
            self.write_records(0, count, records)
        public_lines = [*carried[1], *map(fmt.chunk_line, public_manifest.pop("chunks"))]
        public_lines.sort(key=fmt.line_chunk_id)  # by random id: nothing groups them
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
        private_manifest["units"] = [
            u | {"public_records": logged[str(u["id"])]["public_records"]
                 if str(u["id"]) in logged else u.get("public_records", 0)}
            for u in private_manifest["units"]]
        private_lines = itertools.chain(carried[0], itertools.starmap(
            lambda chunk_id, entry: fmt.chunk_line(entry, chunk_id),
            private_manifest.pop("chunks").items()))
        self.out.put("private", fmt.MANIFEST, fmt.encode_manifest(private_manifest,
                                                                  private_lines, listed=False))
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
                for path in [*part.paths(), *([part.order_path] if part.order_path else [])]]

    def _write_term_index(self, count: int) -> dict:
        """The index's new parts into the private zone, its parts list beside them; its
        manifest entry (docs/publication-format.md)."""
        layout, self.index_superseded = write_parts(
            self.out.store, self.version, self.carried_index, self.terms, count,
            self.index_shard, self.out.write_private)
        entry = layout.entry()
        self.out.write_private(fmt.TERM_PARTS, fmt.encode_json(entry, compact=True))
        return entry


def split_members(members: Iterable[tuple[int, frozenset[str]]],
                  chunk_terms: Sequence[frozenset[str]]) -> list[list[tuple[int, list[str]]]]:
    """For each chunk, the (position, subrecord) of the members that meet it; terms in no
    chunk (a private part passed up the tree) are left out."""
    owner = {term: i for i, terms in enumerate(chunk_terms) for term in terms}
    members_of: list[list[tuple[int, list[str]]]] = [[] for _ in chunk_terms]
    for position, terms in members:
        parts: dict[int, list[str]] = {}
        for term in terms:
            if term in owner:
                parts.setdefault(owner[term], []).append(term)
        for i, sub in parts.items():
            members_of[i].append((position, sub))
    return members_of


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
    # Spawned, not forked: a forked worker would inherit the publish lock and keep holding it
    # if this process were killed.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                             initializer=one_thread) as pool:
        in_flight: deque = deque()
        for job in jobs:
            in_flight.append(pool.submit(_partition_job, job))
            if len(in_flight) >= IN_FLIGHT_PER_WORKER * workers:
                yield in_flight.popleft().result()
        while in_flight:
            yield in_flight.popleft().result()


def write_layout(writer: VersionWriter, record_ids: Sequence[str], layout: Layout,
                 where: Placement | None = None,
                 progress: PhaseProgress | None = None) -> dict[str, int]:
    """Write every unit of ``layout``; ``where`` places a layout built over some records
    (an append's) among all of the publication's."""
    where = where or Placement()
    totals = {"public": 0, "private": 0, "public_subrecords": 0, "private_subrecords": 0,
              "public_pairs": 0, "private_pairs": 0}
    for unit in layout.units:
        split = unit.partition
        stored_private = [split.private] if unit.keeps_private and split.private else []
        chunk_terms = [*split.public, *stored_private]
        for i, members in enumerate(split_members(unit.members, chunk_terms)):
            private = i >= len(split.public)
            writer.add_chunk(where.unit(unit.id), unit.kind, private, chunk_terms[i],
                             [(record_ids[where.record(p)], where.record(p), sub)
                              for p, sub in members])
            kind = "private" if private else "public"
            totals[kind] += 1
            totals[f"{kind}_subrecords"] += len(members)
            totals[f"{kind}_pairs"] += sum(len(sub) for _, sub in members)
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

    def unit(self, unit: int) -> int:
        return unit + self.units


def units_manifest(layout: Layout, where: Placement | None = None) -> list[dict]:
    where = where or Placement()
    return [{"id": where.unit(u.id), "kind": u.kind, "node": u.node + where.nodes,
             "members": len(u.members),
             "passed_up": sorted(u.partition.private) if not u.keeps_private else [],
             "notes": u.partition.notes} for u in layout.units]
