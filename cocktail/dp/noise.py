"""Laplace noise from OpenDP's floating-point-safe sampler (never `random` or numpy's)."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=256)
def _measurement(scale: float):
    import opendp.prelude as dp  # here, not above: it would slow every command's start

    dp.enable_features("contrib")
    return dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                             dp.l1_distance(T=float), scale=scale)


def laplace(values: list[float], scale: float) -> list[float]:
    """``values`` + i.i.d. Lap(scale) noise, one draw per value."""
    if scale <= 0:
        raise ValueError(f"the Laplace scale must be positive, got {scale}")
    return list(_measurement(float(scale))([float(v) for v in values]))
