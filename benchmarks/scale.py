"""Publishing at scale: both engines on synthetic baskets of growing size.

    python benchmarks/scale.py [--sizes 100k,1m,3m,10m] [--engines single,spark]
                               [--executors 1m] [--no-audit] [--json] [--data DIR]

Each run is `cocktail publish --json` in its own process on data from `cocktail generate`
(seed 1, k=5, m=3, improved), then `cocktail audit --json`.  The table gives wall time, CPU
time (user + system of the run and every process it started), records per second, the peak
RSS of the largest process of the run's process tree (sampled from /proc every 0.2 s: the
Python driver, Spark's JVM and its Python workers; ``--json`` gives each one's peak), public
chunks, the audit result and the publish's phases.  ``--executors SIZE`` adds Spark runs on
local[1] and local[2] at that size (the throughput of one executor against two).  Generated
data is kept in ``--data`` (default: a temporary directory) and reused.  Every run's store is
kept until the benchmark ends (about 0.4 GB per million records), then deleted with the
temporary directory.  A Spark run on local[N] starts its driver from the class-data archive
an earlier run made (docs/engines.md); on a machine that has none, the first Spark run makes
it, about 5 s longer.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from measure import adopt_orphans, descendants, reap_orphans

SIZES = {"100k": 100_000, "300k": 300_000, "1m": 1_000_000, "3m": 3_000_000,
         "10m": 10_000_000}
COCKTAIL = [sys.executable, "-m", "cocktail.cli"]


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_ticks(pid: int) -> int:
    """User + system clock ticks a process has used so far."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return 0


def role(pid: int, root: int) -> str:
    """Which part of a run a process is: the Python driver, Spark's JVM or a Python worker."""
    if pid == root:
        return "driver"
    try:
        with open(f"/proc/{pid}/comm") as f:
            return "jvm" if f.read().strip() == "java" else "workers"
    except OSError:
        return "workers"


def run_measured(command: list[str]) -> tuple[subprocess.CompletedProcess, float, float, dict]:
    """The command's result, wall seconds, CPU seconds and each role's largest single-process
    peak RSS (KB).  CPU: what the run and every process it started used, those it left
    running (a publish's fork server and its workers, Spark's JVM) waited for here, or, if
    more, the sum over its process tree as last sampled."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    peak: dict[str, int] = {}
    ticks: dict[int, int] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for pid in descendants(process.pid):
                kind = role(pid, process.pid)
                peak[kind] = max(peak.get(kind, 0), rss_kb(pid))
                ticks[pid] = max(ticks.get(pid, 0), cpu_ticks(pid))
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = process.communicate()
    reap_orphans()
    done.set()
    sampler.join()
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = max(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
              sum(ticks.values()) / os.sysconf("SC_CLK_TCK"))
    return subprocess.CompletedProcess(command, process.returncode, out, err), seconds, cpu, peak


def dataset(directory: Path, size: str) -> Path:
    path = directory / f"synthetic-{size}.dat"
    if not path.exists():
        subprocess.run([*COCKTAIL, "generate", str(path), "--records", str(SIZES[size]),
                        "--seed", "1"], check=True, capture_output=True)
    return path


def one_run(data: Path, engine: str, master: str | None, audit: bool,
            work: Path) -> dict:
    # Each run its own store, none deleted before the benchmark ends: on ext4 without a
    # journal, creating files within minutes of deleting many costs several times more
    # (docs/engines.md, "Measured as a user's install runs").
    store = Path(tempfile.mkdtemp(prefix="scale-store-", dir=work))
    command = [*COCKTAIL, "publish", str(data), "--store", str(store), "--json",
               "--engine", engine]
    if master:
        command += ["--master", master]
    done, seconds, cpu, peak = run_measured(command)
    if done.returncode != 0:
        return {"error": done.stderr[-500:]}
    report = json.loads(done.stdout)
    row = {"records": report["records"], "wall_seconds": round(seconds, 1),
           "cpu_seconds": round(cpu, 1),
           "records_per_second": round(report["records"] / seconds),
           "peak_rss_mb": round(max(peak.values()) / 1024),
           "peak_rss_mb_by_process": {kind: round(kb / 1024) for kind, kb in peak.items()},
           "public_chunks": report["public_chunks"],
           "phase_seconds": report["phase_seconds"]}
    if audit:
        checked, audit_seconds, _, _ = run_measured([*COCKTAIL, "audit", "--store", str(store),
                                                  "--json"])
        row["audit"] = "PASS" if checked.returncode == 0 and json.loads(checked.stdout)["ok"] \
            else "FAIL"
        row["audit_seconds"] = round(audit_seconds, 1)
    return row


def main() -> None:
    adopt_orphans()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100k,1m,3m,10m")
    parser.add_argument("--engines", default="single,spark")
    parser.add_argument("--executors", default="1m",
                        help="size for the local[1] vs local[2] Spark runs ('' to skip)")
    parser.add_argument("--single-up-to", default="3m",
                        help="largest size the single-machine engine runs (its memory grows "
                        "with the records)")
    parser.add_argument("--no-audit", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--data", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cocktail-scale-"))
    try:
        rows = measure_all(args, work)
    finally:
        shutil.rmtree(work)
    if args.json:
        print(json.dumps(rows))
        return
    print_table(rows)


def measure_all(args: argparse.Namespace, work: Path) -> list[dict]:
    data_dir = args.data or work
    data_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    runs = [(size, engine, "local[2]" if engine == "spark" else None)
            for size in args.sizes.split(",") for engine in args.engines.split(",")
            if engine == "spark" or SIZES[size] <= SIZES[args.single_up_to]]
    if args.executors:
        runs += [(args.executors, "spark", "local[1]"), (args.executors, "spark", "local[2]")]
    for size, engine, master in runs:
        row = one_run(dataset(data_dir, size), engine, master, not args.no_audit, work)
        rows.append({"size": size, "engine": engine, "master": master, **row})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def print_table(rows: list[dict]) -> None:
    table = Table(title="Publishing at scale (k=5, m=3, improved; synthetic, seed 1)")
    for column in ("size", "engine", "wall s", "CPU s", "records/s",
                   "peak RSS MB (largest process)", "public chunks", "audit", "phases (s)"):
        table.add_column(column, justify="left" if column == "phases (s)" else "right")
    for row in rows:
        if "error" in row:
            table.add_row(row["size"], row["engine"], "error", row["error"][-60:], *[""] * 5)
            continue
        engine = row["engine"] + (f" {row['master']}" if row["master"] else "")
        table.add_row(row["size"], engine, f"{row['wall_seconds']:.1f}",
                      f"{row['cpu_seconds']:.1f}", f"{row['records_per_second']:,}",
                      f"{row['peak_rss_mb']:,}", f"{row['public_chunks']:,}",
                      row.get("audit", "-"), ", ".join(f"{k} {v:.1f}" for k, v in
                                                       row["phase_seconds"].items()))
    Console(width=240).print(table)


if __name__ == "__main__":
    main()
