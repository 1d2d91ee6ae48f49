"""The incremental (k,e) paper's experiment on Adult, beside ours.

    python benchmarks/ke_incremental.py [--ks 2,4,6,8,10] [--es 20,100,500]
                                        [--naive-limit 120] [--out docs/figures]

Adult's training rows with capital_loss > 0 (1,427 tuples, 89 distinct values: the paper's
data set), in file order: the first half (713) is the first release, the rest ten increments
of ~71 (the notes' reading of the paper's protocol).  For each k and e, three chains of 11
releases: ours (the laminar rule, ``cocktail.tables.ke.laminar_ke``), the paper's incremental
algorithm (``paper_incremental``, pairwise test against the previous release) and the paper's
naive baseline (``naive_ke``, pairwise test against every earlier release; stopped once one
release takes longer than ``--naive-limit`` seconds).  Reported per setting: seconds for all
ten increments, the final sum of ranges (SE) of each chain against a fresh optimum of the
final table (history ignored: unsafe, a reference only), the most tuples ours had to buffer,
and what the multi-release differential attacker isolates in each chain.  Writes
``ke_incremental.csv`` (one row per release) and ``ke_incremental.png``.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cocktail.tables import ke
from cocktail.tables.attack import differential_attack
from cocktail.tables.paper import naive_ke, paper_incremental

ADULT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "adult.csv"
FIRST, INCREMENTS = 713, 10


def adult_values() -> list[float]:
    with ADULT.open() as f:
        return [float(r["capital_loss"]) for r in csv.DictReader(f)
                if float(r["capital_loss"]) > 0]


def prefixes(values: list[float]) -> list[dict[int, float]]:
    step = (len(values) - FIRST) // INCREMENTS
    cuts = [FIRST + step * i for i in range(INCREMENTS)] + [len(values)]
    return [{t: values[t] for t in range(cut)} for cut in cuts]


def chains(k: int, e: float, tables: list[dict[int, float]], naive_limit: float) -> list[dict]:
    rows = []
    start = ke.static_ke(tables[0], k, e)
    ours, paper, naive = [start], [start], [start]
    naive_on = True
    for number, values in enumerate(tables[1:], start=1):
        row = {"k": k, "e": e, "release": number, "tuples": len(values)}
        began = time.perf_counter()
        placed = ke.laminar_ke(values, ours[-1], k, e)
        row["ours_s"] = time.perf_counter() - began
        ours.append(placed.partitions)
        row["ours_se"] = ke.sum_of_errors(placed.partitions, values)
        row["ours_buffered"] = len(placed.buffered)
        began = time.perf_counter()
        result, _ = paper_incremental(values, paper[-1], k, e)
        row["paper_s"] = time.perf_counter() - began
        if result is not None:
            paper.append(result)
            row["paper_se"] = ke.sum_of_errors(result, values)
        if naive_on:
            began = time.perf_counter()
            result = naive_ke(values, naive, k, e)
            row["naive_s"] = time.perf_counter() - began
            naive_on = row["naive_s"] <= naive_limit
            if result is not None:
                naive.append(result)
                row["naive_se"] = ke.sum_of_errors(result, values)
        row["fresh_se"] = ke.sum_of_errors(ke.static_ke(values, k, e), values)
        rows.append(row)
    final = tables[-1]
    rows[-1]["ours_attack"] = len(differential_attack(ours, final, k, e))
    rows[-1]["paper_attack"] = len(differential_attack(paper, final, k, e))
    rows[-1]["naive_attack"] = len(differential_attack(naive, final, k, e)) \
        if len(naive) == len(tables) else None
    return rows


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = sorted({(r["k"], r["e"]) for r in rows})
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for k, e in settings:
        mine = [r for r in rows if (r["k"], r["e"]) == (k, e)]
        left.plot([r["release"] for r in mine], [r["ours_se"] for r in mine],
                  label=f"k={k}, e={e:g}")
    left.set(xlabel="release", ylabel="sum of ranges (SE), laminar rule",
             title="Utility as increments arrive (lower is better)")
    left.legend(fontsize=7, ncol=2)
    labels = [f"{k}/{e:g}" for k, e in settings]
    for key, name in (("ours_s", "ours (laminar)"), ("paper_s", "paper incremental"),
                      ("naive_s", "naive baseline")):
        right.plot(labels, [sum(r.get(key) or 0 for r in rows if (r["k"], r["e"]) == s)
                            for s in settings], marker="o", label=name)
    right.set(xlabel="k / e", ylabel="seconds for 10 increments", yscale="log",
              title="Time for the ten increments")
    right.tick_params(axis="x", labelrotation=60, labelsize=7)
    right.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ks", default="2,4,6,8,10")
    parser.add_argument("--es", default="20,100,500")
    parser.add_argument("--naive-limit", type=float, default=120.0)
    parser.add_argument("--out", type=Path, default=Path("docs/figures"))
    args = parser.parse_args()
    tables = prefixes(adult_values())
    rows = []
    for k in map(int, args.ks.split(",")):
        for e in map(float, args.es.split(",")):
            rows += chains(k, e, tables, args.naive_limit)
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "ke_incremental.csv").open("w", newline="") as f:
        fields = sorted({key for row in rows for key in row})
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, args.out / "ke_incremental.png")
    table = Table(title=f"Adult, capital_loss > 0: {len(tables[-1])} tuples, first release "
                  f"{FIRST}, {INCREMENTS} increments")
    for column in ("k", "e", "s ours", "s paper", "s naive", "SE ours", "SE paper",
                   "SE naive", "SE fresh", "max buffered", "attack ours/paper/naive"):
        table.add_column(column, justify="right")
    for k, e in sorted({(r["k"], r["e"]) for r in rows}):
        mine = [r for r in rows if (r["k"], r["e"]) == (k, e)]
        last = mine[-1]
        naive_done = all("naive_s" in r for r in mine)
        table.add_row(
            str(k), f"{e:g}", f"{sum(r['ours_s'] for r in mine):.2f}",
            f"{sum(r['paper_s'] for r in mine):.2f}",
            f"{sum(r['naive_s'] for r in mine):.1f}" if naive_done else
            f">{args.naive_limit:g} (stopped)",
            f"{last['ours_se']:g}", f"{last.get('paper_se', float('nan')):g}",
            f"{last['naive_se']:g}" if naive_done and "naive_se" in last else "-",
            f"{last['fresh_se']:g}", str(max(r["ours_buffered"] for r in mine)),
            f"{last['ours_attack']}/{last['paper_attack']}/"
            f"{'-' if last['naive_attack'] is None else last['naive_attack']}")
    Console(width=200).print(table)
    print(f"wrote {args.out / 'ke_incremental.csv'} and {args.out / 'ke_incremental.png'}")


if __name__ == "__main__":
    main()
