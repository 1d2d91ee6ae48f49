"""A child process's lifetime against its parent's (Linux's parent-death signal): the process
pool's fork server and workers die with the process that started them; `serve --detach`'s
child dies with its command until it serves, then outlives it."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent: int | None) -> None:
    """SIGKILL for this process when its parent ends; ``parent``, the pid it expects as its
    parent: if that one ended before the signal was asked for, this process exits at once.
    Linux sends the signal when the parent's *thread* that forked this process ends, not its
    last thread.  No parent-death signal elsewhere: this process outlives its parent there."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def outlive_parent() -> None:
    """Undo :func:`die_with_parent`: from now on this process outlives its parent."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, 0, 0, 0, 0)
