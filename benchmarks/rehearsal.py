"""Wall time and peak memory of the 5-host rehearsal (tests/test_testbed.py, scripts/testbed).

    python benchmarks/rehearsal.py

Runs the rehearsal test once (root and `ip netns` needed), samples the resident memory of
every process inside the five host namespaces each second, and prints the phases' wall times,
the total and the peak memory as a table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOSTS = ("ck-private-1", "ck-private-2", "ck-public-1", "ck-public-2", "ck-public-3")


def namespace_rss_mib() -> float:
    total_kib = 0
    for host in HOSTS:
        pids = subprocess.run(["ip", "netns", "pids", host], capture_output=True,
                              text=True).stdout.split()
        for pid in pids:
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    total_kib += int(line.split()[1])
    return total_kib / 1024


def main() -> int:
    peak = {"mib": 0.0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak["mib"] = max(peak["mib"], namespace_rss_mib())
            done.wait(1)

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "phases.json"
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-n", "0", "-m", "testbed",
             "-p", "no:cacheprovider", str(REPO / "tests" / "test_testbed.py")],
            cwd=REPO, env={**os.environ, "COCKTAIL_REHEARSAL_REPORT": str(report)})
        wall = time.monotonic() - started
        done.set()
        sampler.join()
        phases = json.loads(report.read_text()) if report.exists() else {}
    print("| phase | seconds |\n|---|---|")
    for phase, seconds in phases.items():
        print(f"| {phase} | {seconds:.1f} |")
    print(f"| **whole rehearsal (pytest -m testbed)** | **{wall:.1f}** |")
    print(f"\npeak resident memory of the five hosts' processes: {peak['mib'] / 1024:.2f} GiB")
    print("rehearsal test:", "passed" if result.returncode == 0 else "FAILED")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
