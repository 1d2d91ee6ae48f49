"""The tightest convex lower bound on a pure-DP strategy's total variance that depends on the
strategy only through its Gram matrix AᵀA, computed exactly for a workload of few cells
(issue 41: could a bound, not a search, show the per-query figure optimal?).

    python benchmarks/dp_gram_bound.py [--workload "paper batch"] [--iterations 3000]

Why it is a bound.  Scale a strategy A so its L1 sensitivity (the largest column L1 norm) is 1.
Such matrices are convex combinations Σ λ_t E_t of ones with a single ±1 in each column, and
A ↦ AᵀA is operator convex, so AᵀA ⪯ Σ λ_t E_tᵀE_t.  Each E_tᵀE_t is Σ_G s_G s_Gᵀ over the
groups of columns sharing a row, which is the mean of ssᵀ over independent signs per group: a
point of the cut polytope CUT = conv{ssᵀ : s ∈ {±1}ⁿ}.  Every query's variance 2·wᵀ(AᵀA)⁻¹w
falls as AᵀA grows, so min over Y ∈ CUT of 2·tr(W Y⁻¹ Wᵀ) is at most any strategy's total
(per-query bounds only raise it).  Conversely each vertex ssᵀ is a strategy (one row, s), so
nothing convex in AᵀA can be tighter.

How.  Frank-Wolfe over CUT's vertices, every sign vector priced (2ⁿ⁻¹ of them: n ≤ 20 cells),
with an exact line search.  The objective is convex, so f(Y) − ⟨∇f(Y), Y − S⟩, S the best
vertex, is a lower bound at every step: the printed bound holds whatever the iterations.
"""

from __future__ import annotations

import argparse
import sys
from itertools import product

import numpy as np
from scipy.optimize import minimize_scalar

from cocktail.blas import one_thread
from cocktail.dataset import load
from cocktail.dp.workload import Matrices
from cocktail.querylang import parse_batch
from dp_strategies import DATASET, most_frequent, workloads

MAX_CELLS = 20  # every sign vector is priced each step


def total(W: np.ndarray, Y: np.ndarray) -> float:  # noqa: N803
    """2·tr(W Y⁻¹ Wᵀ): the total Laplace variance at α = 1 of a Gram matrix Y."""
    return 2.0 * float(np.trace(W @ np.linalg.solve(Y, W.T)))


def gram_bound(W: np.ndarray, iterations: int) -> tuple[float, float]:  # noqa: N803
    """(best lower bound, the total at the last point) over CUT for workload ``W``."""
    n = W.shape[1]
    signs = np.array([(1, *rest) for rest in product((1, -1), repeat=n - 1)], dtype=float)
    Y = np.eye(n)  # noqa: N806  (the histogram: the mean of ssᵀ over all signs)
    best = -np.inf
    for _ in range(iterations):
        inverse_w = np.linalg.solve(Y, W.T)
        G = inverse_w @ inverse_w.T  # noqa: N806  (−∇f / 2: f falls along G)
        scores = np.einsum("ij,jk,ik->i", signs, G, signs)
        s = signs[int(np.argmax(scores))]
        value = total(W, Y)
        gap = 2.0 * (scores.max() - float(np.sum(G * Y)))  # ⟨∇f, Y − ssᵀ⟩
        best = max(best, value - gap)
        if gap <= 1e-9 * value:
            break
        vertex = np.outer(s, s)
        step = minimize_scalar(lambda g: total(W, (1 - g) * Y + g * vertex),
                               bounds=(0.0, 1.0), method="bounded",
                               options={"xatol": 1e-10}).x
        Y = (1 - step) * Y + step * vertex  # noqa: N806
    return best, total(W, Y)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="paper batch")
    parser.add_argument("--iterations", type=int, default=3000)
    args = parser.parse_args()
    one_thread()
    texts = workloads(most_frequent(load(DATASET).records, 32))
    if args.workload not in texts:
        parser.error(f"--workload: one of {', '.join(texts)}")
    W = Matrices(parse_batch(texts[args.workload])).W_cells  # noqa: N806
    if W.shape[1] > MAX_CELLS:
        parser.error(f"{args.workload} has {W.shape[1]} cells; at most {MAX_CELLS} are priced")
    bound, reached = gram_bound(W, args.iterations)
    print(f"{args.workload}: {W.shape[1]} cells; the Gram-matrix bound on the total variance at "
          f"α = 1 is at least {bound:.2f} (Frank-Wolfe's last point {reached:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
