"""The strategy search against HDMM on six workloads (issue 31).

    python benchmarks/dp_strategies.py [--draws 3000] [--hdmm-starts 25]

Six workloads over the most frequent terms of BMS-WebView-1: the paper's batch, every 1-way
count of 8 terms, every 2-way and 3-way conjunction of 6 terms, a prefix chain of 6
(count(t1), count(t1 & t2), ...), and 20 seeded random linear combinations of 1-3 conjunctions
of 1-3 terms with weights in -2..2.  For each: the total and worst per-query variance at α = 1
of every candidate (NOQ, NOT, the best fixed cell candidate, each searched candidate), the
chosen strategy and the search time (a cold cache); HDMM's best seeded run (its OPT0 with
p = N/16 and OPT_M, each from ``--hdmm-starts`` uniform random starts, unweighted, no budget);
and the empirical variance of ``--draws`` noisy releases of the chosen strategy over the data's
true cell histogram against the reported one.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from itertools import combinations
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from cocktail.dataset import load
from cocktail.dp import optimize
from cocktail.dp.answer import exact_vector
from cocktail.dp.noise import laplace
from cocktail.dp.strategies import _choose, cell_candidates, choose, noq, noT, searched_candidates
from cocktail.dp.workload import Matrices
from cocktail.querylang import parse_batch

DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "bms-webview-1.dat"
WORKLOAD_SEED = 31  # the random workload only; the noise comes from OpenDP
# The issue's measurements of HDMM (total variance at α = 1); 2-way and 3-way tied Cocktail's.
ISSUE_HDMM = {"paper batch": 209, "1-way of 8": 320, "prefix of 6": 42, "random 20": 5609}


def conj(terms) -> str:
    return "count(" + " & ".join(terms) + ")"


def workloads(terms: list[str]) -> dict[str, str]:
    t = terms
    paper = (f"2*{conj([t[0]])} + {conj([t[1]])} + {conj([t[2]])}; {conj([t[0]])} + "
             f"2*{conj([t[2]])}; 2*{conj([t[1]])} + 2*{conj([t[2]])} + {conj([t[3]])}")
    rng = random.Random(WORKLOAD_SEED)
    combos = []
    for _ in range(20):
        parts = {tuple(sorted(rng.sample(t[:6], rng.randint(1, 3))))
                 for _ in range(rng.randint(1, 3))}
        combos.append(" + ".join(f"{rng.choice([-2, -1, 1, 2])}*{conj(p)}"
                                 for p in sorted(parts)).replace("+ -", "- "))
    return {"paper batch": paper,
            "1-way of 8": "\n".join(conj([x]) for x in t[:8]),
            "2-way of 6": "\n".join(conj(c) for c in combinations(t[:6], 2)),
            "3-way of 6": "\n".join(conj(c) for c in combinations(t[:6], 3)),
            "prefix of 6": "\n".join(conj(t[:i]) for i in range(1, 7)),
            "random 20": "\n".join(combos)}


def hdmm_best(m: Matrices, starts: int) -> float:
    """HDMM's objective as its paper states it: OPT0 (p = N/16) and OPT_M from random starts."""
    V, u = m.W_cells, len(m.terms)  # noqa: N806
    p = max(1, V.shape[1] // 16)
    runs = [(optimize.p_identity_loss(V, p), p * V.shape[1]),
            (optimize.marginals_loss(V, u), 1 << u)]
    unlimited = optimize.Budget(1 << 62)
    best = np.inf
    for loss, size in runs:
        for start in range(starts):
            value, _ = optimize.minimise(loss, optimize.start_point(1, start, size), unlimited, 1)
            best = min(best, value)
    return 2 * best


def empirical(strategy, m: Matrices, exact: np.ndarray, draws: int) -> float:
    """The largest relative gap between the measured and the reported per-query variance."""
    samples = np.array([strategy.answer(exact, 1.0, laplace) for _ in range(draws)])
    return float(np.max(np.abs(samples.var(axis=0, ddof=1) / strategy.variances(1.0) - 1)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=3000)
    parser.add_argument("--hdmm-starts", type=int, default=25)
    args = parser.parse_args()
    data = load(DATASET)
    frequency: dict[str, int] = {}
    for record in data.records:
        for term in record:
            frequency[term] = frequency.get(term, 0) + 1
    terms = sorted(frequency, key=lambda t: (-frequency[t], t))[:8]

    def counts(queries):
        return [data.count_containing(q.terms) for q in queries]

    console, failures = Console(width=200), 0
    summary = Table(title="Total variance at α = 1 (worst query in brackets)")
    for column in ("workload", "u", "NOQ", "NOT", "best fixed", "chosen", "strategy",
                   "search s (CPU)", "HDMM (ours)", "HDMM (issue)", "chosen/HDMM", "empirical gap"):
        summary.add_column(column)
    for name, text in workloads(terms).items():
        m = Matrices(parse_batch(text))
        _choose.cache_clear()
        start, cpu = time.perf_counter(), time.process_time()
        choice = choose(m)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        candidates = [noq(m), noT(m), *cell_candidates(m),
                      *searched_candidates(m, None, optimize.Budget(1 << 30))]
        detail = Table(title=f"{name}: every candidate")
        for column in ("candidate", "total", "worst query"):
            detail.add_column(column)
        for s in candidates:
            v = s.variances(1.0)
            detail.add_row(s.name, f"{v.sum():.1f}", f"{v.max():.1f}")
        console.print(detail)
        chosen, fixed = choice.optimized, choice.fixed
        hdmm = hdmm_best(m, args.hdmm_starts)
        reference = min(hdmm, ISSUE_HDMM.get(name, hdmm))
        gap = empirical(chosen, m, exact_vector(chosen, m, counts), args.draws)
        worse = np.any(chosen.variances(1.0) > fixed.variances(1.0) * (1 + 1e-9))
        failures += int(gap > 0.1) + int(bool(worse)) + int(cpu > 2)  # wall time: other load
        v = chosen.variances(1.0)
        summary.add_row(
            name, str(len(m.terms)),
            *(f"{s.expected_error(1.0):.1f} ({s.variances(1.0).max():.1f})"
              for s in (choice.noq, choice.not_, fixed)),
            f"{v.sum():.1f} ({v.max():.1f})", chosen.name, f"{seconds:.2f} ({cpu:.2f})",
            f"{hdmm:.1f}", str(ISSUE_HDMM.get(name, "tie")), f"{v.sum() / reference:.2f}", f"{gap:.1%}")
    console.print(summary)
    console.print(f"{args.draws} draws per workload; a gap over 10%, a query worse than the best "
                  f"fixed candidate or a search over 2 s of CPU counts as a failure: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
