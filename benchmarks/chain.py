"""Chains of Cocktail publications on BMS-WebView-2, k = 5, 10, 20: re-shared hop by hop from
public views (``cocktail republish``) against planned by the owner (``cocktail chain plan``,
greedy, backward and lookahead, clusters laid out for the first or the strictest hop), and the
strictest release sent to every hop.

    python benchmarks/chain.py [--k 5,10,20] [--m 2,2,2]

Per chain and hop: public chunks, the share of the owner's (record, term) occurrences shown,
U_i = the term pairs shown together in public subrecords, UL_i = 1 − U_i/U_0 (U_0: the pairs
of the whole records), and per chain ΣU, seconds and `cocktail audit --chain`.  Prints a table;
writes nothing but temporary stores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cocktail.audit import public_view
from cocktail.store import LocalStore

WV2 = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "bms-webview-2.dat"
COCKTAIL = [sys.executable, "-m", "cocktail.cli"]


def run(*args: str) -> dict:
    done = subprocess.run([*COCKTAIL, *args, "--json"], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(done.stdout + done.stderr)
    return json.loads(done.stdout)


def shown(store: Path) -> tuple[int, int, int]:
    """A hop's public chunks, occurrences and pairs shown together, from its public view."""
    _, _, chunks = public_view(LocalStore(store))
    subrecords = [sub for _, _, rows in chunks for _, sub in rows]
    return (len(chunks), sum(map(len, subrecords)),
            sum(len(s) * (len(s) - 1) // 2 for s in subrecords))


def republished(tmp: Path, ks: list[int], ms: list[int]) -> tuple[list[tuple], float, bool]:
    stores = [tmp / f"republished{i + 1}" for i in range(len(ks))]
    started = time.perf_counter()
    run("publish", str(WV2), "--store", str(stores[0]), "--k", str(ks[0]), "--m", str(ms[0]))
    for hop in range(1, len(ks)):
        run("republish", "--from", str(stores[hop - 1]), "--to", str(stores[hop]),
            "--k", str(ks[hop]), "--m", str(ms[hop]))
    seconds = time.perf_counter() - started
    return [shown(s) for s in stores], seconds, run("audit", "--chain", *map(str, stores))["ok"]


def planned(tmp: Path, source: Path, ks: list[int], ms: list[int], strategy: str,
            clusters_for: str) -> tuple[dict, bool]:
    out = tmp / f"{strategy}-{clusters_for}"
    plan = run("chain", "plan", "--store", str(source), "--k", ",".join(map(str, ks)),
               "--m", ",".join(map(str, ms)), "--strategy", strategy, "--clusters-for",
               clusters_for, "--out", str(out))
    hops = [str(out / f"hop{i + 1}") for i in range(len(ks))]
    return plan, run("audit", "--chain", *hops)["ok"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", default="5,10,20")
    parser.add_argument("--m", default="2,2,2")
    args = parser.parse_args()
    ks, ms = [int(x) for x in args.k.split(",")], [int(x) for x in args.m.split(",")]
    records = [line.split() for line in WV2.read_text().splitlines()]
    occurrences = sum(map(len, records))
    pairs = sum(len(r) * (len(r) - 1) // 2 for r in records)
    chains = []  # (name, [(chunks, occurrences, U)], seconds, audit ok or None)
    with tempfile.TemporaryDirectory(prefix="cocktail-chain-") as tmp:
        hops, seconds, ok = republished(Path(tmp), ks, ms)
        chains.append(("republish", hops, seconds, ok))
        for clusters_for in ("first", "strictest"):
            for strategy in ("greedy", "backward", "lookahead"):
                plan, ok = planned(Path(tmp), Path(tmp) / "republished1", ks, ms, strategy,
                                   clusters_for)
                chains.append((f"{strategy}, {clusters_for}",
                               [(h["public_chunks"], h["public_occurrences"], h["utility"])
                                for h in plan["hops"]], plan["seconds"], ok))
    strictest = next(hops for name, hops, _, _ in chains if name == "backward, strictest")[-1]
    chains.append(("strictest to all", [strictest] * len(ks), 0.0, None))  # one release
    table = Table(title=f"BMS-WebView-2 chains, k={args.k}, m={args.m}: {occurrences:,} "
                  f"occurrences, U_0 = {pairs:,} pairs")
    for column in ("chain (strategy, clusters for)", "hop", "k", "m", "chunks",
                   "occurrences shown", "U_i (pairs)", "UL_i", "ΣU", "s", "audit --chain"):
        table.add_column(column, justify="right")
    for name, hops, seconds, ok in chains:
        for n, ((chunks, shown_, utility), k, m) in enumerate(zip(hops, ks, ms), start=1):
            last = n == len(hops)
            table.add_row(name if n == 1 else "", str(n), str(k), str(m), f"{chunks:,}",
                          f"{shown_ / occurrences:.1%}", f"{utility:,}",
                          f"{1 - utility / pairs:.4f}",
                          f"{sum(h[2] for h in hops):,}" if last else "",
                          f"{seconds:.1f}" if last else "",
                          {True: "PASS", False: "FAIL", None: "-"}[ok] if last else "",
                          end_section=last)
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
