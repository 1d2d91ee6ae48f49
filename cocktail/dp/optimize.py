"""Optimized cell strategies: HDMM's two families (McKenna et al., VLDB 2018), searched here.

Both minimise the total variance Σ_i v_i, v_i = Δ² ‖(V A⁺)_i‖² for the cell workload V (n x N),
plus a penalty μ Σ_i max(0, v_i − b_i)² / b_i for each query over its bound b (the best fixed
candidate's variance, a little lowered), by L-BFGS-B over non-negative parameters.  The
penalty's gradient is the variances' gradient with query i weighted by
c_i = 1 + 2μ max(0, v_i − b_i) / b_i, so each family needs only a weighted gradient:

* **p-Identity**: A = [I; Θ] D with Θ ≥ 0 (p x N) and D scaling every column to L1 norm 1, so
  Δ = 1. With B = V D⁻¹ and Woodbury, ‖V A⁺‖² = ‖B‖² − tr(G K⁻¹ Gᵀ), G = BΘᵀ, K = I + ΘΘᵀ:
  O(n N p) per evaluation.
* **weighted marginals**: θ_S ≥ 0 for each subset S of the u terms, A stacks θ_S times the
  histogram of the cells' patterns restricted to S, so Δ = Σ θ_S. AᵀA is diagonal in the
  Walsh–Hadamard basis χ_T with eigenvalue λ_T = Σ_{S ⊇ T} θ_S² 2^(u−|S|), so
  ‖V A⁺‖² = Σ_T ‖V χ_T‖² / (N λ_T): O(u 2^u) per evaluation.

Under zCDP the total needs no search: over the cells (or their groups) its optimum over every
strategy is a convex problem with a certified solution, :func:`gaussian_factorization`.

When the penalised optimum still leaves a query over its bound, :func:`bounded_p_identity`
solves the bounded problem itself (SLSQP, each query's variance ≤ its bound a constraint with
its analytic Jacobian), charged to the same budget.

Each family is searched by :func:`search`: a short run from many starting points, then the best
few refined.  The search is deterministic (starting points are structured, or hashed from a
seed: they are not noise, and come from no sampler; the privacy code's only randomness is
OpenDP's) and bounded by a :class:`Budget` of work units charged for every run's start and
every evaluation (see :func:`_units`), and, whatever the units misjudge, by a ceiling on the
search thread's CPU time and a wall-clock time to stop at.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..extras import require

Loss = Callable[[np.ndarray], tuple[float, np.ndarray]]
_ITERATIONS = 1000  # of a refinement; the budget bounds them all
_PENALTY = 1000.0  # μ: high, or the optimum keeps queries 1.3x over their bound
_MARGIN = 0.97     # b = 0.97 x the bound: the penalised optimum overshoots b a little
_SCREEN = 20       # iterations of a screening run: enough to tell the basins apart
_KEEP = 4          # screened points refined to convergence
_FTOL = 1e-13      # scipy's default (2e-9) stops on the flat valleys of p-Identity: 208 not 205
_SEEDED = 24       # seeded starting points per objective
_START_SCALE = 0.01  # bounded search: starts this near the histogram (0.1: most never get feasible)
_SLSQP_ITERATIONS = 200
_THETA_MAX = 1e3   # bounded search: past it K = I + ΘΘᵀ is too ill-conditioned to trust a bound


def start_point(seed: int, start: int, size: int) -> np.ndarray:
    """A fixed point of [0, 1)^size, spread like a uniform draw: SHAKE-256 of (seed, start)."""
    words = hashlib.shake_256(f"{seed}:{start}".encode()).digest(8 * size)
    return np.frombuffer(words, dtype="<u8") / 2.0 ** 64


class Exhausted(Exception):
    """The search's budget is spent."""


@dataclass
class Budget:
    """Work units left, and two clocks that stop the search whatever is left: the search
    thread's CPU time (``time.thread_time``) and the monotonic time.  The units make a search
    the same on every machine and under any load (so its result can be cached); the clocks
    bound it when the units misjudge the machine, and a search they stop is ``cut``: its
    result depends on the machine, and is used but not kept."""

    units: int
    cpu_until: float = math.inf  # time.thread_time() of the searching thread
    until: float = math.inf      # time.monotonic()
    cut: bool = False

    def spend(self, units: int) -> None:
        if units > self.units:
            self.units = 0
            raise Exhausted
        if time.thread_time() >= self.cpu_until or time.monotonic() >= self.until:
            self.units, self.cut = 0, True
            raise Exhausted
        self.units -= units

    def portion(self, units: int) -> Budget:
        """At most ``units`` of this budget, under the same clocks; :meth:`settle` it after."""
        return Budget(min(units, self.units), self.cpu_until, self.until)

    def settle(self, portion: Budget, units: int) -> None:
        """Charge what ``portion`` (given ``units``) spent, and its cut."""
        self.units -= units - portion.units
        if portion.cut:
            self.units, self.cut = 0, True


def _units(multiply_adds: int, variables: int) -> int:
    """An evaluation's units, one per 2^16 multiply-adds (~50 µs of one core here), of the
    loss and of the optimizer's own step (~256 a variable: L-BFGS-B's update and scipy's
    bookkeeping in Python), plus two for the overhead every evaluation has."""
    return 2 + ((multiply_adds + 256 * variables) >> 16)


def _start_units(variables: int) -> int:
    """A run's start: ~0.3 ms, and scipy checks and converts the bounds one variable at a
    time, ~3 µs each (a run of 4,080 variables costs ~13 ms before its first evaluation)."""
    return 6 + (variables >> 4)


def minimise(loss: Loss, start: np.ndarray, budget: Budget, cost: int,
             iterations: int = _ITERATIONS, squared: bool = False) -> tuple[float, np.ndarray]:
    """The best value and point L-BFGS-B reaches from ``start`` (x ≥ 0) before the budget runs
    out (the start's, unevaluated, at ∞ when it allows no evaluation).  ``squared``: over
    x = φ², unbounded.  scipy takes bounds one variable at a time in Python (0.2 s a start at
    45,000 variables, and 3 ms more an iteration), and on the p-Identity of 9 or 10 terms
    this form reached lower optima in the same time (docs/dp.md, "Past 8 terms")."""
    best = [np.inf, start]
    to_x = np.square if squared else (lambda x: x)

    def charged(point: np.ndarray) -> tuple[float, np.ndarray]:
        budget.spend(cost)
        x = to_x(point)
        value, grad = _finite(loss, x)
        if value < best[0]:
            best[:] = [value, x.copy()]
        return value, 2 * point * grad if squared else grad

    try:
        budget.spend(_start_units(0 if squared else start.size))
        minimize()(charged, np.sqrt(start) if squared else start, jac=True, method="L-BFGS-B",
                   bounds=None if squared else [(0, None)] * start.size,
                   options={"maxiter": iterations, "ftol": _FTOL})
    except (Exhausted, _Diverged):
        pass
    return best[0], best[1]


class _Diverged(Exception):
    """A run left the region where its objective is computable: it ends, keeping its best."""


def _finite(loss: Loss, x: np.ndarray) -> tuple[float, np.ndarray]:
    """``loss(x)``, or :class:`_Diverged` when it is not finite (a run that stepped to a Θ so
    large that K = I + ΘΘᵀ overflowed): a hostile workload's weights must not turn a search
    into a server error."""
    with np.errstate(over="ignore", invalid="ignore"):
        try:
            value, grad = loss(x)
        except np.linalg.LinAlgError:
            raise _Diverged from None
    if not np.isfinite(grad).all() or np.isnan(value):
        raise _Diverged
    return value, grad


@dataclass(frozen=True)
class Problem:
    """One starting point of one objective, and the units of one evaluation."""
    loss: Loss
    start: np.ndarray
    cost: int
    squared: bool = False  # searched over x = φ² (see minimise)
    kind: int = 0  # its objective's: the best screened point of each kind is refined too
    structured: bool = False  # a start from the workload's structure: refined first of its kind


def search(problems: list[Problem], budget: Budget) -> tuple[Problem, np.ndarray] | None:
    """Screen: a short run from every start while half the budget lasts; then refine the
    ``_KEEP`` best screened points fully, and more while the budget lasts where the problems
    are of several kinds (:func:`_refined_order`).  Most starts fall into a poor basin within
    ``_SCREEN`` iterations, so this finds the good basins of many more starts than running each
    start to convergence would (the paper batch's best p-Identity is found from ~1 start in 50).
    The best refined point and its problem, or None when the budget allows no run."""
    reserve = budget.units // 2
    screened = []
    for problem in problems:
        if budget.units - reserve < _start_units(problem.start.size) + _SCREEN * problem.cost:
            continue  # a cheaper objective may still fit
        value, x = minimise(problem.loss, problem.start, budget, problem.cost, _SCREEN,
                            problem.squared)
        screened.append((value, len(screened), problem, x))
    best = None
    for _, _, problem, x in _refined_order(screened):
        if budget.units <= 0:
            break
        value, x = minimise(problem.loss, x, budget, problem.cost, _ITERATIONS,
                            problem.squared)
        if best is None or value < best[0]:
            best = (value, problem, x)
    return None if best is None else best[1:]


def _refined_order(screened: list) -> list:
    """The ``_KEEP`` best screened points; then, among several kinds of objective, each kind's
    best, second best, ... in turn while the budget lasts: a large family screens worse after
    ``_SCREEN`` iterations than a small one it would beat (the random 40 over 16 terms: the
    marginals of at most 4 terms screen at 2x their converged total)."""
    ranked = sorted(screened, key=lambda s: s[:2])
    if len({entry[2].kind for entry in ranked}) == 1:
        return ranked[:_KEEP]
    # past the _KEEP best, a kind's structured start comes first of its kind: a large family's
    # screens worst and refines best (the random 40: 2.6e8 after screening, 108,442 refined)
    order = ranked[:_KEEP] + sorted(ranked[_KEEP:], key=lambda s: not s[2].structured)
    seen: dict[int, int] = {}
    rank_in_kind = []
    for entry in order:
        rank_in_kind.append(seen.get(entry[2].kind, 0))
        seen[entry[2].kind] = rank_in_kind[-1] + 1
    rest = sorted(range(_KEEP, len(order)), key=lambda i: (rank_in_kind[i], i))
    return order[:_KEEP] + [order[i] for i in rest]


def penalised(variances: np.ndarray, bound: np.ndarray | None) -> tuple[float, np.ndarray]:
    """The objective at these per-query variances, and each query's weight c_i in its gradient."""
    if bound is None:
        return float(variances.sum()), np.ones_like(variances)
    target = _MARGIN * bound
    over = np.maximum(0.0, variances - target) / target
    return float(variances.sum() + _PENALTY * (over ** 2 * target).sum()), 1 + 2 * _PENALTY * over


def _p_identity_terms(V: np.ndarray,  # noqa: N803
                      theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """B = V D⁻¹ and B M, M = I − Θᵀ K⁻¹ Θ: query i's variance (halved) is ⟨B_i, (BM)_i⟩."""
    B = V * (1 + theta.sum(axis=0))  # noqa: N806
    return B, B - np.linalg.solve(np.eye(len(theta)) + theta @ theta.T, theta @ B.T).T @ theta


def p_identity_reconstruction(V: np.ndarray, theta: np.ndarray,  # noqa: N803
                              A: np.ndarray) -> np.ndarray:  # noqa: N803
    """R = V A⁺ for A = [I; Θ] D (:func:`p_identity_matrix`, the caller's): R = [BM, BMΘᵀ]
    (R A = B M (I + ΘᵀΘ) D = B D = V), in O(n N p) where the pseudo-inverse of A would take
    O(N³): 1.1 s at 1,024 cells.  Then one step of iterative refinement: where Θ is large,
    M = I − Θᵀ K⁻¹ Θ cancels digits (R A was 2.5e-5 off V on the prefix of 10 terms; 3e-10
    after the step)."""
    def reconstruction(target: np.ndarray) -> np.ndarray:
        _, BM = _p_identity_terms(target, theta)  # noqa: N806
        return np.hstack([BM, BM @ theta.T])

    R = reconstruction(V)  # noqa: N806
    return R + reconstruction(V - R @ A)


def p_identity_loss(V: np.ndarray, p: int, bound: np.ndarray | None = None) -> Loss:  # noqa: N803
    """The objective for A = [I; Θ] D (Δ = 1), and its gradient in Θ (flattened)."""
    cells = V.shape[1]

    def loss(flat: np.ndarray) -> tuple[float, np.ndarray]:
        theta = flat.reshape(p, cells)
        B, BM = _p_identity_terms(V, theta)  # noqa: N806
        value, weights = penalised((B * BM).sum(axis=1), bound)
        weighted = weights[:, None] * BM
        grad = -2 * (theta @ BM.T) @ weighted + 2 * (V * weighted).sum(axis=0)
        return value, grad.ravel()

    return loss


def p_identity_variances(V: np.ndarray,  # noqa: N803
                         theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each query's variance (halved) under [I; Θ] D, and its Jacobian in Θ (n x pN): query
    i's row is the loss's gradient with weight 1 on i alone."""
    B, BM = _p_identity_terms(V, theta)  # noqa: N806
    T = theta @ BM.T  # noqa: N806
    jacobian = -2 * T.T[:, :, None] * BM[:, None, :] + 2 * (V * BM)[:, None, :]
    return (B * BM).sum(axis=1), jacobian.reshape(len(V), -1)


def bounded_p_identity(V: np.ndarray, ps: list[int], budget: Budget, seed: int,  # noqa: N803
                       bound: np.ndarray) -> np.ndarray | None:
    """The lowest-total Θ found with every query's variance at most ``bound`` exactly: SLSQP
    with the bounds as constraints, from ``_SEEDED`` seeded points near Θ = 0 per p.  Θ = 0 is
    the histogram, which meets the bound; the penalised optima sit just outside it, where the
    linearised constraints are incompatible and SLSQP fails.  Each evaluation (variances,
    Jacobian, and SLSQP's dense least-squares step) is charged to ``budget``; the best
    feasible point evaluated is kept, so a run cut short still counts."""
    best: list = [np.inf, None]
    for start in range(_SEEDED):
        for p in ps:
            size = p * V.shape[1]
            # SLSQP's step: a least-squares problem of the constraints and both bounds of
            # every variable over all of them
            cost = _units(size * (2 * len(V) + p) + (len(V) + 3 * size) * size ** 2, size)
            if _start_units(size) + cost * 2 > budget.units:
                continue  # not even two evaluations: a smaller p may still fit
            x = _START_SCALE * start_point(seed + p, start, size)
            try:
                _constrained(V, p, x, bound, budget, cost, best)
            except Exhausted:
                pass
    return best[1]


def _constrained(V: np.ndarray, p: int, start: np.ndarray, bound: np.ndarray,  # noqa: N803
                 budget: Budget, cost: int, best: list) -> None:
    budget.spend(_start_units(start.size))
    memo: dict = {}

    def evaluate(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if memo.get("x") is None or not np.array_equal(memo["x"], x):
            budget.spend(cost)
            variances, jacobian = p_identity_variances(V, x.reshape(p, -1))
            memo.update(x=x.copy(), value=(variances, jacobian))
            if np.all(variances <= bound) and variances.sum() < best[0]:
                best[:] = [variances.sum(), x.reshape(p, -1).copy()]
        return memo["value"]

    minimize()(lambda x: (evaluate(x)[0].sum(), evaluate(x)[1].sum(axis=0)), start,
               jac=True, method="SLSQP", bounds=[(0, _THETA_MAX)] * start.size,
               constraints=[{"type": "ineq", "fun": lambda x: bound - evaluate(x)[0],
                             "jac": lambda x: -evaluate(x)[1]}],
               options={"maxiter": _SLSQP_ITERATIONS, "ftol": _FTOL})


def minimize() -> Callable:
    """scipy's minimizer, imported by the first search: the import costs 0.3 s, which every
    CLI command and server start would pay otherwise."""
    return require("scipy.optimize").minimize


def p_identity_matrix(theta: np.ndarray) -> np.ndarray:
    """[I; Θ] D: every column of L1 norm 1."""
    stacked = np.vstack([np.eye(theta.shape[1]), theta])
    return stacked / stacked.sum(axis=0)


def p_identity(V: np.ndarray, ps: list[int], budget: Budget, seed: int,  # noqa: N803
               bound: np.ndarray | None = None, squared: bool = False) -> np.ndarray | None:
    """The best Θ (p x N) for any p in ``ps``, searched from ``_SEEDED`` seeded starts per p,
    taken in turn so that every p is screened alike (``squared``: see :func:`minimise`);
    None when the budget allows no run."""
    families = [(p_identity_loss(V, p, bound),
                 _units(p * V.shape[1] * (V.shape[0] + p), p * V.shape[1]), p) for p in ps]
    found = search([Problem(loss, start_point(seed + p, start, p * V.shape[1]), cost, squared)
                    for start in range(_SEEDED) for loss, cost, p in families], budget)
    return None if found is None else found[1].reshape(-1, V.shape[1])


def distinct_columns(V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # noqa: N803
    """The distinct nonzero columns of V, and each column's index among them (−1 for zero).

    Cells with equal columns are only ever asked about together, so a strategy over their sums
    (lifted by giving each cell its group's column) has the same Δ and the same error: p-Identity
    is searched over the groups, which is cheaper and finds better optima (the prefix chain's 64
    cells are 7 groups)."""
    columns, index = np.unique(V, axis=1, return_inverse=True)
    nonzero = np.flatnonzero(np.abs(columns).sum(axis=0) > 0)
    position = np.full(columns.shape[1], -1)
    position[nonzero] = np.arange(nonzero.size)
    return columns[:, nonzero], position[index.ravel()]


def hadamard(u: int) -> np.ndarray:
    """The 2^u Walsh–Hadamard characters χ_T as columns: χ_T(P) = (−1)^|P ∩ T|."""
    characters = np.ones((1, 1))
    for _ in range(u):  # the new bit is the highest: (−1)^(its product) times the rest
        characters = np.kron([[1.0, 1.0], [1.0, -1.0]], characters)
    return characters


def _zeta(values: np.ndarray, u: int, supersets: bool) -> np.ndarray:
    """out[T] = Σ_{S ⊇ T} values[S] with ``supersets``, else Σ_{S ⊆ T} values[S] (the zeta
    transform over the u bits: along each bit, one half takes in the other)."""
    into = 0 if supersets else 1
    out = values.reshape((2,) * u).copy()
    for axis in range(u):
        half = [slice(None)] * u
        half[axis] = into
        out[tuple(half)] += np.take(out, 1 - into, axis=axis)
    return out.ravel()


def marginals_loss(V: np.ndarray, u: int, bound: np.ndarray | None = None) -> Loss:  # noqa: N803
    """The objective for the weighted marginals θ (θ_S at index S's bitmask), and its gradient.

    The bitmask of S reshaped to u axes puts bit i on axis u − 1 − i; both sums are symmetric
    in the axes, so the order does not matter."""
    cells = 1 << u
    parts = (V @ hadamard(u)) ** 2 / cells  # query i's share on character T, before 1/λ_T
    width = 2.0 ** (u - np.array([s.bit_count() for s in range(cells)]))
    used = parts.sum(axis=0) > 1e-9 * parts.sum(axis=0).max()

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        eigen = _zeta(theta ** 2 * width, u, supersets=True)
        if np.any(eigen[used] <= 0):
            return np.inf, np.zeros_like(theta)
        inverse = np.where(used, 1 / np.where(used, eigen, 1), 0)
        total = theta.sum()
        value, weights = penalised(total ** 2 * (parts @ inverse), bound)
        needed = weights @ parts
        grad = (2 * total * (needed @ inverse) - total ** 2 * 2 * theta * width
                * _zeta(needed * inverse ** 2, u, supersets=False))
        return value, grad

    return loss


def blocks(u: int, size: int) -> np.ndarray:
    """θ = 1 on the marginals of consecutive blocks of ``size`` terms (a partition), else 0."""
    theta = np.zeros(1 << u)
    for low in range(0, u, size):
        theta[(1 << min(u, low + size)) - (1 << low)] = 1
    return theta


def marginals(V: np.ndarray, u: int, budget: Budget, seed: int,  # noqa: N803
              bound: np.ndarray | None = None) -> np.ndarray | None:
    """The best θ searched from the partitions of the terms into blocks of each size (the 1-way
    counts of 8 terms are best answered from 2-way or 3-way marginals of disjoint blocks, a basin
    that seeded starts rarely reach), slightly spread so every character stays measured, and
    ``_SEEDED`` seeded starts."""
    loss, cost = marginals_loss(V, u, bound), _units((V.shape[0] + u) << u, 1 << u)
    starts = [blocks(u, size) + 0.01 for size in range(1, u + 1)]
    starts += [start_point(seed, start, 1 << u) for start in range(_SEEDED)]
    found = search([Problem(loss, start, cost) for start in starts], budget)
    return None if found is None else found[1]


def marginals_matrix(theta: np.ndarray, u: int) -> np.ndarray:
    """The stacked weighted marginals of the subsets S with θ_S > 0, rows over the 2^u cells."""
    patterns = np.arange(1 << u)
    blocks = []
    for subset in np.flatnonzero(theta > 0):
        keys = patterns & subset
        values = np.unique(keys)
        blocks.append(theta[subset] * (keys[None, :] == values[:, None]))
    return np.vstack(blocks).astype(float)


_GAP = 1e-4  # gaussian_factorization stops once its strategy is this close to the lower bound


def gaussian_factorization(V: np.ndarray, budget: Budget  # noqa: N803
                           ) -> tuple[np.ndarray, float, float] | None:
    """The strategy over the columns of ``V`` (n x N, the groups of cells) of least total
    variance under Gaussian noise of L2 sensitivity 1, among all strategies, and the lower
    bound it is certified against (both in ‖V A⁺‖², without the Gaussian's ½).

    The problem is min tr(VᵀV X⁻¹) over X = AᵀA with every X_jj ≤ 1 (Δ₂ = 1), which is
    convex; its dual is max over λ in the simplex of (tr M^½)², M = V diag(λ) Vᵀ (n x n),
    the factorization norm γ_F(V)² (Edmonds, Nikolov and Ullman, STOC 2020).  Stationarity
    gives X = Vᵀ M^-½ V, that is A = M^-¼ V: the workload's own rows, re-weighted.  Any λ gives
    a strategy, scaled to Δ₂ = 1 by its largest column norm g_j = v_jᵀ M^-½ v_j, of total
    max(g) tr M^½, and a lower bound (tr M^½)² on every strategy; the multiplicative update
    λ_j ← λ_j g_j (the dual's gradient) closes the gap (0.2% in 50 steps on the 2-way counts
    of 10 terms).  Each step costs O(n² N), charged to ``budget``; None if it allows none.

    Queries that are not linearly independent leave M singular: V is replaced by a basis of
    its row space, S Vᵀ of its thin SVD (r x N), which has the same VᵀV and so the same
    objective and optimum; the strategy then has r rows."""
    _, singular, rows = np.linalg.svd(V, full_matrices=False)
    rank = int((singular > 1e-10 * singular[0]).sum())
    V = singular[:rank, None] * rows[:rank]  # noqa: N806
    n, columns = V.shape
    weights = np.full(columns, 1.0 / columns)
    cost = _units(3 * n * n * columns + 10 * n ** 3, 0)
    budget.spend(cost)  # the SVD
    best, lower = None, 0.0
    while True:
        try:
            budget.spend(cost)
        except Exhausted:
            return best
        values, vectors = np.linalg.eigh((V * weights) @ V.T)
        if values.min() <= 1e-12 * values.max():  # a weight that fell to 0 left M singular
            return best
        root = np.sqrt(values)
        A = (vectors / np.sqrt(root)) @ vectors.T @ V  # noqa: N806  (M^-¼ V)
        norms = (A ** 2).sum(axis=0)  # g = ‖M^-¼ v‖²
        total, lower = float(norms.max() * root.sum()), max(lower, float(root.sum() ** 2))
        if best is None or total < best[1]:
            best = (A / math.sqrt(norms.max()), total, lower)
        best = (*best[:2], lower)
        if best[1] <= lower * (1 + _GAP):
            return best
        weights = weights * norms / (weights @ norms)
