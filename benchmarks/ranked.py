"""The ranked-retrieval paper's experiments (Yan, Gao, Zhang; the notes' §4), reproduced: the
average top-k utility loss U_avg of ESVT, ESTT and OpenDP noisy top-k against a random
baseline, on a synthetic table in the paper's shape and on Adult, and what each defense costs
in build and query time (the paper reports no times).

    python benchmarks/ranked.py [--tuples 300000] [--quick] [--repeats 3]
                                [--epsilons 1,10,100] [--seed 0] [--out docs/figures]

Data.  *Synthetic*: ``cocktail.synthetic`` with RankSpec's defaults — 5 public and 5
private categorical columns, domain sizes 5,2,2,5,6 each, B_j following A_j with probability
0.3, 300,000 distinct tuples (the paper's sample size; 83% of the 360,000 possible tuples).
*Adult* (/work/shared/datasets/adult.csv): public age (numeric, ρ = 1 − |x − y|/range), sex,
education, type_employer, country; private marital, occupation, relationship, race, income;
duplicate rows over those 10 columns dropped (the model needs distinct tuples).

Workload, as the paper's: |W| queries (10), each a copy of a tuple drawn at random from the
table (all its public and private values asked); all weights 1; k = 10; l = 2.  *Before* is
the undefended ranking, *after* the defended one: ESVT/ESTT rank by the published (averaged)
scores, dp draws a fresh noisy top-k per query with ε per query (sensitivity: the weights of
the private columns asked, all of them here; the default ε = 100 shows where the noise starts
to keep the top 1).  Every build of a table
shares one tie-break key, so before and after break ties alike and the loss is the
defense's alone.  U_avg is ``cocktail.rank.utility.average_loss`` (Eq. 15 with the notes'
fixes: D' per query, ranks ≤ k; replacing the whole top k costs (k + 1)/(2k)).  Each point is
the mean over --repeats workloads drawn with numpy (seeded); the same workloads serve every
defense of a point.  ESVT and ESTT draw with ``secrets``, so each table is built once and its
sets are reused: they depend neither on k, nor on the workload, nor on the weights.

Beside U_avg each point reports the **true score kept**: the share of the true top k's total
score that the defended top k holds (``cocktail.rank.utility.score_kept``).  U_avg counts every
reordering among tuples of equal score, and on the synthetic table the 10th true score is
shared by about 37 tuples: its undefended top 10 is itself one draw among equals.

Random baseline (the paper builds "equivalent sets from randomly picked tuples" and says no
more): a random permutation of the whole table cut into pairs (the odd tuple out joins the last
pair), ignoring public values; every tuple ranks by its pair's mean true score
s'(t|q) = (s(t|q) + s(partner|q))/2, ties by the same keyed hash; a fresh pairing per workload.
RankIndex cannot express it: it averages only the private part, its members sharing public
values.

Series (each a row of the printed table and a panel of the PNG):
* U_avg vs k (1, 5, 10, 20, 50), both datasets, every defense and the baseline;
* vs workload size (10, 50, 100), vs database size (the first 1/6, 1/3, 2/3 and all of the
  synthetic tuples: 50k..300k by default; distinct tuples in order of first draw, so each is a
  sample without replacement), vs weight ratio (public weights 1..3, private 1) — synthetic;
* vs the number of public (5, 10, 15; 10 private) and private (5, 10, 15; 10 public)
  attributes, domains cycling 5,2,2,5,6 — synthetic, fresh tables, ESVT and ESTT only (dp's
  sensitivity grows with the private columns; it is measured elsewhere);
* build time (protect + RankIndex.build) and mean query time (top 10; dp: noisy top 10 at the
  first ε) per defense, on the full synthetic table and on Adult.

The default run takes 16–18 minutes on 2 cores (ESTT builds dominate: about 90 s on the
300,000-tuple table, 160 s with 10 private columns); --quick (30,000 synthetic tuples, one
workload per point, fewer points) takes under a minute.  Progress goes to stderr.  Writes
``ranked.csv`` (one row per measured point) and ``ranked.png``.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import mean, pstdev

import numpy as np
from rich.console import Console
from rich.table import Table as RichTable

from cocktail.rank.index import RankIndex
from cocktail.rank.model import Query, RankTable, Schema, read_rank_table
from cocktail.rank.release import protect
from cocktail.synthetic import PAPER_DOMAINS, RankSpec, generate_table
from cocktail.rank.utility import average_loss, score_kept

ADULT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "adult.csv"
ADULT_PUBLIC = ("age", "sex", "education", "type_employer", "country")
ADULT_PRIVATE = ("marital", "occupation", "relationship", "race", "income")
L = 2
K = 10
W = 10
RANDOM = "random"


@dataclass(frozen=True)
class Method:
    name: str
    defense: str                  # whose index answers (random: none's true scores)
    epsilon: float | None = None  # dp only


@dataclass
class Built:
    index: RankIndex
    seconds: float
    counts: dict


@dataclass(frozen=True)
class Plan:
    tuples: int
    ks: tuple[int, ...]
    workloads: tuple[int, ...]
    fractions: tuple[float, ...]
    attributes: tuple[int, ...]
    ratios: tuple[float, ...]
    repeats: int


def plan_for(args: argparse.Namespace) -> Plan:
    if args.quick:
        return Plan(args.tuples or 30_000, (1, 10, 50), (10, 50), (1 / 3, 1), (5, 10),
                    (1, 2, 3), args.repeats or 1)
    return Plan(args.tuples or 300_000, (1, 5, 10, 20, 50), (10, 50, 100),
                (1 / 6, 1 / 3, 2 / 3, 1), (5, 10, 15), (1, 1.5, 2, 2.5, 3), args.repeats or 3)


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- tables -----------------------------------------------------------------------------------

def cycled(count: int) -> tuple[int, ...]:
    return tuple(PAPER_DOMAINS[i % len(PAPER_DOMAINS)] for i in range(count))


def synthetic(tuples: int, public: int = 5, private: int = 5, seed: int = 0) -> RankTable:
    """RankSpec's table as a RankTable (codes are the category values; no CSV round trip)."""
    spec = RankSpec(tuples, cycled(public), cycled(private), seed=seed)
    rows = generate_table(spec).astype(float)
    names = spec.columns
    sizes = (*spec.public, *spec.private)
    schema = Schema(tuple(names[:public]), tuple(names[public:]), {}, {},
                    {c: tuple(str(v) for v in range(d)) for c, d in zip(names, sizes)})
    return RankTable(schema, [str(i) for i in range(len(rows))], rows[:, :public],
                     rows[:, public:])


def head(table: RankTable, n: int) -> RankTable:
    return RankTable(table.schema, table.ids[:n], table.public[:n], table.private[:n])


def adult() -> tuple[RankTable, int] | None:
    """Adult's distinct tuples over the 10 columns, and how many rows the file has."""
    if not ADULT.exists():
        return None
    with ADULT.open(newline="") as f:
        reader = csv.DictReader(f)
        rows = [tuple(r[c].strip() for c in (*ADULT_PUBLIC, *ADULT_PRIVATE)) for r in reader]
    distinct = list(dict.fromkeys(rows))
    with tempfile.NamedTemporaryFile("w", suffix=".csv", newline="") as tmp:
        writer = csv.writer(tmp)
        writer.writerow((*ADULT_PUBLIC, *ADULT_PRIVATE))
        writer.writerows(distinct)
        tmp.flush()
        table = read_rank_table(tmp.name, ADULT_PUBLIC, ADULT_PRIVATE, numeric=("age",))
    return table, len(rows)


def reweighted(built: dict[str, Built], ratio: float) -> dict[str, Built]:
    """The same sets scored with public weights ``ratio`` (the sets do not depend on them)."""
    def one(b: Built) -> Built:
        schema = b.index.schema
        weights = {c: ratio for c in schema.public}
        return replace(b, index=replace(b.index, schema=replace(schema, weights=weights)))
    return {defense: one(b) for defense, b in built.items()}


# -- builds and measurements ------------------------------------------------------------------

def build(table: RankTable, defense: str, key: bytes, label: str) -> Built:
    started = time.perf_counter()
    protection, _ = protect(table, defense, L)
    sets = protection.sets if defense in ("esvt", "estt") else None
    index = RankIndex.build(table, sets, key, defense)
    seconds = time.perf_counter() - started
    counts = protection.counts()
    progress(f"{label}: built {defense} over {len(table.ids):,} tuples in {seconds:.1f} s "
             f"({counts['obfuscated']:,} obfuscated, {counts['suppressed']:,} suppressed)")
    return Built(index, seconds, counts)


def build_all(table: RankTable, defenses: tuple[str, ...], key: bytes,
              label: str) -> dict[str, Built]:
    return {defense: build(table, defense, key, label) for defense in ("none", *defenses)}


def workload(table: RankTable, size: int, seed: tuple[int, ...]) -> list[Query]:
    """``size`` distinct tuples of the table, each asked back whole."""
    rows = np.random.default_rng(seed).choice(len(table.ids), size, replace=False)
    schema = table.schema
    return [Query({c: table.public[i, j] for j, c in enumerate(schema.public)},
                  {c: table.private[i, j] for j, c in enumerate(schema.private)}, f"row {i}")
            for i in rows]


def random_pairs(n: int, seed: tuple[int, ...]) -> np.ndarray:
    """Each tuple's pair label: a permutation cut in twos, the odd tuple out in the last pair."""
    order = np.random.default_rng(seed).permutation(n)
    labels = np.empty(n, dtype=np.int64)
    labels[order] = np.minimum(np.arange(n) // 2, max(n // 2 - 1, 0))
    return labels


def pair_means(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    sums, sizes = np.bincount(labels, weights=scores), np.bincount(labels)
    return sums[labels] / sizes[labels]


def after(method: Method, built: dict[str, Built], query: Query, true: np.ndarray, k: int,
          labels: np.ndarray) -> list[int]:
    index = built[method.defense].index
    if method.name == RANDOM:
        return index.order(pair_means(true, labels), k)
    if method.epsilon is not None:
        return index.noisy_top(query, k, method.epsilon)
    return index.top(query, k)


def losses(built: dict[str, Built], table: RankTable, methods: list[Method],
           ks: tuple[int, ...], size: int, repeats: int, seed: int,
           ) -> dict[tuple[str, int], list[float]]:
    """(U_avg, score kept) per (method, k), one pair per workload.  Deterministic rankings are
    taken once at the largest k (a top-k is the prefix of a top-K); dp draws afresh for each
    k."""
    found: dict[tuple[str, int], list[tuple[float, float]]] = {}
    top = max(ks)
    none = built["none"].index
    for repeat in range(repeats):
        queries = workload(table, size, (seed, size, repeat))
        labels = random_pairs(len(table.ids), (seed, size, repeat, 1))
        pairs: dict[tuple[str, int], list] = {(m.name, k): [] for m in methods for k in ks}
        kept: dict[tuple[str, int], list] = {(m.name, k): [] for m in methods for k in ks}
        for query in queries:
            true = none.scores(query, true=True)
            before = none.order(true, top)
            for m in methods:
                for k in ks:
                    if m.epsilon is None and k == ks[0]:
                        ranked = after(m, built, query, true, top, labels)
                    elif m.epsilon is not None:
                        ranked = after(m, built, query, true, k, labels)
                    pairs[m.name, k].append((before, ranked))
                    kept[m.name, k].append(score_kept(true, before, ranked, k))
        for point, both in pairs.items():
            found.setdefault(point, []).append((average_loss(both, point[1]),
                                                mean(kept[point])))
    return found


def query_seconds(built: Built, method: Method, queries: list[Query]) -> float:
    started = time.perf_counter()
    for query in queries:
        if method.epsilon is not None:
            built.index.noisy_top(query, K, method.epsilon)
        else:
            built.index.top(query, K)
    return (time.perf_counter() - started) / len(queries)


# -- the series -------------------------------------------------------------------------------

def u_rows(dataset: str, series: str, x: float, found: dict, built: dict[str, Built], k: int,
           size: int, tuples: int) -> list[dict]:
    """One row per method at ``k``; ESVT/ESTT rows carry their build's counts."""
    return [{"dataset": dataset, "series": series, "x": x, "defense": name, "k": k,
             "workload": size, "tuples": tuples,
             "u_avg": round(mean(u for u, _ in values), 6),
             "u_sd": round(pstdev([u for u, _ in values]), 6),
             "score_kept": round(mean(kept for _, kept in values), 6), "repeats": len(values),
             **(built[name].counts if name in ("esvt", "estt") else {})}
            for (name, at), values in found.items() if at == k]


def by_k(dataset: str, table: RankTable, built: dict, methods: list[Method], plan: Plan,
         seed: int) -> list[dict]:
    progress(f"{dataset}: U_avg vs k")
    found = losses(built, table, methods, plan.ks, W, plan.repeats, seed)
    return [row for k in plan.ks
            for row in u_rows(dataset, "k", k, found, built, k, W, len(table.ids))]


def by_workload(table: RankTable, built: dict, methods: list[Method], plan: Plan,
                seed: int) -> list[dict]:
    rows = []
    for size in plan.workloads:
        progress(f"synthetic: U_avg vs workload size, |W| = {size}")
        found = losses(built, table, methods, (K,), size, plan.repeats, seed)
        rows += u_rows("synthetic", "workload", size, found, built, K, size, len(table.ids))
    return rows


def by_tuples(table: RankTable, built: dict, methods: list[Method], plan: Plan, key: bytes,
              seed: int) -> list[dict]:
    rows = []
    for fraction in plan.fractions:
        n = round(len(table.ids) * fraction)
        part = head(table, n)
        mine = built if n == len(table.ids) else build_all(part, ("esvt", "estt", "dp"), key,
                                                           f"synthetic {n:,}")
        progress(f"synthetic: U_avg vs database size, n = {n:,}")
        found = losses(mine, part, methods, (K,), W, plan.repeats, seed)
        rows += u_rows("synthetic", "tuples", n, found, mine, K, W, n)
    return rows


def by_ratio(table: RankTable, built: dict, methods: list[Method], plan: Plan,
             seed: int) -> list[dict]:
    rows = []
    for ratio in plan.ratios:
        progress(f"synthetic: U_avg vs weight ratio {ratio:g}")
        found = losses(reweighted(built, ratio), table, methods, (K,), W, plan.repeats, seed)
        rows += u_rows("synthetic", "weight ratio", ratio, found, built, K, W,
                       len(table.ids))
    return rows


def by_attributes(plan: Plan, key: bytes, seed: int) -> list[dict]:
    """Fresh tables: public count varied with 10 private, private count with 10 public (the
    10 + 10 table, in both series, is built and measured once)."""
    methods = [Method("esvt", "esvt"), Method("estt", "estt"), Method(RANDOM, "none")]
    shapes = dict.fromkeys([(count, 10) for count in plan.attributes] +
                           [(10, count) for count in plan.attributes])
    rows = []
    for public, private in shapes:
        table = synthetic(plan.tuples, public, private, seed)
        built = build_all(table, ("esvt", "estt"), key, f"synthetic {public}+{private}")
        progress(f"synthetic: U_avg with {public} public and {private} private attributes")
        found = losses(built, table, methods, (K,), W, plan.repeats, seed)
        for series, x, varied in (("public", public, private == 10),
                                  ("private", private, public == 10)):
            if varied and x in plan.attributes:
                rows += [row | {"public": public, "private": private}
                         for row in u_rows("synthetic", series, x, found, built, K, W,
                                           plan.tuples)]
    return sorted(rows, key=lambda r: (r["series"] != "public", r["x"]))


def timings(dataset: str, table: RankTable, built: dict, methods: list[Method],
            seed: int) -> list[dict]:
    """Build seconds and mean top-10 query time per defense (dp: at the first ε)."""
    queries = workload(table, W, (seed, 0))
    dp = next(m for m in methods if m.epsilon is not None)
    chosen = [Method("none", "none"), Method("esvt", "esvt"), Method("estt", "estt"), dp]
    rows = []
    for m in chosen:
        b = built[m.defense]
        rows.append({"dataset": dataset, "series": "time", "x": len(table.ids),
                     "defense": m.defense, "k": K, "workload": W, "tuples": len(table.ids),
                     "build_s": round(b.seconds, 3),
                     "query_ms": round(1000 * query_seconds(b, m, queries), 3), **b.counts})
    return rows


def dataset_series(dataset: str, table: RankTable, methods: list[Method], key: bytes,
                   plan: Plan, seed: int) -> tuple[dict, list[dict]]:
    built = build_all(table, ("esvt", "estt", "dp"), key, dataset)
    return built, by_k(dataset, table, built, methods, plan, seed) + \
        timings(dataset, table, built, methods, seed)


# -- output -----------------------------------------------------------------------------------

FIELDS = ("dataset", "series", "x", "defense", "k", "workload", "tuples", "public", "private",
          "u_avg", "u_sd", "score_kept", "repeats", "build_s", "query_ms", "sets", "virtual", "obfuscated",
          "suppressed")


def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)


def show(rows: list[dict], names: list[str], title: str) -> None:
    console = Console(width=200)
    table = RichTable(title=title)
    for column in ("dataset", "series", "x", *names, "estt obfuscated / suppressed"):
        table.add_column(column, justify="right")
    points = dict.fromkeys((r["dataset"], r["series"], r["x"]) for r in rows if "u_avg" in r)
    for dataset, series, x in points:
        mine = {r["defense"]: r for r in rows
                if (r["dataset"], r["series"], r["x"]) == (dataset, series, x) and "u_avg" in r}
        table.add_row(dataset, series, f"{x:,.4g}" if isinstance(x, float) else f"{x:,}",
                      *(f"{mine[n]['u_avg']:.3f} ± {mine[n]['u_sd']:.3f} "
                        f"({mine[n]['score_kept']:.0%})" if n in mine else "–" for n in names),
                      f"{mine['estt']['obfuscated']:,} / {mine['estt']['suppressed']:,}")
    console.print(table)
    times = RichTable(title="Build and query time (query: top 10; dp: noisy top 10)")
    for column in ("dataset", "defense", "tuples", "build s", "query ms", "sets", "virtual",
                   "obfuscated", "suppressed"):
        times.add_column(column, justify="right")
    for r in rows:
        if r["series"] == "time":
            times.add_row(r["dataset"], r["defense"], f"{r['tuples']:,}", f"{r['build_s']:.2f}",
                          f"{r['query_ms']:.1f}",
                          *(f"{r[c]:,}" for c in ("sets", "virtual", "obfuscated", "suppressed")))
    console.print(times)


PANELS = (("synthetic", "k", "k"), ("Adult", "k", "k"),
          ("synthetic", "k", "k", "score_kept"), ("Adult", "k", "k", "score_kept"),
          ("synthetic", "workload", "workload size |W|"),
          ("synthetic", "tuples", "database size |D|"),
          ("synthetic", "public", "public attributes (10 private)"),
          ("synthetic", "private", "private attributes (10 public)"),
          ("synthetic", "weight ratio", "public weight / private weight"))


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(4, 3, figsize=(16, 17))
    cells = iter(axes.flat)
    for dataset, series, label, *measure in PANELS:
        value = measure[0] if measure else "u_avg"
        mine = [r for r in rows if (r["dataset"], r["series"]) == (dataset, series)]
        if not mine:
            continue
        axis = next(cells)
        names = list(dict.fromkeys(r["defense"] for r in mine))
        for name, marker in zip(names, "osD^v*"):  # markers tell apart lines that coincide
            line = [r for r in mine if r["defense"] == name]
            style = {"color": "black", "linestyle": "--"} if name == RANDOM else \
                {"marker": marker, "alpha": 0.8}
            axis.plot([r["x"] for r in line], [r[value] for r in line], label=name, **style)
        what = "U_avg" if value == "u_avg" else "true score kept"
        axis.set(xlabel=label, ylabel=what,
                 title=f"{dataset}: {what} vs {label}" + ("" if series == "k" else f", k = {K}"))
        if series == "k":  # the full range: k = 1 spans 0..1; other panels zoom in
            axis.set(xscale="log", ylim=(0, 1.05))
            axis.set_xticks([r["x"] for r in mine], [str(r["x"]) for r in mine])
        axis.legend(fontsize=7)
    times = [r for r in rows if r["series"] == "time"]
    for what, unit in (("build_s", "build time, s"), ("query_ms", "mean query time, ms")):
        axis = next(cells)
        sizes = dict((r["dataset"], r["tuples"]) for r in times)
        defenses = list(dict.fromkeys(r["defense"] for r in times))
        width = 0.8 / len(sizes)
        for d, (dataset, tuples) in enumerate(sizes.items()):
            values = {r["defense"]: r[what] for r in times if r["dataset"] == dataset}
            axis.bar([i + d * width for i in range(len(defenses))],
                     [values.get(name, 0) for name in defenses], width,
                     label=f"{dataset} ({tuples:,} tuples)")
        axis.set_xticks([i + width * (len(sizes) - 1) / 2 for i in range(len(defenses))],
                        defenses)
        axis.set(ylabel=unit, yscale="log", title=unit)
        axis.legend(fontsize=7)
    for axis in cells:
        axis.remove()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


# -- main -------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tuples", type=int, help="synthetic table size (default 300,000; "
                        "--quick: 30,000)")
    parser.add_argument("--quick", action="store_true", help="fewer, smaller points")
    parser.add_argument("--repeats", type=int, help="workloads per point (default 3; --quick 1)")
    parser.add_argument("--epsilons", default="1,10,100", help="dp's ε per query")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("docs/figures"))
    args = parser.parse_args()
    plan = plan_for(args)
    started = time.perf_counter()
    epsilons = [float(e) for e in args.epsilons.split(",")]
    methods = [Method("esvt", "esvt"), Method("estt", "estt"),
               *(Method(f"dp ε={e:g}", "dp", e) for e in epsilons), Method(RANDOM, "none")]
    key = np.random.default_rng(args.seed).bytes(32)  # the benchmark's tie-break key

    table = synthetic(plan.tuples, seed=args.seed)
    built, rows = dataset_series("synthetic", table, methods, key, plan, args.seed)
    rows += by_workload(table, built, methods, plan, args.seed)
    rows += by_ratio(table, built, methods, plan, args.seed)
    rows += by_tuples(table, built, methods, plan, key, args.seed)
    rows += by_attributes(plan, key, args.seed)
    found = adult()
    if found is None:
        progress(f"Adult skipped: {ADULT} does not exist")
    else:
        adult_table, total = found
        progress(f"Adult: {len(adult_table.ids):,} distinct tuples of {total:,} rows")
        rows += dataset_series("Adult", adult_table, methods, key, plan, args.seed)[1]

    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, args.out / "ranked.csv")
    plot(rows, args.out / "ranked.png")
    show(rows, [m.name for m in methods],
         f"U_avg (mean ± sd over {plan.repeats} workload(s); in brackets the true score kept; "
         f"k = {K}, |W| = {W}, l = {L}, weights 1 unless varied)")
    if found is not None:
        print(f"Adult: {len(adult_table.ids):,} distinct tuples over the 10 columns "
              f"(of {total:,} rows)")
    print(f"wrote {args.out / 'ranked.csv'} and {args.out / 'ranked.png'} "
          f"in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
