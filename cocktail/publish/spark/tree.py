"""The overlay tree grown level by level (:func:`grow_tree_distributed`): per node, term
supports and then split statistics summed over the records' partitions, only those sums and
each node's choice at the driver; a small node's subtree grown in one task.  The split search
itself is the single-machine tree's (:mod:`cocktail.overlay.tree`)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from pyspark import StorageLevel

from ...blas import one_thread
from ...dataset import Records
from ...overlay.tree import (Node, SplitSearch, Tree, children_of, choose_split, grow,
                             presence, rank_candidates, split_stats)
from .blocks import Block


# A node of at most this many records grows its whole subtree in one task (a few tens of MB
# of term ids), not level by level: each level on the cluster costs two jobs, 0.6-1.2 s on a
# 2-core machine whatever its records, about what a task takes to grow a subtree this size.
# At 1M records: 100,000 gave 3 levels on the cluster and a 5.3 s tree, 300,000 one level and
# 3.6-3.8 s (500,000: 3.7 s; 1,000,000, all in one task: 4.2 s).
LOCAL_SUBTREE = 300_000


def grow_tree_distributed(sc, blocks, names: tuple[str, ...], total: int, leaf_size: int,
                          search: SplitSearch, max_share: float = 0.95):
    """The overlay tree of :func:`cocktail.overlay.tree.grow_tree`, each record's leaf (as
    :class:`Block` nodes, computed from ``held``), each leaf's number of records, each
    leaf's cluster starts when every leaf was grown in a task (:func:`_subtrees`; else None)
    and ``held``, the blocks kept on disk until the caller has cached what it needs of
    ``leaf_of``.
    ``blocks``: the records, a :class:`Block` a partition, so that a pass over a level is a
    few numpy operations per node.  Large nodes are split level by level on the cluster; a
    node of at most :data:`LOCAL_SUBTREE` records grows its subtree in one task.
    Nodes get temporary ids while the tree grows, then the single-machine engine's ids
    (depth first, the last child first)."""
    vocabulary = len(names)
    blocks.persist(StorageLevel.DISK_ONLY)
    cached = blocks  # the last level that was routed and summed in one job
    splits: dict[int, tuple[tuple[int, ...], list[tuple[list[str], int]]]] = {}
    leaves: dict[int, int] = {}
    starts: dict[int, np.ndarray] = {}  # a leaf grown in a task -> its cluster starts
    local: dict[int, int] = {}  # nodes whose subtree one task grows (a leaf's too: its starts)
    next_id = 1

    def large(frontier: dict[int, int]) -> dict[int, int]:
        """The nodes split on the cluster; the others go to ``local``."""
        local.update({node: n for node, n in frontier.items()
                      if n <= max(leaf_size, LOCAL_SUBTREE)})
        return {node: n for node, n in frontier.items() if n > max(leaf_size, LOCAL_SUBTREE)}

    sizes = large({0: total})
    ranked = _ranked(sc, blocks, sizes, vocabulary, search.pool) if sizes else {}
    while sizes:
        choices = _choices(sc, blocks, ranked, search)
        frontier, routes = {}, {}
        for node, n in sorted(sizes.items()):
            choice = choices.get(node)
            groups = children_of(choice, n, leaf_size, max_share)
            if not groups:
                leaves[node] = n
                continue
            children = []
            for patterns in groups:
                children.append((patterns, next_id))
                frontier[next_id] = sum(choice.sizes[int(p, 2)] for p in patterns)
                next_id += 1
            splits[node] = (choice.terms, children)
            routes[node] = (ranked[node], choice.terms, _route(choice.terms, children))
        blocks = _routed(cached, sc.broadcast(routes))
        sizes = large(frontier)
        if sizes:  # the job that routes the records (and caches them) sums the next supports
            blocks.persist(StorageLevel.DISK_ONLY)
            ranked = _ranked(sc, blocks, sizes, vocabulary, search.pool)
            cached.unpersist()
            cached = blocks
        # else the last level is routed again by each of the two jobs below: cheaper than
        # a job that caches it
    routes = {}
    for root, grown in _subtrees(sc, blocks, local, leaf_size, search, max_share).items():
        ids = {0: root}  # the subtree's own ids (a parent before its children) -> temporary
        for node, n, split, children, first in grown:
            if split is None:
                leaves[ids[node]], starts[ids[node]] = n, first
                continue
            for _, child in children:
                ids[child] = next_id
                next_id += 1
            children = [(patterns, ids[child]) for patterns, child in children]
            splits[ids[node]] = (split, children)
            routes[ids[node]] = (np.array(split), split, _route(split, children))
    final, tree = _number(splits, names)
    final_b, routes_b = sc.broadcast(final), sc.broadcast(routes)
    leaf_of = blocks.map(lambda block: block.descended(routes_b.value).renamed(final_b.value))
    # a node too large for a task that no split divides is a leaf without starts (rare)
    cut = {final[leaf]: first for leaf, first in starts.items()} \
        if len(starts) == len(leaves) else None
    return tree, leaf_of, {final[node]: n for node, n in leaves.items()}, cut, cached


def _routed(blocks, routes_b):
    """``blocks`` one level down (a function of its own: the map is lazy, and must keep this
    level's routes)."""
    return blocks.map(lambda block: block.routed(routes_b.value))


def _route(split: tuple[int, ...], children: list[tuple[list[str], int]]) -> np.ndarray:
    """Each presence pattern of the split terms, read as a binary number -> its child."""
    route = np.full(2 ** len(split), -1, dtype=np.int64)
    for patterns, child in children:
        route[[int(p, 2) for p in patterns]] = child
    return route


def _subtrees(sc, blocks, roots: dict[int, int], leaf_size: int, search: SplitSearch,
              max_share: float) -> dict[int, list[tuple]]:
    """Each of ``roots``' subtrees, grown in one task from the node's records, gathered from
    every block: (node, its number of records, split terms or None, children, and for a
    leaf its cluster starts) per node, parents first.  A leaf's cluster starts are the input
    positions that begin its clusters (every ``leaf_size``-th of its records in input order,
    as :func:`~cocktail.overlay.layout.cut_clusters` cuts them): what numbers its records'
    clusters on any block, without counting a leaf's records block by block."""
    if not roots:
        return {}
    wanted = sc.broadcast(roots)

    def pieces(block: Block) -> Iterator:
        for node, rows in block.by_node(wanted.value):
            yield node, (block.positions[rows], block.records.take(rows))

    def subtree(item: tuple) -> tuple[int, list[tuple]]:
        one_thread()  # an executor's Python worker, once
        node, parts = item
        parts = list(parts)
        records = Records.joined([part[1] for part in parts])
        positions = np.concatenate([part[0] for part in parts])
        return node, [(g.id, len(g.positions), g.split, g.children,
                       np.sort(positions[g.positions])[::leaf_size] if g.split is None else None)
                      for g in grow(records, np.arange(len(records)), leaf_size, search,
                                    max_share)]

    return dict(blocks.flatMap(pieces).groupByKey().map(subtree).collect())


def _ranked(sc, blocks, sizes: dict[int, int], vocabulary: int, pool: int) -> dict:
    wanted = sc.broadcast(sizes)

    def supports(block: Block) -> Iterator:
        for node, rows in block.by_node(wanted.value):
            yield node, np.bincount(block.records.rows(rows)[1], minlength=vocabulary)

    summed = blocks.flatMap(supports).reduceByKey(np.add)
    return dict(summed.map(lambda kv: (kv[0], rank_candidates(
        kv[1], wanted.value[kv[0]], pool))).collect())


def _choices(sc, blocks, ranked: dict, search: SplitSearch) -> dict:
    candidates = sc.broadcast({node: terms for node, terms in ranked.items() if len(terms)})

    def stats(block: Block) -> Iterator:
        one_thread()  # an executor's Python worker, once
        for node, rows in block.by_node(candidates.value):
            yield node, split_stats(presence(block.records, rows, candidates.value[node]),
                                    search)

    summed = blocks.flatMap(stats).reduceByKey(lambda a, b: a + b)
    return dict(summed.map(lambda kv: (kv[0], choose_split(
        kv[1], candidates.value[kv[0]], search))).collect())


def _number(splits: dict, names: tuple[str, ...]) -> tuple[dict[int, int], Tree]:
    """Temporary ids to the ids :func:`grow_tree` gives: children numbered when their parent
    is split, the last child split first."""
    final = {0: 0}
    nodes = [Node(0)]
    pending = [0]
    while pending:
        temporary = pending.pop()
        if temporary not in splits:
            continue
        node = nodes[final[temporary]]
        terms, children = splits[temporary]
        node.split = tuple(names[t] for t in terms)
        for patterns, child in children:
            final[child] = len(nodes)
            nodes.append(Node(len(nodes)))
            node.children.update({pattern: final[child] for pattern in patterns})
            pending.append(child)
    return final, Tree(nodes)
