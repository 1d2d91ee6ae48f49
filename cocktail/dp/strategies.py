"""NOQ, NOT and the optimized strategy, with their data-independent expected errors.

Every strategy is a matrix mechanism: it measures y = A x + Lap(Δ_A / α) for a strategy matrix A
over some exact vector x, then answers the workload as R y with R A = the workload (so the
answers are unbiased).  The variance of answer i is 2 (Δ_A / α)^2 ||R_i||^2: it depends on the
workload and α only, never on the data, so choosing the strategy costs no privacy.

* **NOQ** (noise on queries): A = W over the counting-query answers x = c, R = I, and Δ_A is
  the honest set-valued sensitivity of W (:mod:`.sensitivity`).
* **NOT** (noise on terms): A = I over c, R = W.  Δ_A is how many counting queries one record
  can satisfy at once — not 1, as the paper assumes.
* **optimized**: matrix mechanisms over the 2^u presence-pattern cells x = h, where one record
  is in exactly one cell, with least-squares reconstruction R = W_cells A^+.  The candidate
  strategies are the cell histogram (A = I, Δ = 1), the counting queries (A = C, NOT's
  measurements), the workload itself (A = W C, NOQ's), and counting queries plus histogram
  stacked; the one with the lowest expected error wins.  As NOQ's and NOT's own measurements
  are candidates, the optimized error is never above theirs.  Past ``MAX_CELL_TERMS`` workload
  terms there are no cells to work on, and the optimized strategy is the better of NOQ and NOT.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .sensitivity import satisfiable_sensitivity
from .workload import Matrices


@dataclass(frozen=True)
class Strategy:
    name: str
    space: str            # "counts" (x = c) or "cells" (x = h)
    A: np.ndarray         # noqa: N815 - strategy matrix
    R: np.ndarray         # noqa: N815 - reconstruction
    sensitivity: float
    sensitivity_exact: bool = True

    def variances(self, alpha: float) -> np.ndarray:
        """Expected squared error of each answer at privacy parameter ``alpha``."""
        return 2 * (self.sensitivity / alpha) ** 2 * (self.R ** 2).sum(axis=1)

    def expected_error(self, alpha: float) -> float:
        """Expected total squared error over the workload."""
        return float(self.variances(alpha).sum())

    def answer(self, exact: np.ndarray, alpha: float,
               laplace: Callable[[list[float], float], list[float]]) -> np.ndarray:
        """Noisy answers from the exact vector of this strategy's space."""
        measured = self.A @ exact
        noisy = np.array(laplace(measured.tolist(), self.sensitivity / alpha))
        return self.R @ noisy


def noq(m: Matrices) -> Strategy:
    value = satisfiable_sensitivity(m.W, m)
    return Strategy("NOQ", "counts", m.W, np.eye(len(m.W)), value.value, value.exact)


def noT(m: Matrices) -> Strategy:  # noqa: N802 - the paper's name
    identity = np.eye(m.W.shape[1])
    value = satisfiable_sensitivity(identity, m)
    return Strategy("NOT", "counts", identity, m.W, value.value, value.exact)


def _cell_strategy(name: str, A: np.ndarray, m: Matrices) -> Strategy:  # noqa: N803
    sensitivity = float(np.abs(A).sum(axis=0).max())  # one record moves one cell by one
    return Strategy(name, "cells", A, m.W_cells @ np.linalg.pinv(A), sensitivity)


def cell_candidates(m: Matrices) -> list[Strategy]:
    cells = np.eye(m.C.shape[1])
    return [_cell_strategy("cells: histogram", cells, m),
            _cell_strategy("cells: counting queries", m.C, m),
            _cell_strategy("cells: workload", m.W_cells, m),
            _cell_strategy("cells: counting queries + histogram", np.vstack([m.C, cells]), m)]


@dataclass(frozen=True)
class Choice:
    noq: Strategy
    not_: Strategy
    optimized: Strategy

    def report(self, alpha: float) -> dict[str, float]:
        return {"NOQ": self.noq.expected_error(alpha), "NOT": self.not_.expected_error(alpha),
                "optimized": self.optimized.expected_error(alpha),
                "optimized_strategy": self.optimized.name}


def choose(m: Matrices) -> Choice:
    """NOQ, NOT and the optimized strategy for a workload (errors scale as 1/α², so α plays
    no part in the choice).  The choice depends only on the workload's shape, never on term
    names, so ``count(x)`` for every x shares one search."""
    return _choose(_ByShape(m))


@dataclass(frozen=True, eq=False)
class _ByShape:
    m: Matrices

    def __hash__(self) -> int:
        return hash(self.m.shape)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ByShape) and self.m.shape == other.m.shape


@lru_cache(maxsize=64)  # at most ~1 MB each (256 cells), so memory stays bounded
def _choose(keyed: _ByShape) -> Choice:
    m = keyed.m
    plain = [noq(m), noT(m)]
    candidates = plain + (cell_candidates(m) if m.cells_feasible else [])
    best = min(candidates, key=lambda s: s.expected_error(1.0))
    return Choice(plain[0], plain[1], best)
