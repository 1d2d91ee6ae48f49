"""What one strategy search costs: the CPU seconds of a cold choice, per shape and objective.

    python benchmarks/search_cost.py [--repeat 3]

Shapes up to the 8 terms a search works on (past them nothing is searched): 8 single counts,
8 pairs in a ring, all 28 pairs, seeded random 8-term batches of 8, 20 and 64 linear queries,
the widest batch the limits allow (64 queries over 128 counting queries), and the paper's
batch.  For each: the least CPU seconds (``time.process_time``: every thread of this process)
and wall seconds of ``--repeat`` cold choices (the work is the same each time; the least is
the one other load slowed least), whether the search ran to its units (``complete``) or a
clock stopped it, the chosen strategy and its total variance at α = 1.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from itertools import combinations

from cocktail.dp import optimize
from cocktail.dp.strategies import OBJECTIVES, choose
from cocktail.dp.workload import Matrices
from cocktail.querylang import parse_batch

TERMS = [f"t{i}" for i in range(8)]


def conj(terms) -> str:
    return "count(" + " & ".join(terms) + ")"


def random_batch(seed: int, queries: int) -> str:
    rng = random.Random(seed)
    lines = []
    for _ in range(queries):
        parts = {conj(sorted(rng.sample(TERMS, rng.randint(1, 4))))
                 for _ in range(rng.randint(1, 3))}
        lines.append(" + ".join(f"{rng.choice([1, 2, 3])}*{p}" for p in sorted(parts)))
    return "\n".join(lines)


def widest() -> str:
    rng = random.Random(64)
    counts = rng.sample([c for n in range(1, 9) for c in combinations(TERMS, n)], 128)
    return "\n".join(f"{rng.choice([-1, 1, 2])}*{conj(counts[2 * i])} + "
                     f"{rng.choice([1, 3])}*{conj(counts[2 * i + 1])}" for i in range(64))


SHAPES = {
    "8 single counts": "; ".join(conj([t]) for t in TERMS),
    "8 pairs (a ring)": "; ".join(conj(p) for p in zip(TERMS, TERMS[1:] + TERMS[:1])),
    "28 pairs": "; ".join(conj(p) for p in combinations(TERMS, 2)),
    **{f"random, {n} queries": random_batch(n, n) for n in (8, 20, 64)},
    "64 queries over 128 counts": widest(),
    "paper batch": "2*count(a) + count(b) + count(c); count(a) + 2*count(c); "
                   "2*count(b) + 2*count(c) + count(d)",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    optimize.minimize()  # scipy's import (0.3 s, once a process) is no search's
    print(f"{'shape':28} {'u':>2} {'n':>3} {'q':>4} {'objective':10} {'CPU s':>6} {'wall s':>6}"
          f"  complete  strategy (total variance)")
    for name, text in SHAPES.items():
        workload = parse_batch(text)
        for objective in OBJECTIVES:
            cpu = wall = float("inf")
            for _ in range(args.repeat):
                started, started_cpu = time.perf_counter(), time.process_time()
                choice = choose(Matrices(workload), objective=objective)
                cpu = min(cpu, time.process_time() - started_cpu)
                wall = min(wall, time.perf_counter() - started)
            print(f"{name:28} {len(workload.terms):2} {len(workload.queries):3} "
                  f"{len(workload.counts):4} {objective:10} {cpu:6.2f} {wall:6.2f}  "
                  f"{str(choice.complete):8}  {choice.optimized.name} "
                  f"({choice.optimized.expected_error(1.0):.1f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
