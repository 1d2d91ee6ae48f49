"""A partition's records as the engine's phases hand them on (:class:`Block`): read from the
input, routed down the tree, cut into clusters, and moved to the task that partitions a unit."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ...dataset import PackedIds, Records
from ...overlay.tree import pattern_codes, presence


@dataclass
class Block:
    """One partition's records while the tree grows: term ids in compressed rows and each
    record's current node, so that a pass is numpy work per node, not a loop per record."""

    positions: np.ndarray  # input positions, ascending
    ids: PackedIds         # record ids
    records: Records       # term ids (names: the vocabulary's range)
    node: np.ndarray       # each record's current node

    def by_node(self, wanted=None, among: np.ndarray | None = None
                ) -> Iterator[tuple[int, np.ndarray]]:
        """(node, the rows at that node, ascending) for the nodes in ``wanted`` (None: all),
        of the rows ``among`` (ascending; None: all of them)."""
        if among is None and wanted is not None:
            among = self.at(wanted)
        rows = self.node if among is None else self.node[among]
        order = np.argsort(rows, kind="stable")
        nodes, starts = np.unique(rows[order], return_index=True)
        if among is not None:
            order = among[order]
        ends = [*starts[1:].tolist(), len(order)]
        for node, start, end in zip(nodes.tolist(), starts.tolist(), ends):
            if wanted is None or node in wanted:
                yield node, order[start:end]

    def at(self, nodes) -> np.ndarray:
        """The rows at any of ``nodes``, ascending."""
        return np.flatnonzero(np.isin(self.node, list(nodes)))

    def routed(self, routes: dict, among: np.ndarray | None = None) -> Block:
        """Each record at a node of ``routes`` (of the rows ``among``) one level down."""
        node = self.node.copy()
        for at, rows in self.by_node(routes, among):
            ranked, split, route = routes[at]
            node[rows] = route[pattern_codes(presence(self.records, rows, ranked), ranked,
                                             split)]
        return Block(self.positions, self.ids, self.records, node)

    def descended(self, routes: dict) -> Block:
        """Every record routed down to a node ``routes`` does not split (a subtree's leaf);
        each level sorts only the records still moving."""
        block, moving = self, self.at(routes)
        while len(moving):
            block = block.routed(routes, moving)
            moving = moving[np.isin(block.node[moving], list(routes))]
        return block

    def renamed(self, final: dict[int, int]) -> Block:
        """Each record's node under its id in ``final``."""
        nodes, inverse = np.unique(self.node, return_inverse=True)
        named = np.array([final[node] for node in nodes.tolist()], dtype=np.int64)
        return Block(self.positions, self.ids, self.records, named[inverse.reshape(-1)])

    def clustered(self, before: Counter, base: dict[int, int], size: int) -> Block:
        """Each record's leaf cluster (unit) in place of its leaf: a leaf's records are cut
        into clusters of ``size`` in input order from its first unit ``base[leaf]`` on,
        ``before[leaf]`` of them in earlier blocks (counted on here)."""
        unit = np.empty(len(self.node), dtype=np.int64)
        for leaf, rows in self.by_node():
            unit[rows] = base[leaf] + (before[leaf] + np.arange(len(rows))) // size
            before[leaf] += len(rows)
        return Block(self.positions, self.ids, self.records, unit)

    def cut(self, starts: dict[int, np.ndarray], base: dict[int, int]) -> Block:
        """Each record's leaf cluster (unit) in place of its leaf, from the leaf's cluster
        starts (:func:`_subtrees`): its first unit ``base[leaf]`` plus the starts at or
        before the record's position, less one."""
        unit = np.empty(len(self.node), dtype=np.int64)
        for leaf, rows in self.by_node():
            unit[rows] = base[leaf] - 1 + np.searchsorted(starts[leaf], self.positions[rows],
                                                          side="right")
        return Block(self.positions, self.ids, self.records, unit)

    def pieces(self) -> Iterator[tuple[int, tuple]]:
        """(node, (positions, record ids, term ids) of its records here) per node: what a
        shuffle by node moves, a few arrays rather than a tuple per record."""
        for node, rows in self.by_node():
            yield node, (self.positions[rows], self.ids.take(rows), self.records.take(rows))
