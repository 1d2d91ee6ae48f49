"""The publish pipeline: partition a dataset into clusters and chunks and write it as the
first release of a store (or, with ``rebase``, a fresh re-partition the owner accepts).

Later releases are appended (:mod:`.append`).  Reading a publication is :mod:`cocktail.query`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from .. import chunkformat as fmt
from .. import releases
from ..dataset import Dataset
from ..overlay.layout import LayoutParams, build_layout
from ..query.view import Publication
from ..store import Store
from ..versions import committed_versions, current_version, prune, sweep
from .batch import collector_paused
from .writer import VersionWriter, owner_key, partitions, units_manifest, write_layout

DEFAULT_KEEP = 3


@dataclass(frozen=True)
class PublishParams(LayoutParams):
    keep: int = DEFAULT_KEEP  # committed versions kept, the current one included
    workers: int = os.cpu_count() or 1  # processes partitioning clusters in parallel

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


def log_legacy_release(store: Store, current: str) -> None:
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
    releases.write_entry(store, entry)


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
    with store.publish_lock(), collector_paused():
        current = current_version(store)
        sweep(store, current)
        if current is not None:
            if not rebase:
                raise releases.refuse_rebase(store, current)
            log_legacy_release(store, current)
        layout = build_layout(dataset.records, params,
                              lambda clusters, n: partitions(clusters, params, params.workers, n),
                              progress)
        existing = committed_versions(store)
        version = fmt.version_name(int(existing[-1][1:]) + 1 if existing else 1)
        writer = VersionWriter(store, version, owner_key(store),
                                releases.ReleaseBuilder("rebase" if current else "fresh"))
        started_writing = time.perf_counter()
        totals = write_layout(writer, dataset.ids, layout)
        phases = dict(layout.seconds, write=time.perf_counter() - started_writing)
        now = datetime.now(timezone.utc).replace(microsecond=0)
        created = now.isoformat(timespec="seconds")
        public_manifest = writer.public_manifest(created, params.k, params.m)
        private_manifest = {
            "format": fmt.FORMAT, "version": version, "created": created,
            "params": asdict(params),
            "source": {"path": dataset.source, "format": dataset.format,
                       "records": len(dataset), "skipped_lines": dataset.skipped_lines},
            "tree": layout.tree.to_manifest(), "roots": layout.tree.roots,
            "units": units_manifest(layout),
            "aggregation": layout.stats,
            "pairs": {"public": totals["public_pairs"], "private": totals["private_pairs"]},
            "chunks": writer.chunks,
        }
        records_bytes = fmt.encode_records(dataset.ids, layout.leaf_units(len(dataset)))
        release_entry = writer.release.entry(
            version, created, params.k, params.m, method=params.method, records=len(dataset),
            appended=len(dataset), buffered=0)
        writer.finish(public_manifest, private_manifest, records_bytes, release_entry,
                      now.timestamp(), phases)
        prune(store, version, params.keep)
    pairs = dataset.records.pairs()
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
