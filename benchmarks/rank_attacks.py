"""The attack suite against every ranked-retrieval defense (the paper's Fig. 2, and the attackers
it does not run): success of the differencing, sybil-partner and prior-aware attackers.

    python benchmarks/rank_attacks.py [--tuples 30000] [--victims 100] [--epsilon 1]
                                      [--sybils 4,16] [--out docs/figures]

Tables: those of ``benchmarks/ranked.py``: the synthetic table in the paper's shape (5 public
and 5 private columns with domains 5, 2, 2, 5, 6; private values follow public ones 30% of the
time) and Adult (public: age, sex, education, type_employer, country; private: marital,
occupation, relationship, race, income; duplicates over those columns dropped — the model
needs distinct tuples).  Defenses: none, esvt and estt at l = 2, dp at ε per victim and column (all probes
together).  Success is the expected accuracy of the attacker's guess over (victim, private
column); "chance" guesses uniformly, "prior alone" guesses the commonest value among the other
tuples with the victim's public values, asking nothing.  Writes ``rank_attacks.csv``.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from pathlib import Path

from ranked import ADULT, adult, synthetic  # the same tables as the utility experiments
from rich.console import Console
from rich.table import Table

from cocktail.attacks.rank import attack_ranking
from cocktail.rank.model import RankTable
from cocktail.rank.release import build_ranking
from cocktail.store import LocalStore

DEFENSES = ("none", "esvt", "estt", "dp")


def datasets(tuples: int) -> list[tuple[str, RankTable]]:
    found = [(f"synthetic {tuples:,}", synthetic(tuples))]
    loaded = adult()
    if loaded is None:
        print(f"{ADULT} is missing: Adult skipped", file=sys.stderr)
    else:
        found.append((f"Adult {len(loaded[0].ids):,}", loaded[0]))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tuples", type=int, default=30_000)
    parser.add_argument("--victims", type=int, default=100)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--sybils", default="4,16")
    parser.add_argument("--out", type=Path, default=Path("docs/figures"))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name, table in datasets(args.tuples):
            for defense in DEFENSES:
                store = LocalStore(str(Path(work) / f"{name}-{defense}"))
                built = build_ranking(store, "ranking", table, defense, 2)
                for sybils in map(int, args.sybils.split(",")) if defense == "estt" else [4]:
                    print(f"{name}: {defense}, {sybils} sybils ...", file=sys.stderr)
                    report = attack_ranking(store, "ranking", args.victims, args.epsilon,
                                            sybils)
                    rows.append({"table": name, "defense": defense,
                                 "sybils": sybils if defense == "estt" else "",
                                 **{f"{a}": report.success.get(a, "") for a in
                                    ("differencing", "sybil", "prior")},
                                 "partnered": report.partnered if report.partnered is not None
                                 else "", "chance": report.chance,
                                 "prior_alone": report.prior_only,
                                 "dp_bound": report.dp_bound or "",
                                 "build_s": built.seconds, "attack_s": report.seconds})
    show(rows, args)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "rank_attacks.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def show(rows: list[dict], args: argparse.Namespace) -> None:
    table = Table(title=f"attack success, {args.victims} victims x 5 private columns "
                        f"(dp: ε = {args.epsilon:g} per victim and column)")
    for column in rows[0]:
        table.add_column(column.replace("_", " "))
    for row in rows:
        table.add_row(*(f"{v:.1%}" if isinstance(v, float) and k not in ("build_s", "attack_s")
                        else str(v) for k, v in row.items()))
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
