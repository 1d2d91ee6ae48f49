"""A workload's strategy (data independent) and its noisy release (from exact private inputs).

The strategies need the counting-query answers c, the cell histogram h of the workload terms,
or the conjunctive counts of some subsets of the terms (:mod:`.marginals`).  h comes from the
conjunctive counts of every subset of the terms by Möbius inversion (records holding exactly
pattern P = sum over T ⊇ P of (-1)^|T-P| count(T)).  All counts come from one call of a
:data:`Counts` function, which the caller wires to the query engine: this package never sees a
publication or a runner.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..querylang import CountQuery, Workload, parse_batch
from .noise import DEFINITIONS, epsilon
from .limits import LIMITS
from .search import SEARCHES, Searches
from .objectives import DEFAULT_OBJECTIVE
from .strategies import PURE, Choice, Strategy, above
from .workload import Matrices

# The δ at which a zCDP release's (ε, δ) is reported beside its ρ.
REPORTED_DELTA = 1e-6

# Exact answers to conjunctive counts, one per query; ``CountQuery(())`` counts every record.
Counts = Callable[[Sequence[CountQuery]], list[int]]


@dataclass(frozen=True)
class NoisyAnswer:
    workload: str
    answers: list[float]
    variances: list[float]      # expected squared error of each answer
    alpha: float
    strategy: str
    expected_errors: dict        # total expected squared error of NOQ, NOT, optimized
    sensitivity: float
    sensitivity_exact: bool
    objective: str
    fixed_variances: list[float]  # each query's under the best fixed candidate
    definition: str = PURE        # "zcdp": ``alpha`` is ρ
    draws: tuple[int, ...] = ()   # noise draws each answer adds up (its interval's kind)
    quantiles: tuple = ()         # a Laplace sum's half-widths at intervals.LADDER, or None

    def as_dict(self) -> dict:
        spent = {"alpha": self.alpha} if self.definition == PURE else {
            "definition": self.definition, "rho": self.alpha,
            "epsilon": epsilon(self.alpha, REPORTED_DELTA), "delta": REPORTED_DELTA}
        return {"workload": self.workload, "answers": self.answers,
                "expected_squared_error": self.variances,
                "expected_rms_error": [float(np.sqrt(v)) for v in self.variances],
                "noise_draws": list(self.draws), "noise_quantiles": list(self.quantiles),
                **spent, "strategy": self.strategy,
                "strategy_errors": self.expected_errors, "sensitivity": self.sensitivity,
                "sensitivity_exact": self.sensitivity_exact, "objective": self.objective,
                "fixed_expected_squared_error": self.fixed_variances,
                "above_fixed": above(self.variances, self.fixed_variances).tolist()}


def cell_histogram(counts_of_subsets: np.ndarray) -> np.ndarray:
    """Möbius inversion over supersets: ``counts_of_subsets[T]`` = records holding all of T."""
    h = counts_of_subsets.astype(float).copy()
    bits = (len(h) - 1).bit_length()
    for bit in range(bits):
        step = 1 << bit
        for mask in range(len(h)):
            if not mask & step:
                h[mask] -= h[mask | step]
    return h


def exact_queries(strategy: Strategy, m: Matrices) -> list[CountQuery]:
    """The conjunctive counts a strategy's exact vector is made of."""
    if strategy.space == "counts":
        return list(m.workload.counts)
    terms = m.terms
    masks = strategy.subsets if strategy.space == "subsets" else range(1 << len(terms))
    return [CountQuery(tuple(t for i, t in enumerate(terms) if mask >> i & 1)) for mask in masks]


def exact_vector(strategy: Strategy, m: Matrices, counts: Counts) -> np.ndarray:
    values = np.array(counts(exact_queries(strategy, m)), dtype=float)
    return cell_histogram(values) if strategy.space == "cells" else values


@dataclass(frozen=True)
class Prepared:
    """A workload with its strategy: everything but the data, so it is free to compute before
    the budget is charged; the exact vector is computed only after."""

    workload: Workload
    matrices: Matrices
    choice: Choice
    objective: str

    @property
    def evaluations(self) -> int:
        """How many conjunctive counts the exact vector takes (it sets the response time)."""
        return len(exact_queries(self.choice.optimized, self.matrices))

    def exact(self, counts: Counts) -> np.ndarray:
        return exact_vector(self.choice.optimized, self.matrices, counts)

    def noisy(self, exact: np.ndarray, alpha: float,
              noise: Callable[[list[float], float], list[float]] | None = None) -> NoisyAnswer:
        if alpha <= 0:
            raise ValueError(f"alpha must be positive, got {alpha}")
        strategy = self.choice.optimized
        answers = strategy.answer(exact, alpha, noise)
        return NoisyAnswer(str(self.workload), [float(a) for a in answers],
                           [float(v) for v in strategy.variances(alpha)], alpha, strategy.name,
                           self.choice.report(alpha), strategy.sensitivity,
                           strategy.sensitivity_exact, self.objective,
                           [float(v) for v in self.choice.fixed.variances(alpha)],
                           strategy.definition, tuple(map(int, strategy.draws())),
                           tuple(strategy.noise_quantiles(alpha)))

    def default(self, alpha: float) -> NoisyAnswer:
        """The release when the exact vector is not ready by the deadline: the same mechanism
        over an all-zero vector (Fuzz's default value), indistinguishable in form."""
        return self.noisy(np.zeros(self.choice.optimized.A.shape[1]), alpha)


def prepare(workload: Workload, search_units: int = LIMITS.search_units,
            objective: str = DEFAULT_OBJECTIVE, *, searches: Searches = SEARCHES, user: str = "",
            until: float = math.inf, definition: str = PURE) -> Prepared:
    """Choose the strategy (:meth:`.search.Searches.choose`): data independent, so it costs
    no privacy."""
    matrices = Matrices(workload)
    choice = searches.choose(matrices, search_units, objective, user, until, definition)
    choice.optimized.noise_quantiles(1.0)  # kept with it; here for a choice no search made
    return Prepared(workload, matrices, choice, objective)


def warm_up() -> None:
    """Choose a strategy for one count under each definition and draw its default answer,
    thrown away: what answering loads on its first use (scipy for the choice, ~0.3 s; OpenDP,
    ~0.7 s cold) would otherwise hold a server's first fresh answer past its time, and its
    first dp top k past its deadline (OpenDP's noisy top-k then takes 3-4 ms, not ~1 s)."""
    one = parse_batch("count(a)")
    for definition in DEFINITIONS:
        prepare(one, definition=definition).default(1.0)
