"""NOQ, NOT and the optimized strategy, with their data-independent expected errors.

Every strategy is a matrix mechanism: it measures y = A x + noise for a strategy matrix A over
some exact vector x, then answers the workload as R y with R A = the workload (so the answers
are unbiased).  Under pure differential privacy (α, the default) the noise is Lap(Δ_A / α) with
Δ_A the L1 sensitivity, and answer i has variance 2 (Δ_A / α)^2 ||R_i||^2; under ρ-zero-
concentrated DP ("zcdp") it is N(0, Δ_A² / 2ρ) with Δ_A the L2 sensitivity, and the variance
Δ_A² / (2ρ) ||R_i||^2.  Either depends on the workload and the budget only, never on the data,
so choosing the strategy costs no privacy.  A strategy is built for one definition: its
sensitivity is in that definition's norm, and the choice is made in its variances.

* **NOQ** (noise on queries): A = W over the counting-query answers x = c, R = I, and Δ_A is
  the honest set-valued sensitivity of W (:mod:`.sensitivity`).
* **NOT** (noise on terms): A = I over c, R = W.  Δ_A is how many counting queries one record
  can satisfy at once — not 1, as the paper assumes.
* **optimized**: matrix mechanisms over the 2^u presence-pattern cells x = h, where one record
  is in exactly one cell, with least-squares reconstruction R = W_cells A^+.  The candidate
  strategies are the cell histogram (A = I, Δ = 1), the counting queries (A = C, NOT's
  measurements), the workload itself (A = W C, NOQ's), and counting queries plus histogram
  stacked (the *fixed* candidates), and HDMM's p-Identity and weighted marginals searched for
  this workload (:mod:`.optimize`), penalised for any query above the best fixed candidate's
  variance, and the bounded problem solved when the penalty leaves one above.  Under
  "per-query" a searched candidate may win only if no query's variance is above the best
  fixed candidate's; under "total" (the default) any may (the search unbounded).  The lowest
  total wins.  As NOQ's and NOT's own measurements are candidates, the optimized error is never
  above theirs.  Past ``MAX_CELL_TERMS`` workload terms the fixed cell candidates cost too much
  (a pseudo-inverse over 2^u columns): the candidates are NOQ, NOT and weighted marginals
  searched over the conjunctive counts of term subsets (the "subsets" space, :mod:`.marginals`),
  while those subsets number at most ``marginals.MAX_SUBSETS``, and under pure DP up to
  ``MAX_GROUPED_CELL_TERMS`` p-Identity over the groups of cells, its least squares in closed
  form; past that, the better of NOQ and NOT.  Under zCDP up to ``MAX_GROUPED_CELL_TERMS``
  terms the least-total strategy over the cells is not searched but solved, certified against
  its dual's bound (:func:`.optimize.gaussian_factorization`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..blas import one_blas_thread
from ..extras import MissingExtra
from . import marginals, optimize
from .intervals import laplace_sum_ladder
from .limits import LIMITS
from .noise import DEFINITIONS, PURE, ZCDP, gaussian, laplace
from .objectives import DEFAULT_OBJECTIVE, OBJECTIVES, PER_QUERY
from .sensitivity import satisfiable_sensitivity
from .workload import Matrices

# The sensitivity's norm under each privacy definition (dp/noise.py).
_NORM = {PURE: 1, ZCDP: 2}

# The whole choice's CPU time (this thread's), whatever the units say: with the fixed
# candidates before and the chosen strategies' pseudo-inverses after, a choice stays under
# 1.5 CPU-s on any shape the limits allow (tests/test_dp_strategies.py).
SEARCH_CPU_SECONDS = 1.2


@dataclass(frozen=True)
class Strategy:
    name: str
    space: str            # "counts" (x = c), "cells" (x = h) or "subsets" (x = their counts)
    A: np.ndarray         # noqa: N815 - strategy matrix
    R: np.ndarray         # noqa: N815 - reconstruction
    sensitivity: float    # L1 under "pure", L2 under "zcdp"
    sensitivity_exact: bool = True
    subsets: tuple[int, ...] = ()  # "subsets": the terms of each count, bitmasks over m.terms
    definition: str = PURE

    def noise_scale(self, budget: float) -> float:
        """The Laplace scale Δ/α, or the Gaussian's standard deviation Δ/√(2ρ)."""
        if self.definition == PURE:
            return self.sensitivity / budget
        return self.sensitivity / math.sqrt(2 * budget)

    def variances(self, budget: float) -> np.ndarray:
        """Expected squared error of each answer at privacy parameter ``budget`` (α or ρ)."""
        spread = 2 if self.definition == PURE else 1  # Laplace variance 2b², Gaussian σ²
        return spread * self.noise_scale(budget) ** 2 * (self.R ** 2).sum(axis=1)

    def draws(self) -> np.ndarray:
        """How many noise draws each answer adds up (the non-zero entries of its row of R):
        one draw is exactly Laplace (or Gaussian), several are not (:mod:`.intervals`)."""
        return np.count_nonzero(self.R, axis=1)

    @cached_property
    def _unit_quantiles(self) -> list[list[float] | None]:
        """Each Laplace sum's exact half-widths at the intervals' ladder, at a noise scale
        of 1 (:mod:`.intervals`); None where one draw or Gaussian noise has a closed form.
        Kept with the strategy: computed once, where it is chosen (:mod:`.search`)."""
        return [laplace_sum_ladder(row) if self.definition == PURE and draws > 1 else None
                for row, draws in zip(self.R, self.draws())]

    def noise_quantiles(self, budget: float) -> list[list[float] | None]:
        """Each answer's noise half-widths at the intervals' ladder, at ``budget``."""
        scale = self.noise_scale(budget)
        return [None if q is None else [h * scale for h in q] for q in self._unit_quantiles]

    def expected_error(self, budget: float) -> float:
        """Expected total squared error over the workload."""
        return float(self.variances(budget).sum())

    def answer(self, exact: np.ndarray, budget: float,
               noise: Callable[[list[float], float], list[float]] | None = None) -> np.ndarray:
        """Noisy answers from the exact vector of this strategy's space; ``noise`` (values,
        scale) by default OpenDP's sampler of the definition."""
        noise = noise or (laplace if self.definition == PURE else gaussian)
        measured = self.A @ exact
        return self.R @ np.array(noise(measured.tolist(), self.noise_scale(budget)))


def noq(m: Matrices, definition: str = PURE) -> Strategy:
    value = satisfiable_sensitivity(m.W, m, _NORM[definition])
    return Strategy("NOQ", "counts", m.W, np.eye(len(m.W)), value.value, value.exact,
                    definition=definition)


def noT(m: Matrices, definition: str = PURE) -> Strategy:  # noqa: N802 - the paper's name
    identity = np.eye(m.W.shape[1])
    value = satisfiable_sensitivity(identity, m, _NORM[definition])
    return Strategy("NOT", "counts", identity, m.W, value.value, value.exact,
                    definition=definition)


def _cell_strategy(name: str, A: np.ndarray, m: Matrices,  # noqa: N803
                   definition: str = PURE, R: np.ndarray | None = None) -> Strategy:  # noqa: N803
    """``R``: the least-squares reconstruction where it is known in closed form."""
    # one record moves one cell by one: the largest column's norm
    sensitivity = float(np.linalg.norm(A, ord=_NORM[definition], axis=0).max())
    return Strategy(name, "cells", A, m.W_cells @ np.linalg.pinv(A) if R is None else R,
                    sensitivity, definition=definition)


def cell_candidates(m: Matrices, definition: str = PURE) -> list[Strategy]:
    cells = np.eye(m.C.shape[1])
    return [_cell_strategy(name, A, m, definition) for name, A in (
        ("cells: histogram", cells), ("cells: counting queries", m.C),
        ("cells: workload", m.W_cells),
        ("cells: counting queries + histogram", np.vstack([m.C, cells])))]


def _unbiased(strategy: Strategy, m: Matrices, target: np.ndarray | None = None) -> bool:
    """R A = W over cells (or ``target``, W over the strategy's own space): A measures
    everything the workload asks (a searched A may not)."""
    target = m.W_cells if target is None else target
    scale = max(1.0, float(np.abs(target).max()))
    return bool(np.allclose(strategy.R @ strategy.A, target, atol=1e-7 * scale))


def searched_candidates(m: Matrices, bound: np.ndarray | None, budget: optimize.Budget,
                        seed: int = 0, definition: str = PURE) -> list[Strategy]:
    """Under pure DP up to ``MAX_CELL_TERMS`` terms: HDMM's weighted marginals over the u
    terms (a third of the budget) and p-Identity over the groups of cells with equal columns
    (p in {G/16, n, q, 2q}: G groups, n queries, q counting queries); up to
    ``MAX_GROUPED_CELL_TERMS``, weighted marginals over term subsets and p-Identity over the
    groups; under zCDP up to ``MAX_GROUPED_CELL_TERMS``, the least-total strategy over the
    groups of cells (solved) and weighted marginals over term subsets; past them, weighted
    marginals over term subsets (:mod:`.marginals`).  Found for this
    workload, their queries' variances (at a budget of 1) held under ``bound`` if given
    (penalised, then bounded or unpenalised with what the budget has left)."""
    with one_blas_thread():
        if definition == ZCDP and m.groups_feasible:
            return _searched_gaussian(m, bound, budget, seed)
        if definition == ZCDP or not m.groups_feasible:
            return _searched_subsets(m, bound, budget, seed, definition)
        if not m.cells_feasible:
            return _searched_past_cells(m, bound, budget, seed)
        return _searched(m, bound, budget, seed)


# The searches minimise Δ² Σ a²/λ (L1 or L2 Δ): the variance at a budget of 1 is that times
# the Laplace's 2, or the Gaussian's ½ (σ² = Δ² / 2ρ).
VARIANCE_PER_LOSS = {PURE: 2.0, ZCDP: 0.5}


def _searched_subsets(m: Matrices, bound: np.ndarray | None, budget: optimize.Budget,
                      seed: int, definition: str) -> list[Strategy]:
    scale = float(np.abs(m.W).max()) or 1.0  # as in _searched
    loss_bound = None if bound is None else bound / VARIANCE_PER_LOSS[definition] / scale ** 2
    found = marginals.search(m, budget, seed, loss_bound, scale, l2=definition == ZCDP)
    if found is None:
        return []
    strategy = subsets_strategy(found, m, definition)
    return [strategy] if _unbiased(strategy, m, _over_subsets(m, strategy.subsets)) else []


def subsets_strategy(found: marginals.Found, m: Matrices, definition: str = PURE) -> Strategy:
    """The weighted marginals of ``found`` over the counts of their subsets, least squares;
    Δ is Σθ (L1) or √Σθ² (L2): one record moves one cell of each marginal by θ."""
    A, columns = marginals.matrix(found)  # noqa: N806
    target = _over_subsets(m, columns.tolist())
    # R = W A⁺ = W (AᵀA)⁻¹ Aᵀ: AᵀA is small (one row and column per subset)
    R = (A @ np.linalg.solve(A.T @ A, target.T)).T  # noqa: N806
    return Strategy(f"subsets: weighted marginals ({len(found.theta)})", "subsets", A, R,
                    float(np.linalg.norm(found.theta, ord=_NORM[definition])),
                    subsets=tuple(columns.tolist()), definition=definition)


def _over_subsets(m: Matrices, subsets) -> np.ndarray:
    """W over the counts of ``subsets``: each counting query is the count of its own terms."""
    position = {mask: i for i, mask in enumerate(subsets)}
    W = np.zeros((len(m.W), len(position)))  # noqa: N806
    W[:, [position[mask] for mask in m.masks.tolist()]] = m.W
    return W


def _searched_gaussian(m: Matrices, bound: np.ndarray | None, budget: optimize.Budget,
                       seed: int) -> list[Strategy]:
    """Up to ``MAX_GROUPED_CELL_TERMS`` terms under zCDP: the least-total strategy over the
    groups of cells, certified (:func:`.optimize.gaussian_factorization`; half the budget),
    and weighted marginals over term subsets (the rest): the least total may leave a query
    above its bound under "per-query", where marginals may not."""
    half_units = budget.units // 2
    share = budget.portion(half_units)
    groups, index = optimize.distinct_columns(m.W_cells)
    found_optimum = optimize.gaussian_factorization(groups, share)
    budget.settle(share, half_units)
    found = _searched_subsets(m, bound, budget, seed, ZCDP)
    if found_optimum is not None:
        A = found_optimum[0]  # noqa: N806 - over the groups; each cell takes its group's column
        lifted = np.hstack([A, np.zeros((len(A), 1))])[:, index]
        strategy = _cell_strategy("cells: gaussian optimum", lifted, m, ZCDP,
                                  R=groups @ np.linalg.pinv(A))
        found += [strategy] if _unbiased(strategy, m) else []
    return found


# p-Identity's rows past the cell space: on 9 and 10 terms the best p found was 8 to 24
# (docs/dp.md, "Past 8 terms"), and each p more costs every evaluation.
PAST_CELLS_PS = (12, 24)


def _scaled(m: Matrices, bound: np.ndarray | None) -> tuple[np.ndarray, float, np.ndarray | None]:
    """The cell workload scaled to entries of at most 1, the scale, and the bound as
    :mod:`.optimize` takes it (without the Laplace variance's 2): the best strategy is the same
    for W and W / s (variances scale by 1/s²), and weights like 857523 drove the unscaled
    search's Θ to overflow."""
    scale = float(np.abs(m.W_cells).max()) or 1.0
    return m.W_cells / scale, scale, None if bound is None else bound / 2 / scale ** 2


def _searched_past_cells(m: Matrices, bound: np.ndarray | None, budget: optimize.Budget,
                         seed: int) -> list[Strategy]:
    """9 or 10 terms, pure DP: weighted marginals over term subsets (a quarter of the budget)
    and p-Identity over the groups of cells, searched over x = φ² (the rest)."""
    quarter = budget.units // 4
    share = budget.portion(quarter)
    found = _searched_subsets(m, bound, share, seed, PURE)
    budget.settle(share, quarter)
    V, scale, half = _scaled(m, bound)  # noqa: N806
    groups, index = optimize.distinct_columns(V)
    theta = optimize.p_identity(groups, list(PAST_CELLS_PS), budget, seed, half, squared=True)
    if theta is not None:
        strategy = _p_identity_strategy(theta, groups * scale, index, m)
        found += [strategy] if _unbiased(strategy, m) else []
    return found


def _searched(m: Matrices, bound: np.ndarray | None, budget: optimize.Budget,
              seed: int) -> list[Strategy]:
    V, scale, half = _scaled(m, bound)  # noqa: N806
    u = len(m.terms)
    found = []
    third = budget.units // 3
    share = budget.portion(third)
    theta = optimize.marginals(V, u, share, seed, half)
    budget.settle(share, third)
    if theta is not None:
        theta = np.where(theta > 1e-4 * theta.max(), theta, 0)  # drop the negligible marginals
        found.append(_cell_strategy(f"cells: weighted marginals ({np.count_nonzero(theta)})",
                                    optimize.marginals_matrix(theta, u), m))
    groups, index = optimize.distinct_columns(V)
    ps = sorted({max(1, groups.shape[1] // 16), len(V), m.C.shape[0], 2 * m.C.shape[0]})
    theta = optimize.p_identity(groups, ps, budget, seed, half)
    weights = groups * scale
    if theta is not None:
        found.append(_p_identity_strategy(theta, weights, index, m))
    if half is not None and (theta is None or not within(found[-1], bound)):
        # the penalised optimum is over the bound: what remains of the budget goes to the
        # bounded problem itself
        theta = optimize.bounded_p_identity(groups, ps, budget, seed, half)
        if theta is not None:
            found.append(_p_identity_strategy(theta, weights, index, m, " bounded"))
    elif half is not None:
        # within it: the rest goes to the unpenalised search, whose optimum may meet the bound
        # too and be lower (the penalty's margin steers the search away from some such)
        theta = optimize.p_identity(groups, ps, budget, seed + 1)
        if theta is not None:
            found.append(_p_identity_strategy(theta, weights, index, m, " unpenalised"))
    return [s for s in found if _unbiased(s, m)]


def _p_identity_strategy(theta: np.ndarray, groups: np.ndarray, index: np.ndarray,
                         m: Matrices, label: str = "") -> Strategy:
    """[I; Θ] D over the groups (``groups``: the workload over them), lifted to the cells: each
    cell takes its group's column.  The reconstruction over the groups is the cells' too: with
    S summing cells into groups, (A S)⁺ = S⁺ A⁺ and W S S⁺ = W."""
    A = optimize.p_identity_matrix(theta)  # noqa: N806
    # index −1: the zero column, for cells no query asks
    lifted = np.hstack([A, np.zeros((len(A), 1))])[:, index]
    return _cell_strategy(f"cells: p-identity{label} (p={len(theta)})", lifted, m,
                          R=optimize.p_identity_reconstruction(groups, theta, A))


def above(variances: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Which queries' variances are above ``bound`` (beyond rounding)."""
    return np.asarray(variances) > np.asarray(bound) * (1 + 1e-9)


def within(strategy: Strategy, bound: np.ndarray) -> bool:
    """No query's variance (at α = 1) above ``bound``."""
    return not above(strategy.variances(1.0), bound).any()


def optimized(m: Matrices, fixed: Strategy, budget: optimize.Budget,
              objective: str = DEFAULT_OBJECTIVE) -> Strategy:
    """The lowest-total candidate among ``fixed`` and the searched ones (of ``fixed``'s
    definition); under "per-query" only those that keep every query's variance at or below
    ``fixed``'s (the search held under it), under "total" any (the search unbounded)."""
    bound = fixed.variances(1.0) if objective == PER_QUERY else None
    found = searched_candidates(m, bound, budget, definition=fixed.definition)
    allowed = [s for s in found if bound is None or within(s, bound)]
    return min([fixed, *allowed], key=lambda s: s.expected_error(1.0))


@dataclass(frozen=True)
class Choice:
    noq: Strategy
    not_: Strategy
    fixed: Strategy       # the best fixed candidate: no query of ``optimized`` is worse
    optimized: Strategy
    complete: bool = True  # False: a clock stopped the search (its result is not kept)
    search_skipped: str | None = None  # why no strategy was searched (a missing extra)

    def report(self, budget: float) -> dict[str, float]:
        return {"NOQ": self.noq.expected_error(budget), "NOT": self.not_.expected_error(budget),
                "fixed": self.fixed.expected_error(budget), "fixed_strategy": self.fixed.name,
                "optimized": self.optimized.expected_error(budget),
                "optimized_strategy": self.optimized.name,
                **({"search_skipped": self.search_skipped} if self.search_skipped else {})}


def searched(m: Matrices) -> bool:
    """Whether the workload's strategy is searched for (a function of the workload alone).
    Not when neither cells nor term subsets are few enough to work on, nor for one query w:
    any strategy A with w = R A has |w_j| ≤ max|R| Σ_i |A_ij| ≤ ‖R‖ Δ_A, so its variance
    2 Δ_A² ‖R‖² is at least w's own 2 Δ_w² — NOQ's, which is optimal."""
    return len(m.W) > 1 and (m.cells_feasible or marginals.feasible(m))


def most_counts(m: Matrices) -> int:
    """The most conjunctive counts the exact vector of any strategy chosen for ``m`` may take
    (a function of the workload alone): all 2^u cells, or the most any searched family's
    strategy may measure."""
    if m.cells_feasible:
        return 1 << len(m.terms)
    return max([len(m.workload.counts), *([1 << len(m.terms)] if m.groups_feasible else []),
                *map(marginals.most_measured, marginals.families(m))])


def choose(m: Matrices, search_units: int = LIMITS.search_units,
           objective: str = DEFAULT_OBJECTIVE, until: float = math.inf,
           definition: str = PURE) -> Choice:
    """NOQ, NOT and the optimized strategy for a workload under ``definition`` (errors scale
    as 1/α² or 1/ρ, so the budget plays no part in the choice) and ``objective``
    (:data:`OBJECTIVES`).  The choice depends only on the workload's shape, the definition and
    the objective, never on term names.  ``search_units`` bounds
    the search's work (:class:`.optimize.Budget`), backed by ``SEARCH_CPU_SECONDS`` of this
    thread's CPU time for the whole choice and by ``until`` (monotonic).  Nothing is cached
    here: :class:`.search.Searches` keeps and shares the choices."""
    check_objective(objective)
    check_definition(definition)
    with one_blas_thread():
        budget = optimize.Budget(search_units, time.thread_time() + SEARCH_CPU_SECONDS, until)
        plain = [noq(m, definition), noT(m, definition)]
        if not searched(m):
            best = min(plain, key=lambda s: s.expected_error(1.0))
            return Choice(*plain, best, best)
        cells = cell_candidates(m, definition) if m.cells_feasible else []
        fixed = min(plain + cells, key=lambda s: s.expected_error(1.0))
        if search_units <= 0:
            return Choice(*plain, fixed, fixed)  # no units: nothing to search with
        try:
            best = optimized(m, fixed, budget, objective)
        except MissingExtra as missing:  # no [search]: the best fixed candidate, said so
            return Choice(*plain, fixed, fixed, search_skipped=str(missing))
        return Choice(*plain, fixed, best, complete=not budget.cut)


def check_objective(objective: str) -> None:
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}: use one of {', '.join(OBJECTIVES)}")


def check_definition(definition: str) -> None:
    if definition not in DEFINITIONS:
        raise ValueError(f"unknown privacy definition {definition!r}: use one of "
                         f"{', '.join(DEFINITIONS)}")
