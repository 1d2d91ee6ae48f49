"""Weighted marginals past the cell space: HDMM's OPT_M over chosen term subsets, no 2^u cells.

A marginal on a subset S of the workload's u terms counts the records by their pattern on S:
2^|S| cells, each record in exactly one.  Stacking θ_S times the marginal of every S of a
family F gives a strategy of L1 sensitivity Δ = Σ θ_S, exactly (one record moves one cell of
each marginal by one).  In the Walsh basis χ_R of the 2^u cells, AᵀA is diagonal with
eigenvalue 2^u λ_R, λ_R = Σ_{S ∈ F, S ⊇ R} θ_S² 2^−|S|, and the conjunctive count of the terms
T is Σ_{R ⊆ T} (−1)^|R| 2^−|T| χ_R.  So the least-squares answer to a linear query
w = Σ_j w_j count(T_j) has variance 2 Δ² Σ_R a_R² / λ_R (at α = 1), with
a_R = Σ_{j: R ⊆ T_j} w_j 2^−|T_j|: only the subsets R of the workload's term sets (their
*closure*) enter, never a cell.  The cell-space search (:mod:`.optimize`) is the case F = every
subset; this one works at any u the limits allow, its cost set by the closure's size.

The measurement needs no cells either.  A marginal's cell (the records holding exactly P of S)
is the signed sum Σ_{P ⊆ R ⊆ S} (−1)^|R−P| count(R), so the strategy is a matrix over the
conjunctive counts of the subsets of F's sets (the "subsets" space).  Those counts are a
full-rank linear image of the cells, so least squares over them is least squares over the
cells: the same reconstruction, the same variances (tests/test_dp_marginals.py checks both
against the cell-space matrices, and Δ against every record pattern).

The families searched: the closure itself (every subset a workload query could use), and with
it every marginal of at most t and of at most t + 1 terms (t: the widest counting query; under
zCDP the 2-way counts of 10 terms are best answered from all 120 3-way marginals), and the
partitions of the terms, in workload order, into blocks of 2 to 6 and into one block (the
1-way counts of 12 terms are best answered under pure DP from the 3-way marginals of four
disjoint blocks: each record in one cell of each, Δ = 1, and the total measured four times).
A family is searched by its closed form alone, so it may be larger than the counts a strategy
may measure: the 2,517 marginals of at most 4 of 16 terms, of which the random 40 over 16
terms keeps 26 to 28 (docs/dp.md).  What is measured is the heaviest marginals whose subsets
fit ``MAX_SUBSETS``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations

import numpy as np

from . import optimize
from .workload import Matrices

# Conjunctive counts a strategy may be built over: the least squares over them is cubic in
# their number (1,024, the histogram of 10 terms: ~0.15 s), and each is a count the private
# cloud computes.
MAX_SUBSETS = 1024
# Marginals a family may hold: an evaluation of the closed form is linear in their number
# (2.6 ms at 6,885 marginals of 16 terms and a closure of 90), and the search's units pay it.
MAX_FAMILY = 4096
BLOCK_SIZES = range(2, 7)
_SPREAD = 0.01  # every start keeps each subset of the closure measured
# Seeded starts per family, after its structured one: with up to 9 families, the cell search's
# 24 each left the screening no budget for the last families' (random 40 over 16 terms).
SEEDED = 8


def subsets_of(mask: int) -> list[int]:
    """Every subset of the bitmask ``mask``, itself and 0 included."""
    found, subset = [], mask
    while True:
        found.append(subset)
        if subset == 0:
            return found
        subset = (subset - 1) & mask


def closure(masks) -> np.ndarray:
    """The sorted bitmasks of every subset of every mask of ``masks``."""
    return np.array(sorted({s for mask in set(masks) for s in subsets_of(int(mask))}),
                    dtype=np.int64)


def _popcount(masks: np.ndarray) -> np.ndarray:
    return np.array([int(s).bit_count() for s in masks.tolist()], dtype=np.int64)


def _within(inner: np.ndarray, outer: np.ndarray) -> np.ndarray:
    """[i, j]: inner[j] ⊆ outer[i]."""
    return (inner[None, :] & ~outer[:, None]) == 0


def coefficients(m: Matrices, characters: np.ndarray) -> np.ndarray:
    """a (queries x characters): query i is Σ_R a[i, R] (−1)^|R| χ_R."""
    counts = m.masks
    share = _within(characters, counts) * 2.0 ** -_popcount(counts)[:, None]
    return m.W @ share


def families(m: Matrices) -> tuple[np.ndarray, ...]:
    """The candidate families F (bitmasks): the workload's closure, alone, with every marginal
    of at most t and of at most t + 1 terms (t: the widest count; at most ``MAX_FAMILY``), and
    with each block partition (the whole set of terms the last: its marginal is the cell
    histogram; none whose closure is over ``MAX_SUBSETS``).  A request asks for them several
    times (whether to search, its deadline, the search), so they are kept by shape."""
    return _families(tuple(m.masks.tolist()), len(m.terms))


@lru_cache(maxsize=64)
def _families(masks: tuple[int, ...], u: int) -> tuple[np.ndarray, ...]:
    widest = max(mask.bit_count() for mask in masks)
    if 1 << widest > MAX_SUBSETS:  # one count's own subsets are too many: never enumerated
        return ()
    base = closure(masks)  # at most 2^10 subsets for each of the published 128 counts
    if len(base) > MAX_SUBSETS:
        return ()
    found = [base]
    for size in (widest, widest + 1):  # every marginal of at most that many terms
        if 1 <= size < u and sum(math.comb(u, i) for i in range(size + 1)) <= MAX_FAMILY:
            every = [sum(1 << t for t in terms) for width in range(1, size + 1)
                     for terms in combinations(range(u), width)]
            family = np.union1d(base, every)
            if len(family) > len(base):
                found.append(family)
    for size in [*(b for b in BLOCK_SIZES if b < u), u]:
        blocks = [((1 << min(u, low + size)) - 1) ^ ((1 << low) - 1) for low in range(0, u, size)]
        if sum(1 << min(u - low, size) for low in range(0, u, size)) > 2 * MAX_SUBSETS:
            continue  # (its closure, never enumerated, is at least half that)
        family = np.union1d(base, blocks)
        if len(family) > len(base) and len(np.union1d(base, closure(blocks))) <= MAX_SUBSETS:
            found.append(family)  # (blocks all in the closure would repeat it)
    for family in found:
        family.flags.writeable = False  # kept, and shared by every request of the shape
    return tuple(found)


def most_measured(family: np.ndarray) -> int:
    """The most conjunctive counts a strategy searched over ``family`` may measure."""
    return MAX_SUBSETS if len(family) >= MAX_SUBSETS else min(MAX_SUBSETS,
                                                              len(closure(family)))


def feasible(m: Matrices) -> bool:
    """Whether a marginal strategy can be searched for the workload (a function of its shape)."""
    return bool(families(m))


def loss(parts: np.ndarray, family: np.ndarray, characters: np.ndarray,
         bound: np.ndarray | None = None, l2: bool = False) -> optimize.Loss:
    """The objective Δ² Σ_R a²/λ_R per query (penalised over ``bound``) for θ over ``family``,
    and its gradient; ``parts``: a² (queries x characters); Δ is Σθ, or √Σθ² with ``l2``."""
    weight = _within(characters, family) * 2.0 ** -_popcount(family)[:, None]  # F x R

    def value(theta: np.ndarray) -> tuple[float, np.ndarray]:
        eigen = theta ** 2 @ weight
        if np.any(eigen <= 0):
            return np.inf, np.zeros_like(theta)
        inverse = 1 / eigen
        square, d_square = ((theta @ theta, 2 * theta) if l2
                            else (theta.sum() ** 2, np.full_like(theta, 2 * theta.sum())))
        result, weights = optimize.penalised(square * (parts @ inverse), bound)
        needed = weights @ parts
        grad = d_square * (needed @ inverse) \
            - square * 2 * theta * (weight @ (needed * inverse ** 2))
        return result, grad

    return value


@dataclass(frozen=True)
class Found:
    """A searched θ over a family, the subsets with θ > 0."""
    theta: np.ndarray
    family: np.ndarray


def search(m: Matrices, budget: optimize.Budget, seed: int,
           bound: np.ndarray | None = None, scale: float = 1.0, l2: bool = False
           ) -> Found | None:
    """The best θ over every family (:func:`families`): from θ = 1 on the blocks (or on every
    subset), spread by ``_SPREAD``, and ``SEEDED`` seeded starts per family, the
    workload scaled by ``scale`` as the cell search does (``bound`` in :func:`loss`'s units),
    Δ in L2 with ``l2``."""
    characters = closure(m.masks)
    parts = (coefficients(m, characters) / scale) ** 2
    problems, family_of = [], {}
    candidates = families(m)
    # Every family's structured start first, then the seeded ones in turn: the screening goes
    # down this list while half the budget lasts, and must reach every family.
    for start in range(-1, SEEDED):
        for kind, family in enumerate(candidates):
            cost = optimize._units(len(family) * len(characters) + parts.size, len(family))
            if start < 0:
                blocks = ~np.isin(family, characters)
                point = np.where(blocks, 1.0, 0.0) if blocks.any() else np.ones(len(family))
            else:
                point = optimize.start_point(seed, start, len(family))
            problems.append(optimize.Problem(loss(parts, family, characters, bound, l2),
                                             point + _SPREAD, cost, kind=kind,
                                             structured=start < 0))
            family_of[id(problems[-1])] = family
    found = optimize.search(problems, budget)
    if found is None:
        return None
    problem, theta = found
    family = family_of[id(problem)]
    kept = theta > 1e-4 * theta.max()  # drop the negligible marginals, if all stays measured
    if np.all(theta[kept] ** 2 @ (_within(characters, family[kept]) * 1.0) > 0):
        theta, family = theta[kept], family[kept]
    return _measurable(Found(theta, family), characters)


def _measurable(found: Found, characters: np.ndarray) -> Found | None:
    """``found``'s heaviest marginals, as many as are measured over at most ``MAX_SUBSETS``
    counts, in their order (a family searched past them keeps few: 26 to 28 of the 2,517 of
    the random 40 over 16 terms); None if those leave a subset of the closure unmeasured."""
    order = np.argsort(-found.theta, kind="stable")
    counts: set[int] = set()
    for taken, index in enumerate(order.tolist()):
        counts.update(subsets_of(int(found.family[index])))
        if len(counts) > MAX_SUBSETS:
            order = order[:taken]
            break
    kept = np.sort(order)
    theta, family = found.theta[kept], found.family[kept]
    if not np.all(theta ** 2 @ (_within(characters, family) * 1.0) > 0):
        return None
    return Found(theta, family)


def matrix(found: Found) -> tuple[np.ndarray, np.ndarray]:
    """The strategy over the conjunctive counts of its subsets: (A, the subsets' bitmasks).
    Marginal S's row for the pattern P ⊆ S is θ_S Σ_{P ⊆ R ⊆ S} (−1)^|R−P| count(R): over S's
    own subsets, in the order of their bits, the Kronecker power of [[1, −1], [0, 1]]."""
    columns = closure(found.family)
    blocks = []
    for weight, subset in zip(found.theta.tolist(), found.family.tolist()):
        bits = [b for b in range(subset.bit_length()) if subset >> b & 1]
        mobius = np.ones((1, 1))
        for _ in bits:
            mobius = np.kron([[1.0, -1.0], [0.0, 1.0]], mobius)  # the new bit is the highest
        local = np.arange(1 << len(bits))
        masks = np.zeros(len(local), dtype=np.int64)
        for j, bit in enumerate(bits):
            masks |= ((local >> j) & 1) << bit
        block = np.zeros((len(local), len(columns)))
        block[:, np.searchsorted(columns, masks)] = weight * mobius
        blocks.append(block)
    return np.vstack(blocks), columns
