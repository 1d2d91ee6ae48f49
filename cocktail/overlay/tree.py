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
than ``max_share`` of its records to one child ("no useful split").  What becomes a cluster
and a unit of a leaf's records is the layout's (:mod:`cocktail.overlay.layout`).  The tree is
private: it lives in the private manifest only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from ..dataset import Records

Pattern = str  # one character per split term: "1" present, "0" absent


@dataclass
class Node:
    id: int
    split: tuple[str, ...] = ()                           # empty for a leaf
    children: dict[Pattern, int] = field(default_factory=dict)
    positions: list[int] = field(default_factory=list)    # grown leaf: its records, in order
    units: list[int] = field(default_factory=list)         # leaf: its clusters' unit ids
    aggregate: int | None = None                           # its aggregated unit, if any
    lifted: list[int] = field(default_factory=list)        # a promotion node: the tops it pools

    @property
    def is_leaf(self) -> bool:
        return not self.split and not self.lifted


@dataclass
class Tree:
    """The overlay tree, as the publisher grows it and as the private manifest keeps it.
    A publication's is a forest: each append that forms new clusters adds a tree (``roots``);
    within a tree a parent precedes its children.  An append that promotes the private
    remainders of the forest's tops adds a *promotion node* above them (``lifted``: the tree
    roots and the earlier promotion node it pools); it routes no record, so it is no root."""

    nodes: list[Node]
    roots: list[int] = field(default_factory=lambda: [0])

    def leaves(self) -> list[Node]:
        return [n for n in self.nodes if n.is_leaf]

    def parents(self) -> dict[int, int]:
        """child -> parent, a promotion node being the parent of the tops it lifted."""
        return {child: n.id for n in self.nodes
                for child in (*n.children.values(), *n.lifted)}

    def tops(self) -> list[int]:
        """The nodes nothing lifts or holds: tree roots not yet pooled, the last promotion."""
        held = self.parents()
        return [n.id for n in self.nodes if n.id not in held]

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
                 "units": n.units, "aggregate": n.aggregate}
                | ({"lifted": n.lifted} if n.lifted else {}) for n in self.nodes]

    @classmethod
    def from_manifest(cls, nodes: list[dict], roots: list[int] | None = None) -> Tree:
        return cls([Node(n["id"], tuple(n["split"]), dict(n["children"]), units=list(n["units"]),
                         aggregate=n["aggregate"], lifted=list(n.get("lifted", ())))
                    for n in nodes], list(roots or [0]))


def _entropies(sizes: np.ndarray) -> np.ndarray:
    """The Shannon entropy (bits) of each row of child sizes, each summed in the order and
    grouping numpy's sum of that row's non-zero shares would use (zeros add exactly nothing):
    one by one, but pairwise for eight terms, so that a choice between near-equal splits is
    the one a row-by-row computation makes."""
    total = sizes.sum(axis=1, keepdims=True)
    p = np.divide(sizes, total, out=np.zeros(sizes.shape), where=sizes > 0)
    terms = np.zeros(sizes.shape)
    np.multiply(p, np.log2(p, out=np.zeros(sizes.shape), where=p > 0), out=terms, where=p > 0)
    one_by_one = np.zeros(len(sizes))
    for column in terms.T:
        one_by_one += column
    if sizes.shape[1] == 8:
        t = terms.T
        pairwise = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]))
        one_by_one = np.where((sizes > 0).all(axis=1), pairwise, one_by_one)
    return -one_by_one


def best_split(records: Sequence[frozenset[str]], max_terms: int = 3, pool: int = 32,
               combo_pool: int = 12) -> tuple[tuple[str, ...], float, list[int]] | None:
    """The candidate term set with the most balanced branching: (terms, entropy, child sizes)."""
    records = Records.of(records)
    found = _best_split(records, np.arange(len(records)), SplitSearch(max_terms, pool,
                                                                      combo_pool))
    if found is None:
        return None
    choice = found[0]
    return (tuple(records.names[t] for t in choice.terms), choice.entropy,
            [s for s in choice.sizes if s])


@dataclass(frozen=True)
class SplitSearch:
    """Which term sets a node's split is chosen among."""

    max_terms: int = 3    # terms in a split, 1 to 3
    pool: int = 32        # the terms with support closest to half, tried alone
    combo_pool: int = 12  # the first of those, tried in pairs and triples


@dataclass
class SplitStats:
    """What choosing a node's split needs to know of its records, as sums over records (so
    partial sums over parts of a node add up): over the ranked candidate terms, how many
    records hold each, each pair, and each triple of the first ``combo_pool``."""

    n: int
    single: np.ndarray  # [i]
    pair: np.ndarray    # [i, j] of the first combo_pool candidates (0 past them)
    cube: np.ndarray    # [a, b, c] for a < b, of the first combo_pool candidates

    def __add__(self, other: SplitStats) -> SplitStats:
        return SplitStats(self.n + other.n, self.single + other.single,
                          self.pair + other.pair, self.cube + other.cube)


@dataclass(frozen=True)
class SplitChoice:
    terms: tuple[int, ...]  # term ids, in id (= name) order
    entropy: float
    sizes: list[int]        # records per pattern, by pattern code


def rank_candidates(support: np.ndarray, n: int, pool: int) -> np.ndarray:
    """The term ids that can split ``n`` records (held by some, not all), closest to half
    first, ties by id; at most ``pool``."""
    useful = np.flatnonzero((support > 0) & (support < n))
    return useful[np.lexsort((useful, np.abs(support[useful] - n / 2)))][:pool]


def presence(records: Records, positions: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """present[r, i]: whether the record at positions[r] holds terms[i]."""
    return _presence(*records.rows(positions), len(positions), len(records.names), terms)


def _presence(rows: np.ndarray, ids: np.ndarray, n: int, names: int,
              terms: np.ndarray) -> np.ndarray:
    column = np.full(names, -1)
    column[terms] = np.arange(len(terms))
    held = column[ids] >= 0
    present = np.zeros((n, len(terms)), dtype=bool)
    present[rows[held], column[ids[held]]] = True
    return present


def split_stats(present: np.ndarray, search: SplitSearch) -> SplitStats:
    """Co-occurrence counts of the first ``combo_pool`` candidates, the only ones tried in
    pairs and triples, read off how many records hold each subset of them.  Child sizes then
    follow by inclusion-exclusion, without a pass per candidate."""
    width, combos = present.shape[1], min(search.combo_pool, present.shape[1])
    pair = np.zeros((width, width), dtype=np.int64)
    cube = np.zeros((combos,) * 3, dtype=np.int64)
    if search.max_terms >= 2:
        holding = _superset_counts(present[:, :combos])
        bit = 1 << np.arange(combos)
        pair[:combos, :combos] = holding[bit[:, None] | bit]
        if search.max_terms == 3:
            first, second = np.triu_indices(combos, 1)
            cube[first, second] = holding[(bit[first] | bit[second])[:, None] | bit]
    return SplitStats(len(present), present.sum(axis=0, dtype=np.int64), pair, cube)


def _superset_counts(present: np.ndarray) -> np.ndarray:
    """[S]: how many rows hold every column of the bit set S (columns as bits, first lowest):
    a histogram of the rows' column sets, summed over supersets one bit at a time."""
    width = present.shape[1]
    codes = present.astype(np.int64) @ (1 << np.arange(width))
    counts = np.bincount(codes, minlength=1 << width)
    for bit in range(width):
        view = counts.reshape(-1, 2, 1 << bit)
        view[:, 0, :] += view[:, 1, :]
    return counts


def choose_split(stats: SplitStats, ranked: np.ndarray, search: SplitSearch) -> SplitChoice:
    """The candidate with the highest entropy of child sizes; ties to the first in id order.
    Every candidate's sizes and entropy are computed at once; the scan that picks keeps the
    order and the tolerance of a one-by-one search."""
    column = {int(t): i for i, t in enumerate(ranked)}
    best, best_score = None, 0.0
    for size in range(1, search.max_terms + 1):
        candidates = ranked if size == 1 else ranked[:search.combo_pool]
        splits = list(combinations(sorted(candidates.tolist()), size))  # by id: by name
        if not splits:
            continue
        sizes = _pattern_sizes(np.array([[column[t] for t in split] for split in splits]),
                               stats)
        for number, score in enumerate(_entropies(sizes).tolist()):
            if best is None or score > best_score + 1e-12:
                best, best_score = (splits[number], sizes[number]), score
    split, sizes = best
    return SplitChoice(split, best_score, [int(x) for x in sizes])


def pattern_codes(present: np.ndarray, ranked: np.ndarray, split: tuple[int, ...]) -> np.ndarray:
    """Each record's pattern of the split terms, read as a binary number (first term highest)."""
    column = {int(t): i for i, t in enumerate(ranked)}
    codes = np.zeros(len(present), dtype=np.int64)
    for t in split:
        codes = codes * 2 + present[:, column[t]]
    return codes


def _best_split(records: Records, positions: np.ndarray, search: SplitSearch
                ) -> tuple[SplitChoice, np.ndarray] | None:
    """The split of the records at ``positions`` and each one's pattern code."""
    rows, ids = records.rows(positions)
    ranked = rank_candidates(np.bincount(ids, minlength=len(records.names)), len(positions),
                             search.pool)
    if not len(ranked):
        return None
    present = _presence(rows, ids, len(positions), len(records.names), ranked)
    choice = choose_split(split_stats(present, search), ranked, search)
    return choice, pattern_codes(present, ranked, choice.terms)


def _pattern_sizes(cols: np.ndarray, stats: SplitStats) -> np.ndarray:
    """For each row of split columns, how many records have each presence pattern of its
    terms, indexed by the pattern read as a binary number (first term highest)."""
    n, single, pair = stats.n, stats.single, stats.pair
    if cols.shape[1] == 1:
        i = cols[:, 0]
        return np.stack([n - single[i], single[i]], axis=1)
    if cols.shape[1] == 2:
        i, j = cols.T
        both = pair[i, j]
        return np.stack([n - single[i] - single[j] + both, single[j] - both, single[i] - both,
                         both], axis=1)
    i, j, k = cols.T
    ijk = stats.cube[tuple(np.sort(cols, axis=1).T)]
    ij, ik, jk = pair[i, j], pair[i, k], pair[j, k]
    only_i, only_j, only_k = (single[i] - ij - ik + ijk, single[j] - ij - jk + ijk,
                              single[k] - ik - jk + ijk)
    sizes = np.stack([np.zeros_like(ijk), only_k, only_j, jk - ijk, only_i, ik - ijk,
                      ij - ijk, ijk], axis=1)
    sizes[:, 0] = n - sizes[:, 1:].sum(axis=1)
    return sizes


def _merge_small(sizes: dict[Pattern, int], minimum: int) -> list[list[Pattern]]:
    """Patterns grouped into children: big ones alone, small ones together (and that group
    folded into the smallest big child if it is still small)."""
    big = [[p] for p in sorted(sizes) if sizes[p] >= minimum]
    small = [p for p in sorted(sizes) if sizes[p] < minimum]
    if small:
        if sum(sizes[p] for p in small) >= minimum or not big:
            big.append(small)
        else:
            min(big, key=lambda ps: sum(sizes[p] for p in ps)).extend(small)
    return big


def children_of(choice: SplitChoice | None, n: int, leaf_size: int,
                max_share: float) -> list[list[Pattern]]:
    """A node's children as groups of patterns; fewer than two make the node a leaf (no
    useful split)."""
    if n <= leaf_size or choice is None or max(choice.sizes) > max_share * n:
        return []
    width = len(choice.terms)
    sizes = {format(code, f"0{width}b"): size for code, size in enumerate(choice.sizes) if size}
    children = _merge_small(sizes, max(1, leaf_size // 4))
    return children if len(children) >= 2 else []


def grow_tree(records: Sequence[frozenset[str]], leaf_size: int, *, max_terms: int = 3,
              max_share: float = 0.95, pool: int = 32, combo_pool: int = 12) -> Tree:
    """Grown depth first: a node's children are numbered when it is split, and the last
    child is split next (the Spark engine numbers its nodes the same way)."""
    if leaf_size < 1:
        raise ValueError(f"leaf size must be at least 1, got {leaf_size}")
    if not 1 <= max_terms <= 3:
        raise ValueError(f"a split uses 1 to 3 terms, got {max_terms}")
    records = Records.of(records)
    nodes = [Node(0)]
    for grown in grow(records, np.arange(len(records)), leaf_size,
                      SplitSearch(max_terms, pool, combo_pool), max_share):
        node = nodes[grown.id]
        if grown.split is None:
            node.positions = grown.positions.tolist()
            continue
        node.split = tuple(records.names[t] for t in grown.split)
        for patterns, child in grown.children:
            nodes.append(Node(child))
            node.children.update({pattern: child for pattern in patterns})
    return Tree(nodes)


@dataclass
class Grown:
    """One node of a tree being grown: its records and, if it is split, its split's terms
    and its children (their patterns and ids)."""

    id: int
    positions: np.ndarray
    split: tuple[int, ...] | None = None
    children: list[tuple[list[Pattern], int]] = field(default_factory=list)


def grow(records: Records, positions: np.ndarray, leaf_size: int, search: SplitSearch,
         max_share: float) -> Iterator[Grown]:
    """The tree over the records at ``positions``, node by node, depth first: the root is
    0, children are numbered when their parent is split and the last child is split next.
    A node depends on its own records alone, so the Spark engine grows a small node's
    subtree with this in one task."""
    pending, count = [(0, positions)], 1
    while pending:
        node, positions = pending.pop()
        found = _best_split(records, positions, search) if len(positions) > leaf_size else None
        groups = children_of(found and found[0], len(positions), leaf_size, max_share)
        if not groups:
            yield Grown(node, positions)
            continue
        choice, codes = found
        grown = Grown(node, positions, choice.terms)
        for patterns in groups:
            grown.children.append((patterns, count))
            pending.append((count, positions[np.isin(codes, [int(p, 2) for p in patterns])]))
            count += 1
        yield grown

