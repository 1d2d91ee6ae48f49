"""Query latency: the fast path against plain inverted indexes on the raw data, and job runners.

    python benchmarks/query_latency.py [--queries 1000] [--runners inline,local,spark]

For BMS-WebView-1 and -2 (k=5, m=3, improved, overlay tree and aggregation): publish to a
temporary local store, then time random 1-3-term conjunctive counts (terms drawn from a random
record) (i) on two floors over the raw records, which no system can beat: a Python inverted
index (term -> set of record ids; one-term counts read the set's size, no copy) and the same
with pyroaring bitmaps; (ii) on the fast path, cold (the first query pays for opening the
publication's term bitmaps, reported apart) and warm; (iii) as single-query MapReduce jobs on
each runner whose engine is installed (pyspark is not in `[bench]`: that runner is skipped
with a note).  Every answer is checked against the floor.  Prints one table.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from pyroaring import BitMap
from rich.console import Console
from rich.table import Table

from cocktail.dataset import load
from cocktail.publish import PublishParams, publish
from cocktail.query import Engine, Publication
from cocktail.querylang import CountQuery
from cocktail.store import LocalStore
from cocktail.synthetic import random_conjunctions

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
ENGINES = {"spark": "pyspark"}  # runner -> the module it needs


def percentiles(seconds: list[float]) -> tuple[float, float]:
    ordered = sorted(seconds)
    return (1e6 * statistics.median(ordered),
            1e6 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))])


def timed(function, *args) -> tuple[object, float]:
    started = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - started


def set_index(records) -> dict[str, set[int]]:
    index: dict[str, set[int]] = {}
    for position, record in enumerate(records):
        for term in record:
            index.setdefault(term, set()).add(position)
    return index


def set_count(index, terms) -> int:
    sets = sorted((index.get(t, set()) for t in terms), key=len)
    if len(sets) == 1:
        return len(sets[0])
    return len(sets[0].intersection(*sets[1:]))


def roaring_count(index, terms) -> int:
    maps = sorted((index.get(t, BitMap()) for t in terms), key=len)
    if len(maps) == 1:
        return len(maps[0])
    common = maps[0]
    for other in maps[1:-1]:
        common = common & other
    return common.intersection_cardinality(maps[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--runners", default="inline,local,spark")
    parser.add_argument("--job-queries", type=int, default=3, help="single-query jobs per runner")
    args = parser.parse_args()
    table = Table(title="Query latency (µs); memory and opening of the fast path's bitmaps")
    for column in ("dataset", "what", "p50", "p95", "wrong"):
        table.add_column(column, justify="right")
    notes, failed = [], False
    for name in ("bms-webview-1.dat", "bms-webview-2.dat"):
        if not (DATASETS / name).exists():
            notes.append(f"{name}: not in {DATASETS}, skipped")
            continue
        dataset = load(DATASETS / name)
        queries = [CountQuery(q) for q in random_conjunctions(dataset.records, args.queries, 7)]
        by_set = set_index(dataset.records)
        by_roaring = {t: BitMap(s) for t, s in by_set.items()}
        expected, set_floor = zip(*(timed(set_count, by_set, q.terms) for q in queries))
        _, roaring_floor = zip(*(timed(roaring_count, by_roaring, q.terms) for q in queries))
        rows = [("floor: Python sets", set_floor, 0), ("floor: roaring bitmaps", roaring_floor, 0)]
        with tempfile.TemporaryDirectory() as tmp:
            store = LocalStore(tmp)
            publish(dataset, store, PublishParams(k=5, m=3))
            publication = Publication.open(store)
            tracemalloc.start()
            _, opening = timed(lambda: publication.term_records)
            memory = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            for label in ("fast path, warm", "fast path, warm (again)"):
                answers, seconds = zip(*(timed(Engine(publication).count, q) for q in queries))
                wrong = sum(a != e for a, e in zip(answers, expected))
                rows.append((label, seconds, wrong))
            for runner in filter(None, args.runners.split(",")):
                needed = ENGINES.get(runner)
                if needed and importlib.util.find_spec(needed) is None:
                    notes.append(f"{runner} runner skipped: {needed} is not installed "
                                 "(pip install -e '.[test]')")
                    continue
                fresh = Publication.open(store)
                sample = queries[:args.job_queries]
                answers, seconds = zip(*(timed(Engine(fresh, runner).count, q)
                                         for q in sample))
                wrong = sum(a != e for a, e in zip(answers, expected))
                rows.append((f"{runner} job (1 query)", seconds, wrong))
        for label, seconds, wrong in rows:
            p50, p95 = percentiles(list(seconds))
            table.add_row(name, label, f"{p50:,.1f}", f"{p95:,.1f}", str(wrong))
            failed |= wrong > 0
        fast = percentiles(list(rows[3][1]))[0]
        for floor, label in ((rows[0], "Python-set"), (rows[1], "roaring")):
            table.add_row(name, f"fast path p50 / {label} floor p50",
                          f"{fast / percentiles(list(floor[1]))[0]:.1f}x", "", "")
        table.add_row(name, "fast path: bitmaps built in, memory",
                      f"{opening * 1000:,.0f} ms", f"{memory / 2**20:.1f} MiB", "")
    console = Console(width=140)
    console.print(table)
    for note in notes:
        console.print(f"note: {note}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
