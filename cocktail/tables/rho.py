"""ρ-cloning: equivalence classes that are near-copies of the table's sensitive distribution.

Algorithm 1 of "Cloning for privacy protection in multiple independent data publications"
(``../shared/papers/rho-cloning-multiple-publications.txt``; the notes'
``paper-rho-cloning.md`` reconstruct it), so that intersecting a victim's classes across
independent publishers tells little beyond the global distributions:

1. *Division*: one sub-dataset W_j per sensitive value; b = min |W_j| classes.
2. *Assignment*: each class takes λ_j = round(|W_j| / b) tuples of every value, the λ_j of the
   first η candidates (the first λ_j when λ_j > η) that widen its QIs least.  Rounding up adds counterfeit tuples (value
   s_j, no QIs), rounding down suppresses the tuples left over; a fraction of exactly ½
   suppresses in the first half of the tied values (by name) and counterfeits in the rest —
   not Python's round-half-even.
3. *k-adjustment*: a class smaller than k is merged, whole, into the class nearest in QI space
   (splitting one, as the paper's Table 2(d) does, breaks cloning: the notes, §4); each class
   is cut into sub-classes of at least k tuples in QI order, published as micro-statistics
   (numeric QI: the average and the range of the β values nearest it; categorical: the
   number of distinct values) linked to the class's whole sensitive multiset, as in Anatomy.

ρ is *measured* on the result — max over classes and values of |f_class(s) − f_table(s)| — and
reported; the paper's worst-case bound is false from four values on (notes §4), so it is never
used.  Counterfeits are flagged in the private zone.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .data import Row


@dataclass
class Rounding:
    b: int                                   # classes
    lam: dict[str, int]                      # tuples of each value per class
    counterfeit: dict[str, int] = field(default_factory=dict)  # per value, added
    suppress: dict[str, int] = field(default_factory=dict)     # per value, removed


def rounding(counts: Mapping[str, int]) -> Rounding:
    if not counts:
        raise ValueError("no tuples to clone")
    b = min(counts.values())
    halves = sorted(v for v, c in counts.items() if 2 * (c % b) == b)
    counterfeit_halves = set(halves[len(halves) // 2:])
    plan = Rounding(b, {})
    for value, count in sorted(counts.items()):
        whole, rest = divmod(count, b)
        up = 2 * rest > b or value in counterfeit_halves
        plan.lam[value] = whole + up
        if up:
            plan.counterfeit[value] = plan.lam[value] * b - count
        elif rest:
            plan.suppress[value] = rest
    return plan


def rho(classes: Sequence[Counter], counts: Mapping[str, int]) -> float:
    """max over classes and values of |f_class(s) − f_table(s)|; 0 for exact clones."""
    total = sum(counts.values())
    worst = 0.0
    for held in classes:
        size = sum(held.values())
        for value in set(counts) | set(held):
            worst = max(worst, abs(held.get(value, 0) / size - counts.get(value, 0) / total))
    return worst


@dataclass
class Cloned:
    classes: list[list[int]]          # tuple ids; counterfeits have negative ids
    subclasses: list[list[list[int]]]  # per class, its sub-classes
    counterfeit: dict[int, str]       # counterfeit id -> its sensitive value
    suppressed: list[int]
    plan: Rounding
    rho: float
    qi: dict[int, tuple]              # each tuple's QIs, numeric ones as floats


class _Box:
    """A class's QI extent: numeric ranges and categorical value sets, for distortion."""

    def __init__(self, numeric: Sequence[bool]) -> None:
        self.numeric = numeric
        self.low = [np.inf] * len(numeric)
        self.high = [-np.inf] * len(numeric)
        self.seen: list[set[str]] = [set() for _ in numeric]

    def add(self, qi: Sequence) -> None:
        for i, value in enumerate(qi):
            if self.numeric[i]:
                self.low[i], self.high[i] = min(self.low[i], value), max(self.high[i], value)
            else:
                self.seen[i].add(value)


def clone(rows: Sequence[Row], numeric: Sequence[bool], k: int,
          eta: int | None = None) -> Cloned:
    """Algorithm 1 over ``rows`` (categorical ``s``); ``eta`` candidates scanned per class and
    value (default 20% of the table, the paper's)."""
    if k < 1:
        raise ValueError(f"k must be at least 1 (got {k})")
    by_value: dict[str, list[Row]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: r.id):
        by_value[str(row.s)].append(row)
    counts = {value: len(members) for value, members in by_value.items()}
    plan = rounding(counts)
    eta = eta or max(1, len(rows) // 5)
    qi = _QiMatrix(rows, numeric)
    boxes = [_Box(numeric) for _ in range(plan.b)]
    classes: list[list[int]] = [[] for _ in range(plan.b)]
    counterfeit: dict[int, str] = {}
    suppressed: list[int] = []
    # the rarest values first: each class is seeded with one of their tuples
    for value in sorted(by_value, key=lambda v: (counts[v], v)):
        pool = [row.id for row in by_value[value]]
        # λ_j of the first η: when λ_j > η, the first λ_j — else the shortfall would be
        # counterfeited and as many tuples suppressed, distortion the rounding never asked for
        scan = max(eta, plan.lam[value])
        for r in range(plan.b):
            chosen = qi.least_distortion(pool[:scan], boxes[r], plan.lam[value])
            for t in chosen:
                classes[r].append(t)
                boxes[r].add(qi.values(t))
            taken = set(chosen)
            pool = [t for t in pool if t not in taken]
            for _ in range(plan.lam[value] - len(chosen)):
                fake = -(len(counterfeit) + 1)
                counterfeit[fake] = value
                classes[r].append(fake)
        suppressed += pool
    sensitive = {row.id: str(row.s) for row in rows} | counterfeit
    classes = _merge_small(classes, boxes, k, qi)
    subclasses = [_cut(members, k, qi) for members in classes]
    measured = rho([Counter(sensitive[t] for t in members) for members in classes], counts)
    return Cloned(classes, subclasses, counterfeit, sorted(suppressed), plan, measured, qi.rows)


class _QiMatrix:
    """The QIs of every tuple, numeric ones as floats, with each column's global extent."""

    def __init__(self, rows: Sequence[Row], numeric: Sequence[bool]) -> None:
        self.numeric = numeric
        self.rows = {row.id: tuple(float(v) if numeric[i] else v for i, v in enumerate(row.qi))
                     for row in rows}
        columns = list(zip(*self.rows.values())) if rows else [[] for _ in numeric]
        self.width = [(max(c) - min(c)) or 1.0 if numeric[i] else float(len(set(c)))
                      for i, c in enumerate(columns)]

    def values(self, t: int) -> tuple:
        return self.rows[t]

    def distortion(self, t: int, box: _Box) -> float:
        cost = 0.0
        for i, value in enumerate(self.rows[t]):
            if self.numeric[i]:
                if box.low[i] <= box.high[i]:
                    grown = max(box.high[i], value) - min(box.low[i], value)
                    cost += (grown - (box.high[i] - box.low[i])) / self.width[i]
            elif box.seen[i] and value not in box.seen[i]:
                cost += 1 / self.width[i]
        return cost

    def least_distortion(self, candidates: list[int], box: _Box, wanted: int) -> list[int]:
        ranked = sorted(candidates, key=lambda t: (self.distortion(t, box), t))
        return ranked[:wanted]

    def key(self, t: int) -> tuple:
        """QI order for cutting sub-classes; counterfeits (no QIs) last."""
        return (1,) if t < 0 else (0, *self.rows[t])


def _merge_small(classes: list[list[int]], boxes: list[_Box], k: int,
                 qi: _QiMatrix) -> list[list[int]]:
    """Merge every class smaller than k, whole, into the nearest one."""
    classes, boxes = list(classes), list(boxes)
    while len(classes) > 1:
        small = [i for i, members in enumerate(classes) if len(members) < k]
        if not small:
            break
        i = min(small, key=lambda i: (len(classes[i]), i))
        others = [j for j in range(len(classes)) if j != i]
        j = min(others, key=lambda j: (_gap(boxes[i], boxes[j], qi), j))
        classes[j] += classes[i]
        for t in classes[i]:
            if t >= 0:
                boxes[j].add(qi.values(t))
        del classes[i], boxes[i]
    if len(classes[0]) < k:
        raise ValueError(f"the table has {len(classes[0])} tuples after cloning, fewer than "
                         f"k={k}")
    return classes


def _gap(a: _Box, b: _Box, qi: _QiMatrix) -> float:
    cost = 0.0
    for i, numeric in enumerate(qi.numeric):
        if numeric:
            low, high = min(a.low[i], b.low[i]), max(a.high[i], b.high[i])
            cost += ((high - low) - (b.high[i] - b.low[i])) / qi.width[i]
        else:
            cost += len(a.seen[i] - b.seen[i]) / qi.width[i]
    return cost


def _cut(members: list[int], k: int, qi: _QiMatrix) -> list[list[int]]:
    """Sub-classes of at least k tuples, consecutive in QI order."""
    ordered = sorted(members, key=lambda t: (qi.key(t), t))
    parts = max(1, len(ordered) // k)
    size, extra = divmod(len(ordered), parts)
    cuts, start = [], 0
    for p in range(parts):
        stop = start + size + (p < extra)
        cuts.append(ordered[start:stop])
        start = stop
    return cuts


def micro_statistics(members: list[int], qi: Mapping[int, tuple], numeric: Sequence[bool],
                     beta: int) -> list[tuple]:
    """Per QI: numeric (average, low, high of the β values nearest it); categorical
    (distinct count,).  Counterfeits (no QIs) do not count."""
    real = [qi[t] for t in members if t >= 0]
    stats = []
    for i, is_numeric in enumerate(numeric):
        column = [row[i] for row in real]
        if not column:
            stats.append(("*", "*", "*") if is_numeric else ("*",))
        elif is_numeric:
            values = np.array(column, dtype=float)
            average = float(values.mean())
            nearest = values[np.argsort(np.abs(values - average), kind="stable")[:beta]]
            stats.append((round(average, 3), float(nearest.min()), float(nearest.max())))
        else:
            stats.append((len(set(column)),))
    return stats
