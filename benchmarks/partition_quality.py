"""Regenerate the paper's Figures 5 and 6: chunks and partitioning time vs k, m, |E| and |T|.

    python benchmarks/partition_quality.py all [--out results/partition] [--quick]
    python benchmarks/partition_quality.py fig5|fig6|optimal|mining

Every point publishes to a fresh local store and runs the independent audit; a point whose audit
fails is reported as such.  Writes ``runs.csv`` (one row per point and method), ``fig5_*.png``
(public chunks), ``fig6_*.png`` (partitioning CPU seconds) and ``summary.md`` (the tables and the
checks of issue 3) under ``--out``, a folder that is not committed.

Datasets: BMS-WebView-1 and -2 from ../shared/datasets, and a synthetic Quest-style set.
Sweeps, as in the paper's section 6 (|E| = 50,000 records unless swept): k in 2..50 at m=3;
m in 1..5 at k=5; |E| at k=5, m=3; |T| (a seeded random subset of the vocabulary) at k=5, m=3.
`optimal` runs on small clusters (100 records) where the exact solver can prove optimality.
"""

from __future__ import annotations

import argparse
import csv
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import fim
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from cocktail.anonymity import partition  # noqa: E402
from cocktail.anonymity.concepts import ClusterTooDense, mine_concepts  # noqa: E402
from cocktail.anonymity.optimal import TooLargeForOptimal  # noqa: E402
from cocktail.audit import audit  # noqa: E402
from cocktail.dataset import Dataset, load  # noqa: E402
from cocktail.publish import PublishParams, publish  # noqa: E402
from cocktail.store import LocalStore  # noqa: E402
from cocktail.synthetic import SyntheticSpec, generate  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"
METHODS = ("testing", "basic", "improved")
RECORDS = 50_000


@dataclass(frozen=True)
class Point:
    dataset: str
    sweep: str      # 'k', 'm', 'E' or 'T'
    value: int
    k: int
    m: int
    records: int
    terms: int | None = None  # |T| when the vocabulary is cut


def datasets(quick: bool) -> dict[str, Dataset]:
    found = {}
    for name, file in (("WV1", "bms-webview-1.dat"), ("WV2", "bms-webview-2.dat")):
        if (SHARED / file).exists():
            found[name] = load(SHARED / file)
    records = generate(SyntheticSpec(records=20_000 if quick else RECORDS, items=1000, seed=1))
    found["SYN"] = Dataset(tuple(str(i) for i in range(1, len(records) + 1)), tuple(records),
                           "synthetic(seed=1)", "fimi")
    return found


def points(name: str, dataset: Dataset, quick: bool) -> list[Point]:
    n = min(RECORDS, len(dataset))
    vocabulary = len(dataset.terms())
    ks = (2, 5, 10, 20, 50) if quick else (2, 5, 10, 20, 30, 40, 50)
    ms = (1, 2, 3) if quick else (1, 2, 3, 4, 5)
    sizes = sorted({min(n, s) for s in (10_000, 20_000, 30_000, 40_000, 50_000)})
    term_counts = sorted({min(vocabulary, round(vocabulary * f)) for f in (0.2, 0.4, 0.6, 0.8, 1)})
    return ([Point(name, "k", k, k, 3, n) for k in ks]
            + [Point(name, "m", m, 5, m, n) for m in ms]
            + [Point(name, "E", e, 5, 3, e) for e in sizes]
            + [Point(name, "T", t, 5, 3, n, t) for t in term_counts])


def restrict(dataset: Dataset, point: Point) -> Dataset:
    head = dataset.head(point.records)
    if point.terms is None:
        return head
    keep = set(random.Random(point.terms).sample(sorted(dataset.terms()), point.terms))
    return Dataset(head.ids, tuple(r & keep for r in head.records), head.source, head.format)


def run_point(dataset: Dataset, point: Point, method: str, cluster_size: int) -> dict:
    row = {"dataset": point.dataset, "sweep": point.sweep, "value": point.value, "k": point.k,
           "m": point.m, "records": point.records, "method": method}
    data = restrict(dataset, point)
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalStore(tmp)
        try:
            report = publish(data, store, PublishParams(k=point.k, m=point.m, method=method,
                                                        cluster_size=cluster_size))
        except ClusterTooDense as exc:
            return row | {"status": "too dense", "note": str(exc)}
        checked = audit(store)
    return row | {"status": "ok" if checked.ok else "AUDIT FAILED",
                  "public_chunks": report.public_chunks, "private_terms": report.private_terms,
                  "private_share": report.private_term_share,
                  "partition_s": report.partition_seconds, "publish_s": report.seconds,
                  "violations": len(checked.violations)}


def optimal_rows(data: dict[str, Dataset], quick: bool) -> list[dict]:
    """improved vs the proven optimum on small clusters, cluster by cluster."""
    rows = []
    for name, dataset in data.items():
        for k, m in ((2, 2), (5, 2), (5, 3), (10, 3)):
            clusters = [dataset.records[i:i + 100] for i in range(0, 2000 if quick else 5000, 100)]
            for number, records in enumerate(clusters):
                counts = {}
                try:
                    counts["optimal"] = len(partition("optimal", records, k, m).public)
                except TooLargeForOptimal:
                    continue
                for method in METHODS:
                    counts[method] = len(partition(method, records, k, m).public)
                rows.append({"dataset": name, "k": k, "m": m, "cluster": number, **counts})
    return rows


def mining_rows(data: dict[str, Dataset]) -> list[dict]:
    """Our concept mining vs a bare pyfim Eclat call on the same clusters, and whole publishes."""
    rows = []
    for name in ("WV1", "WV2"):
        if name not in data:
            continue
        dataset = data[name]
        clusters = [dataset.records[i:i + 2000] for i in range(0, len(dataset), 2000)]
        started = time.perf_counter()
        for records in clusters:
            fim.eclat([sorted(r) for r in records if r], target="s", supp=-5, zmax=3, report="a")
        bare = time.perf_counter() - started
        started = time.perf_counter()
        for records in clusters:
            mine_concepts(records, 5, 3)
        ours = time.perf_counter() - started
        publishes = {}
        for method in METHODS:
            with tempfile.TemporaryDirectory() as tmp:
                publishes[method] = publish(dataset, LocalStore(tmp),
                                            PublishParams(k=5, m=3, method=method)).seconds
        rows.append({"dataset": name, "pyfim_s": round(bare, 3), "ours_s": round(ours, 3),
                     "ratio": round(ours / bare, 2),
                     **{f"publish_{m}_s": s for m, s in publishes.items()}})
    return rows


def plot(rows: list[dict], metric: str, label: str, prefix: str, out: Path) -> list[Path]:
    """One figure per dataset, a panel per sweep; log y, as basic is an order of magnitude off."""
    made = []
    for dataset in sorted({r["dataset"] for r in rows}):
        figure, axes = plt.subplots(1, 4, figsize=(18, 4))
        for axis, sweep, xlabel in zip(axes, "kmET", ("k", "m", "|E|", "|T|")):
            for method in METHODS:
                pts = sorted((r["value"], r[metric]) for r in rows
                             if r["dataset"] == dataset and r["sweep"] == sweep
                             and r["method"] == method and r["status"] == "ok")
                if pts:
                    axis.plot(*zip(*pts), marker="o", label=method)
            axis.set_xlabel(xlabel)
            axis.set_ylabel(label)
            axis.set_yscale("symlog", linthresh=1)
            axis.grid(alpha=0.3)
        axes[0].legend()
        figure.suptitle(f"{dataset}: {label}")
        figure.tight_layout()
        path = out / f"{prefix}_{dataset}.png"
        figure.savefig(path, dpi=90)
        plt.close(figure)
        made.append(path)
    return made


def write_csv(rows: list[dict], path: Path) -> None:
    fields = list(dict.fromkeys(key for row in rows for key in row))
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def table(rows: list[dict], columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def summarise(runs: list[dict], optimal: list[dict], mining: list[dict], command: str) -> str:
    ok = [r for r in runs if r["status"] == "ok"]
    out = [f"# Partition quality (generated by `{command}`)", ""]
    failed = [r for r in runs if r["status"] == "AUDIT FAILED"]
    dense = [r for r in runs if r["status"] == "too dense"]
    refused = sorted({f"{r['dataset']} {r['method']} m={r['m']}" for r in dense})
    out.append(f"Points: {len(runs)} publications, audit failures: **{len(failed)}**, "
               f"refused as too dense for mining: {len(dense)} ({', '.join(refused)}).")
    by_point: dict[tuple, dict[str, int]] = {}
    for r in ok:
        by_point.setdefault((r["dataset"], r["sweep"], r["value"]), {})[r["method"]] = \
            r["public_chunks"]
    both = [c for c in by_point.values() if {"improved", "basic"} <= c.keys()]
    vs_basic = sum(c["improved"] <= c["basic"] for c in both)
    both_t = [c for c in by_point.values() if {"improved", "testing"} <= c.keys()]
    vs_testing = sum(c["improved"] <= c["testing"] for c in both_t)
    out += ["", "## Checks", "",
            f"* improved <= basic on {vs_basic}/{len(both)} points",
            f"* improved <= testing on {vs_testing}/{len(both_t)} points "
            f"({100 * vs_testing / max(1, len(both_t)):.0f}%)"]
    if optimal:
        ratios = [r["improved"] / r["optimal"] for r in optimal if r["optimal"]]
        out.append(f"* improved / optimal over {len(ratios)} small clusters: mean "
                   f"{statistics.mean(ratios):.3f}, max {max(ratios):.3f}; "
                   f"testing / optimal mean "
                   f"{statistics.mean(r['testing'] / r['optimal'] for r in optimal if r['optimal']):.3f}")
    out += ["", "## Public chunks per point", "",
            table([{"dataset": d, "sweep": s, "value": v, **c} for (d, s, v), c in
                   sorted(by_point.items())],
                  ["dataset", "sweep", "value", *METHODS])]
    seconds: dict[tuple, dict[str, float]] = {}
    for r in ok:
        seconds.setdefault((r["dataset"], r["sweep"], r["value"]), {})[r["method"]] = \
            r["partition_s"]
    out += ["", "## Partitioning CPU seconds per point", "",
            table([{"dataset": d, "sweep": s, "value": v, **c} for (d, s, v), c in
                   sorted(seconds.items())], ["dataset", "sweep", "value", *METHODS])]
    if optimal:
        grouped: dict[tuple, list[dict]] = {}
        for r in optimal:
            grouped.setdefault((r["dataset"], r["k"], r["m"]), []).append(r)
        rows = [{"dataset": d, "k": k, "m": m, "clusters": len(rs),
                 **{meth: sum(r[meth] for r in rs) for meth in ("optimal", *METHODS)}}
                for (d, k, m), rs in sorted(grouped.items())]
        out += ["", "## Small clusters (100 records): total chunks vs the proven optimum", "",
                table(rows, ["dataset", "k", "m", "clusters", "optimal", *METHODS])]
    if mining:
        out += ["", "## Concept mining vs bare pyfim (k=5, m=3, clusters of 2000) and publish "
                "wall time", "", table(mining, list(mining[0]))]
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("figure", choices=("fig5", "fig6", "optimal", "mining", "all"))
    parser.add_argument("--out", type=Path, default=Path("results/partition"))
    parser.add_argument("--quick", action="store_true", help="fewer points, smaller inputs")
    parser.add_argument("--cluster-size", type=int, default=PublishParams.cluster_size)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    data = datasets(args.quick)
    runs, optimal, mining = [], [], []
    if args.figure in ("fig5", "fig6", "all"):
        for name, dataset in data.items():
            for point in points(name, dataset, args.quick):
                for method in METHODS:
                    runs.append(run_point(dataset, point, method, args.cluster_size))
                    print(f"{point} {method}: {runs[-1].get('public_chunks')} chunks "
                          f"{runs[-1]['status']}", flush=True)
        write_csv(runs, args.out / "runs.csv")
        if args.figure in ("fig5", "all"):
            plot(runs, "public_chunks", "public chunks", "fig5", args.out)
        if args.figure in ("fig6", "all"):
            plot(runs, "partition_s", "partitioning CPU s", "fig6", args.out)
    if args.figure in ("optimal", "all"):
        optimal = optimal_rows(data, args.quick)
        write_csv(optimal, args.out / "optimal.csv")
    if args.figure in ("mining", "all"):
        mining = mining_rows(data)
        write_csv(mining, args.out / "mining.csv")
    command = "python benchmarks/partition_quality.py " + " ".join(sys.argv[1:])
    summary = summarise(runs, optimal, mining, command)
    (args.out / "summary.md").write_text(summary)
    print(summary)
    return 1 if any(r["status"] == "AUDIT FAILED" for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
