"""The term-based overlay partitioning tree (paper 5.1).

Each internal node splits its records by the presence pattern of a small term set P (1..3
terms): a record goes to the child whose pattern says, for each term of P, whether the record
holds it, so a node has up to 2^|P| children.  P is chosen for the most balanced branching,
measured as the Shannon entropy (bits) of the child sizes; the search only looks at a pool of the
terms whose support in the node is closest to half of it (singletons from ``pool``, pairs and
triples from its first ``combo_pool``), so it stays fast with thousands of terms.

Children smaller than ``leaf_size / 4`` are merged into one child that carries all their
patterns (a child may answer to several patterns; the planner follows it if any pattern fits
the query), so the tree does not shatter rare patterns into clusters too small to publish.
A node becomes a leaf when it holds at most ``leaf_size`` records, or when no split sends less
than ``max_share`` of its records to one child ("no useful split").  A leaf larger than
``leaf_size`` is cut into fixed-size clusters in input order.  Leaves' clusters are what
EQI-partitioning works on.  The tree is private: it lives in the private manifest only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

Pattern = str  # one character per split term: "1" present, "0" absent


@dataclass
class Node:
    id: int
    split: tuple[str, ...] = ()                           # empty for a leaf
    children: dict[Pattern, int] = field(default_factory=dict)
    clusters: list[list[int]] = field(default_factory=list)  # while publishing: positions
    units: list[int] = field(default_factory=list)         # leaf: its clusters' unit ids
    aggregate: int | None = None                           # its aggregated unit, if any

    @property
    def is_leaf(self) -> bool:
        return not self.split


@dataclass
class Tree:
    """The overlay tree, as the publisher grows it and as the private manifest keeps it.
    A publication's is a forest: each append that forms new clusters adds a tree (``roots``);
    a parent always precedes its children."""

    nodes: list[Node]
    roots: list[int] = field(default_factory=lambda: [0])

    def leaves(self) -> list[Node]:
        return [n for n in self.nodes if n.is_leaf]

    def parents(self) -> dict[int, int]:
        return {child: n.id for n in self.nodes for child in n.children.values()}

    def route(self, root: int, record: frozenset[str]) -> Node | None:
        """The leaf a record reaches from ``root``, or None where its pattern has no child."""
        node = self.nodes[root]
        while node.split:
            child = node.children.get("".join("1" if t in record else "0" for t in node.split))
            if child is None:
                return None
            node = self.nodes[child]
        return node

    def graft(self, other: Tree, units: int) -> None:
        """Add ``other`` as a new tree of the forest, its unit ids shifted by ``units``."""
        shift = len(self.nodes)
        for node in other.nodes:
            self.nodes.append(Node(node.id + shift, node.split,
                                   {p: c + shift for p, c in node.children.items()},
                                   units=[u + units for u in node.units],
                                   aggregate=None if node.aggregate is None
                                   else node.aggregate + units))
        self.roots += [root + shift for root in other.roots]

    def to_manifest(self) -> list[dict]:
        return [{"id": n.id, "split": list(n.split), "children": n.children,
                 "units": n.units, "aggregate": n.aggregate} for n in self.nodes]

    @classmethod
    def from_manifest(cls, nodes: list[dict], roots: list[int] | None = None) -> Tree:
        return cls([Node(n["id"], tuple(n["split"]), dict(n["children"]), units=list(n["units"]),
                         aggregate=n["aggregate"]) for n in nodes], list(roots or [0]))


def _entropy(sizes: np.ndarray) -> float:
    p = sizes[sizes > 0] / sizes.sum()
    return float(-(p * np.log2(p)).sum())


def best_split(records: Sequence[frozenset[str]], max_terms: int = 3, pool: int = 32,
               combo_pool: int = 12) -> tuple[tuple[str, ...], float, list[int]] | None:
    """The candidate term set with the most balanced branching: (terms, entropy, child sizes)."""
    n = len(records)
    support = Counter(t for r in records for t in r)
    ranked = sorted((t for t, s in support.items() if 0 < s < n),
                    key=lambda t: (abs(support[t] - n / 2), t))[:pool]
    if not ranked:
        return None
    column = {t: i for i, t in enumerate(ranked)}
    present = np.zeros((n, len(ranked)), dtype=np.int64)
    for position, record in enumerate(records):
        for term in record:
            if term in column:
                present[position, column[term]] = 1
    best = None
    for size in range(1, max_terms + 1):
        candidates = ranked if size == 1 else ranked[:combo_pool]
        for split in combinations(sorted(candidates), size):
            codes = np.zeros(n, dtype=np.int64)
            for term in split:  # the pattern read as a binary number, first term highest
                codes = codes * 2 + present[:, column[term]]
            sizes = np.bincount(codes, minlength=1 << size)
            score = _entropy(sizes)
            if best is None or score > best[1] + 1e-12:
                best = (split, score, [int(x) for x in sizes if x])
    return best


def _merge_small(groups: dict[Pattern, list[int]], minimum: int) -> list[list[Pattern]]:
    """Patterns grouped into children: big ones alone, small ones together (and that group
    folded into the smallest big child if it is still small)."""
    big = [[p] for p in sorted(groups) if len(groups[p]) >= minimum]
    small = [p for p in sorted(groups) if len(groups[p]) < minimum]
    if small:
        if sum(len(groups[p]) for p in small) >= minimum or not big:
            big.append(small)
        else:
            min(big, key=lambda ps: sum(len(groups[p]) for p in ps)).extend(small)
    return big


def grow_tree(records: Sequence[frozenset[str]], leaf_size: int, *, max_terms: int = 3,
              max_share: float = 0.95, pool: int = 32, combo_pool: int = 12) -> Tree:
    if leaf_size < 1:
        raise ValueError(f"leaf size must be at least 1, got {leaf_size}")
    if not 1 <= max_terms <= 3:
        raise ValueError(f"a split uses 1 to 3 terms, got {max_terms}")
    nodes = [Node(0)]
    pending = [(0, list(range(len(records))))]
    while pending:
        node_id, positions = pending.pop()
        node = nodes[node_id]
        found = None
        if len(positions) > leaf_size:
            found = best_split([records[p] for p in positions], max_terms, pool, combo_pool)
        children: list[list[Pattern]] = []
        if found is not None and max(found[2]) <= max_share * len(positions):
            groups: dict[Pattern, list[int]] = {}
            for p in positions:
                pattern = "".join("1" if t in records[p] else "0" for t in found[0])
                groups.setdefault(pattern, []).append(p)
            children = _merge_small(groups, max(1, leaf_size // 4))
        if len(children) < 2:  # no useful split: a leaf, cut into clusters
            node.clusters = [positions[i:i + leaf_size]
                             for i in range(0, len(positions), leaf_size)] if positions else []
            continue
        node.split = found[0]
        for patterns in children:
            child = Node(len(nodes))
            nodes.append(child)
            node.children.update({pattern: child.id for pattern in patterns})
            pending.append((child.id, sorted(p for pattern in patterns for p in groups[pattern])))
    return Tree(nodes)
