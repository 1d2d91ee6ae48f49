"""L1 sensitivity of a batch of linear queries over set-valued data.

Neighbouring datasets differ by one record, and one record holding terms T satisfies *every*
counting query whose terms lie in T, all at once.  So the sensitivity of W is
max over term sets T of ||W 1_{S(T)}||_1 with S(T) = {j : terms(q_j) ⊆ T}, not the paper's
"largest column sum", which assumes each record satisfies at most one counting query.  Only the
workload's own terms matter, so T ranges over the 2^u subsets of them.  The enumeration costs
2^u x (counting queries); past ``MAX_EXACT_WORK`` the safe upper bound sum_ij |W_ij| is used
and reported as such, so no request can make it run for long.  The L2 sensitivity (the Gaussian
mechanism's, under zCDP) is max over T of ||W 1_{S(T)}||_2, enumerated alike; its bound is
the lesser of the column norms' sum and ||W||_2 √q (q counting queries), each at least
||W x||_2 for every x in {0, 1}^q.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .workload import Matrices

MAX_EXACT_WORK = 1 << 23  # subsets x counting queries: about 0.1 s here
_BLOCK = 1 << 14


@dataclass(frozen=True)
class Sensitivity:
    value: float
    exact: bool  # False: an upper bound (too many terms to enumerate)


def exact_feasible(n_terms: int, n_counts: int) -> bool:
    return (1 << n_terms) * n_counts <= MAX_EXACT_WORK


def satisfiable_sensitivity(W: np.ndarray, m: Matrices, norm: int = 1  # noqa: N803
                            ) -> Sensitivity:
    """max_T ||W 1_{S(T)}||_norm (1 or 2) over the counting queries of ``m`` (W has one
    column each)."""
    n_terms = len(m.terms)
    if not exact_feasible(n_terms, W.shape[1]):
        return Sensitivity(_bound(W, norm), exact=False)
    masks, best = m.masks, 0.0
    for start in range(0, 1 << n_terms, _BLOCK):
        subsets = np.arange(start, min(start + _BLOCK, 1 << n_terms), dtype=np.int64)
        satisfied = ((masks[None, :] & ~subsets[:, None]) == 0).astype(float)  # T x m
        best = max(best, float(np.linalg.norm(satisfied @ W.T, ord=norm, axis=1).max()))
    return Sensitivity(best, exact=True)


def _bound(W: np.ndarray, norm: int) -> float:  # noqa: N803
    """An upper bound of ||W x||_norm over x in {0, 1}^q."""
    if norm == 1:
        return float(np.abs(W).sum())
    columns = float(np.linalg.norm(W, axis=0).sum())
    return min(columns, float(np.linalg.norm(W, ord=2)) * np.sqrt(W.shape[1]))
