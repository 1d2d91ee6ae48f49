"""Load on `cocktail serve`: 20 concurrent analysts asking new and repeated single-term queries.

    python benchmarks/serve_load.py [--clients 20] [--seconds 20] [--rate 200] [--store DIR]
                                    [--json]

Publishes BMS-WebView-1 (k=5, m=3) to a temporary local store (or, with --store, serves a
store already published, e.g. query_scale's 10M one, through a throwaway view of it: its files
linked, a fresh ledger of the run's own, so the real ledger, its users and its dataset budget
are never opened), gives each client its own role
(so every client's first ask of a term is fresh: charged, computed and held to its deadline;
its later asks of the same term are reused), starts `cocktail serve` on 127.0.0.1 and drives it
with asyncio clients for a fixed time, each alternating a new term and a term it asked before.
Two runs: flat out (each client asks again as soon as answered), then at an offered --rate.
Prints requests per second, response-time percentiles by kind, deadline misses (from the
server's log) and the server's resident memory over the run.  Bounded in time; nothing leaves
loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from rich.console import Console
from rich.table import Table

from cocktail.dataset import load
from cocktail.dp.ledger import Ledger
from cocktail.private_config import LEDGER_CONFIG, LEDGER_FILE, ledger_location
from cocktail.publish import PublishParams, publish
from cocktail.query import Publication
from cocktail.store import LocalStore

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO.parent / "shared" / "datasets"
sys.path.insert(0, str(REPO))  # the tests' server fixture, shared rather than copied
from tests.served import serve  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def client(url: str, token: str, terms: list[str], stop_at: float, interval: float,
                 times: dict[str, list[float]], codes: dict[int, int]) -> None:
    asked: list[str] = []
    fresh = iter(terms)
    async with httpx.AsyncClient(timeout=60, headers={"Authorization": f"Bearer {token}"}) as http:
        turn, next_at = 0, time.monotonic()
        while time.monotonic() < stop_at:
            if interval:  # open loop: this client's share of the offered rate
                next_at += interval
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            kind = "new" if turn % 2 == 0 or not asked else "repeated"
            term = next(fresh, None) if kind == "new" else asked[turn % len(asked)]
            if term is None:
                kind, term = "repeated", asked[turn % len(asked)]
            started = time.perf_counter()
            response = await http.post(url + "/v1/query", json={  # every term, fresh
                "query": f"count({term})", "allow_unlisted": True})
            times[kind].append(time.perf_counter() - started)
            codes[response.status_code] = codes.get(response.status_code, 0) + 1
            if kind == "new":
                asked.append(term)
            turn += 1


async def drive(url: str, tokens: list[str], terms: list[str], seconds: float, rate: float,
                pid: int) -> dict:
    times: dict[str, list[float]] = {"new": [], "repeated": []}
    codes: dict[int, int] = {}
    memory: list[float] = []

    async def sample_memory() -> None:
        while time.monotonic() < stop_at:
            memory.append(rss_mb(pid))
            await asyncio.sleep(1)

    started = time.monotonic()
    stop_at = started + seconds
    interval = len(tokens) / rate if rate else 0.0
    await asyncio.gather(sample_memory(), *(
        client(url, token, terms, stop_at, interval, times, codes) for token in tokens))
    elapsed = time.monotonic() - started
    total = sum(len(v) for v in times.values())
    return {"offered_per_second": rate or "as fast as answered", "seconds": round(elapsed, 2),
            "requests": total, "requests_per_second": round(total / elapsed, 1),
            "status_codes": codes,
            "server_rss_mb": {"first": memory[0], "after_first_quarter": memory[len(memory) // 4],
                              "last": memory[-1], "max": max(memory)},
            "ms": {kind: {"n": len(v), **{p: round(float(np.percentile(v, q)) * 1000, 1)
                                          for p, q in (("p50", 50), ("p90", 90), ("p99", 99))}}
                   for kind, v in times.items() if v}}


def published(source: Path, directory: Path) -> LocalStore:
    store = LocalStore(directory / "store")
    publish(load(source), store, PublishParams(k=5, m=3))
    return store


def throwaway(store: Path, directory: Path) -> LocalStore:
    """``store`` seen through symbolic links to its zones' entries, without its ledger (nor the
    pointer to one kept elsewhere): the server reads the real publication, and every role,
    token and charge of the run goes to a fresh ledger in ``directory``, deleted after."""
    for zone in ("public", "private"):
        (directory / zone).mkdir(parents=True, mode=0o700)
        for entry in (store / zone).iterdir():
            if zone == "private" and (entry.name.startswith(LEDGER_FILE)
                                      or entry.name == LEDGER_CONFIG):
                continue
            (directory / zone / entry.name).symlink_to(entry.resolve())
    return LocalStore(directory)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20.0, help="per run")
    parser.add_argument("--rate", type=float, default=200.0,
                        help="the second run's offered load, requests/s (the first: flat out)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--store", type=Path, help="serve this published store instead")
    args = parser.parse_args()
    source = DATASETS / "bms-webview-1.dat"
    if args.store is None and not source.exists():
        print(f"{source} is missing (the shared datasets live beside the repo)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        store = throwaway(args.store, Path(tmp) / "view") if args.store else \
            published(source, Path(tmp))
        ledger = Ledger(ledger_location(store))
        tokens = []
        for i in range(args.clients):
            role = f"load-{i}"
            ledger.add_role(role, alpha=0.001, budget=1e6)
            tokens.append(ledger.add_user(f"analyst-{role}", role))
        index = Publication.open(store).term_records  # terms, most frequent first
        terms = sorted(index, key=lambda t: (-len(index[t]), t))
        log = Path(tmp) / "serve.log"
        with serve(store.root, log=log) as (url, server):
            runs = [asyncio.run(drive(url, tokens, terms, args.seconds, rate, server.pid))
                    for rate in (0.0, args.rate)]
        misses = log.read_text().count("deadline missed")
    name = str(args.store) if args.store else "BMS-WebView-1"
    result = {"clients": args.clients, "dataset": name, "runs": runs, "deadline_misses": misses}
    if args.json:
        print(json.dumps(result))
        return 0
    table = Table(title=f"cocktail serve under load: {args.clients} clients, {name}, "
                        f"{os.cpu_count()} cpus")
    for column in ("offered/s", "answered/s", "kind", "requests", "p50 ms", "p90 ms",
                   "p99 ms", "server RSS MB first → ¼ → last"):
        table.add_column(column, justify="right")
    for run in runs:
        rss = run["server_rss_mb"]
        for kind, row in run["ms"].items():
            offered = run["offered_per_second"]
            table.add_row("flat out" if isinstance(offered, str) else f"{offered:g}",
                          str(run["requests_per_second"]), kind,
                          str(row["n"]), *(str(row[p]) for p in ("p50", "p90", "p99")),
                          f"{rss['first']:.0f} → {rss['after_first_quarter']:.0f} → "
                          f"{rss['last']:.0f}")
    console = Console(width=120)
    console.print(table)
    console.print(f"status codes {[run['status_codes'] for run in runs]}; {misses} deadline "
                  "misses (server log)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
