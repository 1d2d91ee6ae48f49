"""BLAS on one thread.  These machines have two shared cores: OpenBLAS threads on small
products only contend, and on a busy machine they spin (the overlay tree of 1M records took
19.5 s of CPU with the default threads, 4 s with one).  A process that computes sets it once
(:func:`one_thread`); a search that may load scipy, whose own BLAS a limit set earlier does not
reach, runs inside :func:`one_blas_thread`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING

from .extras import MissingExtra, require

if TYPE_CHECKING:
    from threadpoolctl import ThreadpoolController  # the owner's engine: the CLI's root imports us


def before_numpy() -> None:
    """For an entry point, before numpy loads: OpenBLAS starts a thread a core as it loads, and
    they spin before they sleep (importing numpy took 0.34 s of CPU here, 0.23 s on one
    thread: medians of 15 pairs); every command runs BLAS on one thread anyway.  An
    OPENBLAS_NUM_THREADS the user set is kept."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


@cache
def one_thread() -> None:
    """One BLAS thread for the rest of this process (numpy's BLAS, and any loaded by now)."""
    require("threadpoolctl").ThreadpoolController().limit(limits=1, user_api="blas")


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """One BLAS thread inside, scipy's included (it is loaded first): on the strategy search's
    small matrices threads only contend, and their summation order would make the search's
    path differ from run to run."""
    with _with_scipy().limit(limits=1, user_api="blas"):
        yield


@cache
def _with_scipy() -> ThreadpoolController:
    """The BLAS libraries, scipy's included, found once (1 ms each time)."""
    from .dp import optimize
    try:
        optimize.minimize()
    except MissingExtra:
        pass  # no [search]: numpy's BLAS is the only one
    return require("threadpoolctl").ThreadpoolController()
