"""Publish the full BMS-WebView files for every (k, m) and method, audit, and check queries;
or, with ``--speed``, time the default publish beside the disassociation peer.

    python benchmarks/publish_bms.py [--queries 200] [--cluster-size 2000] [--csv out.csv]
    python benchmarks/publish_bms.py --speed [--runs 3] [--peer DIR] [--peer-include DIR]

For every run: publish to a fresh local store, run the independent audit, answer random 1-3 term
conjunctive queries exactly and compare each with a brute-force count on the raw records.
Prints one table row per run (times in seconds); exits non-zero if any audit or answer fails.

``--speed``: `cocktail publish --json` (k=5, m=3, improved, defaults otherwise) as a whole
process, ``--runs`` times per file, interleaved with the peer when ``--peer`` names a checkout of
github.com/ikotsov/Disassociation-Algorithm (C++; the only public disassociation code): it is
built here with g++ -O2 and a driver of ours (HorPart with maxClusterSize = 2k, then VerPart per
cluster, as ../shared/notes/peer-disassociation.md describes), against nlohmann/json.hpp from
``--peer-include`` (Debian's nlohmann-json3-dev puts it in /usr/include).  Medians of wall,
CPU (user + system, children included) and peak RSS, Cocktail's phases, each one's public share
of the term occurrences, and the ratios.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cocktail.audit import audit
from cocktail.dataset import load
from cocktail.publish import PublishParams, publish
from cocktail.query import Engine, Publication
from cocktail.querylang import CountQuery
from cocktail.store import LocalStore
from cocktail.synthetic import random_conjunctions
from measure import Measured, measured

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
# ``--speed`` times Cocktail as a user's install runs it: with its bytecode cache (pip writes it
# at install; PYTHONDONTWRITEBYTECODE in the caller's shell made every run compile ~20 modules,
# 0.2-0.3 s), and each run into a store of its own, all kept until the benchmark ends: on an
# ext4 without a journal, creating a file skips, one by one, the inodes freed in the last
# 60-360 s (the kernel's recently_deleted), so deleting a run's 1,800 files made the next
# runs' commits 1.0-1.5 s instead of 0.3 (the peer writes one file).  Run it on a file system
# that has not just deleted many files (a test run, another benchmark) for the same reason.
USERS_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
FILES = ("bms-webview-1.dat", "bms-webview-2.dat")
PARAMS = ((2, 2), (5, 3), (10, 2))
METHODS = ("basic", "testing")


def run_one(dataset, method: str, k: int, m: int, cluster_size: int, n_queries: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalStore(tmp)
        report = publish(dataset, store, PublishParams(k=k, m=m, method=method,
                                                       cluster_size=cluster_size))
        started = time.perf_counter()
        checked = audit(store)
        audit_seconds = time.perf_counter() - started
        publication = Publication.open(store)
        queries = random_conjunctions(dataset.records, n_queries, seed=k * 10 + m)
        started = time.perf_counter()
        wrong = sum(Engine(publication).count(CountQuery(q)) != dataset.count_containing(q)
                    for q in queries)
        query_seconds = time.perf_counter() - started
    return {"dataset": Path(dataset.source).name, "method": method, "k": k, "m": m,
            "publish_s": report.seconds, "public_chunks": report.public_chunks,
            "private_chunks": report.private_chunks, "private_terms": report.private_terms,
            "private_subrecords": report.private_subrecords,
            "private_term_share": report.private_term_share,
            "audit_ok": checked.ok, "audit_s": round(audit_seconds, 2),
            "queries": len(queries), "wrong_answers": wrong,
            "query_ms_mean": round(1000 * query_seconds / max(1, len(queries)), 2)}


# The peer's main.cpp fixes its parameters and paths; this driver takes them as arguments.
PEER_DRIVER = r"""
#include <cstdlib>
#include <iostream>
#include "horpart/dataset.h"
#include "horpart/horpart.h"
#include "horpart/utility_constraints.h"
#include "verpart/verpart.h"
int main(int argc, char **argv) {
  if (argc != 5) { std::cerr << "usage: peer IN.csv OUT.json K M\n"; return 2; }
  size_t k = std::atoi(argv[3]), m = std::atoi(argv[4]);
  Dataset data = readCSV(argv[1]);
  UtilityConstraints none;
  std::vector<VerPartOutput> out;
  for (const auto &cluster : HorPart(data, {}, none, {}, 2 * k))
    out.push_back(VerPart(cluster, none, k, m));
  exportToJson(out, argv[2]);
}
"""


def build_peer(source: Path, include: Path, work: Path) -> Path:
    """The peer's HorPart and VerPart with our driver, compiled in ``work`` (the checkout is
    only read; its sources include ``../third_party/json.hpp``, linked here)."""
    for part in ("horpart", "verpart"):
        shutil.copytree(source / part, work / part)
    (work / "third_party").mkdir()
    (work / "third_party" / "json.hpp").symlink_to(include / "nlohmann" / "json.hpp")
    (work / "driver.cpp").write_text(PEER_DRIVER)
    binary = work / "peer"
    subprocess.run(["g++", "-std=c++17", "-O2", "-I", str(work), "-I", str(include),
                    *map(str, sorted(work.glob("*part/*.cpp"))), str(work / "driver.cpp"),
                    "-o", str(binary)], check=True)
    return binary


def peer_input(path: Path, work: Path) -> Path:
    """A FIMI file as the peer reads it: terms separated by single commas."""
    converted = work / (path.stem + ".csv")
    with path.open() as lines, converted.open("w") as out:
        for line in lines:
            out.write(",".join(line.split()) + "\n")
    return converted


def peer_public_share(output: Path, pairs: int) -> float:
    """The share of the input's term occurrences the peer put in record chunks (it drops some:
    they count as not public)."""
    clusters = json.loads(output.read_text())["clusters"]
    return sum(len(sub) for cluster in clusters for chunk in cluster["record_chunks"]
               for sub in chunk) / pairs


def speed(files: list[Path], runs: int, peer: Path | None, work: Path) -> Table:
    table = Table(title="Publishing BMS-WebView, whole processes (k=5, m=3; medians of "
                  f"{runs}, interleaved)")
    for column in ("dataset", "tool", "wall s", "CPU s", "peak RSS MB", "public share",
                   "phases (s)"):
        table.add_column(column, justify="right" if column != "phases (s)" else "left")
    for path in files:
        ours: list[Measured] = []
        theirs: list[Measured] = []
        reports = []
        source = peer_input(path, work) if peer else None
        stores = work / "stores" / path.stem  # none deleted before the end: see USERS_ENV

        def ours_run(n: int) -> Measured:
            return measured([sys.executable, "-m", "cocktail.cli", "publish", str(path),
                             "--store", str(stores / str(n)), "--json"], env=USERS_ENV)

        def peer_run() -> Measured:
            return measured([str(peer), str(source), str(work / "peer.json"), "5", "3"])

        ours_run(0)  # untimed: the bytecode cache written, both inputs in the page cache
        if peer:
            peer_run()
        for n in range(1, runs + 1):
            ours.append(ours_run(n))
            reports.append(json.loads(ours[-1].out))
            if peer:
                theirs.append(peer_run())
        phases = {name: statistics.median(r["phase_seconds"][name] for r in reports)
                  for name in reports[0]["phase_seconds"]}
        share = 1 - reports[0]["private_term_share"]
        rows = [("cocktail", ours, share, ", ".join(f"{k} {v:.2f}" for k, v in phases.items()))]
        if peer:
            rows.append(("peer (C++)", theirs,
                         peer_public_share(work / "peer.json", load(path).records.pairs()), ""))
        for tool, done, public, detail in rows:
            wall, cpu, rss = (statistics.median(getattr(r, key) for r in done)
                              for key in ("wall", "cpu", "rss_mb"))
            table.add_row(path.name, tool, f"{wall:.2f}", f"{cpu:.2f}", f"{rss:.0f}",
                          f"{public:.1%}", detail)
        if peer:  # pair by pair: the machine's speed drifts between rounds
            ratios = (statistics.median(getattr(a, key) / getattr(b, key)
                                        for a, b in zip(ours, theirs))
                      for key in ("wall", "cpu", "rss_mb"))
            table.add_row(path.name, "cocktail / peer", *(f"{r:.2f}x" for r in ratios), "", "")
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--cluster-size", type=int, default=PublishParams.cluster_size)
    parser.add_argument("--csv", type=Path, help="also write the rows to this CSV file")
    parser.add_argument("--speed", action="store_true",
                        help="time the default publish (beside the peer with --peer)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--peer", type=Path, help="the disassociation peer's source directory "
                        "(the one holding horpart/ and verpart/)")
    parser.add_argument("--peer-include", type=Path, default=Path("/usr/include"),
                        help="where nlohmann/json.hpp is")
    args = parser.parse_args()
    if args.peer and not all((args.peer / part).is_dir() for part in ("horpart", "verpart")):
        parser.error(f"--peer {args.peer}: no horpart/ and verpart/ there; give the peer's "
                     "source directory")
    console = Console(width=240)  # the table is wide; never squeeze it into 80 columns
    if args.speed:
        files = [DATASETS / name for name in FILES if (DATASETS / name).exists()]
        with tempfile.TemporaryDirectory() as tmp:
            peer = build_peer(args.peer, args.peer_include, Path(tmp) / "peer-build") \
                if args.peer else None
            console.print(speed(files, args.runs, peer, Path(tmp)))
        return 0
    rows = []
    for name in FILES:
        path = DATASETS / name
        if not path.exists():
            console.print(f"[yellow]skipping {name}: {path} not present[/]")
            continue
        dataset = load(path)
        for method in METHODS:
            for k, m in PARAMS:
                rows.append(run_one(dataset, method, k, m, args.cluster_size, args.queries))
                console.print(f"done {name} {method} k={k} m={m}", style="dim")
    if not rows:
        console.print("[red]no dataset found[/]")
        return 2
    table = Table(title=f"Publishing BMS-WebView (cluster size {args.cluster_size})")
    for column in rows[0]:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    console.print(table)
    if args.csv:
        with args.csv.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    failed = [r for r in rows if not r["audit_ok"] or r["wrong_answers"]]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
