"""The propagation paper's experiment on German Credit: utility loss per hop against δ for
BUA, TDA and FLA and two honest baselines, P(T) per hop against its threshold, and mean
utility loss against the chain's length.

    python benchmarks/propagation.py [--deltas 0.02,0.03,0.05,0.08] [--hops 4]
                                     [--lengths 2,3,4,5,6] [--min-size 2] [--out docs/figures]

German Credit (1,000 rows).  Sensitive: PURPOSE — what the loan is for (10 values: car, radio/TV,
education, business, repairs, …), the personal fact a recipient should not learn; the 70/30
credit class would leave JS little room and, with no size floor, admits singletons.  QIs:
AGE, DURATION_MONTHS and AMOUNT — numeric (the paper mean-recodes) and the ones an adversary
plausibly knows from a contract.  W = (0.5, 0.25, 0.25): age is the most widely known QI and
the one analyses group by, so its precision is worth most.  Baselines the paper lacks:

* **strictest to all** — the last hop's level (P < δ) built once from T_0 and sent to every
  hop (Remark 1's safe chain, refined by TDA rather than fully merged);
* **independent per hop** — a TDA table built from T_0 at each hop's level: the best each hop
  could get alone, but not nested, so colluding recipients compose it (``audit --chain``).

Writes ``propagation.csv`` and ``propagation.png``.
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from pathlib import Path
from statistics import mean

from rich.console import Console
from rich.table import Table as RichTable

from cocktail.tables.chain import audit_chain, numeric_qis, run_chain, write_hops
from cocktail.tables.data import Row, Table
from cocktail.tables.propagation import STRATEGIES, Atom, Space, tda

GERMAN = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "german.data"
QI = ("AGE", "DURATION_MONTHS", "AMOUNT")
SENSITIVE = "PURPOSE"
WEIGHTS = (0.5, 0.25, 0.25)
BASELINES = ("strictest to all", "independent per hop")


def load() -> Table:
    lines = GERMAN.read_text().split("\n")
    header = lines[0].split()
    at = [header.index(c) for c in QI]
    s = header.index(SENSITIVE)
    rows = [line.split() for line in lines[1:] if line.strip()]
    return Table(QI, SENSITIVE, [Row(i, tuple(r[j] for j in at), r[s])
                                 for i, r in enumerate(rows)])


def baseline(table: Table, kind: str, hops: int, delta: float, min_size: int,
             out: Path) -> dict:
    """Each hop's partition of T_0's rows, built from T_0; measured like a chain."""
    qis = numeric_qis(table)
    scales = [max(c) - min(c) for c in zip(*qis)]
    atoms = [Atom(q, ((str(row.s), 1),)) for q, row in zip(qis, table.rows)]
    weights = [w / sum(WEIGHTS) for w in WEIGHTS]
    space = Space.of(atoms, weights, scales, min_size)
    position = {id(a): i for i, a in enumerate(atoms)}
    started = time.perf_counter()
    levels = [(hops - hop + 1) * delta for hop in range(1, hops + 1)]
    if kind == "strictest to all":
        levels = [delta] * hops
    built = {level: tda(space, atoms, level) for level in sorted(set(levels))}
    partitions = [[[position[id(a)] for a in c] for c in built[level]] for level in levels]
    seconds = time.perf_counter() - started
    files = write_hops(out, table, partitions, {"weights": weights, "scales": scales,
                                                "delta": delta, "min_size": min_size})
    base = space.utility([[a] for a in atoms])
    return {"losses": [1 - space.utility(built[level]) / base for level in levels],
            "privacy": [space.privacy(built[level]) for level in levels],
            "audit": audit_chain(files), "seconds": seconds}


def chained(table: Table, strategy: str, hops: int, delta: float, min_size: int,
            out: Path) -> dict:
    started = time.perf_counter()
    report = run_chain(table, WEIGHTS, hops, delta, strategy, out, min_size)
    seconds = time.perf_counter() - started
    files = [out / f"hop{h}.csv" for h in range(1, hops + 1)]
    return {"losses": [h.utility_loss for h in report.hops],
            "privacy": [h.privacy for h in report.hops], "audit": audit_chain(files),
            "seconds": seconds}


def run(table: Table, method: str, hops: int, delta: float, min_size: int, work: Path) -> dict:
    out = work / f"{method.replace(' ', '-')}-{hops}-{delta}"
    if method in BASELINES:
        return baseline(table, method, hops, delta, min_size, out)
    return chained(table, method, hops, delta, min_size, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deltas", default="0.02,0.03,0.05,0.08")
    parser.add_argument("--hops", type=int, default=4)
    parser.add_argument("--lengths", default="2,3,4,5,6")
    parser.add_argument("--min-size", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("docs/figures"))
    args = parser.parse_args()
    table = load()
    methods = (*STRATEGIES, *BASELINES)
    results = []
    with tempfile.TemporaryDirectory(prefix="cocktail-chain-") as tmp:
        for delta in map(float, args.deltas.split(",")):
            for method in methods:
                found = run(table, method, args.hops, delta, args.min_size, Path(tmp))
                results.append(_row("by delta", method, args.hops, delta, found))
        middle = 0.05
        for hops in map(int, args.lengths.split(",")):
            for method in methods:
                found = run(table, method, hops, middle, args.min_size, Path(tmp))
                results.append(_row("by length", method, hops, middle, found))
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "propagation.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(results[0]))
        writer.writeheader()
        writer.writerows(results)
    plot(results, args, args.out / "propagation.png")
    show(results, args)


def _row(series: str, method: str, hops: int, delta: float, found: dict) -> dict:
    audit = found["audit"]
    return {"series": series, "method": method, "hops": hops, "delta": delta,
            "losses": " ".join(f"{x:.4f}" for x in found["losses"]),
            "mean_loss": round(mean(found["losses"]), 6),
            "privacy": " ".join(f"{x:.4f}" for x in found["privacy"]),
            "thresholds_met": all(t["ok"] for t in audit.thresholds),
            "nested": all(n["ok"] for n in audit.nested),
            "colluders_pinned": max((p.disclosed for p in audit.colluders), default=0),
            "colluders_narrowed": max((p.narrowed for p in audit.colluders), default=0),
            "seconds": round(found["seconds"], 3)}


def show(results: list[dict], args: argparse.Namespace) -> None:
    table = RichTable(title=f"German Credit: {SENSITIVE} sensitive, QIs {', '.join(QI)}, "
                      f"W = {WEIGHTS}, classes ≥ {args.min_size}")
    for column in ("series", "method", "L", "δ", "UL per hop", "mean UL", "P per hop",
                   "thresholds", "nested", "pinned / narrowed by 2 colluders", "s"):
        table.add_column(column, justify="right")
    for r in results:
        table.add_row(r["series"], r["method"], str(r["hops"]), f"{r['delta']:g}", r["losses"],
                      f"{r['mean_loss']:.4f}", r["privacy"],
                      "met" if r["thresholds_met"] else "MISSED",
                      "yes" if r["nested"] else "NO",
                      f"{r['colluders_pinned']:,} / {r['colluders_narrowed']:,}",
                      f"{r['seconds']:.2f}")
    Console(width=220).print(table)
    print(f"wrote {args.out / 'propagation.csv'} and {args.out / 'propagation.png'}")


def plot(results: list[dict], args: argparse.Namespace, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    by_delta = [r for r in results if r["series"] == "by delta"]
    for method in dict.fromkeys(r["method"] for r in by_delta):
        mine = [r for r in by_delta if r["method"] == method]
        axes[0].plot([r["delta"] for r in mine], [r["mean_loss"] for r in mine], marker="o",
                     label=method)
    axes[0].set(xlabel="δ", ylabel="mean utility loss over the hops",
                title=f"UL vs δ (L = {args.hops})")
    fla = next(r for r in by_delta if r["method"] == "fla" and r["delta"] == 0.05)
    privacy = [float(x) for x in fla["privacy"].split()]
    hops = range(1, len(privacy) + 1)
    axes[1].bar(hops, privacy, label="P(T_i), FLA")
    axes[1].plot(hops, [(len(privacy) - h + 1) * 0.05 for h in hops], "r--", marker="_",
                 label="threshold (L − i + 1)·δ")
    axes[1].set(xlabel="hop", ylabel="P(T), bits", title="P per hop, δ = 0.05")
    by_length = [r for r in results if r["series"] == "by length"]
    for method in dict.fromkeys(r["method"] for r in by_length):
        mine = [r for r in by_length if r["method"] == method]
        axes[2].plot([r["hops"] for r in mine], [r["mean_loss"] for r in mine], marker="o",
                     label=method)
    axes[2].set(xlabel="chain length L", ylabel="mean utility loss",
                title="UL vs chain length, δ = 0.05")
    for axis in axes:
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
