"""Queries at scale: opening a publication, exact counts, and `cocktail serve` readiness.

    python benchmarks/query_scale.py [--sizes 100k,1m] [--with-10m] [--queries 2000]
                                     [--runs 3] [--data DIR] [--parts open,resolve,cli,serve]
                                     [--cluster-runner index-local] [--json]

Per size, data from `cocktail generate --seed 1` is published once with `cocktail publish`
(single engine; 10M, behind ``--with-10m``, on Spark local[2]) into ``--data`` (default: a
temporary directory; a store already there is reused).  Then, each in a fresh process:

* **open**: `Publication.open(store).warm()` in process (the persisted term index, every
  term deserialized), its wall time and the process's RSS after it; then p50/p99 of exact
  counts over ``--queries`` random 1–3-term conjunctions (three in four from real records);
* **resolve**: the same open without the term index, as versions written before it are read
  (the chunks resolved through the pseudonym maps, record ids loaded): the old cost;
* **cli**: `cocktail query --exact "count(a & b)"`, end to end (wall, CPU, peak RSS), median
  of ``--runs``, beside `cocktail --version` (the interpreter and the CLI's imports alone);
* **serve**: `cocktail serve` from start until it answers `GET /v1/limits` (wall, and the CPU
  it used), the open time it logs, and its RSS then;
* **cluster** (not in the default ``--parts``): the same data published again with its term
  index in 4 parts, and a batch of 200 of the queries as `cocktail query --exact --batch` on
  the fast path and on ``--cluster-runner`` (one job, a map task per part): wall, CPU and the
  peak RSS of the largest process; the answers must agree.

On a shared machine the wall times carry other processes' load; the CPU column does not.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.served import free_port  # noqa: E402

SIZES = {"100k": 100_000, "1m": 1_000_000, "10m": 10_000_000}
COCKTAIL = [sys.executable, "-m", "cocktail.cli"]
QUERY_SAMPLE = 20_000  # records read from the data file to draw queries from

# Run in a fresh process, so that its RSS is the open's alone.
IN_PROCESS = r"""
import json, sys, time
from pathlib import Path
from cocktail.query import Engine, Publication
from cocktail.querylang import CountQuery
from cocktail.store import LocalStore

def rss_mb():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

store, mode, queries = sys.argv[1], sys.argv[2], json.loads(Path(sys.argv[3]).read_text())
started = time.perf_counter()
publication = Publication.open(LocalStore(store))
if mode == "open":
    publication.warm()
else:  # what a reader did before the index: resolve every chunk, load the record ids
    publication.__dict__["term_records"] = publication.resolved_term_records()
    publication.record_ids
opened = time.perf_counter() - started
rss = rss_mb()
engine, times = Engine(publication), []
for terms in queries:
    query = [CountQuery(tuple(terms))]
    began = time.perf_counter_ns()
    engine.counts(query)
    times.append(time.perf_counter_ns() - began)
times.sort()
print(json.dumps({"open_s": opened, "rss_mb": rss, "p50_us": times[len(times) // 2] / 1e3,
                  "p99_us": times[int(len(times) * 0.99)] / 1e3}))
"""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s(pid: int) -> float:
    """User and system seconds the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def prepare(size: str, data: Path, shards: int = 1) -> Path:
    """The published store of ``size`` (generated and published once, then reused), its term
    index in ``shards`` parts."""
    source = data / f"synthetic-{size}.dat"
    store = data / (f"store-{size}" if shards == 1 else f"store-{size}-{shards}-shards")
    if not source.exists():
        subprocess.run([*COCKTAIL, "generate", str(source), "--records", str(SIZES[size]),
                        "--seed", "1"], check=True, capture_output=True)
    if not (store / "public" / "CURRENT").exists():
        engine = ["--engine", "spark"] if size == "10m" else []
        per_shard = ["--index-shard", str(-(-SIZES[size] // shards))] if shards > 1 else []
        subprocess.run([*COCKTAIL, "publish", str(source), "--store", str(store), "--json",
                        *engine, *per_shard], check=True, capture_output=True)
    return store


def queries(source: Path, n: int) -> list[list[str]]:
    from cocktail.synthetic import random_conjunctions

    records = []
    with source.open() as lines:
        for line in lines:
            records.append(frozenset(line.split()))
            if len(records) == QUERY_SAMPLE:
                break
    return [list(q) for q in random_conjunctions(records, n, seed=3)]


def in_process(store: Path, mode: str, workload: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", IN_PROCESS, str(store), mode, str(workload)],
                          check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def cli(*arguments: str) -> dict:
    """One `cocktail ...`: wall and CPU seconds, peak RSS (from wait4), what it printed."""
    with tempfile.TemporaryFile() as printed:
        started = time.perf_counter()
        process = subprocess.Popen([*COCKTAIL, *arguments], stdout=printed)
        _, status, usage = os.wait4(process.pid, 0)
        if status:
            raise RuntimeError(f"cocktail {' '.join(arguments)} failed ({status})")
        wall = time.perf_counter() - started
        printed.seek(0)
        return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
                "rss_mb": usage.ru_maxrss / 1024, "printed": printed.read()}


def cluster(size: str, data: Path, asked: list[list[str]], runner: str) -> dict:
    """A batch counted in process and as one job over 4 index parts."""
    from cocktail.querylang import CountQuery

    store, batch = prepare(size, data, shards=4), data / f"batch-{size}.txt"
    batch.write_text("".join(f"{CountQuery(tuple(q))}\n" for q in asked[:200]))
    runs = {name: cli("query", "--exact", "--batch", str(batch), "--store", str(store),
                      "--runner", name, "--json") for name in ("fast", runner)}
    answers = {name: json.loads(run.pop("printed"))["answers"] for name, run in runs.items()}
    if answers["fast"] != answers[runner]:
        raise RuntimeError(f"{runner} disagrees with the fast path on {size}")
    return {"runner": runner, "shards": 4, "queries": len(answers["fast"]), **runs}


def serve_ready(store: Path) -> dict:
    port, log = free_port(), tempfile.TemporaryFile()
    started = time.perf_counter()
    process = subprocess.Popen([*COCKTAIL, "serve", "--store", str(store), "--port", str(port)],
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/v1/limits", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None:
                    raise RuntimeError("cocktail serve did not start") from None
                time.sleep(0.02)
        ready, rss, cpu = time.perf_counter() - started, rss_mb(process.pid), cpu_s(process.pid)
        log.seek(0)
        opened = re.search(rb"opened in ([0-9.]+) s", log.read())
        return {"ready_s": ready, "cpu_s": cpu,
                "open_s": float(opened.group(1)) if opened else float("nan"), "rss_mb": rss}
    finally:
        process.terminate()
        process.wait(10)
        log.close()


def median_of(runs: list[dict]) -> dict:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]
            if key != "printed"}


PARTS = ("open", "resolve", "cli", "serve", "cluster")


def measure(size: str, data: Path, n: int, runs: int, parts: list[str], runner: str) -> dict:
    store = prepare(size, data)
    workload = data / f"queries-{size}.json"
    asked = queries(data / f"synthetic-{size}.dat", n)
    workload.write_text(json.dumps(asked))
    pair = next(q for q in asked if len(q) == 2)
    steps = {
        "open": lambda: in_process(store, "open", workload),
        "resolve": lambda: in_process(store, "resolve", workload),
        "cli": lambda: median_of([cli("query", "--exact", f"count({' & '.join(pair)})",
                                      "--store", str(store)) for _ in range(runs)]),
        "cli_start": lambda: median_of([cli("--version") for _ in range(runs)]),
        "serve": lambda: median_of([serve_ready(store) for _ in range(runs)]),
        "cluster": lambda: cluster(size, data, asked, runner),
    }
    wanted = [*parts, *(["cli_start"] if "cli" in parts else [])]
    return {"size": size, **{part: steps[part]() for part in wanted}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100k,1m")
    parser.add_argument("--with-10m", action="store_true", help="also 10M (Spark-published)")
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--data", type=Path)
    parser.add_argument("--parts", default="open,resolve,cli,serve",
                        help=f"what to measure, of {','.join(PARTS)}")
    parser.add_argument("--cluster-runner", default="index-local",
                        help="with --parts ...,cluster: the runner over the index parts")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = args.sizes.split(",") + (["10m"] if args.with_10m else [])
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size(s) {', '.join(unknown)}; choose from {', '.join(SIZES)}")
    data = args.data or Path(tempfile.mkdtemp(prefix="query-scale-"))
    data.mkdir(parents=True, exist_ok=True)
    parts = args.parts.split(",")
    if set(parts) - set(PARTS):
        parser.error(f"unknown part(s) {', '.join(set(parts) - set(PARTS))}")
    results = [measure(size, data, args.queries, args.runs, parts, args.cluster_runner)
               for size in sizes]
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    table = Table(title="Queries at scale (k=5, m=3, synthetic, seed 1)")
    table.add_column("records")
    cells = {"open": ("open (index) / RSS / p50 / p99 count", lambda o:
                      f"{o['open_s']:.3f} s / {o['rss_mb']:.0f} MB / {o['p50_us']:.0f} / "
                      f"{o['p99_us']:.0f} µs"),
             "resolve": ("open (resolved) / RSS / p50 / p99", lambda o:
                         f"{o['open_s']:.2f} s / {o['rss_mb']:.0f} MB / {o['p50_us']:.0f} / "
                         f"{o['p99_us']:.0f} µs"),
             "cli": ("query --exact: wall / CPU / RSS", lambda c:
                     f"{c['wall_s']:.2f} s / {c['cpu_s']:.2f} s / {c['rss_mb']:.0f} MB"),
             "cli_start": ("--version: wall / CPU", lambda v:
                           f"{v['wall_s']:.2f} s / {v['cpu_s']:.2f} s"),
             "serve": ("serve: ready / CPU / open / RSS", lambda v:
                       f"{v['ready_s']:.2f} s / {v['cpu_s']:.2f} s / {v['open_s']:.2f} s / "
                       f"{v['rss_mb']:.0f} MB"),
             "cluster": ("batch of 200, fast vs job over 4 parts: wall / CPU / RSS", lambda c:
                         " vs ".join(f"{c[n]['wall_s']:.1f} s / {c[n]['cpu_s']:.1f} s / "
                                     f"{c[n]['rss_mb']:.0f} MB" for n in ("fast", c["runner"]))
                         + f" ({c['runner']})")}
    shown = [part for part in cells if part in results[0]]
    for part in shown:
        table.add_column(cells[part][0], justify="right")
    for r in results:
        table.add_row(r["size"], *(cells[part][1](r[part]) for part in shown))
    Console(width=220).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
