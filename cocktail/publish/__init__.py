"""The publish pipeline: partition a dataset into clusters and chunks and write it as the
first release of a store (or, with ``rebase``, a fresh re-partition the owner accepts).

Later releases are appended (:mod:`.append`).  Reading a publication is :mod:`cocktail.query`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import BinaryIO

from .. import chunkformat as fmt
from .. import releases
from ..blas import one_thread
from ..dataset import Dataset
from ..overlay.layout import LayoutParams, PhaseProgress, build_layout
from ..overlay.tree import Tree
from ..query.termindex import SHARD_RECORDS
from ..query.view import Publication
from ..releases.layout import Refused, is_derived
from ..store import Store
from .batch import collector_paused
from .writer import VersionWriter, owner_key, partitions, units_manifest, write_layout

DEFAULT_KEEP = 3


@dataclass(frozen=True)
class PublishParams(LayoutParams):
    keep: int = DEFAULT_KEEP  # committed versions kept, the current one included
    workers: int = os.cpu_count() or 1  # processes partitioning clusters in parallel
    index_shard: int = SHARD_RECORDS  # record positions per part of the term index, at most

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
        if self.index_shard < 1:
            raise ValueError(f"index shard must hold at least 1 record (got {self.index_shard})")
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1 (got {self.workers})")
        if not 0 <= self.max_rho <= 1:
            raise ValueError(f"max ρ must be between 0 and 1 (got {self.max_rho})")


@dataclass(frozen=True)
class PublishReport:
    store: str
    version: str
    method: str
    k: int
    m: int
    engine: str              # "single" (this process) or "spark"
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
    seconds: float            # wall time of the whole publish, reading the input included
    phase_seconds: dict       # wall time of tree, partition, aggregate, write, term_index, commit
    rho: float | None = None  # with sensitive terms: the clusters' measured ρ

    def as_dict(self) -> dict:
        return asdict(self)


def timed_from(report, started: float):
    """``report`` (a publish's or an append's) with its ``seconds`` counted from ``started``:
    from before its input was read, which a caller that loads it times (the owner waits for
    the load too)."""
    return replace(report, seconds=round(time.perf_counter() - started, 3))


def refuse_derived(store: Store, current: str) -> None:
    """A derived view is written by `cocktail republish` alone: the owner's writers have no
    records behind it, and would point CURRENT at a mix."""
    if is_derived(store, current):
        raise Refused(f"{store.url} holds a view derived by `cocktail republish`, not an "
                      "owner's publication: publish to another store")


def log_legacy_release(store: Store, current: str) -> None:
    """A store published before the release log existed: log its current version as
    'imported', from its files, so that the history starts with what the public cloud holds."""
    if releases.has_entry(store, current):
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
    releases.write_entry(store, entry)


@dataclass
class Built:
    """What an engine made of the records: all the release needs besides the chunk files."""

    tree: Tree
    units: list[dict]          # the units' manifest entries, by unit id
    stats: dict                # private subrecords and terms before and after aggregation
    totals: dict[str, int]     # chunks, subrecords and (record, term) pairs, public and private
    records: bytes | BinaryIO  # records.jsonl, or a file it was spooled to
    source: dict               # the input: path, format, records, skipped lines
    pairs: int                 # (record, term) pairs of the input
    partition_seconds: float
    phases: dict[str, float]   # wall seconds of the engine's phases


def publish(dataset: Dataset, store: Store, params: PublishParams,
            progress: PhaseProgress | None = None, *,
            rebase: bool = False) -> PublishReport:
    """Partition, pseudonymise and write ``dataset`` as the first release of ``store``, or, with
    ``rebase``, as a fresh re-partition of a store that has released before (the owner accepts
    that the two chunkings compose; the release log records it).

    ``progress(phase, done, total)`` follows the phases (tree, partition: after each leaf
    cluster, aggregate, write, commit).
    """
    params.check()
    check_size(params, len(dataset))

    def build(writer: VersionWriter, mtime: float) -> Built:
        layout = build_layout(dataset.records, params,
                              lambda clusters, n: partitions(clusters, params, params.workers, n),
                              progress)
        started = time.perf_counter()
        totals = write_layout(writer, dataset.ids, layout, progress=progress)
        phases = dict(layout.seconds, write=time.perf_counter() - started)
        return Built(layout.tree, units_manifest(layout), layout.stats, totals,
                     fmt.encode_records(dataset.ids, layout.leaf_units(len(dataset))),
                     source_of(dataset) | {"sha256": dataset.content_digest},
                     dataset.records.pairs(), layout.partition_seconds, phases)

    return release(store, params, build, rebase=rebase, engine="single", progress=progress)


def source_of(dataset: Dataset) -> dict:
    """Where a release's records came from, for the owner (private manifest, release log)."""
    return {"path": dataset.source, "format": dataset.format, "records": len(dataset),
            "skipped_lines": dataset.skipped_lines}


def batches(source: dict, version: str) -> dict[str, str]:
    """A first release's entry in the private manifest's ``batches`` (content digest ->
    the version that added it): what tells a FIMI or SPMF batch appended again."""
    digest = source.get("sha256")
    return {digest: version} if digest else {}


def check_size(params: PublishParams, records: int) -> None:
    if params.k > records:
        raise ValueError(f"k={params.k} exceeds the {records:,} records: nothing could be "
                         "published")


def release(store: Store, params: PublishParams,
            build: Callable[[VersionWriter, float], Built], *, rebase: bool,
            engine: str, progress: PhaseProgress | None = None) -> PublishReport:
    """The release around an engine's ``build(writer, mtime)``: the lock, the version, the
    manifests, the release log entry and the commit point (``progress``'s phase commit), the
    same whichever engine partitioned.  Every public file gets ``mtime``."""
    progress = progress or (lambda phase, done, total: None)
    started = time.perf_counter()
    one_thread()
    # The lock first: a read-only store or a running publish is reported before the work.
    with releases.begin(store) as out, collector_paused():
        current = out.current
        if current is not None:
            refuse_derived(store, current)
            if not rebase:
                raise releases.refuse_rebase(store, current)
            log_legacy_release(store, current)
        version = out.version
        writer = VersionWriter(out, owner_key(store),
                               releases.ReleaseBuilder("rebase" if current else "fresh"),
                               params.index_shard)
        built = build(writer, out.mtime)
        phases = dict(built.phases)
        created = out.created
        public_manifest = writer.public_manifest(created, params.k, params.m)
        records = built.source["records"]
        private_manifest = {
            "format": fmt.FORMAT, "version": version, "created": created,
            "params": asdict(params), "source": built.source,
            "tree": built.tree.to_manifest(), "roots": built.tree.roots,
            "units": built.units, "aggregation": built.stats,
            "batches": batches(built.source, version),
            "pairs": {"public": built.totals["public_pairs"],
                      "private": built.totals["private_pairs"]},
            "chunks": writer.chunks,
        }
        release_entry = writer.release.entry(
            version, created, params.k, params.m, method=params.method, records=records,
            appended=records, buffered=0, input=built.source)
        progress("commit", 0, 1)
        try:
            writer.finish(public_manifest, private_manifest, built.records, records,
                          release_entry, params.keep, phases)
        finally:
            if not isinstance(built.records, bytes):
                built.records.close()
        progress("commit", 1, 1)
    totals = built.totals
    return PublishReport(
        store=store.url, version=version, method=params.method, k=params.k, m=params.m,
        engine=engine, records=records,
        clusters=sum(u["kind"] == "leaf" for u in built.units),
        public_chunks=totals["public"], private_chunks=totals["private"],
        public_subrecords=totals["public_subrecords"],
        private_subrecords=totals["private_subrecords"],
        private_terms=built.stats["after"]["private_terms"],
        private_term_share=round(totals["private_pairs"] / built.pairs, 6)
        if built.pairs else 0.0,
        aggregated_clusters=sum(u["kind"] == "aggregate" for u in built.units),
        private_before_aggregation=built.stats["before"],
        skipped_lines=built.source["skipped_lines"],
        partition_seconds=round(built.partition_seconds, 3),
        seconds=round(time.perf_counter() - started, 3),
        phase_seconds={phase: round(t, 3) for phase, t in phases.items()},
        rho=built.stats.get("rho"),
    )
