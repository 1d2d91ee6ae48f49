"""The driver of a Spark publish: :func:`publish_spark` (a first publish or a rebase) and
:func:`append_spark`, around the single-machine release (the lock, the version, the manifests
and the commit); :class:`_Run` drives one publish's phases on the cluster (read, tree, leaf
units, aggregation, write) and :class:`SparkClusters` an append's new clusters."""

from __future__ import annotations

import itertools
import pickle
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
from pyspark import StorageLevel

from ... import chunkformat as fmt
from ... import releases
from ...dataset import Dataset, InputOptions, Records
from ...overlay.layout import PhaseProgress
from ...overlay.tree import Node, SplitSearch, Tree
from ...query.view import Publication
from ...store import Store
from .. import Built, PublishParams, PublishReport, check_size, release
from ..append import AppendReport, NewClusters, append
from ..writer import Placement, VersionWriter
from .blocks import Block
from .context import SparkSettings, engine_context
from .layout import aggregate_pools, layout_stats, leaf_clusters, partition_leaves
from .reading import (RECORDS_PER_TASK, Input, collect_dataset, driver_input, format_of,
                      read_records, read_table)
from .tree import grow_tree_distributed
from .writer import (Carrier, Collected, UnitJob, carried_outputs, in_task_order,
                     units_manifest, write_files)

_NO_JOB = type("NoJob", (), {"stageIds": ()})()  # a job the tracker has already forgotten
RECORDS_PER_REPORT = 500_000  # records whose reports make one partition (~10 MB)
REPORTS_AT_ONCE = 2  # report partitions the driver reads in one job: two executors' tasks


def publish_spark(source, store: Store, params: PublishParams, settings: SparkSettings,
                  *, data_format: str | None = None, skip_bad_lines: bool = False,
                  options: InputOptions = InputOptions(), rebase: bool = False,
                  progress: PhaseProgress | None = None) -> PublishReport:
    """:func:`cocktail.publish.publish` on Spark, reading ``source``: a path or hdfs:// URL,
    or a DataFrame (Spark's, pandas', polars'; :func:`read_table`), ``options`` saying how
    it is laid out.  A context already running in this process (a notebook's, the tests')
    is used as it is, ``settings`` aside, and left running."""
    params.check()
    progress = progress or (lambda phase, done, total: None)
    with engine_context(settings) as (sc, done):
        started = time.perf_counter()
        progress("load", 0, 1)
        data_format = format_of(sc, source, data_format)
        table = read_table(sc, source, data_format, skip_bad_lines, options)
        data = (driver_input(sc, list(table.ids), table.records, table) if table
                else read_records(sc, source, data_format, skip_bad_lines, options))
        # On disk, not in the heap: the driver's JVM is the local executors' too, and each
        # cached partition would have to fit in it whole.
        data.records.persist(StorageLevel.DISK_ONLY)
        check_size(params, data.total)
        progress("load", 1, 1)
        loading = time.perf_counter() - started
        engine = _Run(sc, data, params, store, progress)

        def build(writer: VersionWriter, mtime: float) -> Built:
            try:
                return engine.build(writer, mtime)
            finally:
                done()  # the manifests and the commit need no Spark

        report = release(store, params, build, rebase=rebase, engine="spark", progress=progress)
    report.phase_seconds["load"] = round(loading, 3)
    return report


def append_spark(source, store: Store, settings: SparkSettings, *,
                 data_format: str | None = None, skip_bad_lines: bool = False,
                 options: InputOptions = InputOptions(), min_new: int | None = None,
                 progress: PhaseProgress | None = None,
                 loaded: Callable[[Dataset], None] | None = None,
                 allow_duplicate: bool = False) -> AppendReport:
    """:func:`cocktail.publish.append.append` on Spark: the batch is read by Spark's reader
    (the same parsing and bad-line messages as :func:`publish_spark`) and collected at the
    driver (a batch fits one machine), and the new clusters its pool forms are laid out and
    written by :class:`SparkClusters`; the rest of the append runs at the driver as on the
    single machine.  ``loaded(dataset)``: called once the batch is read.  A context already
    running is used as :func:`publish_spark` does."""
    refuse_cloned(store)
    with engine_context(settings) as (sc, _):
        if progress:
            progress("load", 0, 1)
        data_format = format_of(sc, source, data_format)
        dataset = read_table(sc, source, data_format, skip_bad_lines, options) or \
            collect_dataset(read_records(sc, source, data_format, skip_bad_lines, options))
        if progress:
            progress("load", 1, 1)
        if loaded:
            loaded(dataset)
        return append(dataset, store, min_new, progress, clusters=SparkClusters(sc),
                      allow_duplicate=allow_duplicate)


def refuse_cloned(store: Store) -> None:
    """A store published with sensitive terms grows ρ-cloned trees, which the single-machine
    engine alone makes."""
    if releases.current_version(store) is None:
        return  # the append says what to do
    sensitive = Publication.open(store).head["params"].get("sensitive")
    if sensitive:
        raise ValueError(f"{store.url} was published with sensitive terms (ρ-cloned "
                         "clusters): its appends run on the single-machine engine "
                         "(--engine single)")


class SparkClusters:
    """The Spark engine of an append's new clusters (:data:`~.append.ClusterPool`): the pool
    laid out and written by :meth:`_Run.lay_out`, as a first publish's records are, with what
    the single-machine :func:`~.append.cluster_pool` does differently: the records are the
    pool's (numbered from 0 in pool order, placed by ``where``), the ``held`` terms are kept
    private in the leaf clusters, and the root's pool is handed back whole for the promotion,
    not partitioned.  The driver holds the pool's records (an append's batch and buffer)."""

    def __init__(self, sc) -> None:
        self.sc = sc

    def __call__(self, writer: VersionWriter, ids: dict[int, str], pool: list[int],
                 records: list[frozenset[str]], params: PublishParams, held: frozenset[str],
                 where: Placement, progress: PhaseProgress | None) -> NewClusters:
        if params.sensitive:
            raise ValueError("ρ-cloned clusters (sensitive terms) are the single-machine "
                             "engine's")
        data = driver_input(self.sc, [ids[position] for position in pool],
                            Records.build(records))
        run = _Run(self.sc, data, params, writer.out.store,
                   progress or (lambda phase, done, total: None))
        laid = run.lay_out(writer, run.job(
            writer, writer.out.mtime, held=held, pass_up_root=params.aggregate,
            positions=np.asarray(where.records, dtype=np.int64), units=where.units),
            beside=lambda units: units.flatMap(lambda block: zip(
                block.node.tolist(), block.positions.tolist())).collect())
        leaf_unit = {where.record(local): where.unit(unit) for unit, local in laid.beside}
        return NewClusters(laid.tree, units_manifest(laid.summaries, where), leaf_unit,
                           laid.root_pool, laid.found.totals)


class _Run:
    """One publish's Spark work, from the parsed records to the files in staging."""

    def __init__(self, sc, data: Input, params: PublishParams, store: Store,
                 progress: PhaseProgress) -> None:
        self.sc, self.data, self.total, self.params = sc, data, data.total, params
        self.store, self.progress = store, progress
        self.phases: dict[str, float] = {}
        # partitions of each shuffle: small ones, as a task holds its share at once (a
        # cluster's records, a write task's files)
        self.tasks = max(2, sc.defaultParallelism * 2, data.total // RECORDS_PER_TASK)
        self.carrier = Carrier(self.tasks, -(-data.total // RECORDS_PER_REPORT))

    def _timed(self, phase: str, started: float) -> None:
        self.phases[phase] = time.perf_counter() - started

    def _tracked(self, phase: str, action: Callable[[], object]) -> object:
        """Run a Spark action, reporting its tasks as the phase's progress."""
        tracker, done = self.sc.statusTracker(), threading.Event()
        result: dict = {}

        def run() -> None:
            self.sc.setJobGroup(phase, phase)
            try:
                result["value"] = action()
            except BaseException as exc:  # re-raised in the caller's thread
                result["error"] = exc
            finally:
                done.set()

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        total = 1
        while not done.wait(0.5):
            stages = [tracker.getStageInfo(stage) for job in tracker.getJobIdsForGroup(phase)
                      for stage in (tracker.getJobInfo(job) or _NO_JOB).stageIds]
            stages = [stage for stage in stages if stage]
            if stages:
                total = sum(s.numTasks for s in stages)
                self.progress(phase, sum(s.numCompletedTasks for s in stages), total)
        worker.join()
        self.progress(phase, total, total)
        if "error" in result:
            raise result["error"]
        return result["value"]

    def job(self, writer: VersionWriter, mtime: float, **pool) -> UnitJob:
        """What the executors need; ``pool``: an append's (:class:`UnitJob`'s last fields)."""
        params = self.params
        return UnitJob(self.data.names, params.method, params.k, params.m, params.aggregate,
                       writer.key, secrets.token_bytes(32), self.store.url, writer.staging,
                       mtime, **pool)

    def build(self, writer: VersionWriter, mtime: float) -> Built:
        """A first publish (or a rebase): every record of the input."""
        laid = self.lay_out(writer, self.job(writer, mtime), beside=self._records_file)
        summaries = laid.summaries
        return Built(laid.tree, units_manifest(summaries), layout_stats(summaries),
                     laid.found.totals, laid.beside,
                     {"path": self.data.source, "format": self.data.format,
                      "records": self.total, "skipped_lines": self.data.skipped},
                     self.data.pairs, sum(s["cpu"] for s in summaries.values()),
                     dict(self.phases))

    def lay_out(self, writer: VersionWriter, unit_job: UnitJob,
                beside: Callable[[object], object]) -> _Laid:
        """The records' overlay tree, clusters and aggregation, every unit's files written into
        the staging area by the executors and registered in ``writer`` (chunk entries, release
        log records and member keys, term index), as :func:`~.writer.write_layout` does.
        What a first publish and an append's pool share.  ``beside(units)`` (the blocks, each
        record's leaf unit as its node) runs beside the aggregation round, whose one task
        leaves the other executors idle."""
        sc, params, names = self.sc, self.params, self.data.names
        job = sc.broadcast(unit_job)
        started = time.perf_counter()
        self.progress("tree", 0, 1)
        if params.overlay:
            tree, leaf_of, leaves, starts, held = grow_tree_distributed(
                sc, self.data.records, names, self.total, params.cluster_size, SplitSearch())
        else:
            tree, leaves, starts = Tree([Node(0)]), {0: self.total}, None
            leaf_of = held = self.data.records  # every record at the root
        units, leaf_units = leaf_clusters(sc, tree, leaf_of, leaves, starts,
                                          params.cluster_size)
        self.progress("tree", 1, 1)
        self._timed("tree", started)

        started = time.perf_counter()
        outputs = units.flatMap(Block.pieces).groupByKey(self.tasks).mapPartitions(
            partition_leaves(job, sc.broadcast(leaf_units)))
        carried = [self._carried(outputs, job)]
        summaries, found, pools = {}, Collected(), []
        for item in self._reports(carried[0], "partition"):
            if item[0] == "unit":
                summaries[item[1]] = item[2]
            elif item[0] == "pools":
                pools.append(item[1])
            else:
                found.add(item)
        leaf_of.unpersist()  # the units are cached now
        held.unpersist()
        self._timed("partition", started)

        with ThreadPoolExecutor(1, "spark-beside") as pool:
            besides = pool.submit(beside, units)
            started = time.perf_counter()
            root_pool = []
            if params.aggregate:
                aggregated, root_pool = self._aggregate(tree, pools, job, summaries, found)
                carried.append(aggregated)
            self._timed("aggregate", started)

            started = time.perf_counter()
            self._tracked("write", lambda: self._write(carried, job))
            found.into(writer)
            done = besides.result()
            units.unpersist()
            self._timed("write", started)
        return _Laid(tree, summaries, found, root_pool, done)

    def _aggregate(self, tree: Tree, pools: list[bytes], job, summaries: dict,
                   found: Collected):
        """The second round: the pools (pickled, a task's each), in one task (the job that
        makes its units reports them).  Returns the shuffle that carries the aggregated
        units' files (:meth:`_carried`), and the root's pool when the job passes it up
        ((position, terms), in pool order)."""
        parents_b = self.sc.broadcast(tree.parents())
        # Broadcast, not the task's own data: megabytes in a task are sent with it (and
        # warned about); a broadcast goes through the block manager.
        pools_b = self.sc.broadcast(pools)
        pooled = self.sc.parallelize([0], 1).flatMap(
            lambda _: itertools.chain.from_iterable(map(pickle.loads, pools_b.value)))
        written = self._carried(pooled.mapPartitions(aggregate_pools(
            job, self.params.aggregate_volume, parents_b, len(summaries))), job)
        root_pool = []
        for item in self._reports(written):
            if item[0] == "aggregate":
                _, node, unit, summary = item
                summaries[unit] = summary
                tree.nodes[node].aggregate = unit
            elif item[0] == "root_pool":
                root_pool.append(item[1:])
            else:
                found.add(item)
        return written, root_pool

    def _carried(self, outputs, job):
        """``outputs`` (a job's files and reports) in the one shuffle that carries them
        (:class:`Carrier`): the files to the tasks that write them, the reports to the
        partitions after those.  No cache between: the job that makes the outputs writes
        the shuffle, the driver reads the reports from it, and the write job the files."""
        return outputs.mapPartitionsWithIndex(carried_outputs(job)).partitionBy(
            self.carrier.partitions, self.carrier)

    def _reports(self, carried, phase: str | None = None) -> Iterator[tuple]:
        """What the driver takes of a job's outputs (:func:`reported`), from the report
        partitions of their shuffle (:meth:`_carried`): REPORTS_AT_ONCE partitions a job (a
        job each cost 0.4 s at 1M, read one after the other), in task order.  The first job
        runs the tasks that make the outputs, every one at once (tracked as ``phase``'s
        progress when given)."""
        reports = carried.mapPartitions(in_task_order)
        parts = list(self.carrier.report_partitions)
        first, *rest = [parts[at:at + REPORTS_AT_ONCE]
                        for at in range(0, len(parts), REPORTS_AT_ONCE)]

        def read(batch: list[int]) -> list[tuple]:
            return self.sc.runJob(reports, list, batch)  # in the order of ``batch``

        yield from self._tracked(phase, lambda: read(first)) if phase else read(first)
        for batch in rest:
            yield from read(batch)

    def _write(self, carried: list, job) -> None:
        """The write job: each task writes the files that the shuffles (the leaves' and the
        aggregation's) carried to its partition, together, in their keyed-hash order."""
        carrier = self.carrier
        files = self.sc.union(carried) if len(carried) > 1 else carried[0]
        if files.getNumPartitions() != carrier.partitions:
            # Spark joins shuffles partition by partition when their partitioners are equal
            # (the one carrier); were that lost, files would be written shuffle by shuffle.
            files = files.partitionBy(carrier.partitions, carrier)
        self.sc.runJob(files, write_files(job), list(range(carrier.writers)))

    def _records_file(self, units) -> BinaryIO:
        """records.jsonl: each record's id and leaf unit, streamed from the executors into a
        private temporary file, so the driver never holds it."""
        spool = tempfile.TemporaryFile()
        lines_of = units.map(
            lambda block: fmt.encode_records(block.ids.strings(), block.node.tolist()))
        for lines in lines_of.toLocalIterator(prefetchPartitions=True):
            spool.write(lines)
        return spool


@dataclass
class _Laid:
    """What :meth:`_Run.lay_out` made: units numbered from 0, nodes the run's own."""

    tree: Tree
    summaries: dict[int, dict]  # unit -> what its executor reported
    found: Collected           # the chunks' entries and the units' member names
    root_pool: list             # (publication position, terms) the root passed up, if asked
    beside: object              # what lay_out's ``beside`` gave
