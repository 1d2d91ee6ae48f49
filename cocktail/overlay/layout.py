"""From records to partitioned units: leaf clusters of the overlay tree and aggregated clusters.

The tree grows (:mod:`.tree`); the layout decides what becomes a cluster and a unit.  A leaf's
records are cut into clusters of ``cluster_size`` in input order (without the overlay, one
root leaf holds every record; with sensitive terms the root's clusters are dealt as ρ-clones,
:mod:`.cloning`).  A *unit* is what one EQI-partitioning works on.  Leaf units are the leaf
clusters (whole records).  With aggregation (paper 5.2), the private part of every leaf cluster is
passed up the tree.  A node pools what it receives; once the pool reaches the volume threshold
(``aggregate_volume`` subrecords) and comes from two or more sources, it becomes an aggregated
unit and is re-partitioned, and only what stays private goes further up.  Smaller pools go up whole: every
split of a pool leaves residues of fewer than k occurrences behind, so pooling late keeps less
private.  The root keeps the
final remainder as the only private chunks.  Since the root pool holds every subrecord still
private, any term in k or more of them has support >= k there and becomes public: after full
aggregation at most k-1 private subrecords contain any term (Theorem 5).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..anonymity import Partition, partition
from ..dataset import Records
from .cloning import checked_rho, cloned_clusters
from .tree import Node, Tree, grow_tree

Subrecords = list[tuple[int, frozenset[str]]]  # (record position, the terms to partition)
PhaseProgress = Callable[[str, int, int], None]  # (phase, done, total): what a publish reports

# (the clusters' records, read lazily; how many records in all) -> (partition, CPU seconds) each
PartitionMany = Callable[[Iterable[Sequence[frozenset[str]]], int],
                         Iterator[tuple[Partition, float]]]


@dataclass(frozen=True)
class LeafMembers(Sequence[tuple[int, frozenset[str]]]):
    """A leaf cluster's (record position, terms), read from the records on each pass rather
    than kept: the records are held once, compactly, and the clusters only name them."""

    records: Records
    positions: list[int]

    def restricted(self, terms: frozenset[str]) -> Subrecords:
        """The (position, terms within ``terms``) of the members holding any of ``terms``,
        from the records' term ids (no set is built for a member that holds none)."""
        names = self.records.names
        rows, ids = self.records.rows(np.asarray(self.positions, dtype=np.int64))
        held = np.isin(ids, self.records.ids_of(terms))
        found: dict[int, list[str]] = {}
        for row, term in zip(rows[held].tolist(), ids[held].tolist()):
            found.setdefault(row, []).append(names[term])
        return [(self.positions[row], frozenset(part)) for row, part in found.items()]

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, i):
        return self.positions[i], self.records[self.positions[i]]

    def __iter__(self) -> Iterator[tuple[int, frozenset[str]]]:
        records = self.records
        return ((p, records[p]) for p in self.positions)


@dataclass
class Unit:
    id: int
    kind: str            # "leaf" or "aggregate"
    node: int
    members: LeafMembers | Subrecords
    partition: Partition
    keeps_private: bool  # its private part is stored with it (else it was passed up)


@dataclass
class Layout:
    tree: Tree
    units: list[Unit]
    aggregated: bool
    partition_seconds: float = 0.0
    stats: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # wall time of each phase

    def leaf_units(self, records: int) -> list[int]:
        """The leaf unit of each record position."""
        unit_of = [-1] * records
        for unit in self.units:
            if unit.kind == "leaf":
                for p in unit.members.positions:
                    unit_of[p] = unit.id
        return unit_of


@dataclass(frozen=True)
class LayoutParams:
    """How records become partitioned units (what a publication's parameters say of it)."""

    k: int = 5
    m: int = 3
    method: str = "improved"
    cluster_size: int = 2000
    overlay: bool = True     # clusters from the overlay tree (else a fixed-size split)
    aggregate: bool = True   # pool leftover private subrecords up the tree (paper 5.2)
    aggregate_volume: int = 50_000  # pooled subrecords that make an aggregated cluster early
    sensitive: tuple[str, ...] = ()  # ρ-clone the clusters over these terms (not the tree)
    max_rho: float = 1.0             # refuse a cloning whose measured ρ is larger


def leaf_clusters(records: Records, params: LayoutParams
                  ) -> tuple[Tree, list[tuple[int, list[int]]], float | None]:
    """The tree, its leaf clusters ((leaf, record positions) each) and their ρ: the overlay
    tree's leaves cut in input order (:func:`cut_clusters`), one root leaf cut so without the
    overlay, or with sensitive terms the root's ρ-cloned clusters, their ρ checked (else
    None)."""
    size = params.cluster_size
    if params.sensitive:
        clusters = cloned_clusters(records, size, params.sensitive)
        rho = checked_rho(records, clusters, params.sensitive, params.max_rho)
        return Tree([Node(0)]), [(0, cluster) for cluster in clusters], rho
    if params.overlay:
        tree = grow_tree(records, size)
    else:  # one root leaf
        tree = Tree([Node(0, positions=list(range(len(records))))])
    return tree, [(leaf.id, cluster) for leaf in tree.leaves()
                  for cluster in cut_clusters(leaf.positions, size)], None


def cut_clusters(positions: list[int], size: int) -> list[list[int]]:
    """A leaf's records, in input order, cut into clusters of ``size``."""
    return [positions[i:i + size] for i in range(0, len(positions), size)]


def _private_parts(members: LeafMembers | Subrecords, private: frozenset[str]) -> Subrecords:
    if isinstance(members, LeafMembers):
        return members.restricted(private)
    return [(p, terms & private) for p, terms in members if terms & private]


def cluster_records(records: Records, positions: list[int]) -> Records:
    """The records at ``positions`` as records of their own, numbered over their own terms:
    what a partitioning worker is sent (a few arrays, not a set per record)."""
    taken = records.take(np.asarray(positions, dtype=np.int64))
    if len(records.names) > 8 * len(taken.indices):  # a vast vocabulary: sort the few used
        used, local = np.unique(taken.indices, return_inverse=True)
    else:  # a table over the vocabulary, not a sort (1M records: 0.57 -> 0.21 s of CPU)
        held = np.zeros(len(records.names), dtype=bool)
        held[taken.indices] = True
        used, local = np.flatnonzero(held), (np.cumsum(held) - 1)[taken.indices]
    return Records(tuple(records.names[i] for i in used.tolist()), taken.indptr,
                   local.astype(np.int32))


def _stats(parts: Iterable[Subrecords]) -> dict[str, int]:
    subrecords = [terms for part in parts for _, terms in part]
    return {"private_subrecords": len(subrecords),
            "private_terms": len(set().union(*subrecords)) if subrecords else 0}


def build_layout(records: Sequence[frozenset[str]], params: LayoutParams,
                 partition_many: PartitionMany,
                 progress: PhaseProgress | None = None) -> Layout:
    progress = progress or (lambda phase, done, total: None)
    started = time.perf_counter()
    progress("tree", 0, 1)
    records = Records.of(records)
    tree, leaves, rho = leaf_clusters(records, params)
    layout = Layout(tree, [], params.aggregate)
    if rho is not None:
        layout.stats["rho"] = rho
    layout.seconds["tree"] = time.perf_counter() - started
    progress("tree", 1, 1)
    started = time.perf_counter()
    results = partition_many((cluster_records(records, positions) for _, positions in leaves),
                             len(records))
    pending: dict[int, list[Subrecords]] = {}  # node -> remainders received, one per source
    for number, ((node, positions), (split, cpu)) in enumerate(zip(leaves, results)):
        members = LeafMembers(records, positions)
        layout.units.append(Unit(number, "leaf", node, members, split,
                                 keeps_private=not params.aggregate))
        tree.nodes[node].units.append(number)
        layout.partition_seconds += cpu
        pending.setdefault(node, []).append(_private_parts(members, split.private))
        progress("partition", number + 1, len(leaves))
    layout.stats["before"] = _stats(part for parts in pending.values() for part in parts)
    layout.seconds["partition"] = time.perf_counter() - started
    started = time.perf_counter()
    if params.aggregate:
        progress("aggregate", 0, 1)
        _aggregate(tree, layout, pending, params)
        progress("aggregate", 1, 1)
    layout.seconds["aggregate"] = time.perf_counter() - started
    kept = [_private_parts(u.members, u.partition.private) for u in layout.units
            if u.keeps_private]
    layout.stats["after"] = _stats(kept)
    return layout


def partitions_pool(is_root: bool, sources: int, pooled: int, volume: int) -> bool:
    """Whether a node re-partitions its pool itself: the root always, another node once the
    pool holds ``volume`` subrecords from two or more sources (both engines ask this)."""
    return is_root or (sources > 1 and pooled >= volume)


def _aggregate(tree: Tree, layout: Layout, pending: dict[int, list[Subrecords]],
               params: LayoutParams) -> None:
    """Bottom-up: children are listed after their parents, so walk the nodes backwards."""
    parents = tree.parents()
    for node in reversed(tree.nodes):
        sources = [part for part in pending.pop(node.id, []) if part]
        pool = [item for part in sources for item in part]
        if not pool:
            continue
        is_root = node.id == 0
        if partitions_pool(is_root, len(sources), len(pool), params.aggregate_volume):
            started = time.process_time()
            split = partition(params.method, [terms for _, terms in pool], params.k, params.m,
                              frozenset(params.sensitive))
            layout.partition_seconds += time.process_time() - started
            node.aggregate = len(layout.units)
            layout.units.append(Unit(len(layout.units), "aggregate", node.id, pool, split,
                                     keeps_private=is_root))
            pool = _private_parts(pool, split.private)
        if not is_root:
            pending.setdefault(parents[node.id], []).append(pool)
