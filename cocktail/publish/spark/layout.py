"""The units on the executors, as the single-machine layout makes them
(:mod:`cocktail.overlay.layout`): each leaf's records cut into clusters, each leaf cluster
partitioned in a task and its private part passed up the tree; then the aggregation round,
the pools re-partitioned deepest first in one task.  A unit's files are made in the task that
partitions it (:func:`~.writer.unit_outputs`)."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterator

import numpy as np
from pyspark import StorageLevel

from ...anonymity import partition
from ...blas import one_thread
from ...dataset import PackedIds, Records
from ...overlay.layout import partitions_pool
from ...overlay.tree import Tree
from .. import promotion
from ..batch import collector_paused
from .blocks import Block
from .writer import UnitJob, unit_outputs


def leaf_clusters(sc, tree: Tree, leaf_of, leaves: dict[int, int],
                  starts: dict[int, np.ndarray] | None, size: int):
    """Each leaf's records (``leaf_of``: blocks, each record's leaf its node) cut into
    clusters of ``size`` in input order, as :func:`~cocktail.overlay.layout.cut_clusters`:
    from each leaf's cluster starts when the tree gave them (:meth:`Block.cut`), else by
    counting (:func:`_counted`).
    Returns the blocks with each record's unit as its node, cached, and each unit's
    (leaf, cluster)."""
    base, leaf_units = {}, {}
    for leaf in sorted(leaves):
        base[leaf] = len(leaf_units)
        clusters = -(-leaves[leaf] // size)
        tree.nodes[leaf].units = list(range(base[leaf], base[leaf] + clusters))
        leaf_units.update({base[leaf] + c: (leaf, c) for c in range(clusters)})
    base_b = sc.broadcast(base)
    if starts is None:
        units = _counted(sc, leaf_of, base_b, size)
    else:
        starts_b = sc.broadcast(starts)
        units = leaf_of.map(lambda block: block.cut(starts_b.value, base_b.value))
    return units.persist(StorageLevel.DISK_ONLY), leaf_units


def _counted(sc, leaf_of, base_b, size: int):
    """``leaf_of`` with each record's unit as its node, from each partition's records per
    leaf (:func:`leaf_counts`, a job): a record's rank in its leaf is the count before it
    in earlier partitions plus its rank in its own (partitions keep input order)."""
    offsets, seen = {}, Counter()
    for index, counted in sorted(leaf_counts(leaf_of).items()):
        offsets[index] = dict(seen)
        seen.update(counted)
    offsets_b = sc.broadcast(offsets)

    def number(index: int, blocks: Iterator[Block]) -> Iterator[Block]:
        before = Counter(offsets_b.value[index])
        for block in blocks:
            yield block.clustered(before, base_b.value, size)

    return leaf_of.mapPartitionsWithIndex(number)


def leaf_counts(leaf_of) -> dict[int, Counter]:
    """Each partition's records per leaf (``leaf_of``: blocks, each record's leaf its node),
    in the job that caches ``leaf_of``."""

    def counted(index: int, blocks: Iterator[Block]) -> list[tuple[int, Counter]]:
        found: Counter = Counter()
        for block in blocks:
            leaves, counts = np.unique(block.node, return_counts=True)
            found.update(dict(zip(leaves.tolist(), counts.tolist())))
        return [(index, found)]

    leaf_of.persist(StorageLevel.DISK_ONLY)
    return dict(leaf_of.mapPartitionsWithIndex(counted).collect())


def partition_leaves(job_b, leaf_of_unit_b):
    """Per leaf unit: partition its records, write its chunks, pass its private part up."""

    def run(units: Iterator) -> Iterator[tuple]:
        one_thread()  # an executor's Python worker, once
        job, leaf_of_unit = job_b.value, leaf_of_unit_b.value
        with collector_paused():
            for unit, pieces in units:
                positions, ids, records = _unit_records(job.names, pieces)
                started = time.process_time()
                split = _partition_leaf(job, records)
                cpu = time.process_time() - started
                node, cluster = leaf_of_unit[unit]
                stored = [] if job.aggregate or not split.private else [split.private]
                parts = _private_parts(records, split.private)
                yield "unit", unit, _unit_summary("leaf", node, len(ids), split,
                                                  not job.aggregate, cpu,
                                                  [terms for _, terms in parts])
                yield from unit_outputs(job, job.unit(unit), "leaf", job.placed(positions), ids,
                                        records, [*split.public, *stored], len(split.public))
                if job.aggregate:
                    for row, terms in parts:
                        p = int(positions[row])
                        yield "pool", node, cluster, p, ids[row], terms

    return run


def _unit_records(names: tuple[str, ...], pieces) -> tuple[np.ndarray, list[str], Records]:
    """A unit's records from the pieces of it each block held (:meth:`Block.pieces`), in
    input order: their positions, ids and terms (as ids of ``names``)."""
    pieces = sorted(pieces, key=lambda piece: int(piece[0][0]))
    joined = Records.joined([piece[2] for piece in pieces])
    return (np.concatenate([piece[0] for piece in pieces]),
            PackedIds.joined([piece[1] for piece in pieces]).strings(),
            Records(names, joined.indptr, joined.indices))


def _private_parts(records: Records, private: frozenset[str]) -> list[tuple[int, frozenset]]:
    """(row, the terms of ``private`` it holds) for each record that holds some."""
    held = np.isin(records.indices, records.ids_of(private))
    rows = np.repeat(np.arange(len(records)), np.diff(records.indptr))[held]
    terms, names = records.indices[held].tolist(), records.names
    found, starts = np.unique(rows, return_index=True)
    ends = [*starts[1:].tolist(), len(terms)]
    return [(row, frozenset(names[t] for t in terms[start:end]))
            for row, start, end in zip(found.tolist(), starts.tolist(), ends)]


def _partition_leaf(job: UnitJob, records: Records):
    """A leaf cluster's partition, the held terms kept private (none in a first publish), as
    the single-machine engine's :func:`promotion.holding_back` does."""
    stripped, kept = promotion.strip_held(job.held, records)
    return promotion.keep_held(partition(job.method, stripped, job.k, job.m), kept)


def _unit_summary(kind: str, node: int, size: int, split, keeps_private: bool, cpu: float,
                  parts: list[frozenset[str]]) -> dict:
    """``parts``: the private terms of each record that holds some."""
    return {"kind": kind, "node": node, "members": size,
            "passed_up": [] if keeps_private else sorted(split.private),
            "notes": split.notes, "cpu": cpu, "keeps_private": keeps_private,
            "private_subrecords": len(parts),
            "private_terms": sorted(set().union(*parts)) if parts else []}


def aggregate_pools(job_b, volume: int, parents_b, first_unit: int):
    """The aggregation pass (paper 5.2, as :func:`cocktail.overlay.layout._aggregate`), in one
    task over all the private parts the leaves passed up (a small share of the subrecords):
    nodes in descending id (children before parents), each pooling what its sources passed
    up in the single-machine order (sources by descending child id, a leaf's clusters in
    order, records by position).  A big enough pool from two or more sources, and the root's,
    is partitioned into the next unit from ``first_unit`` on, and its files made; what stays
    private goes up.  Yields ("aggregate", node, unit, summary), the units' outputs
    (:func:`unit_outputs`) and the root's pool when the job passes it up."""

    def run(items: Iterator) -> Iterator[tuple]:
        job, parents = job_b.value, parents_b.value
        pools, sources = defaultdict(list), defaultdict(set)
        for _, node, cluster, p, record_id, terms in items:
            pools[node].append((cluster, p, record_id, terms))
        for node, pool in pools.items():  # a leaf's: its clusters in order, then by position
            pool.sort(key=lambda item: item[:2])
            sources[node] = {cluster for cluster, _, _, _ in pool}
            pools[node] = [item[1:] for item in pool]
        # Children have larger ids than their parents, so in descending id a node's sources
        # are done before it, and each appends its pool to its parent's in the single-machine
        # order (by descending child id): no pool is sorted again.
        unit = first_unit
        with collector_paused():
            while pools:
                node = max(pools)
                for found in _pool_step(job, node, pools.pop(node), len(sources.pop(node)),
                                        volume, parents.get(node), pools, sources):
                    if found[0] != "aggregate":
                        yield found
                        continue
                    _, _, summary, members, chunk_terms, public = found
                    yield "aggregate", node, unit, summary
                    positions = np.array([p for p, _, _ in members], dtype=np.int64)
                    yield from unit_outputs(job, job.unit(unit), "aggregate",
                                            job.placed(positions), [i for _, i, _ in members],
                                            Records.build(t for _, _, t in members),
                                            chunk_terms, public)
                    unit += 1

    return run


def _pool_step(job: UnitJob, node: int, members: list, sources: int, volume: int,
               parent: int | None, pools: dict, passed: dict) -> Iterator[tuple]:
    """One node's pool, ``members`` (position, record id, terms) from ``sources`` sources:
    partitioned if it qualifies, what stays private appended to the parent's."""
    is_root = parent is None
    if is_root and job.pass_up_root:  # an append's new tree: the pool goes to the promotion
        for p, _, terms in members:
            yield "root_pool", job.position(p), terms
        return
    if partitions_pool(is_root, sources, len(members), volume):
        started = time.process_time()
        split = partition(job.method, [terms for _, _, terms in members], job.k, job.m)
        cpu = time.process_time() - started
        stored = [split.private] if is_root and split.private else []
        members_before = members
        members = [(p, record_id, terms & split.private)
                   for p, record_id, terms in members if terms & split.private]
        yield ("aggregate", node, _unit_summary("aggregate", node, len(members_before), split,
                                                is_root, cpu, [t for _, _, t in members]),
               members_before, [*split.public, *stored], len(split.public))
    if not is_root and members:
        pools[parent].extend(members)
        passed[parent].add(node)


def layout_stats(summaries: dict[int, dict]) -> dict[str, dict[str, int]]:
    def count(units: list[dict]) -> dict[str, int]:
        return {"private_subrecords": sum(s["private_subrecords"] for s in units),
                "private_terms": len(set().union(*(s["private_terms"] for s in units)))}

    leaves = [s for s in summaries.values() if s["kind"] == "leaf"]
    return {"before": count(leaves),
            "after": count([s for s in summaries.values() if s["keeps_private"]])}
