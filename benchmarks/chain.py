"""A chain of Cocktail publications on BMS-WebView-2: the owner publishes at the first level,
each hop re-shares the previous hop's public view at the next (``cocktail republish``).

    python benchmarks/chain.py [--k 5,10,20] [--m 2,2,2]

Per hop: public chunks, the share of the owner's (record, term) pairs still shown (U_i), the
utility loss against hop 1 (1 − U_i/U_1), seconds, and `cocktail audit --chain` over the
whole chain.  Prints a table; writes nothing but temporary stores.
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

WV2 = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "bms-webview-2.dat"
COCKTAIL = [sys.executable, "-m", "cocktail.cli"]


def run(*args: str) -> dict:
    done = subprocess.run([*COCKTAIL, *args, "--json"], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(done.stdout + done.stderr)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", default="5,10,20")
    parser.add_argument("--m", default="2,2,2")
    args = parser.parse_args()
    ks, ms = [int(x) for x in args.k.split(",")], [int(x) for x in args.m.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="cocktail-chain-") as tmp:
        stores = [str(Path(tmp) / f"hop{i + 1}") for i in range(len(ks))]
        started = time.perf_counter()
        first = run("publish", str(WV2), "--store", stores[0], "--k", str(ks[0]),
                    "--m", str(ms[0]))
        pairs = sum(1 for line in WV2.read_text().splitlines() for _ in line.split())
        shown = pairs * (1 - first["private_term_share"])
        rows.append((1, ks[0], ms[0], first["public_chunks"], shown,
                     time.perf_counter() - started))
        for hop in range(1, len(ks)):
            started = time.perf_counter()
            report = run("republish", "--from", stores[hop - 1], "--to", stores[hop], "--k",
                         str(ks[hop]), "--m", str(ms[hop]))
            rows.append((hop + 1, ks[hop], ms[hop], report["public_chunks"],
                         report["public_occurrences"], time.perf_counter() - started))
        chain = run("audit", "--chain", *stores)
    table = Table(title=f"BMS-WebView-2 chain ({pairs:,} (record, term) pairs): `cocktail "
                  f"audit --chain` {'PASS' if chain['ok'] else 'FAIL'}")
    for column in ("hop", "k", "m", "public chunks", "pairs shown", "U_i", "UL vs hop 1", "s"):
        table.add_column(column, justify="right")
    for hop, k, m, chunks, occurrences, seconds in rows:
        table.add_row(str(hop), str(k), str(m), f"{chunks:,}", f"{occurrences:,.0f}",
                      f"{occurrences / pairs:.4f}", f"{1 - occurrences / rows[0][4]:.4f}",
                      f"{seconds:.1f}")
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
