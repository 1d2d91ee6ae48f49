"""Appending: publish the first 60% of a dataset, append the rest in 10 batches of 4%, and
compare with one fresh publish of the whole file.

    python benchmarks/append.py [--datasets bms2,retail] [--min-new default,6000] [--json]

For each dataset: time per append, records that extend old clusters, form new ones or wait in
the buffer, public chunks and public coverage (share of (record, term) pairs in public
chunks) after each release, then the same for one fresh publish, and the audits of every
release together (`audit --releases`).  Each ``--min-new`` value is one run: the pool size at
which refused and buffered records form new clusters (``default``: the larger of k and a
quarter of the cluster size); larger pools publish more of their terms but wait longer.
``retail`` is synthetic data of the Retail dataset's
shape (88,162 baskets, 16,470 items, 10.3 items per basket; `cocktail generate`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cocktail.audit import audit, audit_releases
from cocktail.dataset import Dataset, load
from cocktail.publish import PublishParams, publish
from cocktail.publish.append import append
from cocktail.store import LocalStore
from cocktail.synthetic import SyntheticSpec, generate

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
PARAMS = PublishParams(k=5, m=3)


def source(name: str) -> Dataset:
    if name == "bms2":
        return load(DATASETS / "bms-webview-2.dat")
    if name == "bms1":
        return load(DATASETS / "bms-webview-1.dat")
    if name == "retail":
        records = generate(SyntheticSpec(records=88_162, items=16_470, avg_record_len=10.3,
                                         patterns=2_000, seed=11))
        return Dataset(tuple(str(i) for i in range(len(records))), tuple(records), "retail",
                       "fimi")
    raise SystemExit(f"unknown dataset {name!r}: bms1, bms2, retail")


def part(data: Dataset, start: int, stop: int) -> Dataset:
    return Dataset(data.ids[start:stop], data.records[start:stop], data.source, "jsonl")


def run(name: str, data: Dataset, min_new: int | None) -> dict:
    n = len(data)
    cuts = [int(n * 0.6)] + [int(n * (0.6 + 0.04 * i)) for i in range(1, 11)]
    cuts[-1] = n
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalStore(Path(tmp) / "appended")
        started = time.perf_counter()
        first = publish(part(data, 0, cuts[0]), store, PARAMS)
        rows.append({"release": first.version, "records": first.records, "added": first.records,
                     "seconds": round(time.perf_counter() - started, 2),
                     "extended": 0, "new_clusters": first.clusters, "buffered": 0,
                     "public_chunks": first.public_chunks,
                     "public_coverage": round(1 - first.private_term_share, 5)})
        for start, stop in zip(cuts, cuts[1:]):
            added = append(part(data, start, stop), store, min_new=min_new)
            rows.append({"release": added.version, "records": added.records,
                         "added": added.appended_records, "seconds": added.seconds,
                         "extended": added.extended_records, "new_clusters": added.new_clusters,
                         "buffered": added.buffered_records,
                         "public_chunks": added.public_chunks,
                         "public_coverage": added.public_coverage})
        started = time.perf_counter()
        history = audit_releases(store)
        release_audit = {"ok": history.ok, "pairs": history.pairs_checked,
                         "residuals": history.residuals_checked,
                         "violations": len(history.violations),
                         "seconds": round(time.perf_counter() - started, 2),
                         "current_ok": audit(store).ok}
        started = time.perf_counter()
        fresh = publish(data, LocalStore(Path(tmp) / "fresh"), PARAMS)
        rows.append({"release": "fresh, whole file", "records": fresh.records,
                     "added": fresh.records, "seconds": round(time.perf_counter() - started, 2),
                     "extended": 0, "new_clusters": fresh.clusters, "buffered": 0,
                     "public_chunks": fresh.public_chunks,
                     "public_coverage": round(1 - fresh.private_term_share, 5)})
    return {"dataset": name, "records": n, "min_new": min_new or "default", "rows": rows,
            "release_audit": release_audit}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="bms2,retail")
    parser.add_argument("--min-new", default="default,6000")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    results = []
    for name in args.datasets.split(","):
        data = source(name)
        for value in args.min_new.split(","):
            results.append(run(name, data, None if value == "default" else int(value)))
    if args.json:
        print(json.dumps({"results": results}))
        return 0
    console = Console(width=130)
    for result in results:
        table = Table(title=f"{result['dataset']}: {result['records']:,} records, k=5 m=3, "
                            f"60% then 10 appends of 4%, --min-new {result['min_new']}")
        for column in ("release", "records", "added", "s", "extend old", "new clusters",
                       "buffered", "public chunks", "public coverage"):
            table.add_column(column, justify="right")
        for row in result["rows"]:
            table.add_row(row["release"], f"{row['records']:,}", f"{row['added']:,}",
                          f"{row['seconds']:.2f}", f"{row['extended']:,}",
                          str(row["new_clusters"]), str(row["buffered"]),
                          f"{row['public_chunks']:,}", f"{row['public_coverage']:.2%}")
        console.print(table)
        console.print(f"audit --releases: {result['release_audit']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
