"""Exact inputs for a workload, computed in the private cloud, and the noisy release.

The strategies need either the counting-query answers c or the cell histogram h of the workload
terms.  h comes from the conjunctive counts of every subset of the terms by Möbius inversion
(records holding exactly pattern P = sum over T ⊇ P of (-1)^|T-P| count(T)).  All counts run as
one batch of map tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..publication import Publication
from ..querylang import CountQuery, Workload
from ..runners import exact_counts
from .noise import laplace
from .strategies import Choice, Strategy, choose
from .workload import Matrices


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

    def as_dict(self) -> dict:
        return {"workload": self.workload, "answers": self.answers,
                "expected_squared_error": self.variances,
                "expected_rms_error": [float(np.sqrt(v)) for v in self.variances],
                "alpha": self.alpha, "strategy": self.strategy,
                "strategy_errors": self.expected_errors, "sensitivity": self.sensitivity,
                "sensitivity_exact": self.sensitivity_exact}


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


def exact_vector(strategy: Strategy, m: Matrices, publication: Publication,
                 runner: str = "fast") -> np.ndarray:
    if strategy.space == "counts":
        return np.array(exact_counts(publication, list(m.workload.counts), runner), dtype=float)
    terms = m.terms
    subsets = [CountQuery(tuple(t for i, t in enumerate(terms) if mask >> i & 1))
               for mask in range(1, 1 << len(terms))]
    counts = [len(publication.record_ids), *exact_counts(publication, subsets, runner)]
    return cell_histogram(np.array(counts))


@dataclass(frozen=True)
class Prepared:
    """Everything but the noise: computed first, released only once the budget is charged."""

    workload: Workload
    choice: Choice
    exact: np.ndarray

    def noisy(self, alpha: float,
              noise: Callable[[list[float], float], list[float]] = laplace) -> NoisyAnswer:
        if alpha <= 0:
            raise ValueError(f"alpha must be positive, got {alpha}")
        strategy = self.choice.optimized
        answers = strategy.answer(self.exact, alpha, noise)
        return NoisyAnswer(str(self.workload), [float(a) for a in answers],
                           [float(v) for v in strategy.variances(alpha)], alpha, strategy.name,
                           self.choice.report(alpha), strategy.sensitivity,
                           strategy.sensitivity_exact)


def prepare(workload: Workload, publication: Publication, runner: str = "fast") -> Prepared:
    """Choose the strategy (data independent) and compute its exact input (private)."""
    matrices = Matrices(workload)
    choice = choose(matrices)
    return Prepared(workload, choice,
                    exact_vector(choice.optimized, matrices, publication, runner))
