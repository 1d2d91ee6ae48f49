"""Publish the full BMS-WebView files for every (k, m) and method, audit, and check queries.

    python benchmarks/publish_bms.py [--queries 200] [--cluster-size 2000] [--csv out.csv]

For every run: publish to a fresh local store, run the independent audit, answer random 1-3 term
conjunctive queries exactly and compare each with a brute-force count on the raw records.
Prints one table row per run (times in seconds); exits non-zero if any audit or answer fails.
"""

from __future__ import annotations

import argparse
import csv
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

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--cluster-size", type=int, default=PublishParams.cluster_size)
    parser.add_argument("--csv", type=Path, help="also write the rows to this CSV file")
    args = parser.parse_args()
    console = Console(width=240)  # the table is wide; never squeeze it into 80 columns
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
