"""Noise from OpenDP's floating-point-safe samplers (never `random` or numpy's): Laplace for
pure ε-DP (here α), Gaussian for ρ-zero-concentrated DP (zCDP)."""

from __future__ import annotations

from functools import lru_cache

# The privacy definitions, each with its sampler below, and what its per-query parameter and
# budgets are called: pure ε-DP (α here; Laplace) and ρ-zero-concentrated DP (Gaussian).
DEFINITIONS = ("pure", "zcdp")
PURE, ZCDP = DEFINITIONS
PARAMETER = {PURE: "alpha", ZCDP: "rho"}
SYMBOL = {PURE: "α", ZCDP: "ρ"}  # the parameter as people read it


def _prelude():
    import opendp.prelude as dp  # here, not above: it would slow every command's start

    dp.enable_features("contrib")
    return dp


@lru_cache(maxsize=256)
def _measurement(kind: str, scale: float):
    dp = _prelude()
    vectors = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    if kind == "laplace":
        return dp.m.make_laplace(vectors, dp.l1_distance(T=float), scale=scale)
    return dp.m.make_gaussian(vectors, dp.l2_distance(T=float), scale=scale)


def _noisy(kind: str, values: list[float], scale: float) -> list[float]:
    if scale <= 0:
        raise ValueError(f"the {kind} scale must be positive, got {scale}")
    return list(_measurement(kind, float(scale))([float(v) for v in values]))


def laplace(values: list[float], scale: float) -> list[float]:
    """``values`` + i.i.d. Lap(scale) noise, one draw per value."""
    return _noisy("laplace", values, scale)


def gaussian(values: list[float], scale: float) -> list[float]:
    """``values`` + i.i.d. N(0, scale²) noise, one draw per value: ρ-zCDP for an L2
    sensitivity Δ₂ when scale = Δ₂ / √(2ρ)."""
    return _noisy("gaussian", values, scale)


@lru_cache(maxsize=256)
def epsilon(rho: float, delta: float) -> float:
    """The ε of (ε, δ)-DP that ρ-zCDP implies at ``delta``: OpenDP's conversion of the
    Gaussian mechanism's privacy profile (tighter than Bun and Steinke's ρ + 2√(ρ ln 1/δ))."""
    if not (rho > 0 and 0 < delta < 1):
        raise ValueError(f"need ρ > 0 and 0 < δ < 1, got ρ = {rho}, δ = {delta}")
    unit = _measurement("gaussian", 1 / (2 * rho) ** 0.5)  # ρ-zCDP at Δ₂ = 1
    return float(_prelude().c.make_zCDP_to_approxDP(unit).map(1.0).epsilon(delta))
