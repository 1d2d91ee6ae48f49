"""Query latency: the fast path against a plain inverted index on the raw data, and job runners.

    python benchmarks/query_latency.py [--queries 200] [--runners inline,local,spark]

For BMS-WebView-1 and -2 (k=5, m=3, improved, overlay tree and aggregation): publish to a
temporary local store, then time 200 random 1-3-term conjunctive counts (i) on a Python
inverted index of the raw records, the floor no system can beat, (ii) on the fast path, first
with cold caches, then warm, and (iii) as single-query MapReduce jobs on each runner.  Every
answer is checked against the floor.  Prints one table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cocktail.dataset import load
from cocktail.publication import Publication, PublishParams, publish
from cocktail.querylang import CountQuery
from cocktail.runners import exact_count
from cocktail.store import LocalStore
from cocktail.synthetic import random_conjunctions

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def percentiles(seconds: list[float]) -> tuple[float, float]:
    ordered = sorted(seconds)
    return (1000 * statistics.median(ordered),
            1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))])


def timed(function, *args) -> tuple[object, float]:
    started = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - started


def floor_index(records):
    index: dict[str, set[int]] = {}
    for position, record in enumerate(records):
        for term in record:
            index.setdefault(term, set()).add(position)
    return index


def floor_count(index, terms) -> int:
    sets = sorted((index.get(t, set()) for t in terms), key=len)
    return len(sets[0].intersection(*sets[1:]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--runners", default="inline,local,spark")
    parser.add_argument("--job-queries", type=int, default=3, help="single-query jobs per runner")
    args = parser.parse_args()
    table = Table(title="Query latency (ms)")
    for column in ("dataset", "what", "p50", "p95", "wrong"):
        table.add_column(column, justify="right")
    failed = False
    for name in ("bms-webview-1.dat", "bms-webview-2.dat"):
        if not (DATASETS / name).exists():
            continue
        dataset = load(DATASETS / name)
        queries = [CountQuery(q) for q in random_conjunctions(dataset.records, args.queries, 7)]
        index = floor_index(dataset.records)
        expected, floor = zip(*(timed(floor_count, index, q.terms) for q in queries))
        rows = [("floor: raw inverted index", floor, 0)]
        with tempfile.TemporaryDirectory() as tmp:
            store = LocalStore(tmp)
            publish(dataset, store, PublishParams(k=5, m=3))
            cold_publication = Publication.open(store)
            for label in ("fast path, cold caches", "fast path, warm"):
                answers, seconds = zip(*(timed(exact_count, cold_publication, q) for q in queries))
                wrong = sum(a != e for a, e in zip(answers, expected))
                rows.append((label, seconds, wrong))
            for runner in filter(None, args.runners.split(",")):
                publication = Publication.open(store)
                sample = queries[:args.job_queries]
                answers, seconds = zip(*(timed(exact_count, publication, q, runner)
                                         for q in sample))
                wrong = sum(a != e for a, e in zip(answers, expected))
                rows.append((f"{runner} job (1 query)", seconds, wrong))
        for label, seconds, wrong in rows:
            p50, p95 = percentiles(list(seconds))
            table.add_row(name, label, f"{p50:.2f}", f"{p95:.2f}", str(wrong))
            failed |= wrong > 0
        floor_p50 = percentiles(list(floor))[0]
        warm_p50 = percentiles(list(rows[2][1]))[0]
        table.add_row(name, "fast path p50 / floor p50", f"{warm_p50 / floor_p50:.1f}x", "", "")
    Console(width=160).print(table)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
