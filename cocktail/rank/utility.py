"""What a defense costs the ranking: the paper's average top-k utility loss (Eq. 15), with the
notes' fixes — D' is computed per query and holds the tuples ranked ≤ k (1-based) before or
after, so a full top-k replacement costs (k + 1)/(2k) and a random ranking ≈ 0.5.

U = 1/(|W|·k) · Σ_q 1/|D'_q| · Σ_{t∈D'_q} |min(R_t, k+1) − min(R'_t, k+1)|

U_avg counts every reordering, even among tuples of equal true score; where ties are many (a
categorical table, a query asking a whole tuple back), the undefended top k is itself one draw
among equals.  :func:`score_kept` says instead how good the defended answer is by the true
scores: the share of the true top k's total score that it holds.
"""

from __future__ import annotations

from collections.abc import Sequence


def top_k_loss(before: Sequence[int], after: Sequence[int], k: int) -> float:
    """One query: ``before``/``after`` list tuples best first (at least their top k)."""
    rank_before = {t: r for r, t in enumerate(before[:k], start=1)}
    rank_after = {t: r for r, t in enumerate(after[:k], start=1)}
    shown = rank_before.keys() | rank_after.keys()
    total = sum(abs(rank_before.get(t, k + 1) - rank_after.get(t, k + 1)) for t in shown)
    return total / (k * len(shown))


def average_loss(pairs: Sequence[tuple[Sequence[int], Sequence[int]]], k: int) -> float:
    """U_avg over a workload: the mean of :func:`top_k_loss` over its queries."""
    return sum(top_k_loss(before, after, k) for before, after in pairs) / len(pairs)


def score_kept(true: Sequence[float], before: Sequence[int], after: Sequence[int],
               k: int) -> float:
    """Σ of the true scores of ``after``'s top k over that of ``before``'s (1: as good)."""
    best = sum(true[t] for t in before[:k])
    return sum(true[t] for t in after[:k]) / best if best else 1.0
