"""benchmarks/measure.py counts the CPU of what a command leaves running: a publish's
partitioning workers are children of a fork server the publishing process does not wait for,
and a count of the reaped children alone left them out."""

from __future__ import annotations

import sys

from .conftest import REPO

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"


def test_the_cpu_of_an_orphaned_grandchild_is_counted(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    from measure import measured

    # the shell starts a subshell that starts the burner and exits at once: the burner is
    # orphaned, as a fork server is when the publish ends
    done = measured(["sh", "-c", f"({sys.executable} -c '{BURN}' &); exit 0"])
    assert done.code == 0 and done.cpu >= 0.45, done
