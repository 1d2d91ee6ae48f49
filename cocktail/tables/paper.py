"""The incremental (k,e)-anonymity paper's own algorithms, kept to compare against ours.

As reconstructed in ``../shared/notes/paper-incremental-k-e.md`` (§2.3–2.5):

* :func:`breach` — Definition 5 between an old and a new partition (tuple-level sets).
* :func:`paper_incremental` — INCREMENTAL_KE: the static programme whose candidates must pass
  a range-based overlap test and the Definition 5 test against the previous release only.
* :func:`naive_ke` — NAIVE_KE, the paper's baseline: the static programme with every
  (k,e)-valid candidate tested against every partition of every earlier release.

The product publishes with :func:`cocktail.tables.ke.laminar_ke` instead: Definition 5 compares
one old partition with one new one, so a union of old partitions (notes F5) or a third release
(F7) isolates values that no pairwise test sees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .ke import Partitioning, check_params, ke_valid, sorted_ids


def breach(old: frozenset[int], new: frozenset[int], values: Mapping[int, float], k: int,
           e: float) -> str | None:
    """Which Definition 5 condition the pair (old, new) meets, or None: a non-empty difference
    or intersection with fewer than ``k`` distinct values or a range below ``e``."""
    for kind, part in (("difference p_ab-", old - new), ("difference p_ba-", new - old),
                       ("intersection", old & new)):
        if part and not ke_valid((values[t] for t in part), k, e):
            return kind
    return None


@dataclass
class Trace:
    """What INCREMENTAL_KE did with its candidates [j..i] (notes §2.4, F1)."""

    candidates: int = 0        # every [j..i] examined
    overlap_discards: int = 0  # overlapped an old partition without covering it
    breach_tests: int = 0      # passed the overlap test and covered at least one old partition
    breaches: int = 0          # of those, failed Definition 5 against a covered partition


def paper_incremental(values: Mapping[int, float], previous: Partitioning, k: int,
                      e: float) -> tuple[Partitioning | None, Trace]:
    """INCREMENTAL_KE over all tuples ``values`` given the previous release's partitions: the
    partitioning of least SE among the candidates it accepts, or None when there is none."""
    check_params(k, e)
    _require_known([previous], values)
    order = sorted_ids(values)
    n = len(order)
    s = np.array([values[t] for t in order], dtype=np.float64)
    position = {t: p for p, t in enumerate(order)}
    # the O(p) border table: first/last S value, plus positions for the B ⊆ C check
    table = []
    for old in previous:
        at = sorted(position[t] for t in old)
        table.append((s[at[0]], s[at[-1]], at[0], at[-1], old))
    changes = np.concatenate([[0], np.cumsum(s[1:] != s[:-1])])  # distinct(j..i) = c[i]-c[j]+1

    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    back = np.zeros(n + 1, dtype=np.int64)
    trace = Trace()
    for i in range(n):
        j = np.arange(i + 1)
        lo, hi = s[: i + 1], s[i]
        discard = np.zeros(i + 1, dtype=bool)
        covers = np.zeros(i + 1, dtype=bool)
        for first, last, p_min, p_max, _ in table:
            if hi < first:
                continue  # every candidate ending at i lies below B
            disjoint = lo > last
            # the paper compares borders only; B ⊆ C (by position) settles tied borders
            cover = (lo <= first) & (hi >= last) & (j <= p_min) & (p_max <= i)
            discard |= ~disjoint & ~cover
            covers |= cover
        trace.candidates += i + 1
        trace.overlap_discards += int(discard.sum())
        passed = ~discard
        for start in np.flatnonzero(passed & covers):
            trace.breach_tests += 1
            candidate = frozenset(order[start: i + 1])
            if any(breach(old, candidate, values, k, e) for _, _, p_min, p_max, old in table
                   if start <= p_min and p_max <= i):
                trace.breaches += 1
                passed[start] = False
        spread = hi - lo
        passed &= (changes[i] - changes[: i + 1] + 1 >= k) & (spread >= e)
        cost = np.where(passed, best[: i + 1] + spread, np.inf)
        start = int(np.argmin(cost))  # j runs 1..i with a strict '<': the longest group wins ties
        if cost[start] < best[i + 1]:
            best[i + 1], back[i + 1] = cost[start], start
    if not np.isfinite(best[n]):
        return None, trace
    return _groups(order, back), trace


def naive_ke(values: Mapping[int, float], releases: Sequence[Partitioning], k: int,
             e: float) -> Partitioning | None:
    """NAIVE_KE: the static programme whose (k,e)-valid candidates must not breach
    (Definition 5) any partition of any earlier release; None when none is left."""
    check_params(k, e)
    _require_known(releases, values)
    order = sorted_ids(values)
    n = len(order)
    s = np.array([values[t] for t in order], dtype=np.float64)
    position = {t: p for p, t in enumerate(order)}
    olds = [_Old(np.array(sorted(position[t] for t in old)), s, k, e)
            for release in releases for old in release]
    changes = np.concatenate([[0], np.cumsum(s[1:] != s[:-1])])

    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    back = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        j = np.flatnonzero((changes[i] - changes[: i + 1] + 1 >= k) & (s[i] - s[: i + 1] >= e))
        for old in olds:
            if not j.size:
                break
            j = j[~old.breached(j, i, k, e)]
        if not j.size:
            continue
        cost = best[j] + (s[i] - s[j])
        pick = j.size - 1 - int(np.argmin(cost[::-1]))  # j runs i..1: shortest group wins ties
        if cost[pick] < best[i + 1]:
            best[i + 1], back[i + 1] = cost[pick], j[pick]
    if not np.isfinite(best[n]):
        return None
    return _groups(order, back)


class _Old:
    """An old partition A, for Definition 5 against every candidate C = [j..i] at once."""

    def __init__(self, at: np.ndarray, s: np.ndarray, k: int, e: float):
        self.at, self.s = at, s
        self.v = s[at]
        self.m = len(at)
        self.changes = np.concatenate([[0], np.cumsum(self.v[1:] != self.v[:-1])])
        self.valid = ke_valid(self.v.tolist(), k, e)
        n = len(s)
        outside = np.ones(n, dtype=bool)
        outside[at] = False
        self.outside = outside
        # the next position outside A (n if none), and the next one with the same value
        self.next_out = np.full(n + 1, n)
        for p in range(n - 1, -1, -1):
            self.next_out[p] = p if outside[p] else self.next_out[p + 1]
        after = self.next_out[np.minimum(np.arange(n) + 1, n)]
        self.next_same = np.where((after < n) & (s[np.minimum(after, n - 1)] == s), after, n)
        self.last_out = np.full(n, -1)
        for p in range(n):
            self.last_out[p] = p if outside[p] else (self.last_out[p - 1] if p else -1)

    def _distinct(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Distinct values of A's members lo..hi-1 (rank order), 0 when empty."""
        top = np.maximum(hi - 1, 0)
        return np.where(hi > lo, self.changes[top] - self.changes[np.minimum(lo, top)] + 1, 0)

    def breached(self, j: np.ndarray, i: int, k: int, e: float) -> np.ndarray:
        """Whether each candidate j..i, already (k,e)-valid, breaches A."""
        if self.valid and self.at[0] > i:
            return np.zeros(j.size, dtype=bool)  # C misses A: A − C = A, C − A = C, both valid
        v, m = self.v, self.m
        lower = np.searchsorted(self.at, j)              # A's members before C
        upper = int(np.searchsorted(self.at, i, side="right"))  # A's members up to i

        def bad(count, distinct, spread):
            return (count > 0) & ((distinct < k) | (spread < e))

        # A ∩ C: A's members lower..upper-1
        inside = upper - lower
        top = max(upper - 1, 0)
        spread = v[top] - v[np.minimum(lower, top)]
        found = bad(inside, self._distinct(lower, np.full_like(lower, upper)), spread)
        # A − C: A's members before lower and from upper on.  Were a value in both runs, C
        # (between them) would hold that value only, so be valid only for k ≤ 1, never failed
        outside = lower + (m - upper)
        distinct = self._distinct(np.zeros_like(lower), lower) + self._distinct(
            np.full_like(lower, upper), np.full_like(lower, m))
        low = np.where(lower > 0, v[0], v[min(upper, m - 1)])
        high = v[m - 1] if upper < m else v[np.maximum(lower - 1, 0)]
        found |= bad(outside, distinct, high - low)
        # C − A: the positions of j..i outside A
        flag = self.outside[: i + 1] & (self.next_same[: i + 1] > i)
        distinct = np.cumsum(flag[::-1])[::-1][j]
        first = self.next_out[j]
        last = self.last_out[i]
        spread = np.where(first <= i, self.s[last] - self.s[np.minimum(first, len(self.s) - 1)], 0)
        found |= bad((first <= i).astype(np.int64), distinct, spread)
        return found


def _require_known(releases: Sequence[Partitioning], values: Mapping[int, float]) -> None:
    for release in releases:
        for old in release:
            missing = old - values.keys()
            if missing:
                raise ValueError(f"{len(missing)} tuple(s) of an earlier release are gone "
                                 f"(e.g. {min(missing)}): tables only grow")


def _groups(order: Sequence[int], back: np.ndarray) -> Partitioning:
    groups, i = [], len(order)
    while i > 0:
        j = int(back[i])
        groups.append(frozenset(order[j:i]))
        i = j
    return groups[::-1]  # in S order
