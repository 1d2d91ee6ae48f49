"""How the benchmarks time a whole command: wall seconds, CPU seconds (its own and its
descendants') and its peak RSS, from ``wait4``.

A child's peak RSS as wait4 reports it includes the RSS of whatever process forked it (Linux
keeps the old image's high-water mark across exec), so each command is started by a small
launcher, itself started fresh, which reaps it and writes its rusage to a file.  The launcher
is a child subreaper: a descendant the command leaves to run on (a fork server, whose children
are a publish's partitioning workers, outlives the publish by a moment) comes back to it, and
it reaps those too, so their CPU is counted.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

PR_SET_CHILD_SUBREAPER = 36

# adopt_orphans and reap_orphans, inline: the launcher imports nothing it need not
LAUNCHER = """import ctypes, json, os, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
cpu, rss = usage.ru_utime + usage.ru_stime, usage.ru_maxrss
while True:
    try:
        _, _, usage = os.wait4(-1, 0)
    except ChildProcessError:
        break
    cpu, rss = cpu + usage.ru_utime + usage.ru_stime, max(rss, usage.ru_maxrss)
with open(sys.argv[1], "w") as out:
    json.dump([os.waitstatus_to_exitcode(status), cpu, rss], out)
"""


@dataclass(frozen=True)
class Measured:
    code: int
    out: bytes
    err: bytes
    wall: float    # seconds, interpreter start included
    cpu: float     # user + system seconds, the processes it waited for included
    rss_mb: float  # the largest single process's peak

    def costs(self) -> dict:
        return {"wall": round(self.wall, 2), "cpu": round(self.cpu, 2),
                "rss_mb": round(self.rss_mb, 1)}


def measured(command: list[str], env: dict | None = None) -> Measured:
    """Run ``command`` (found on PATH) to its end, its output kept."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r") as usage:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", LAUNCHER, usage.name, *command], stdout=out,
                       stderr=err, env=env or os.environ, check=True)
        wall = time.perf_counter() - started
        code, cpu, rss = json.load(usage)
        out.seek(0)
        err.seek(0)
        return Measured(code, out.read(), err.read(), wall, cpu, rss / 1024)


def adopt_orphans() -> None:
    """Have what this process's children leave running come back to it (Linux's child
    subreaper), to be waited for by :func:`reap_orphans`."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def reap_orphans() -> None:
    """Wait for every child of this process: after :func:`adopt_orphans`, what a measured
    command left running, whose CPU then counts in ``RUSAGE_CHILDREN``."""
    while True:
        try:
            os.wait4(-1, 0)
        except ChildProcessError:
            return


def parent_of(pid: int) -> int | None:
    """The parent of process ``pid`` (/proc), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def descendants(root: int) -> list[int]:
    """``root`` and every process below it, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (parent := parent_of(int(entry))) is not None:
            children.setdefault(parent, []).append(int(entry))
    found, pending = [], [root]
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending.extend(children.get(pid, []))
    return found
