"""L1 sensitivity of a batch of linear queries over set-valued data.

Neighbouring datasets differ by one record, and one record holding terms T satisfies *every*
counting query whose terms lie in T, all at once.  So the sensitivity of W is
max over term sets T of ||W 1_{S(T)}||_1 with S(T) = {j : terms(q_j) ⊆ T}, not the paper's
"largest column sum", which assumes each record satisfies at most one counting query.  Only the
workload's own terms matter, so T ranges over the 2^u subsets of them; past ``MAX_EXACT_TERMS``
the safe upper bound sum_ij |W_ij| is used and reported as such.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_EXACT_TERMS = 22
_BLOCK = 1 << 14


@dataclass(frozen=True)
class Sensitivity:
    value: float
    exact: bool  # False: an upper bound (too many terms to enumerate)


def satisfiable_sensitivity(W: np.ndarray, masks: np.ndarray, n_terms: int) -> Sensitivity:  # noqa: N803
    """max_T ||W 1_{S(T)}||_1 for the counting queries' term ``masks`` over ``n_terms`` terms."""
    if n_terms > MAX_EXACT_TERMS:
        return Sensitivity(float(np.abs(W).sum()), exact=False)
    best = 0.0
    for start in range(0, 1 << n_terms, _BLOCK):
        subsets = np.arange(start, min(start + _BLOCK, 1 << n_terms), dtype=np.int64)
        satisfied = ((masks[None, :] & ~subsets[:, None]) == 0).astype(float)  # T x m
        best = max(best, float(np.abs(satisfied @ W.T).sum(axis=1).max()))
    return Sensitivity(best, exact=True)
