"""Confidence intervals of noisy answers, from what an answer says of its own noise.

Every strategy answers ``R (A x + noise)`` (:mod:`.strategies`), so answer i is the truth plus
``R_i · noise``: a sum of ``noise_draws[i]`` independent draws (the non-zero entries of R_i),
of variance ``expected_squared_error[i]`` = v.  The interval at ``level`` is ``answer ± h``:

* Gaussian noise (a role under zCDP): any sum of Gaussian draws is Gaussian, N(0, v), so
  h = z √v, z the normal quantile of (1 + level) / 2: **exact** coverage.
* Laplace noise, one draw (NOQ, NOT's single counts, a histogram cell): the noise is
  c · Lap(b), itself Laplace of scale √(v / 2), with P(|noise| > h) = exp(-h / scale), so
  h = √(v / 2) · ln(1 / (1 − level)): **exact** coverage.
* Laplace noise, a weighted sum of several draws: the server computes the sum's exact tail
  (:func:`laplace_sum_ladder`, by inverting its characteristic function) at the published
  ``LADDER`` of levels, and the answer carries those half-widths (``noise_quantiles``).  At a
  level of the ladder the interval is **exact**; between two, the lesser of the next level's
  half-width and the extension of the chord through the two below, which is never too narrow:
  the sum's density is log-concave (each Laplace's is, and convolution keeps it), so the log
  of its tail P(|noise| > h) is concave in h, and a chord extended past its ends lies above it.
* Laplace noise with no quantiles (answers stored before they were given, re-shared ones):
  Chebyshev's inequality P(|noise| ≥ h) ≤ v / h², true of any noise of variance v, gives
  h = √(v / (1 − level)): coverage **at least** the level, and wider than needed (at 95%,
  4.47 √v against 2.12 √v for one Laplace draw and 1.96 √v for a Gaussian).
* v = 0 (a query whose weights cancel): no noise, the answer is exact.

:func:`interval` uses the standard library only: an analyst's client computes these
(:mod:`cocktail.client`); :func:`laplace_sum_ladder` (numpy) runs on the server.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from .noise import PURE, ZCDP

EXACT, GAUSSIAN, LAPLACE, LAPLACE_SUM, CHEBYSHEV = (
    "exact", "gaussian", "laplace", "laplace-sum", "chebyshev")
# The levels at which a Laplace sum's exact half-width is computed and sent (published).
LADDER = (0.5, 0.68, 0.8, 0.9, 0.95, 0.975, 0.99, 0.995, 0.999, 0.9999)
DEFAULT_LEVEL = 0.95


def check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"the level must be between 0 and 1 (exclusive), got {level}")


def interval(answer: float, variance: float, level: float, definition: str,
             draws: int | None, quantiles: list[float] | None = None
             ) -> tuple[float, float, str]:
    """(low, high, how it was bounded) around ``answer``: the truth is inside with
    probability ``level`` (at least ``level`` when bounded), for noise of ``variance`` under
    privacy ``definition`` made of ``draws`` draws (None: not known), whose half-widths at
    ``LADDER`` are ``quantiles`` if the answer gives them."""
    check_level(level)
    if variance == 0:
        return answer, answer, EXACT
    chebyshev = math.sqrt(variance / (1 - level))
    if definition == ZCDP:
        half, how = NormalDist().inv_cdf((1 + level) / 2) * math.sqrt(variance), GAUSSIAN
    elif draws == 1:
        half, how = math.sqrt(variance / 2) * math.log(1 / (1 - level)), LAPLACE
    elif quantiles:
        half, how = _from_ladder(level, quantiles), LAPLACE_SUM
        if half > chebyshev:  # past the ladder's top: both bounds hold, take the narrower
            half, how = chebyshev, CHEBYSHEV
    else:
        half, how = chebyshev, CHEBYSHEV
    return answer - half, answer + half, how


def of_answer(answer: dict, level: float) -> list[tuple[float, float, str]]:
    """Each query's interval at ``level`` from a noisy answer as served or stored (older
    answers lack ``noise_draws`` or ``noise_quantiles``: their intervals are bounded)."""
    count = len(answer["answers"])
    draws = answer.get("noise_draws") or [None] * count
    quantiles = answer.get("noise_quantiles") or [None] * count
    definition = answer.get("definition", PURE)
    return [interval(value, variance, level, definition, n, q) for value, variance, n, q in zip(
        answer["answers"], answer["expected_squared_error"], draws, quantiles, strict=True)]


def described(answer: dict, level: float) -> dict:
    """The intervals of ``answer`` at ``level`` as a reply gives them."""
    low, high, how = zip(*of_answer(answer, level)) if answer["answers"] else ((), (), ())
    return {"level": level, "low": list(low), "high": list(high), "method": list(how)}


def _from_ladder(level: float, quantiles: list[float]) -> float:
    """The half-width at ``level`` from those at ``LADDER``: exact on it, else never too
    narrow (the module's docstring: the log-tail is concave)."""
    points = [(0.0, 0.0)] + [(h, math.log(1 - at)) for at, h in zip(LADDER, quantiles)]
    target = math.log(1 - level)
    above = [h for at, h in zip(LADDER, quantiles) if at >= level - 1e-12]
    if above and math.isclose(LADDER[len(LADDER) - len(above)], level, abs_tol=1e-12):
        return above[0]
    below = [p for at, p in zip((0.0, *LADDER), points) if at < level]
    best = above[0] if above else math.inf
    if len(below) >= 2:
        (h1, y1), (h2, y2) = below[-2:]
        if y2 < y1:  # the chord through the two below, extended to the level
            best = min(best, h2 + (target - y2) * (h2 - h1) / (y2 - y1))
    return best


def laplace_sum_ladder(weights) -> list[float]:
    """The exact half-widths h at each ``LADDER`` level of Σ w_j L_j, L_j i.i.d. Lap(1): the
    smallest h with P(|Σ| ≤ h) ≥ level, to 1e-9 in probability.

    For a symmetric sum S with characteristic function φ(s) = Π (1 + w_j² s²)⁻¹,
    P(|S| ≤ t) = Δt/π + (2/π) Σ_k φ(kΔ) sin(kΔt)/k, up to the probability that |S| exceeds
    2π/Δ − t (the series is the CDF of S folded with period 2π/Δ; Δ is taken so that this is
    60 standard deviations away: below 1e-30).  The series stops where the rest is below 1e-10:
    φ(s)/s decreases, so the rest of the sine series is at most 2 φ(K Δ) / (K Δ t)."""
    import numpy as np

    w = np.abs(np.asarray(weights, dtype=float))
    w = w[w > 0]
    sigma = math.sqrt(2 * float((w ** 2).sum()))
    c = w / sigma  # in units of the sum's standard deviation
    step = 2 * math.pi / 60
    t_min = 0.3  # P(|S| ≤ 0.3 σ) < 0.5 for any log-concave symmetric S of variance 1

    def log_phi(s):
        return -np.log1p(np.multiply.outer(s, c) ** 2).sum(axis=-1)

    probe = np.geomspace(step, 1e7, 400)
    small = 2 * np.exp(log_phi(probe)) / (probe * t_min) < 1e-10
    stop = float(probe[np.argmax(small)]) if small.any() else 1e7
    s = np.arange(1, int(stop / step) + 2) * step
    phi = np.concatenate([np.exp(log_phi(chunk)) for chunk in np.array_split(
        s, max(1, len(s) * len(c) // 2_000_000))])
    k = np.arange(1, len(s) + 1)

    def cdf(t):  # P(|S| ≤ t) and its derivative, for a vector t
        angle = np.multiply.outer(t, s)
        return (step * t / math.pi + 2 / math.pi * (np.sin(angle) * (phi / k)).sum(axis=1),
                step / math.pi + 2 * step / math.pi * (np.cos(angle) * phi).sum(axis=1))

    levels = np.array(LADDER)
    low, high = np.zeros(len(levels)), np.sqrt(1 / (1 - levels))  # Chebyshev: never below
    t = np.array([NormalDist().inv_cdf((1 + at) / 2) for at in LADDER])
    for _ in range(60):
        value, density = cdf(t)
        gap = value - levels
        low, high = np.where(gap < 0, t, low), np.where(gap >= 0, t, high)
        if np.all(np.abs(gap) < 1e-10):
            break
        newton = t - gap / np.maximum(density, 1e-300)
        t = np.where((newton > low) & (newton < high), newton, (low + high) / 2)
    return [float(h) * sigma for h in t]
