"""The first run: the wall time of `cocktail demo` as a new user meets it, and of each step.

    python benchmarks/demo.py [--runs 3] [--cocktail PATH]

Runs `cocktail demo` (the interpreter's own, or PATH, e.g. a fresh venv's `bin/cocktail`) in a
fresh directory each time, from process start to exit, and once more with --json for the time of
each step.  The target is 10 s on the development machine (docs/install.md); tests never time
it, they check that nothing slow is on its path (tests/test_demo.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def demo(command: list[str], workdir: Path, *extra: str) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run([*command, "demo", "--workdir", str(workdir), *extra],
                          capture_output=True, text=True, check=True)
    return time.perf_counter() - started, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cocktail", help="the `cocktail` executable (default: this Python's)")
    args = parser.parse_args()
    command = [args.cocktail] if args.cocktail else [sys.executable, "-m", "cocktail.cli"]
    with tempfile.TemporaryDirectory(prefix="cocktail-demo-") as tmp:
        walls = [demo(command, Path(tmp) / f"run{n}")[0] for n in range(args.runs)]
        _, out = demo(command, Path(tmp) / "json", "--json")
    steps = json.loads(out)["step_seconds"]
    print(f"cocktail demo: wall {statistics.median(walls):.1f} s median of {args.runs} "
          f"({', '.join(f'{w:.1f}' for w in walls)})")
    print("steps: " + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in steps.items()))


if __name__ == "__main__":
    main()
