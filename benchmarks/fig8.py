"""Fig. 8 of the paper: average relative error of noisy batch answers vs the privacy parameter α.

    python benchmarks/fig8.py [--sizes 10000,20000,40000,77512] [--batches 30] [--draws 100]
                              [--out docs/figures]

For each prefix of BMS-WebView-2 (the paper used POS, which is not public): publish it (k=5, m=3,
improved, overlay + aggregation) to a temporary local store; draw `--batches` batch workloads of
six counting queries over four terms that co-occur in some record (each query a random 1-3-term
subset); compute the exact inputs from the publication, exactly as `cocktail query` does; then
add noise `--draws` times at each α.  The relative error of an answer is |noisy - true| /
max(true, 0.1% of the records), the usual sanity bound, so that near-empty counts do not
dominate.  Reported for the strategy Cocktail chooses and for NOQ (noise on each query), with
the chosen strategy's expected RMS relative error beside the measured mean (RMS bounds the
mean absolute error from above; they are equal up to a factor of at most 1.41 for Laplace).  Writes fig8.csv and
fig8.png and prints a table.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from cocktail.dataset import load
from cocktail.dp.answer import exact_vector
from cocktail.dp.noise import laplace
from cocktail.dp.strategies import choose
from cocktail.dp.workload import Matrices
from cocktail.publish import PublishParams, publish
from cocktail.query import Engine, Publication
from cocktail.querylang import CountQuery, LinearQuery, Workload
from cocktail.store import LocalStore

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
ALPHAS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
SANITY = 0.001
WORKLOAD_SEED = 8  # workloads only; the noise comes from OpenDP


def batch_workloads(records, n: int) -> list[Workload]:
    """``n`` batches of six 1-3-term conjunctions over four co-occurring terms."""
    rng = np.random.default_rng(WORKLOAD_SEED)
    rich = [sorted(r) for r in records if len(r) >= 4]
    batches = []
    for _ in range(n):
        record = rich[rng.integers(len(rich))]
        terms = [record[i] for i in rng.choice(len(record), 4, replace=False)]
        queries = []
        while len(queries) < 6:
            size = int(rng.integers(1, 4))
            query = CountQuery(tuple(sorted(terms[i] for i in rng.choice(4, size,
                                                                         replace=False))))
            if query not in queries:
                queries.append(query)
        batches.append(Workload(tuple(LinearQuery(((1.0, q),)) for q in queries)))
    return batches


def relative_errors(strategy, exact_in, truth, alpha, draws, floor) -> np.ndarray:
    """Mean relative error per answer over ``draws`` independent noisy releases."""
    errors = [np.abs(strategy.answer(exact_in, alpha, laplace) - truth) for _ in range(draws)]
    return (np.mean(errors, axis=0) / np.maximum(truth, floor))


def measure(size: int, data, batches: int, draws: int) -> list[dict]:
    subset = data.head(size)
    with tempfile.TemporaryDirectory() as tmp:
        publish(subset, LocalStore(tmp), PublishParams(k=5, m=3))
        counts = Engine(Publication.open(LocalStore(tmp))).counts
        floor = SANITY * len(subset)
        rows = {alpha: {"chosen": [], "noq": [], "expected": [], "names": Counter()}
                for alpha in ALPHAS}
        counts = []
        for workload in batch_workloads(subset.records, batches):
            m = Matrices(workload)
            choice = choose(m)
            truth = np.array([subset.count_containing(q.terms) for q in workload.counts])
            inputs = {s.name: exact_vector(s, m, counts) for s in (choice.noq, choice.optimized)}
            assert np.array_equal(inputs["NOQ"], truth), "publication disagrees with raw data"
            counts.extend(truth)
            for alpha in ALPHAS:
                row = rows[alpha]
                row["names"][choice.optimized.name] += 1
                row["chosen"].extend(relative_errors(choice.optimized,
                                                     inputs[choice.optimized.name], truth,
                                                     alpha, draws, floor))
                row["noq"].extend(relative_errors(choice.noq, inputs["NOQ"], truth, alpha,
                                                  draws, floor))
                expected = np.sqrt(choice.optimized.variances(alpha))  # RMS >= mean |error|
                row["expected"].extend(expected / np.maximum(truth, floor))
    return [{"records": size, "median_count": float(np.median(counts)), "alpha": alpha,
             "strategy": rows[alpha]["names"].most_common(1)[0][0],
             "relative_error": float(np.mean(rows[alpha]["chosen"])),
             "expected_rms_relative_error": float(np.mean(rows[alpha]["expected"])),
             "relative_error_noq": float(np.mean(rows[alpha]["noq"]))} for alpha in ALPHAS]


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for size in sorted({r["records"] for r in rows}):
        mine = [r for r in rows if r["records"] == size]
        line, = axes.plot([r["alpha"] for r in mine], [r["relative_error"] for r in mine],
                          marker="o", label=f"|D| = {size:,}")
        axes.plot([r["alpha"] for r in mine], [r["relative_error_noq"] for r in mine],
                  linestyle="--", color=line.get_color(), alpha=0.6)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("privacy parameter α")
    axes.set_ylabel("average relative error")
    axes.set_title("BMS-WebView-2, batches of 6 counts (dashed: NOQ)")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,20000,40000,77512")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("docs/figures"))
    args = parser.parse_args()
    source = DATASETS / "bms-webview-2.dat"
    if not source.exists():
        print(f"{source} is missing", file=sys.stderr)
        return 2
    data = load(source)
    rows = [row for size in map(int, args.sizes.split(","))
            for row in measure(min(size, len(data.records)), data, args.batches, args.draws)]
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "fig8.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, args.out / "fig8.png")
    table = Table(title="Average relative error vs α (BMS-WebView-2)")
    for column in ("records", "median count", "α", "strategy", "rel. error", "expected (RMS)", "NOQ rel. error"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(f"{r['records']:,}", f"{r['median_count']:g}", f"{r['alpha']:g}", r["strategy"],
                      f"{r['relative_error']:.4f}", f"{r['expected_rms_relative_error']:.4f}",
                      f"{r['relative_error_noq']:.4f}")
    Console(width=120).print(table)
    print(f"wrote {args.out / 'fig8.csv'} and {args.out / 'fig8.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
