"""The (k,e)-anonymous model: partitions of tuples by their numeric sensitive value S.

A partitioning is *(k,e)-valid* when every partition holds at least ``k`` distinct S values
spanning a range (max − min) of at least ``e``; its cost is the sum of the ranges (SE).  The
public release permutes S inside each partition (:mod:`cocktail.tables.release`).

* :func:`static_ke` — the optimal partitioning of one table: the O(N²) dynamic programme over
  the tuples sorted by (S, tuple id) of Zhang et al. (ICDE 2007, "Aggregate query answering on
  anonymized tables"), which the incremental paper builds on.  Contiguous groups lose nothing
  (checked against brute force over all set partitions in ``tests/test_tables_ke.py``).
* :func:`laminar_ke` — the next release of a growing table.  The paper tests candidates
  pairwise against the previous release only (Definition 5), which a union of old partitions
  defeats (``docs/tables.md``); we enforce the notes' *laminar* rule instead: every new
  partition is a union of whole old partitions plus new tuples R, with R empty or R itself
  (k,e)-valid.  The published sets then nest, so no difference or intersection across any
  number of releases isolates fewer than k values or a range below e.  New tuples that cannot
  be placed under the rule are *buffered* (kept private, retried at the next release): the
  programme minimises the buffered count first, then SE.

Ties between equal costs go to the shortest last group, so the result depends on the data
and the tuple ids only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

Partitioning = list[frozenset[int]]  # partitions as sets of tuple ids


class Infeasible(ValueError):
    """No (k,e)-valid partitioning exists."""


def check_params(k: int, e: float) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1 (got {k})")
    if e < 0:
        raise ValueError(f"e must be at least 0 (got {e})")


def ke_valid(values: Iterable[float], k: int, e: float) -> bool:
    """At least ``k`` distinct values and a range of at least ``e`` (an empty set fails)."""
    values = list(values)
    return bool(values) and len(set(values)) >= k and max(values) - min(values) >= e


def error(values: Iterable[float]) -> float:
    values = list(values)
    return max(values) - min(values) if values else 0.0


def sum_of_errors(partitions: Partitioning, values: Mapping[int, float]) -> float:
    """SE, the paper's utility cost: the sum of the partitions' ranges."""
    return sum(error(values[t] for t in p) for p in partitions)


def sorted_ids(values: Mapping[int, float]) -> list[int]:
    return sorted(values, key=lambda t: (values[t], t))


@dataclass
class Placement:
    """A release's partitions and the new tuples it could not place yet."""

    partitions: Partitioning
    buffered: frozenset[int]


def static_ke(values: Mapping[int, float], k: int, e: float) -> Partitioning:
    """The partitioning of minimal SE, or :class:`Infeasible` when the table has fewer than
    ``k`` distinct values or a range below ``e``."""
    check_params(k, e)
    if not ke_valid(values.values(), k, e):
        distinct = len(set(values.values()))
        raise Infeasible(f"{len(values)} tuples with {distinct} distinct sensitive values and a "
                         f"range of {error(values.values()):g} cannot meet k={k}, e={e:g}")
    return _programme(values, [], k, e, may_buffer=False).partitions


def laminar_ke(values: Mapping[int, float], previous: Partitioning, k: int,
               e: float) -> Placement:
    """The next release over ``values`` (all tuples: the old ones, those buffered before and
    the new ones) given the previous release's partitions.  Always feasible: at worst the
    old partitions stay as they are and every new tuple waits."""
    check_params(k, e)
    placed = set().union(*previous) if previous else set()
    missing = placed - values.keys()
    if missing:
        raise ValueError(f"{len(missing)} tuple(s) of the previous release are gone "
                         f"(e.g. {min(missing)}): tables only grow")
    return _programme(values, previous, k, e, may_buffer=True)


def _programme(values: Mapping[int, float], previous: Partitioning, k: int, e: float,
               may_buffer: bool) -> Placement:
    order = sorted_ids(values)
    n = len(order)
    s = np.array([values[t] for t in order], dtype=np.float64)
    position = {t: p for p, t in enumerate(order)}
    new = np.ones(n, dtype=bool)
    # A group may not end inside an old partition (nor start inside one: the group before
    # it would then end inside, so this one test suffices).
    right_bad = np.zeros(n, dtype=bool)
    for old in previous:
        at = sorted(position[t] for t in old)
        new[at] = False
        right_bad[at[0]:at[-1]] = True
    new_count = np.concatenate([[0], np.cumsum(new)])
    old_count = np.concatenate([[0], np.cumsum(~new)])
    # the first new position at or after j, and the last at or before i
    first_new = np.full(n + 1, n)
    for p in range(n - 1, -1, -1):
        first_new[p] = p if new[p] else first_new[p + 1]
    last_new = np.full(n, -1)
    for p in range(n):
        last_new[p] = p if new[p] else (last_new[p - 1] if p else -1)
    # the next new position holding the same value (n if none): for distinct counts
    next_same = np.full(n, n)
    seen: dict[float, int] = {}
    for p in range(n - 1, -1, -1):
        if new[p]:
            next_same[p] = seen.get(s[p], n)
            seen[s[p]] = p

    inf = np.inf
    buffered = np.full(n + 1, inf)   # the best cost of the first i positions: buffered, then SE
    cost = np.full(n + 1, inf)
    back = np.full(n + 1, -1)        # start of the last group (or -2: position buffered)
    keeps_new = np.zeros(n + 1, dtype=bool)
    buffered[0] = cost[0] = 0.0
    js = np.arange(n)
    for i in range(n):
        j = js[: i + 1]
        flag = new[: i + 1] & (next_same[: i + 1] > i)
        distinct = np.cumsum(flag[::-1])[::-1]           # distinct new values in [j..i]
        count_new = new_count[i + 1] - new_count[j]
        count_old = old_count[i + 1] - old_count[j]
        lo = first_new[j]
        span_new = np.where(lo <= i, s[last_new[i]] - s[np.minimum(lo, n - 1)], 0.0)
        borders = ~right_bad[i]
        with_new = borders & ((count_new == 0) & (count_old > 0)
                              | (count_new > 0) & (distinct >= k) & (span_new >= e))
        choices = [(with_new, np.zeros(i + 1), True)]
        if may_buffer and not new[i]:
            keep_old = borders & ~new[j] & (count_new > 0) & (count_old > 0)
            choices.append((keep_old, count_new.astype(np.float64), False))
        for allowed, waiting, keeps in choices:
            if not allowed.any():
                continue
            b = np.where(allowed, buffered[j] + waiting, inf)
            c = np.where(allowed, cost[j] + (s[i] - s[j]), inf)
            best = np.lexsort((-j, c, b))[0]  # fewest buffered, least SE, shortest group
            if (b[best], c[best]) < (buffered[i + 1], cost[i + 1]):
                buffered[i + 1], cost[i + 1] = b[best], c[best]
                back[i + 1], keeps_new[i + 1] = best, keeps
        if may_buffer and new[i] and (buffered[i] + 1, cost[i]) < (buffered[i + 1], cost[i + 1]):
            buffered[i + 1], cost[i + 1], back[i + 1] = buffered[i] + 1, cost[i], -2
    if not np.isfinite(cost[n]):
        raise Infeasible(f"no (k={k}, e={e:g}) partitioning of {n} tuples")
    return _walk(order, new, back, keeps_new)


def _walk(order: Sequence[int], new: np.ndarray, back: np.ndarray,
          keeps_new: np.ndarray) -> Placement:
    partitions, waiting, i = [], set(), len(order)
    while i > 0:
        if back[i] == -2:
            waiting.add(order[i - 1])
            i -= 1
            continue
        j = int(back[i])
        members = [order[p] for p in range(j, i) if keeps_new[i] or not new[p]]
        waiting.update(order[p] for p in range(j, i) if new[p] and not keeps_new[i])
        partitions.append(frozenset(members))
        i = j
    return Placement(partitions[::-1], frozenset(waiting))  # in S order
