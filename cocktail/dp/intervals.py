"""Confidence intervals of noisy answers, from what an answer says of its own noise.

Every strategy answers ``R (A x + noise)`` (:mod:`.strategies`), so answer i is the truth plus
``R_i · noise``: a sum of ``noise_draws[i]`` independent draws (the non-zero entries of R_i),
of variance ``expected_squared_error[i]`` = v.  The interval at ``level`` is ``answer ± h``:

* Gaussian noise (a role under zCDP): any sum of Gaussian draws is Gaussian, N(0, v), so
  h = z √v, z the normal quantile of (1 + level) / 2: **exact** coverage.
* Laplace noise, one draw (NOQ, NOT's single counts, a histogram cell): the noise is
  c · Lap(b), itself Laplace of scale √(v / 2), with P(|noise| > h) = exp(-h / scale), so
  h = √(v / 2) · ln(1 / (1 − level)): **exact** coverage.
* Laplace noise, a combination of several draws (or an answer that does not say how many,
  stored before answers said so): no closed form, so Chebyshev's inequality
  P(|noise| ≥ h) ≤ v / h², true of any noise of variance v, gives h = √(v / (1 − level)):
  coverage **at least** the level, and wider than needed (at 95%, 4.47 √v against 2.12 √v for
  one Laplace draw and 1.96 √v for a Gaussian).
* v = 0 (a query whose weights cancel): no noise, the answer is exact.

Standard library only: an analyst's client computes these (:mod:`cocktail.client`).
"""

from __future__ import annotations

import math
from statistics import NormalDist

from .noise import ZCDP

EXACT, GAUSSIAN, LAPLACE, CHEBYSHEV = "exact", "gaussian", "laplace", "chebyshev"


def check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"the level must be between 0 and 1 (exclusive), got {level}")


def interval(answer: float, variance: float, level: float, definition: str,
             draws: int | None) -> tuple[float, float, str]:
    """(low, high, how it was bounded) around ``answer``: the truth is inside with
    probability ``level`` (at least ``level`` when bounded by Chebyshev), for noise of
    ``variance`` under privacy ``definition`` made of ``draws`` draws (None: not known)."""
    check_level(level)
    if variance == 0:
        return answer, answer, EXACT
    if definition == ZCDP:
        half, how = NormalDist().inv_cdf((1 + level) / 2) * math.sqrt(variance), GAUSSIAN
    elif draws == 1:
        half, how = math.sqrt(variance / 2) * math.log(1 / (1 - level)), LAPLACE
    else:
        half, how = math.sqrt(variance / (1 - level)), CHEBYSHEV
    return answer - half, answer + half, how
