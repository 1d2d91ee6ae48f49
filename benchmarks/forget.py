"""What taking records back costs on a large store: `cocktail forget` of 1, 10 and 1,000 random
records and `cocktail retract` of a 5,000-record release, each its own process, timed with its
children (wall, CPU, peak RSS: benchmarks/measure.py), each from a fresh copy of the same store.

The store: `cocktail generate --records N --seed 1` published at k = 5, m = 3, then a batch of
5,000 (`--seed 2`) appended as v000002 (the release retracted).  Both are made once and kept in
--data.  The target (issue 65): forgetting 10 records of a 1M store in at most 3 s of CPU and
200 MB of peak RSS, whole process tree.

    python benchmarks/forget.py --data DIR [--records 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from measure import measured

ROOT = Path(__file__).resolve().parents[1]
TARGET_CPU, TARGET_MB = 3.0, 200.0


def cocktail(*args: object, stdin: Path | None = None) -> tuple[dict, object]:
    """Run ``cocktail ARGS --json`` from this checkout; its JSON and its costs."""
    command = [sys.executable, "-m", "cocktail.cli", *map(str, args), "--json"]
    if stdin is not None:  # the ids file as the command's argument: the launcher has no stdin
        command.insert(4, str(stdin))
    done = measured(command, {**os.environ, "PYTHONPATH": str(ROOT)})
    if done.code != 0:
        raise SystemExit(f"cocktail {args[0]} exited with {done.code}: "
                         f"{done.err.decode(errors='replace')[-500:]}")
    return json.loads(done.out), done


def made(data: Path, records: int) -> Path:
    """The published and appended store, made once."""
    store = data / f"forget-{records}.store"
    if store.exists():
        return store
    first, batch = data / f"forget-{records}.dat", data / "forget-batch.dat"
    cocktail("generate", first, "--records", records, "--seed", 1)
    cocktail("generate", batch, "--records", 5000, "--seed", 2)
    partial = data / f"forget-{records}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    _, publish = cocktail("publish", first, "--store", partial, "--k", 5, "--m", 3)
    print(f"published {records:,} records: {publish.wall:.1f} s wall, {publish.cpu:.1f} s CPU, "
          f"{publish.rss_mb:.0f} MB", file=sys.stderr)
    cocktail("publish", batch, "--store", partial, "--append")
    os.replace(partial, store)
    return store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="where the store is kept")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=65, help="which records are erased")
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    origin = made(args.data, args.records)
    rng = random.Random(args.seed)
    table = Table("erasure", "wall s", "CPU s", "peak MB", "erased", "retired clusters",
                  "retired chunks", "public coverage", "files removed", box=box.MARKDOWN)
    for count in (1, 10, 1000, None):
        work = args.data / "forget-work"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(origin, work)
        if count is None:
            label = "retract v000002 (5,000)"
            out, cost = cocktail("retract", "v000002", "--store", work, "--reason", "benchmark")
        else:
            label = f"forget {count:,}"
            ids = args.data / "forget-ids.txt"  # FIMI lines of the first release: their numbers
            ids.write_text("".join(f"{n}\n" for n in rng.sample(range(1, args.records + 1),
                                                                  count)))
            out, cost = cocktail("forget", "--store", work, "--reason", "benchmark", stdin=ids)
        within = "" if count != 10 else (
            " ✓" if cost.cpu <= TARGET_CPU and cost.rss_mb <= TARGET_MB else " ✗ over target")
        table.add_row(label + within, f"{cost.wall:.2f}", f"{cost.cpu:.2f}",
                      f"{cost.rss_mb:.0f}", f"{out['records_erased']:,}",
                      str(out["retired_clusters"]), str(out["retired_chunks"]),
                      f"{100 * out['public_coverage']:.3f}%", str(out["files_removed"]))
        shutil.rmtree(work)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (shared)")
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
