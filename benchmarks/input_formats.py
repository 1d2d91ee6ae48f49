"""Publishing from Parquet against FIMI: the same records, their CPU and peak RSS.

    PYTHONPATH=. python benchmarks/input_formats.py [--records 1000000] [--rounds 3] [--json]

Two data sets of about ``--records`` records: synthetic baskets (`cocktail generate`, seed 1)
and BMS-WebView-2 (from the shared ``datasets`` directory) repeated until it has as
many (a copy's records are new records: FIMI ids are line numbers).  Each is written as FIMI,
as Parquet with a list column (`cocktail generate --format parquet`'s shape: a record a row, no
ids) and as Parquet pairs (`record_id` int64, `term` string: a (record, term) pair a row).
Each run is `cocktail publish INPUT --json` (k=5, m=3, improved) in a fresh process, measured
by measure.py: CPU of the run's whole process tree (the partitioning workers too) and the peak
RSS of its largest process.  Runs are interleaved, a round running every input once in an
order rotated by the round, so that the load of a shared machine falls on every input alike;
the table gives each input's medians and their ratio to FIMI's.  Every run's store is kept
until the benchmark ends (docs/engines.md: deleting many files slows the next writes).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

from measure import measured

from cocktail.dataset import load, write_fimi, write_parquet

WV2 = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "bms-webview-2.dat"
COCKTAIL = [sys.executable, "-m", "cocktail.cli"]
SHAPES = ("fimi", "parquet, a list a row", "parquet, a pair a row")


def inputs(work: Path, records: int) -> dict[str, dict[str, Path]]:
    """Each data set's files, one a shape."""
    synthetic = work / "synthetic.dat"
    measured([*COCKTAIL, "generate", str(synthetic), "--records", str(records), "--seed", "1"])
    bms = work / "bms-webview-2.dat"
    text = WV2.read_text()
    lines = text.count("\n")
    bms.write_text(text * -(-records // lines))
    return {name: shaped(path) for name, path in
            (("synthetic", synthetic), ("BMS-WebView-2, repeated", bms))}


def shaped(fimi: Path) -> dict[str, Path]:
    data = load(fimi)
    write_fimi(data.records, fimi)  # the records exactly as the Parquet files hold them
    listed, pairs = fimi.with_suffix(".list.parquet"), fimi.with_suffix(".pairs.parquet")
    write_parquet(data.records, listed)
    lengths = [len(record) for record in data.records]
    pq.write_table(pa.table({
        "record_id": pa.array([n for n, length in enumerate(lengths, 1)
                               for _ in range(length or 1)], pa.int64()),
        "term": [term for record in data.records.sorted_terms() for term in record or [""]],
    }), pairs)
    return dict(zip(SHAPES, (fimi, listed, pairs)))


def run(path: Path, work: Path) -> dict:
    store = tempfile.mkdtemp(prefix="store-", dir=work)
    done = measured([*COCKTAIL, "publish", str(path), "--store", store, "--k", "5", "--m", "3",
                     "--json"])
    if done.code != 0:
        raise SystemExit(f"{path}: {done.err.decode()[-500:]}")
    report = json.loads(done.out)
    return {"records": report["records"], "cpu": done.cpu, "rss_mb": done.rss_mb,
            "load": report["phase_seconds"]["load"]}


def measure_all(files: dict[str, dict[str, Path]], rounds: int, work: Path) -> list[dict]:
    runs = [(data, shape) for data in files for shape in SHAPES]
    found: dict[tuple[str, str], list[dict]] = {key: [] for key in runs}
    for number in range(rounds):
        for data, shape in runs[number % len(runs):] + runs[:number % len(runs)]:
            found[data, shape].append(run(files[data][shape], work))
            print(json.dumps({"round": number, "data": data, "input": shape,
                              **found[data, shape][-1]}), file=sys.stderr, flush=True)
    rows = []
    for (data, shape), results in found.items():
        median = {key: statistics.median(r[key] for r in results)
                  for key in ("cpu", "rss_mb", "load")}
        rows.append({"data": data, "input": shape, "records": results[0]["records"],
                     "runs": len(results), **median})
    for row in rows:
        fimi = next(r for r in rows if r["data"] == row["data"] and r["input"] == "fimi")
        row["cpu_ratio"] = round(row["cpu"] / fimi["cpu"], 2)
        row["rss_ratio"] = round(row["rss_mb"] / fimi["rss_mb"], 2)
    return rows


def print_table(rows: list[dict], rounds: int) -> None:
    table = Table(title=f"cocktail publish (k=5, m=3, improved) by input format: medians of "
                        f"{rounds} interleaved runs")
    for column in ("data", "input", "records", "CPU s", "peak RSS MB", "CPU / FIMI",
                   "RSS / FIMI", "load s (wall)"):
        table.add_column(column, justify="left" if column in ("data", "input") else "right")
    for row in rows:
        table.add_row(row["data"], row["input"], f"{row['records']:,}", f"{row['cpu']:.1f}",
                      f"{row['rss_mb']:.0f}", f"{row['cpu_ratio']:.2f}",
                      f"{row['rss_ratio']:.2f}", f"{row['load']:.2f}")
    Console(width=200).print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cocktail-inputs-"))
    try:
        rows = measure_all(inputs(work, args.records), args.rounds, work)
    finally:
        shutil.rmtree(work)
    if args.json:
        print(json.dumps(rows))
        return
    print_table(rows, args.rounds)


if __name__ == "__main__":
    main()
