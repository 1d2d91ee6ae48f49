"""A publication: pseudonymous chunks, inverted indexes, the manifests and versioning.

Writing: every cluster is partitioned, every chunk gets a random id, every subrecord a per-chunk
pseudonym HMAC(owner key, chunk id || record id); public chunks and their indexes go to the public
zone, private chunks, the pseudonym maps, the record ids and the full manifest to the private
zone.  A version is written under a staging name, renamed into place, and made current by
replacing the ``CURRENT`` pointer: the one atomic step.  A crash at any point leaves the previous
version current; the next publish sweeps what the crash left behind.

Reading: :class:`Publication` opens the current (or a named) version for the private cloud.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import multiprocessing
import os
import secrets
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from functools import cached_property

from . import chunkformat as fmt
from . import releases
from pyroaring import BitMap, FrozenBitMap

from .anonymity import Partition, partition
from .dataset import Dataset
from .overlay.layout import Layout, LayoutParams, Unit, build_layout
from .overlay.planner import term_locations
from .store import Store, StoreError

KEY_FILE = "owner.key"
DEFAULT_KEEP = 3
PARALLEL_FROM_RECORDS = 20_000  # below this, starting worker processes costs more than it saves


@dataclass(frozen=True)
class PublishParams:
    k: int = 5
    m: int = 3
    method: str = "improved"
    cluster_size: int = 2000
    keep: int = DEFAULT_KEEP  # committed versions kept, the current one included
    workers: int = os.cpu_count() or 1  # processes partitioning clusters in parallel
    overlay: bool = True     # clusters from the overlay tree (else a fixed-size split)
    aggregate: bool = True   # pool leftover private subrecords up the tree (paper 5.2)
    aggregate_volume: int = 50_000  # pooled subrecords that make an aggregated cluster early

    def check(self) -> None:
        if self.k < 2 or self.m < 1:
            raise ValueError(f"k must be at least 2 and m at least 1 (got k={self.k}, "
                             f"m={self.m}); k=1 would publish every record as it is")
        if self.cluster_size < 1:
            raise ValueError(f"cluster size must be at least 1 (got {self.cluster_size})")
        if self.keep < 1:
            raise ValueError(f"keep must be at least 1 (got {self.keep})")
        if self.aggregate_volume < 1:
            raise ValueError(f"aggregate volume must be at least 1 (got {self.aggregate_volume})")
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1 (got {self.workers})")


@dataclass(frozen=True)
class PublishReport:
    store: str
    version: str
    method: str
    k: int
    m: int
    records: int
    clusters: int
    public_chunks: int
    private_chunks: int
    public_subrecords: int
    private_subrecords: int
    private_terms: int       # distinct terms in the stored private chunks
    private_term_share: float  # share of all (record, term) pairs that stay private
    aggregated_clusters: int
    private_before_aggregation: dict  # the same counts for the leaf clusters' private parts
    skipped_lines: int
    partition_seconds: float  # CPU time of the partitioner, summed over clusters
    seconds: float            # wall time of the whole publish
    phase_seconds: dict       # wall time of tree, partition, aggregate, write, commit

    def as_dict(self) -> dict:
        return asdict(self)


def pseudonym(key: bytes, chunk_id: str, record_id: str) -> str:
    digest = hmac.new(key, f"{chunk_id}\x00{record_id}".encode(), hashlib.sha256).hexdigest()
    return digest[: fmt.PSEUDONYM_HEX]


def owner_key(store: Store) -> bytes:
    """The owner's HMAC key, created on first use; it never leaves the private zone."""
    if store.exists("private", KEY_FILE):
        return bytes.fromhex(store.read("private", KEY_FILE).decode().strip())
    key = secrets.token_bytes(32)
    store.write("private", KEY_FILE, key.hex().encode() + b"\n", pri_label=True)
    return key


# -- versions ------------------------------------------------------------------------------

def current_version(store: Store) -> str | None:
    if not store.exists("public", fmt.POINTER):
        return None
    name = store.read("public", fmt.POINTER).decode().strip()
    if not fmt.VERSION_RE.match(name):
        raise StoreError(f"{store.url}: {fmt.POINTER} names no version ({name!r})")
    return name


def committed_versions(store: Store) -> list[str]:
    """Versions present in both zones, oldest first (not all of them need be current)."""
    public = {n for n in store.list("public") if fmt.VERSION_RE.match(n)}
    return sorted(public & {n for n in store.list("private") if fmt.VERSION_RE.match(n)})


def _sweep(store: Store, current: str | None) -> None:
    """Remove what an interrupted publish left: staging dirs and versions never made current.

    Without a pointer nothing but staging dirs is removed: a lost pointer must not cost data.
    """
    for zone in ("public", "private"):
        for name in store.list(zone):
            stale_version = current is not None and fmt.VERSION_RE.match(name) and name > current
            if name.startswith(fmt.STAGING_PREFIX) or stale_version:
                store.remove(zone, name)
    if current is not None:
        releases.sweep_log(store, current)


def _prune(store: Store, current: str, keep: int) -> None:
    older = [v for v in committed_versions(store) if v < current]
    for version in older[: max(0, len(older) - (keep - 1))]:
        for zone in ("public", "private"):
            store.remove(zone, version)


# -- writing -------------------------------------------------------------------------------

class _VersionWriter:
    """Writes one version's files under its staging names and keeps the running totals.

    Files are produced cluster by cluster, but written in a random order (from a local spool)
    and the public ones stamped with one common time: otherwise creation order, inode numbers,
    HDFS file and block ids and modification times would group the public chunks by cluster,
    in tree order, for anyone who lists them."""

    def __init__(self, store: Store, version: str, key: bytes,
                 release: releases.ReleaseBuilder) -> None:
        self.store, self.version, self.key, self.release = store, version, key, release
        self.staging = fmt.STAGING_PREFIX + version
        self.seen_pseudonyms: set[str] = set()
        self.chunks: dict[str, dict] = {}
        self.unit_map: list[tuple[str, str, int]] = []  # the open unit's pseudonym map
        self._spool = tempfile.TemporaryFile(prefix="cocktail-spool-")
        # zone, path, and either (offset, size) in the spool or the path of a file to copy
        self._spooled: list[tuple[str, str, int | str, int, bool]] = []

    def _put(self, zone: str, name: str, data: bytes, private: bool) -> None:
        self._spooled.append((zone, f"{self.staging}/{name}", self._spool.tell(), len(data),
                              private))
        self._spool.write(data)

    def keep(self, zone: str, old_version: str, name: str) -> None:
        """Carry a file of an earlier version over unchanged (a link where the store can)."""
        self._spooled.append((zone, f"{self.staging}/{name}", f"{old_version}/{name}", 0,
                              zone == "private"))

    def _new_chunk_id(self, record_ids: Sequence[str]) -> tuple[str, list[str]]:
        """A fresh random id whose pseudonyms collide with none issued so far in this version."""
        while True:
            chunk_id = secrets.token_hex(fmt.CHUNK_ID_HEX // 2)
            names = [pseudonym(self.key, chunk_id, r) for r in record_ids]
            if chunk_id not in self.chunks and self.seen_pseudonyms.isdisjoint(names) \
                    and len(set(names)) == len(names):
                self.seen_pseudonyms.update(names)
                return chunk_id, names

    def add_chunk(self, unit: int, unit_kind: str, private: bool, terms: frozenset[str],
                  members: Sequence[tuple[str, int, list[str]]]) -> None:
        """``members``: (record id, record position, subrecord terms) of every non-empty subrecord."""
        chunk_id, names = self._new_chunk_id([record_id for record_id, _, _ in members])
        rows = sorted(zip(names, members))
        subrecords = [(name, sorted(sub)) for name, (_, _, sub) in rows]
        zone = "private" if private else "public"
        chunk_bytes = fmt.encode_chunk(subrecords)
        index_bytes = fmt.encode_index(chunk_id, fmt.build_index(subrecords))
        self._put(zone, f"{fmt.CHUNK_DIR}/{chunk_id}.tsv", chunk_bytes, private)
        self._put(zone, f"{fmt.INDEX_DIR}/{chunk_id}.tsv", index_bytes, private)
        self.unit_map.extend((chunk_id, name, position) for name, (_, position, _) in rows)
        self.chunks[chunk_id] = {
            "unit": unit, "priLabel": private, "terms": sorted(terms),
            "subrecords": len(subrecords),
            "sha256": {"chunk": hashlib.sha256(chunk_bytes).hexdigest(),
                       "index": hashlib.sha256(index_bytes).hexdigest()},
        }
        self.release.add_chunk(chunk_id, unit, unit_kind, private, terms,
                               [(record_id, sub) for record_id, _, sub in members],
                               self.chunks[chunk_id]["sha256"]["chunk"])

    def extend_chunk(self, chunk_id: str, unit: int, unit_kind: str, private: bool,
                     terms: Sequence[str], old_rows: list[tuple[str, list[str]]],
                     members: Sequence[tuple[str, int, list[str]]]) -> None:
        """An existing chunk with new subrecords: the same id, so old records keep their
        pseudonyms and their lines unchanged; the new lines merged in pseudonym order."""
        names = [pseudonym(self.key, chunk_id, record_id) for record_id, _, _ in members]
        if {p for p, _ in old_rows}.intersection(names) or len(set(names)) != len(names):
            raise StoreError(f"pseudonym collision in chunk {chunk_id}: append again")
        new_rows = sorted(zip(names, members))
        subrecords = sorted(old_rows + [(name, sorted(sub)) for name, (_, _, sub) in new_rows])
        zone = "private" if private else "public"
        chunk_bytes = fmt.encode_chunk(subrecords)
        index_bytes = fmt.encode_index(chunk_id, fmt.build_index(subrecords))
        self._put(zone, f"{fmt.CHUNK_DIR}/{chunk_id}.tsv", chunk_bytes, private)
        self._put(zone, f"{fmt.INDEX_DIR}/{chunk_id}.tsv", index_bytes, private)
        self.unit_map.extend((chunk_id, name, position) for name, (_, position, _) in new_rows)
        self.chunks[chunk_id] = {
            "unit": unit, "priLabel": private, "terms": sorted(terms),
            "subrecords": len(subrecords),
            "sha256": {"chunk": hashlib.sha256(chunk_bytes).hexdigest(),
                       "index": hashlib.sha256(index_bytes).hexdigest()},
        }
        carried = hashlib.sha256(fmt.encode_chunk(old_rows)).hexdigest()
        self.release.add_chunk(chunk_id, unit, unit_kind, private, terms,
                               [(record_id, sub) for record_id, _, sub in members],
                               self.chunks[chunk_id]["sha256"]["chunk"],
                               carried_sha256=carried, carried_subrecords=len(old_rows))

    def keep_chunk(self, old_version: str, chunk_id: str, entry: dict) -> None:
        """An existing chunk no new record touches: its files carried over as they are."""
        zone = "private" if entry["priLabel"] else "public"
        for folder in (fmt.CHUNK_DIR, fmt.INDEX_DIR):
            self.keep(zone, old_version, f"{folder}/{chunk_id}.tsv")
        self.chunks[chunk_id] = entry

    def close_unit(self, unit: int, earlier: Sequence[tuple[str, str, int]] = ()) -> None:
        """Write the unit's pseudonym map: ``earlier`` rows (of chunks it had before) first."""
        self._put("private", f"{fmt.PSEUDONYM_DIR}/{unit}.tsv",
                  fmt.encode_pseudonym_map([*earlier, *self.unit_map]), True)
        self.unit_map = []

    def _write_spooled(self) -> None:
        order = list(range(len(self._spooled)))
        secrets.SystemRandom().shuffle(order)
        for i in order:
            zone, path, source, size, private = self._spooled[i]
            if isinstance(source, str):
                self.store.copy(zone, source, path)
                continue
            self._spool.seek(source)
            self.store.write(zone, path, self._spool.read(size), pri_label=private)
        self._spool.close()

    def finish(self, public_manifest: dict, private_manifest: dict, records: bytes,
               release_entry: dict, mtime: float, seconds: dict[str, float]) -> None:
        """Write every file, then commit: ``seconds`` gets the time of each."""
        started = time.perf_counter()
        self._put("public", fmt.MANIFEST, fmt.encode_json(public_manifest), False)
        self._put("private", fmt.RECORDS, records, True)
        self._put("private", fmt.MANIFEST, fmt.encode_json(private_manifest), True)
        self._write_spooled()
        for path in sorted(p for zone, p, *_ in self._spooled if zone == "public"):
            self.store.stamp("public", path, mtime)  # sorted by random chunk id: no order
        seconds["write"] = seconds.get("write", 0.0) + time.perf_counter() - started
        started = time.perf_counter()
        self._commit(release_entry)
        seconds["commit"] = time.perf_counter() - started

    def _commit(self, release_entry: dict) -> None:
        for zone in ("public", "private"):
            self.store.rename(zone, self.staging, self.version)
        self.store.write("private", releases.entry_path(self.version),
                         fmt.encode_json(release_entry), pri_label=True)
        self.store.sync()
        self.store.write("public", fmt.POINTER + ".tmp", f"{self.version}\n".encode(),
                         pri_label=False)
        self.store.rename("public", fmt.POINTER + ".tmp", fmt.POINTER)  # the commit point
        self.store.sync()


def _split_unit(unit: Unit, chunk_terms: Sequence[frozenset[str]]
                ) -> list[list[tuple[int, list[str]]]]:
    """For each chunk, the (position, subrecord) of the unit's members that meet it; terms in
    no chunk (a private part passed up the tree) are left out."""
    owner = {term: i for i, terms in enumerate(chunk_terms) for term in terms}
    members: list[list[tuple[int, list[str]]]] = [[] for _ in chunk_terms]
    for position, terms in unit.members:
        parts: dict[int, list[str]] = {}
        for term in terms:
            if term in owner:
                parts.setdefault(owner[term], []).append(term)
        for i, sub in parts.items():
            members[i].append((position, sub))
    return members


def _partition_job(job: tuple[str, list[frozenset[str]], int, int]) -> tuple[Partition, float]:
    method, records, k, m = job
    started = time.process_time()
    return partition(method, records, k, m), time.process_time() - started


def _partitions(clusters: list[list[frozenset[str]]],
                params: PublishParams) -> Iterator[tuple[Partition, float]]:
    """Each cluster's partition and its CPU seconds, in cluster order; clusters are
    independent, so in parallel."""
    jobs = [(params.method, records, params.k, params.m) for records in clusters]
    if params.workers == 1 or len(jobs) < 2 or \
            sum(map(len, clusters)) < PARALLEL_FROM_RECORDS:
        yield from map(_partition_job, jobs)
        return
    # Spawned, not forked: a forked worker would inherit the publish lock and keep holding it
    # if this process were killed.
    with ProcessPoolExecutor(min(params.workers, len(jobs)),
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        yield from pool.map(_partition_job, jobs)


def _write_layout(writer: _VersionWriter, record_ids: Sequence[str], layout: Layout,
                  where: Placement | None = None) -> dict[str, int]:
    """Write every unit of ``layout``; ``where`` places a layout built over some records
    (an append's) among all of the publication's."""
    where = where or Placement()
    totals = {"public": 0, "private": 0, "public_subrecords": 0, "private_subrecords": 0,
              "public_pairs": 0, "private_pairs": 0}
    for unit in layout.units:
        split = unit.partition
        stored_private = [split.private] if unit.keeps_private and split.private else []
        chunk_terms = [*split.public, *stored_private]
        for i, members in enumerate(_split_unit(unit, chunk_terms)):
            private = i >= len(split.public)
            writer.add_chunk(where.unit(unit.id), unit.kind, private, chunk_terms[i],
                             [(record_ids[where.record(p)], where.record(p), sub)
                              for p, sub in members])
            kind = "private" if private else "public"
            totals[kind] += 1
            totals[f"{kind}_subrecords"] += len(members)
            totals[f"{kind}_pairs"] += sum(len(sub) for _, sub in members)
        writer.close_unit(where.unit(unit.id))
    return totals


@dataclass(frozen=True)
class Placement:
    """Where a layout's local numbers land in the whole publication."""

    records: Sequence[int] | None = None  # layout position -> publication position
    units: int = 0                        # offset of unit ids
    nodes: int = 0                        # offset of tree node ids

    def record(self, position: int) -> int:
        return position if self.records is None else self.records[position]

    def unit(self, unit: int) -> int:
        return unit + self.units


def _tree_manifest(layout: Layout, where: Placement | None = None) -> list[dict]:
    where = where or Placement()
    leaf_units: dict[int, list[int]] = {}
    aggregate_of: dict[int, int] = {}
    for unit in layout.units:
        if unit.kind == "leaf":
            leaf_units.setdefault(unit.node, []).append(where.unit(unit.id))
        else:
            aggregate_of[unit.node] = where.unit(unit.id)
    return [{"id": n.id + where.nodes, "split": list(n.split),
             "children": {p: c + where.nodes for p, c in n.children.items()},
             "units": leaf_units.get(n.id, []), "aggregate": aggregate_of.get(n.id)}
            for n in layout.tree.nodes]


def _units_manifest(layout: Layout, where: Placement | None = None) -> list[dict]:
    where = where or Placement()
    return [{"id": where.unit(u.id), "kind": u.kind, "node": u.node + where.nodes,
             "members": len(u.members),
             "passed_up": sorted(u.partition.private) if not u.keeps_private else [],
             "notes": u.partition.notes} for u in layout.units]


def _log_legacy_release(store: Store, current: str) -> None:
    """A store published before the release log existed: log its current version as
    'imported', from its files, so that the history starts with what the public cloud holds."""
    if releases.read_log(store, current):
        return
    publication = Publication.open(store, current)
    builder = releases.ReleaseBuilder("imported")
    for chunk in publication.chunks.values():
        positions = publication.record_positions(chunk.id)
        members = [(publication.record_ids[positions[p]], terms)
                   for p, terms in publication.subrecords(chunk.id)]
        builder.add_chunk(chunk.id, chunk.unit, publication.units[chunk.unit]["kind"],
                          chunk.private, chunk.terms, members,
                          publication.manifest["chunks"][chunk.id]["sha256"]["chunk"])
    params = publication.manifest["params"]
    entry = builder.entry(current, publication.manifest["created"], params["k"], params["m"],
                          method=params["method"], records=len(publication.record_ids),
                          appended=len(publication.record_ids), buffered=0)
    store.write("private", releases.entry_path(current), fmt.encode_json(entry), pri_label=True)


def publish(dataset: Dataset, store: Store, params: PublishParams,
            progress: Callable[[int, int], None] | None = None, *,
            rebase: bool = False) -> PublishReport:
    """Partition, pseudonymise and write ``dataset`` as the first release of ``store``, or, with
    ``rebase``, as a fresh re-partition of a store that has released before (the owner accepts
    that the two chunkings compose; the release log records it).

    ``progress(done, total)`` is called after each leaf cluster.
    """
    params.check()
    if params.k > len(dataset):
        raise ValueError(f"k={params.k} exceeds the {len(dataset):,} records: nothing could be "
                         "published")
    started = time.perf_counter()
    # The lock first: a read-only store or a running publish is reported before the work.
    with store.publish_lock():
        current = current_version(store)
        _sweep(store, current)
        if current is not None:
            if not rebase:
                raise releases.refuse_rebase(store, current)
            _log_legacy_release(store, current)
        layout = build_layout(
            dataset.records,
            LayoutParams(params.k, params.m, params.method, params.cluster_size, params.overlay,
                         params.aggregate, params.aggregate_volume),
            lambda clusters: _partitions(clusters, params), progress)
        existing = committed_versions(store)
        version = fmt.version_name(int(existing[-1][1:]) + 1 if existing else 1)
        writer = _VersionWriter(store, version, owner_key(store),
                                releases.ReleaseBuilder("rebase" if current else "fresh"))
        started_writing = time.perf_counter()
        totals = _write_layout(writer, dataset.ids, layout)
        phases = dict(layout.seconds, write=time.perf_counter() - started_writing)
        now = datetime.now(timezone.utc).replace(microsecond=0)
        created = now.isoformat(timespec="seconds")
        public_manifest = {
            "format": fmt.FORMAT, "version": version, "created": created,
            "k": params.k, "m": params.m,
            "chunks": [{"id": cid, "priLabel": False, "subrecords": c["subrecords"],
                        "terms": len(c["terms"]), "sha256": c["sha256"]}
                       for cid, c in sorted(writer.chunks.items()) if not c["priLabel"]],
        }
        private_manifest = {
            "format": fmt.FORMAT, "version": version, "created": created,
            "params": asdict(params),
            "source": {"path": dataset.source, "format": dataset.format,
                       "records": len(dataset), "skipped_lines": dataset.skipped_lines},
            "tree": _tree_manifest(layout), "roots": [0],
            "units": _units_manifest(layout),
            "aggregation": layout.stats,
            "pairs": {"public": totals["public_pairs"], "private": totals["private_pairs"]},
            "chunks": writer.chunks,
        }
        leaf_of = layout.leaf_unit_of()
        records_bytes = "".join(
            json.dumps([rid, leaf_of[p]], ensure_ascii=False) + "\n"
            for p, rid in enumerate(dataset.ids)).encode("utf-8")
        release_entry = writer.release.entry(
            version, created, params.k, params.m, method=params.method, records=len(dataset),
            appended=len(dataset), buffered=0)
        writer.finish(public_manifest, private_manifest, records_bytes, release_entry,
                      now.timestamp(), phases)
        _prune(store, version, params.keep)
    pairs = sum(len(r) for r in dataset.records)
    return PublishReport(
        store=store.url, version=version, method=params.method, k=params.k, m=params.m,
        records=len(dataset), clusters=sum(u.kind == "leaf" for u in layout.units),
        public_chunks=totals["public"], private_chunks=totals["private"],
        public_subrecords=totals["public_subrecords"],
        private_subrecords=totals["private_subrecords"],
        private_terms=layout.stats["after"]["private_terms"],
        private_term_share=round(totals["private_pairs"] / pairs, 6) if pairs else 0.0,
        aggregated_clusters=sum(u.kind == "aggregate" for u in layout.units),
        private_before_aggregation=layout.stats["before"],
        skipped_lines=dataset.skipped_lines,
        partition_seconds=round(layout.partition_seconds, 3),
        seconds=round(time.perf_counter() - started, 3),
        phase_seconds={phase: round(t, 3) for phase, t in phases.items()},
    )


# -- reading (private cloud) ----------------------------------------------------------------

@dataclass(frozen=True)
class ChunkInfo:
    id: str
    unit: int
    private: bool
    terms: frozenset[str]


class Publication:
    """One version of a publication, as the private cloud sees it (it holds the maps)."""

    def __init__(self, store: Store, version: str) -> None:
        self.store, self.version = store, version
        self.manifest = fmt.decode_json(store.read("private", fmt.manifest_path(version)),
                                        f"private/{fmt.manifest_path(version)}")
        self.chunks = {cid: ChunkInfo(cid, c["unit"], c["priLabel"], frozenset(c["terms"]))
                       for cid, c in self.manifest["chunks"].items()}
        self.tree: list[dict] = self.manifest["tree"]
        self.roots: list[int] = self.manifest.get("roots", [0])
        self.units: list[dict] = self.manifest["units"]
        self._maps: dict[int, dict[str, dict[str, int]]] = {}

    @classmethod
    def open(cls, store: Store, version: str | None = None) -> Publication:
        version = version or current_version(store)
        if version is None:
            raise StoreError(f"{store.url} holds no publication yet (run `cocktail publish`)")
        if version not in committed_versions(store):
            raise StoreError(f"{store.url} has no version {version}")
        return cls(store, version)

    @property
    def k(self) -> int:
        return self.manifest["params"]["k"]

    @property
    def m(self) -> int:
        return self.manifest["params"]["m"]

    @cached_property
    def _records(self) -> list[list]:
        data = self.store.read("private", f"{self.version}/{fmt.RECORDS}").decode("utf-8")
        return [json.loads(line) for line in data.splitlines()]

    @cached_property
    def record_ids(self) -> list[str]:
        return [rid for rid, _ in self._records]

    @cached_property
    def cluster_of(self) -> list[int]:
        """The leaf cluster (unit id) of each record position."""
        return [unit for _, unit in self._records]

    @cached_property
    def _members(self) -> dict[int, frozenset[int]]:
        grouped: dict[int, list[int]] = {}
        for position, unit in enumerate(self.cluster_of):
            grouped.setdefault(unit, []).append(position)
        return {unit: frozenset(positions) for unit, positions in grouped.items()}

    def cluster_members(self, unit: int) -> frozenset[int]:
        """Record positions of a leaf cluster."""
        return self._members.get(unit, frozenset())

    def warm(self, positions: bool = True) -> Publication:
        """Read now what queries would read lazily (the maps, and with ``positions`` every
        term's records), so no query pays for a cold read or is timed by one, and concurrent
        readers find nothing left to fill in."""
        for attribute in ("record_ids", "cluster_of", "_members", "locations", "term_units",
                          "split_terms", *(["term_records"] if positions else [])):
            getattr(self, attribute)
        for chunk in self.chunks:
            self.record_positions(chunk)
        return self

    def chunk_unit(self, chunk_id: str) -> int:
        return self.chunks[chunk_id].unit

    @cached_property
    def unit_chunks(self) -> dict[int, dict[str, str]]:
        """unit -> term -> the stored chunk of that unit holding the term."""
        where: dict[int, dict[str, str]] = {}
        for chunk in self.chunks.values():
            for term in chunk.terms:
                where.setdefault(chunk.unit, {})[term] = chunk.id
        return where

    @cached_property
    def locations(self) -> dict[int, dict[str, str]]:
        """Leaf cluster -> term -> the chunk holding it for the cluster's records."""
        return term_locations(self.tree, self.unit_chunks,
                              [frozenset(u["passed_up"]) for u in self.units])

    @cached_property
    def split_terms(self) -> frozenset[str]:
        return frozenset(t for node in self.tree for t in node["split"])

    @cached_property
    def term_units(self) -> dict[str, frozenset[int]]:
        """Term -> the leaf clusters with a record holding it."""
        units: dict[str, set[int]] = {}
        for unit, where in self.locations.items():
            for term in where:
                units.setdefault(term, set()).add(unit)
        return {term: frozenset(us) for term, us in units.items()}

    def is_private(self, chunk_id: str) -> bool:
        return self.chunks[chunk_id].private

    def _zone(self, chunk_id: str) -> str:
        return "private" if self.is_private(chunk_id) else "public"

    @cached_property
    def term_records(self) -> dict[str, FrozenBitMap]:
        """Term -> the positions of every record holding it, as a roaring bitmap: what the
        fast path intersects.  Built from every chunk's index and the private maps; each
        (record, term) pair sits in exactly one chunk, so the union over chunks is exact."""
        records: dict[str, BitMap] = {}
        for chunk_id in self.chunks:
            names = self.record_positions(chunk_id)
            path = fmt.index_path(self.version, chunk_id)
            for term, pseudonyms in fmt.decode_index(
                    self.store.read(self._zone(chunk_id), path), chunk_id, path):
                records.setdefault(term, BitMap()).update(names[p] for p in pseudonyms)
        return {term: FrozenBitMap(found) for term, found in records.items()}

    def index_location(self, chunk_id: str) -> str:
        return self.store.location(self._zone(chunk_id), fmt.index_path(self.version, chunk_id))

    def subrecords(self, chunk_id: str) -> Iterator[tuple[str, list[str]]]:
        path = fmt.chunk_path(self.version, chunk_id)
        return fmt.decode_chunk(self.store.read(self._zone(chunk_id), path), path)

    def record_positions(self, chunk_id: str) -> dict[str, int]:
        """pseudonym -> record position, for one chunk (the private map, read per unit)."""
        unit = self.chunks[chunk_id].unit
        if unit not in self._maps:
            path = fmt.pseudonym_map_path(self.version, unit)
            self._maps[unit] = fmt.decode_pseudonym_map(self.store.read("private", path), path)
        return self._maps[unit][chunk_id]
