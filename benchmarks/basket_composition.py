"""The composition attack on two Cocktail publishers of overlapping BMS-WebView-2 baskets,
with and without ``--sensitive-terms`` — what it stops, and what it costs.

    python benchmarks/basket_composition.py [--base 20000] [--overlaps 0.2,0.6,1.0]
        [--ranks 0:20,20:40] [--k 5] [--m 2] [--queries 200] [--out docs/figures]

As in the ρ-cloning paper's set-up: the records, shuffled once (seed 1), are cut into two
disjoint bases and an overlap pool of the same size; each publisher adds its own random sample
of the pool (``--overlaps``).  The sensitive terms are the ranks ``--ranks`` of the support
ranking (0:20, the twenty most frequent).  Each publisher publishes alone at k, m: plainly
(the overlay tree), and with ``--sensitive-terms`` (ρ-cloned clusters, sensitive terms
partitioned apart).  Reported per configuration: the attack (``cocktail attack composition``:
certain disclosures by composition and by one release alone, misled certainties, the best
guess's accuracy against the most common term), publisher 1's measured ρ, private share of
(record, term) pairs, public chunks, publish seconds, and the cost to queries — the map tasks
a workload of conjunctions (a known term and a sensitive one) plans.  Answers are exact before
noise in both layouts (checked), so the noise, and with it the query error, is unchanged.

Writes ``basket_composition.csv`` and ``.png``.  Shuffles and the workload come from
``random.Random``: sampling for the experiment, not privacy code.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from statistics import mean

from rich.console import Console
from rich.table import Table

from cocktail.attacks.chunk_composition import basket_composition, load_basket_release
from cocktail.dataset import load
from cocktail.query import Engine, Publication
from cocktail.querylang import parse_count
from cocktail.store import LocalStore

WV2 = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "bms-webview-2.dat"
COCKTAIL = [sys.executable, "-m", "cocktail.cli"]


def publishers(records: list[frozenset[str]], base: int, overlap: float,
               seed: int = 1) -> list[list[int]]:
    order = list(range(len(records)))
    random.Random(seed).shuffle(order)
    bases, pool = [order[:base], order[base:2 * base]], order[2 * base:3 * base]
    return [sorted(own + random.Random(seed + 1 + n).sample(pool, round(overlap * len(pool))))
            for n, own in enumerate(bases)]


def write_jsonl(records: list[frozenset[str]], ids: list[int], path: Path) -> None:
    with path.open("w") as f:
        for i in ids:
            f.write(json.dumps({"id": str(i), "terms": sorted(records[i])}) + "\n")


def publish(source: Path, store: Path, k: int, m: int, *extra: str) -> dict:
    done = subprocess.run([*COCKTAIL, "publish", str(source), "--store", str(store), "--k",
                           str(k), "--m", str(m), "--json", *extra], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)


def workload(records: list[frozenset[str]], ids: list[int], sensitive: list[str], n: int,
             seed: int = 3) -> list[str]:
    """Conjunctions of a term a publisher's records hold and a sensitive term."""
    rng = random.Random(seed)
    support = Counter(t for i in ids for t in records[i] if t not in sensitive)
    known = sorted(t for t, c in support.items() if c >= 20)
    return [f"count({rng.choice(known)} & {rng.choice(sensitive)})" for _ in range(n)]


def query_cost(store: Path, queries: list[str]) -> tuple[float, list[int]]:
    engine = Engine(Publication.open(LocalStore(store)))
    parsed = [parse_count(q) for q in queries]
    return mean(len(engine.plan(q).tasks) for q in parsed), engine.counts(parsed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=int, default=20_000)
    parser.add_argument("--overlaps", default="0.2,0.6,1.0")
    parser.add_argument("--ranks", default="0:20,20:40")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--m", type=int, default=2)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("docs/figures"))
    args = parser.parse_args()
    records = list(load(WV2).records)
    support = Counter(t for r in records for t in r)
    ranking = sorted(support, key=lambda t: (-support[t], t))
    results = []
    with tempfile.TemporaryDirectory(prefix="cocktail-composition-") as tmp:
        work = Path(tmp)
        for overlap in map(float, args.overlaps.split(",")):
            samples = publishers(records, args.base, overlap)
            sources = [work / f"p{n}.jsonl" for n in range(2)]
            for ids, source in zip(samples, sources):
                write_jsonl(records, ids, source)
            for ranks in args.ranks.split(","):
                low, high = map(int, ranks.split(":"))
                sensitive = ranking[low:high]
                terms_file = work / "sensitive.txt"
                terms_file.write_text("\n".join(sensitive) + "\n")
                queries = workload(records, samples[0], sensitive, args.queries)
                answers = None
                for layout in ("overlay tree", "--sensitive-terms"):
                    extra = ("--sensitive-terms", str(terms_file)) if layout != "overlay tree" \
                        else ()
                    stores = [work / f"{layout[:4]}{n}-{overlap}-{low}" for n in range(2)]
                    started = time.perf_counter()
                    reports = [publish(s, st, args.k, args.m, *extra)
                               for s, st in zip(sources, stores)]
                    seconds = (time.perf_counter() - started) / 2
                    attack = basket_composition(
                        [load_basket_release(str(st), frozenset(sensitive)) for st in stores],
                        frozenset(sensitive), args.m)
                    tasks, exact = query_cost(stores[0], queries)
                    assert answers is None or exact == answers, "layouts answer differently"
                    answers = exact
                    results.append({
                        "overlap": overlap, "ranks": ranks, "layout": layout,
                        "records": reports[0]["records"], "overlapping": attack.overlapping,
                        "attacked": attack.attacked, "composition": attack.certain_disclosures,
                        "alone": attack.disclosed_alone, "misled": attack.misled,
                        "accuracy": attack.attacker_accuracy,
                        "baseline": attack.baseline_accuracy, "rho": reports[0]["rho"],
                        "private_share": reports[0]["private_term_share"],
                        "public_chunks": reports[0]["public_chunks"],
                        "tasks_per_query": round(tasks, 2), "publish_seconds": seconds})
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "basket_composition.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(results[0]))
        writer.writeheader()
        writer.writerows(results)
    plot(results, args.out / "basket_composition.png")
    show(results, args)


def show(results: list[dict], args: argparse.Namespace) -> None:
    table = Table(title=f"BMS-WebView-2, two publishers (bases of {args.base:,}), "
                  f"k={args.k}, m={args.m}: the composition attack")
    for column in ("overlap", "sensitive ranks", "layout", "overlapping", "attacked",
                   "certain (composed)", "certain (alone)", "misled", "accuracy", "baseline",
                   "ρ", "private share", "public chunks", "tasks/query", "publish s"):
        table.add_column(column, justify="right")
    for r in results:
        table.add_row(f"{r['overlap']:.0%}", r["ranks"], r["layout"], f"{r['overlapping']:,}",
                      f"{r['attacked']:,}", f"{r['composition']:,}", f"{r['alone']:,}",
                      f"{r['misled']:,}", f"{r['accuracy']:.3f}", f"{r['baseline']:.3f}",
                      "-" if r["rho"] is None else f"{r['rho']:.4f}",
                      f"{r['private_share']:.4%}", f"{r['public_chunks']:,}",
                      f"{r['tasks_per_query']:.1f}", f"{r['publish_seconds']:.1f}")
    Console(width=220).print(table)
    print(f"wrote {args.out / 'basket_composition.csv'} and "
          f"{args.out / 'basket_composition.png'}")


def plot(results: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for ranks in sorted({r["ranks"] for r in results}):
        for layout, style in (("overlay tree", "-"), ("--sensitive-terms", "--")):
            mine = [r for r in results if r["ranks"] == ranks and r["layout"] == layout]
            x = [100 * r["overlap"] for r in mine]
            left.plot(x, [r["composition"] + r["alone"] for r in mine], style, marker="o",
                      label=f"{layout}, sensitive ranks {ranks}")
            right.plot(x, [r["accuracy"] for r in mine], style, marker="o",
                       label=f"{layout}, ranks {ranks}")
        right.plot(x, [r["baseline"] for r in mine], ":", color="grey")
    left.set(xlabel="overlap pool sampled, %", ylabel="victims with a certain sensitive term",
             title="Certain disclosures (composed + alone)")
    right.set(xlabel="overlap pool sampled, %", ylabel="best guess held (dotted: baseline)",
              title="Attacker accuracy")
    left.legend(fontsize=7)
    right.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
