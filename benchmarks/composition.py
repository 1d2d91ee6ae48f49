"""The ρ-cloning paper's experiment on Adult: ℓ-diverse publishers fall to the composition
attack, ρ-cloned ones do not — and what ρ-cloning costs in utility.

    python benchmarks/composition.py [--overlaps 0.2,0.4,0.6,0.8,1.0] [--ells 2,4,6,8,10]
                                     [--k 5] [--queries 1000] [--out docs/figures]

Adult (30,162 rows; QIs age, sex, education, country; sensitive occupation, 14 values) stands
in for the paper's OCC extract.  As in the paper: the rows, shuffled once (seed 1), are cut
into five disjoint bases and an overlap pool of equal size; each of five publishers adds its
own random sample of the pool (20–100%).  Each publisher anonymises alone: Mondrian
ℓ-diversity for ℓ = 2..10, and ρ-cloning with sub-classes of k.  Reported:

* privacy-risk tuples: publisher 1's overlap tuples whose value a single other release pins
  down (one candidate left; the paper's Fig. 2), ℓ-diverse against ρ-cloned;
* distorted tuples (counterfeit + suppressed) and the measured ρ of the ρ-cloned releases;
* utility: the paper's COUNT workload on publisher 1 (predicates on the 4 QIs and on the
  sensitive value, each a range of θ = 25% of its domain), median relative error over the
  queries with a non-zero answer.  ℓ-diverse groups are estimated by the uniform overlap of
  their QI box; ρ-cloned classes with their *exact* QI counts times the class's share of the
  selected values — a best case for ρ-cloning, which publishes only micro-statistics.  At
  Adult's size most answers are tiny (median 3), so the median over answers of at least 20
  is reported too;
* the notes' counterexample: half ⟨college, Engineer⟩, half ⟨none, Labourer⟩.

Writes ``composition.csv`` and ``composition.png``.  The shuffles and queries come from
``random.Random(seed)``: workload generation, not privacy code.
"""

from __future__ import annotations

import argparse
import csv
import random
import time
from collections import Counter
from pathlib import Path
from statistics import median

from rich.console import Console
from rich.table import Table

from cocktail.attacks.composition import GroupRelease, victims
from cocktail.tables.data import Row
from cocktail.tables.mondrian import mondrian
from cocktail.tables.rho import clone

ADULT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "adult.csv"
QI = ("age", "sex", "education", "country")
NUMERIC = (True, False, False, False)
PUBLISHERS = 5
THETA = 0.25
LARGE = 20  # answers this large are where relative error means something at Adult's size


def load() -> list[Row]:
    with ADULT.open() as f:
        return [Row(i, (r["age"], r["sex"], r["education"], r["country"]), r["occupation"])
                for i, r in enumerate(csv.DictReader(f))]


def publishers(rows: list[Row], overlap: float, seed: int = 1) -> list[list[Row]]:
    shuffled = rows[:]
    random.Random(seed).shuffle(shuffled)
    size = len(shuffled) // (PUBLISHERS + 1)
    pool = shuffled[PUBLISHERS * size:]
    made = []
    for p in range(PUBLISHERS):
        extra = random.Random(seed * 100 + p).sample(pool, round(overlap * len(pool)))
        made.append(shuffled[p * size:(p + 1) * size] + extra)
    return made


def release(label: str, rows: list[Row], classes: list[list[int]],
            fake: dict[int, str]) -> GroupRelease:
    values = {row.id: row.s for row in rows} | fake
    groups = [Counter(values[t] for t in members) for members in classes]
    group_of = {str(t): g for g, members in enumerate(classes) for t in members if t >= 0}
    return GroupRelease(label, groups, group_of, {str(row.id): row.s for row in rows})


def risk(published: list[GroupRelease]) -> int:
    """Publisher 1's people pinned to one value by publisher 1 and any one other."""
    pinned = set()
    for other in published[1:]:
        pinned |= {v.person for v in victims([published[0], other])
                   if v.candidates == {v.truth}}
    return len(pinned)


def workload(rows: list[Row], n: int, seed: int = 2) -> list[tuple]:
    rng = random.Random(seed)
    domains = [sorted({float(r.qi[0]) for r in rows})] + \
        [sorted({r.qi[i] for r in rows}) for i in (1, 2, 3)] + [sorted({r.s for r in rows})]
    queries = []
    for _ in range(n):
        query = []
        for domain in domains:
            width = max(1, round(THETA * len(domain)))
            start = rng.randrange(len(domain) - width + 1)
            query.append(set(domain[start:start + width]))
        queries.append(query)
    return queries


def _holds(row: Row, query: list[set]) -> bool:
    return float(row.qi[0]) in query[0] and all(row.qi[i] in query[i] for i in (1, 2, 3))


def true_count(rows: list[Row], query: list[set]) -> int:
    return sum(_holds(row, query) and row.s in query[4] for row in rows)


def diverse_estimate(rows: dict[int, Row], classes: list[list[int]], query: list[set]) -> float:
    total = 0.0
    for members in classes:
        ages = [float(rows[t].qi[0]) for t in members]
        low, high = min(ages), max(ages)
        inside = [a for a in query[0] if low <= a <= high]
        share = (len(inside) / (high - low + 1)) if high > low else float(low in query[0])
        for i in (1, 2, 3):
            seen = {rows[t].qi[i] for t in members}
            share *= len(seen & query[i]) / len(seen)
        total += share * sum(rows[t].s in query[4] for t in members)
    return total


def cloned_estimate(rows: dict[int, Row], classes: list[list[int]], fake: dict[int, str],
                    query: list[set]) -> float:
    total = 0.0
    for members in classes:
        values = [fake[t] if t < 0 else rows[t].s for t in members]
        selected = sum(_holds(rows[t], query) for t in members if t >= 0)
        total += selected * sum(v in query[4] for v in values) / len(values)
    return total


def relative_error(estimates: list[float], truths: list[int], least: int = 1) -> float:
    """The median of |estimate − truth| / truth over the answers of at least ``least``."""
    errors = [abs(e - t) / t for e, t in zip(estimates, truths) if t >= least]
    return median(errors) if errors else float("nan")


def counterexample(n: int = 1000) -> tuple[int, float]:
    rows = [Row(i, (str(30 + i % 20), "college" if i % 2 else "none"),
                "Engineer" if i % 2 else "Labourer") for i in range(n)]
    made = clone(rows, (True, False), k=5)
    values = {row.id: row.s for row in rows} | made.counterfeit
    estimate = 0.0
    for members in made.classes:
        college = sum(t >= 0 and rows[t].qi[1] == "college" for t in members)
        estimate += college * sum(values[t] == "Engineer" for t in members) / len(members)
    return n // 2, estimate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--overlaps", default="0.2,0.4,0.6,0.8,1.0")
    parser.add_argument("--ells", default="2,4,6,8,10")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=Path("docs/figures"))
    args = parser.parse_args()
    rows = load()
    results = []
    for overlap in map(float, args.overlaps.split(",")):
        tables = publishers(rows, overlap)
        first = {row.id: row for row in tables[0]}
        queries = workload(tables[0], args.queries)
        truths = [true_count(tables[0], q) for q in queries]
        started = time.perf_counter()
        cloned = [clone(t, NUMERIC, args.k) for t in tables]
        seconds = (time.perf_counter() - started) / len(tables)
        published = [release(f"P{p + 1}", t, c.classes, c.counterfeit)
                     for p, (t, c) in enumerate(zip(tables, cloned))]
        base = {"overlap": overlap, "tuples": len(tables[0])}
        estimates = [cloned_estimate(first, cloned[0].classes, cloned[0].counterfeit, q)
                     for q in queries]
        results.append({**base, "model": "rho-clone", "l": None, "risk": risk(published),
                        "rho": max(c.rho for c in cloned),
                        "distorted": len(cloned[0].counterfeit) + len(cloned[0].suppressed),
                        "error": relative_error(estimates, truths),
                        "error_large": relative_error(estimates, truths, LARGE),
                        "seconds": seconds})
        for ell in map(int, args.ells.split(",")):
            started = time.perf_counter()
            classes = [mondrian(t, NUMERIC, ell) for t in tables]
            seconds = (time.perf_counter() - started) / len(tables)
            published = [release(f"P{p + 1}", t, c, {}) for p, (t, c) in
                         enumerate(zip(tables, classes))]
            estimates = [diverse_estimate(first, classes[0], q) for q in queries]
            results.append({**base, "model": "l-diverse", "l": ell, "risk": risk(published),
                            "rho": None, "distorted": 0,
                            "error": relative_error(estimates, truths),
                            "error_large": relative_error(estimates, truths, LARGE),
                            "seconds": seconds})
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "composition.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(results[0]))
        writer.writeheader()
        writer.writerows(results)
    plot(results, args.out / "composition.png")
    table = Table(title=f"Adult, {PUBLISHERS} publishers: privacy-risk tuples of publisher 1 "
                  f"and COUNT median relative error (θ = {THETA:.0%})")
    for column in ("overlap", "model", "tuples", "risk tuples", "ρ (measured)", "distorted",
                   "distorted %", "median rel. error", f"… answers ≥ {LARGE}",
                   "s / publisher"):
        table.add_column(column, justify="right")
    for r in results:
        name = r["model"] + (f" ℓ={r['l']}" if r["l"] else f" k={args.k}")
        table.add_row(f"{r['overlap']:.0%}", name, f"{r['tuples']:,}", f"{r['risk']:,}",
                      "-" if r["rho"] is None else f"{r['rho']:.5f}", f"{r['distorted']:,}",
                      f"{100 * r['distorted'] / r['tuples']:.2f}", f"{r['error']:.1%}",
                      f"{r['error_large']:.1%}", f"{r['seconds']:.2f}")
    Console(width=200).print(table)
    truth, estimate = counterexample()
    print(f"counterexample (half college/Engineer, half none/Labourer, 1,000 rows): "
          f"COUNT(college and Engineer) = {truth}, ρ-cloned estimate {estimate:.0f} "
          f"({abs(estimate - truth) / truth:.0%} error)")
    print(f"wrote {args.out / 'composition.csv'} and {args.out / 'composition.png'}")


def plot(results: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for overlap in sorted({r["overlap"] for r in results}):
        mine = [r for r in results if r["overlap"] == overlap and r["model"] == "l-diverse"]
        left.plot([r["l"] for r in mine], [r["risk"] for r in mine], marker="o",
                  label=f"ℓ-diverse, overlap {overlap:.0%}")
        right.plot([r["l"] for r in mine], [100 * r["error"] for r in mine], marker="o",
                   label=f"ℓ-diverse, overlap {overlap:.0%}")
        cloned = next(r for r in results if r["overlap"] == overlap and r["model"] ==
                      "rho-clone")
        right.axhline(100 * cloned["error"], linestyle="--", linewidth=0.8, color="grey")
    left.axhline(0, color="black", linewidth=1.5, label="ρ-cloning (every overlap)")
    left.set(xlabel="ℓ", ylabel="privacy-risk tuples (certain disclosures)",
             title="Composition attack on publisher 1")
    right.set(xlabel="ℓ", ylabel="median relative error, % (dashed: ρ-cloning)",
              title="COUNT workload, θ = 25%")
    left.legend(fontsize=7)
    right.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
