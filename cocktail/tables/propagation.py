"""Releases that get stricter at every hop of a chain (Chang and Wu, "Strengthening data
privacy during propagation", SPME'14): PLSA, TDA, BUA and FLA, with the notes' fixes.

Hop i publishes T_i with P(T_i) < (L − i + 1)·δ, computed from T_{i−1} alone.  P is the largest
Jensen–Shannon divergence (bits) between a class's sensitive distribution and the whole
table's.  Past hop 1 the units are *atoms* — the classes received — since splitting one would
give two classes with equal QI values, one class by definition; so every hop coarsens the one
before, and a chain is nested.  Classes are mean-recoded; the distance between two QI vectors
is sqrt(Σ w_k ((x_k − y_k)/scale_k)²), the scales being the owner's QI ranges (shipped with W,
the same at every hop).

Fixes (``docs/propagation.md``): BUA's merge loop takes the group of largest P and merges it
with the partner minimising the merged P, with no strict-decrease test — the paper's loop can
run for ever; every tie is broken on content (QI means, then the sensitive multiset), never on
row order, and published classes are sorted multisets.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

STRATEGIES = ("fla", "tda", "bua")


@dataclass(frozen=True)
class Atom:
    """The unit a hop partitions: a tuple at hop 1, a received class after."""

    qi: tuple[float, ...]                 # mean QI values, in the owner's units
    values: tuple[tuple[str, int], ...]   # sorted sensitive multiset

    @cached_property
    def size(self) -> int:
        return sum(n for _, n in self.values)

    @cached_property
    def key(self) -> tuple:
        return (self.qi, self.values)

    @cached_property
    def dominant(self) -> str:
        return min(self.values, key=lambda vn: (-vn[1], vn[0]))[0]


Classes = list[list[Atom]]


@dataclass(frozen=True)
class Space:
    """What every hop shares: the sensitive domain and its global distribution, W and the
    scales (the owner's QI ranges)."""

    domain: tuple[str, ...]
    global_p: np.ndarray
    weights: np.ndarray
    scales: np.ndarray
    min_size: int = 1   # the paper has no floor: 1 lets a class be one person

    @classmethod
    def of(cls, atoms: Sequence[Atom], weights: Sequence[float],
           scales: Sequence[float], min_size: int = 1) -> Space:
        total = Counter()
        for atom in atoms:
            total.update(dict(atom.values))
        domain = tuple(sorted(total))
        counts = np.array([total[v] for v in domain], dtype=float)
        return cls(domain, counts / counts.sum(), np.asarray(weights, float),
                   np.asarray([s or 1.0 for s in scales], float), min_size)

    def distribution(self, atoms: Sequence[Atom]) -> np.ndarray:
        counts = Counter()
        for atom in atoms:
            counts.update(dict(atom.values))
        vector = np.array([counts[v] for v in self.domain], dtype=float)
        return vector / vector.sum()

    def divergence(self, atoms: Sequence[Atom]) -> float:
        """JS(global, class) in bits."""
        return js_bits(self.global_p, self.distribution(atoms))

    def passes(self, atoms: Sequence[Atom], level: float) -> bool:
        return sum(a.size for a in atoms) >= self.min_size and self.divergence(atoms) < level

    def privacy(self, classes: Classes) -> float:
        """P(T): the largest divergence of a class."""
        return max(self.divergence(c) for c in classes)

    def mean(self, atoms: Sequence[Atom]) -> np.ndarray:
        return _size_weighted_mean(atoms)

    def distance(self, x: np.ndarray, y: np.ndarray) -> float:
        return float(np.sqrt((self.weights * ((x - y) / self.scales) ** 2).sum()))

    def utility(self, classes: Classes) -> float:
        """U(T): Σ over tuples of the distance of their recoded QIs from the all-in-one
        table's (what the paper's T̃ keeps); mean recoding never raises it."""
        centre = self.mean([a for c in classes for a in c])
        return sum(self.distance(self.mean(c), centre) * sum(a.size for a in c)
                   for c in classes)


def js_bits(p: np.ndarray, q: np.ndarray) -> float:
    mid = (p + q) / 2
    return float(max(0.0, _entropy(mid) - (_entropy(p) + _entropy(q)) / 2))


def _entropy(p: np.ndarray) -> float:
    nz = p[p > 0]
    return float(-(nz * np.log2(nz)).sum())


def merged(classes: Classes) -> list[Atom]:
    """Each class as the atom the next hop receives (mean-recoded), in the classes' order."""
    atoms = []
    for c in classes:
        values = Counter()
        for atom in c:
            values.update(dict(atom.values))
        qi = tuple(round(float(x), 6) for x in _size_weighted_mean(c))
        atoms.append(Atom(qi, tuple(sorted(values.items()))))
    return atoms


def _size_weighted_mean(atoms: Sequence[Atom]) -> np.ndarray:
    sizes = np.array([a.size for a in atoms], dtype=float)
    return (np.array([a.qi for a in atoms]) * sizes[:, None]).sum(0) / sizes.sum()


def canonical(classes: Classes) -> Classes:
    return sorted((sorted(c, key=lambda a: a.key) for c in classes if c),
                  key=lambda c: [a.key for a in c])


# PLSA: split a class in two, each sensitive signature halved, while both halves pass

def plsa(space: Space, classes: Classes, delta: float) -> Classes:
    done, stack = [], list(classes)
    while stack:
        c = stack.pop()
        halves = _halve(space, c)
        if halves and all(space.passes(h, delta) for h in halves):
            stack.extend(halves)
        else:
            done.append(c)
    return canonical(done)


def _halve(space: Space, c: list[Atom]) -> tuple[list[Atom], list[Atom]] | None:
    """Each group of atoms with the same sensitive multiset, sorted along the class's widest
    weighted QI axis (then content), cut at its median: both halves keep the proportions."""
    if len(c) < 2:
        return None
    axis = _widest_axis(space, c)
    first, second = [], []
    signatures: dict[tuple, list[Atom]] = {}
    for atom in c:
        signatures.setdefault(atom.values, []).append(atom)
    for group in signatures.values():
        group.sort(key=lambda a: (a.qi[axis], a.key))
        first += group[:len(group) // 2]
        second += group[len(group) // 2:]
    return (first, second) if first and second else None


def _widest_axis(space: Space, c: Sequence[Atom]) -> int:
    return int(np.argmax(_spreads(space, c)))


def _spreads(space: Space, c: Sequence[Atom]) -> np.ndarray:
    qi = np.array([a.qi for a in c])
    return np.sqrt(space.weights) * (qi.max(0) - qi.min(0)) / space.scales


# TDA: Mondrian-style top-down splits while both parts pass, then PLSA

def master_classes(space: Space, atoms: Sequence[Atom], delta: float) -> Classes:
    """TDA phase I: cut at the median of the widest axis that gives two passing parts (the
    next widest if not, as Mondrian does), until no cut passes."""
    done, stack = [], [sorted(atoms, key=lambda a: a.key)]
    while stack:
        c = stack.pop()
        parts = _median_cut(space, c, delta)
        if parts:
            stack.extend(parts)
        else:
            done.append(c)
    return canonical(done)


def _median_cut(space: Space, c: list[Atom], delta: float
                ) -> tuple[list[Atom], list[Atom]] | None:
    if len(c) < 2:
        return None
    spreads = _spreads(space, c)
    for axis in sorted(range(len(spreads)), key=lambda i: (-spreads[i], i)):
        if spreads[axis] == 0:
            break
        ordered = sorted(c, key=lambda a: (a.qi[axis], a.key))
        half = sum(a.size for a in c) / 2
        running, cut = 0, 0
        while running + ordered[cut].size <= half and cut < len(ordered) - 1:
            running += ordered[cut].size
            cut += 1
        cut = max(cut, 1)
        left, right = ordered[:cut], ordered[cut:]
        if all(space.passes(p, delta) for p in (left, right)):
            return left, right
    return None


def tda(space: Space, atoms: Sequence[Atom], delta: float) -> Classes:
    return plsa(space, master_classes(space, atoms, delta), delta)


# BUA: basic groups holding every value, merged bottom-up while a group fails, then PLSA

def bua(space: Space, atoms: Sequence[Atom], delta: float) -> Classes:
    groups = basic_groups(space, atoms)
    return plsa(space, merge_failing(space, groups, delta), delta)


def basic_groups(space: Space, atoms: Sequence[Atom]) -> Classes:
    """b = the rarest dominant value's count; each group is seeded with one of its atoms and
    takes the nearest atom of every other value; the rest join the nearest group dominated by
    their value (groups get dominating values in proportion to the values' frequencies)."""
    by_value: dict[str, list[Atom]] = {}
    for atom in sorted(atoms, key=lambda a: a.key):
        by_value.setdefault(atom.dominant, []).append(atom)
    rarest = min(by_value, key=lambda v: (len(by_value[v]), v))
    groups = [[seed] for seed in by_value[rarest]]
    left = {v: list(a) for v, a in by_value.items() if v != rarest}
    for value in sorted(left):
        for group in groups:
            centre = space.mean(group)
            if left[value]:
                nearest = min(left[value],
                              key=lambda a: (space.distance(np.array(a.qi), centre), a.key))
                left[value].remove(nearest)
                group.append(nearest)
    owner = _dominations(space, groups, {v: a for v, a in left.items() if a})
    for value, rest in sorted(left.items()):
        for atom in rest:
            mine = owner.get(value) or range(len(groups))
            best = min(mine, key=lambda g: (space.distance(np.array(atom.qi),
                                                           space.mean(groups[g])), g))
            groups[best].append(atom)
    return canonical(groups)


def _dominations(space: Space, groups: Classes, left: dict[str, list[Atom]]
                 ) -> dict[str, list[int]]:
    """Groups per value in proportion to its leftover atoms (largest remainder), each value
    taking the free groups nearest its leftovers' centre."""
    total = sum(len(a) for a in left.values())
    if not total:
        return {}
    shares = {v: len(groups) * len(a) / total for v, a in left.items()}
    quota = {v: int(s) for v, s in shares.items()}
    for v in sorted(shares, key=lambda v: (-(shares[v] - quota[v]), v))[
            :len(groups) - sum(quota.values())]:
        quota[v] += 1
    free, owner = set(range(len(groups))), {}
    for value in sorted(left, key=lambda v: (-len(left[v]), v)):
        centre = space.mean(left[value])
        chosen = sorted(free, key=lambda g: (space.distance(space.mean(groups[g]), centre),
                                             g))[:quota[value]]
        free -= set(chosen)
        owner[value] = chosen
    return owner


def merge_failing(space: Space, groups: Classes, delta: float) -> Classes:
    """The fixed BUA phase II: while some group fails, the failing one of largest P merges
    with the partner that minimises the merged P (JS is convex, so the largest P never rises);
    at most len(groups) − 1 merges."""
    groups = canonical(groups)
    while len(groups) > 1:
        failing = [i for i, g in enumerate(groups) if not space.passes(g, delta)]
        if not failing:
            break
        worst = max(failing, key=lambda i: (space.divergence(groups[i]),
                                            [a.key for a in groups[i]]))
        partner = min((j for j in range(len(groups)) if j != worst),
                      key=lambda j: (space.divergence(groups[worst] + groups[j]),
                                     [a.key for a in groups[j]]))
        union = groups[worst] + groups[partner]
        groups = canonical([g for i, g in enumerate(groups) if i not in (worst, partner)]
                           + [union])
    return groups


# FLA: at each hop, take the next hop's level now when that keeps more utility over both

def build(space: Space, atoms: Sequence[Atom], delta: float) -> Classes:
    """TDA's master classes, each refined by BUA or PLSA, whichever keeps more utility."""
    out = []
    for master in master_classes(space, atoms, delta):
        options = [plsa(space, [master], delta), bua(space, master, delta)]
        out += max(options, key=lambda o: (space.utility(o), -len(o)))
    return canonical(out)


def fla_hop(space: Space, atoms: Sequence[Atom], delta: float, hop: int, hops: int) -> Classes:
    """A: the next level now; B: this level; C: B coarsened to the next level.  A when
    2·U(A) > U(B) + U(C).  A hop whose atoms all pass already forwards them unchanged (what
    publishing A earlier was for)."""
    level = (hops - hop + 1) * delta
    if all(space.passes([a], level) for a in atoms):
        return canonical([[a] for a in atoms])
    if hop == hops:
        return build(space, atoms, level)
    ahead = build(space, atoms, level - delta)
    now = build(space, atoms, level)
    after = build(space, merged(now), level - delta)  # U over merged atoms = U over tuples
    if 2 * space.utility(ahead) > space.utility(now) + space.utility(after):
        return ahead
    return now


HOP_BUILDERS: dict[str, Callable[[Space, Sequence[Atom], float, int, int], Classes]] = {
    "fla": fla_hop,
    "tda": lambda space, atoms, delta, hop, hops: tda(space, atoms, (hops - hop + 1) * delta),
    "bua": lambda space, atoms, delta, hop, hops: bua(space, atoms, (hops - hop + 1) * delta),
}


def next_hop(space: Space, received: Sequence[Atom], delta: float, hop: int, hops: int,
             strategy: str) -> Classes:
    """Hop ``hop``'s classes of the atoms it received, and nothing else."""
    if strategy not in HOP_BUILDERS:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    return HOP_BUILDERS[strategy](space, received, delta, hop, hops)
