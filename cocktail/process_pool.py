"""The process pool of a publish or append: workers forked from a fork server, the whole tree
dying with the process that started it.

Killed (SIGKILL, the out-of-memory killer), a publish left its workers blocked on their job
queue for ever (each holds both ends of its pipe), the fork server alive for them (each holds
its "alive" pipe), multiprocessing's resource tracker alive for them too (each holds its
pipe), and every one of them holding the caller's stdout and stderr: a caller reading them
waited for ever.  Here the fork server dies with the process that started it and each worker
with the fork server (Linux's parent-death signal); the resource tracker then reads the end of
its pipe and exits on its own.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

from .lifetime import die_with_parent


def process_pool(workers: int, preload: str, initializer: Callable[[], None]
                 ) -> ProcessPoolExecutor:
    """``workers`` processes, forked from a fork server that imported ``preload`` once (the
    first pool of this process starts it; it lives as long as the thread that started it,
    which for the command line is the process), each running ``initializer`` first.
    Not forked from this process: a worker would inherit its descriptors (the publish lock
    among them) and hold them were this process killed, and would copy whatever lock another
    thread holds.  Not spawned: each spawned worker imported the program again (0.3 s of CPU
    each)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__, preload])
    return ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                               initargs=(initializer,))


def _start_worker(initializer: Callable[[], None]) -> None:
    """A worker's first act: die with the fork server it was forked from."""
    die_with_parent(_FORK_SERVER)
    initializer()


def _preloaded_by_fork_server() -> bool:
    """Whether the fork server is importing this module (its preload is its only hook): the
    first of multiprocessing.forkserver's functions up the stack is its ``main`` (a worker
    forked from it is inside ``_serve_one``)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get("__name__") == "multiprocessing.forkserver":
            return frame.f_code.co_name == "main"
        frame = frame.f_back
    return False


_FORK_SERVER: int | None = None  # in a fork server and its workers, its pid
if _preloaded_by_fork_server():
    _FORK_SERVER = os.getpid()
    # No expected parent to check: a fork server whose starter ended before this line finds
    # its "alive" pipe closed when it first looks, before it forks any worker, and exits.
    die_with_parent(None)
