"""The strategy search against HDMM on eleven workloads (issues 31 and 41).

    python benchmarks/dp_strategies.py [--draws 3000] [--hdmm-starts 25] [--repeat 3]
                                       [--only NAME] [--definitions pure,zcdp]

Six workloads over the most frequent terms of BMS-WebView-1: the paper's batch, every 1-way
count of 8 terms, every 2-way and 3-way conjunction of 6 terms, a prefix chain of 6
(count(t1), count(t1 & t2), ...), and 20 seeded random linear combinations of 1-3 conjunctions
of 1-3 terms with weights in -2..2; and five past the 8 terms of the cell space: 1-way counts
of 12, 16 and 32 terms, every 2-way conjunction of 10, and 40 random combinations (as above)
over 16.  For each: the total and worst per-query variance at α = 1
of every candidate (NOQ, NOT, the best fixed cell candidate, each searched candidate), and
for each objective ("per-query": no query above the best fixed candidate's variance; "total":
the lowest total) the chosen strategy, how many queries it answers less accurately than the
best fixed candidate, and the search time (a cold cache, the least of ``--repeat``); HDMM's
best seeded run (its OPT0 with p = N/16 and OPT_M, each from ``--hdmm-starts`` uniform random
starts, unweighted, no budget; past 8 terms OPT_M over all 2^u subsets where u ≤ 16, and OPT0
over the cells where u ≤ 10, fewer starts for both: each takes seconds);
and the empirical variance of ``--draws`` noisy releases of each chosen strategy over the
data's true counts against the reported one.  Each under pure DP at α = 1 (Laplace, L1) and
under zCDP at ρ = 1 (Gaussian, L2), where HDMM's reference is its OPT_M with L2 sensitivity
(its Gaussian templates' objective) over every subset where u ≤ 16.
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

from cocktail.blas import one_thread
from cocktail.dataset import load
from cocktail.dp import marginals, optimize
from cocktail.dp.answer import exact_vector
from cocktail.dp.limits import LIMITS
from cocktail.dp.noise import DEFINITIONS, PURE
from cocktail.dp.strategies import (OBJECTIVES, PER_QUERY, VARIANCE_PER_LOSS, cell_candidates,
                                    choose, noq, noT, searched_candidates)
from cocktail.dp.workload import Matrices
from cocktail.querylang import parse_batch

DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "bms-webview-1.dat"
WORKLOAD_SEED = 31  # the random workload only; the noise comes from OpenDP
# The issues' measurements of HDMM (total variance at α = 1); 2-way and 3-way tied Cocktail's.
ISSUE_HDMM = {"paper batch": 209, "1-way of 8": 320, "prefix of 6": 42, "random 20": 5609,
              "1-way of 12": 1389}
TIED = {"2-way of 6", "3-way of 6"}
OPT0_PAST_CELLS = 10  # most terms for HDMM's OPT0 over the cells past 8 (2^10 cells, p = 64)
OPT0_STARTS = 3
OPT_M_PAST_CELLS = 16  # most terms for HDMM's OPT_M over every subset (2^16 weights)
OPT_M_STARTS = 5       # its starts there: each run evaluates 2^16 weights a step


def conj(terms) -> str:
    return "count(" + " & ".join(terms) + ")"


def random_combinations(terms: list[str], n: int, seed: int) -> str:
    """``n`` seeded sums of 1-3 conjunctions of 1-3 of ``terms``, weights in -2..2."""
    rng = random.Random(seed)
    combos = []
    for _ in range(n):
        parts = {tuple(sorted(rng.sample(terms, rng.randint(1, 3))))
                 for _ in range(rng.randint(1, 3))}
        combos.append(" + ".join(f"{rng.choice([-2, -1, 1, 2])}*{conj(p)}"
                                 for p in sorted(parts)).replace("+ -", "- "))
    return "\n".join(combos)


def workloads(terms: list[str]) -> dict[str, str]:
    t = terms
    paper = (f"2*{conj([t[0]])} + {conj([t[1]])} + {conj([t[2]])}; {conj([t[0]])} + "
             f"2*{conj([t[2]])}; 2*{conj([t[1]])} + 2*{conj([t[2]])} + {conj([t[3]])}")
    return {"paper batch": paper,
            "1-way of 8": "\n".join(conj([x]) for x in t[:8]),
            "2-way of 6": "\n".join(conj(c) for c in combinations(t[:6], 2)),
            "3-way of 6": "\n".join(conj(c) for c in combinations(t[:6], 3)),
            "prefix of 6": "\n".join(conj(t[:i]) for i in range(1, 7)),
            "random 20": random_combinations(t[:6], 20, WORKLOAD_SEED),
            **{f"1-way of {u}": "\n".join(conj([x]) for x in t[:u]) for u in (12, 16, 32)},
            "2-way of 10": "\n".join(conj(c) for c in combinations(t[:10], 2)),
            "random 40 of 16": random_combinations(t[:16], 40, WORKLOAD_SEED)}


def most_frequent(records, n: int) -> list[str]:
    """The ``n`` most frequent terms, ties by name: the workloads' terms, in this order."""
    frequency: dict[str, int] = {}
    for record in records:
        for term in record:
            frequency[term] = frequency.get(term, 0) + 1
    return sorted(frequency, key=lambda t: (-frequency[t], t))[:n]


def hdmm_best(m: Matrices, starts: int, definition: str = PURE) -> float:
    """HDMM's objective as its paper states it: OPT0 (p = N/16) and OPT_M from random starts
    (past the cell space, those of the two that fit: NaN when neither does); under zCDP its
    OPT_M with L2 sensitivity alone, over every subset where u ≤ 16."""
    u, pure = len(m.terms), definition == PURE
    runs = []
    if pure and u <= max(8, OPT0_PAST_CELLS):
        V = m.W_cells  # noqa: N806
        p = max(1, V.shape[1] // 16)
        runs.append((optimize.p_identity_loss(V, p), p * V.shape[1],
                     starts if u <= 8 else min(starts, OPT0_STARTS)))
    if pure and u <= 8:
        runs.append((optimize.marginals_loss(m.W_cells, u), 1 << u, starts))
    elif u <= OPT_M_PAST_CELLS:  # the same objective, over the closure (dp/marginals.py)
        characters = marginals.closure(m.masks)
        every = np.arange(1 << u, dtype=np.int64)
        runs.append((marginals.loss(marginals.coefficients(m, characters) ** 2, every,
                                    characters, l2=not pure), 1 << u,
                     starts if u <= 8 else min(starts, OPT_M_STARTS)))
    unlimited = optimize.Budget(1 << 62)
    best = np.inf
    for loss, size, tries in runs:
        for start in range(tries):
            value, _ = optimize.minimise(loss, optimize.start_point(1, start, size), unlimited, 1)
            best = min(best, value)
    return VARIANCE_PER_LOSS[definition] * best if runs else float("nan")


def timed_choice(m: Matrices, objective: str, repeat: int, definition: str):
    """The choice, and the least wall and CPU seconds of ``repeat`` cold searches: each does
    the same work (the search is deterministic), so the least is the one other load slowed
    least (one run of the 1-way counts took 1.0 to 3.4 s of CPU as that load varied)."""
    seconds = cpu = np.inf
    for _ in range(repeat):  # choose() keeps nothing: each is a cold search
        start, started_cpu = time.perf_counter(), time.process_time()
        choice = choose(m, objective=objective, definition=definition)
        seconds = min(seconds, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - started_cpu)
    return choice, seconds, cpu


def candidates(m: Matrices, fixed, name: str, definition: str) -> Table:
    """Every candidate's total and worst query: the fixed ones, the unbounded search's (no
    budget) and the bounded search's (the published budget)."""
    found = [noq(m, definition), noT(m, definition),
             *(cell_candidates(m, definition) if m.cells_feasible else []),
             *searched_candidates(m, None, optimize.Budget(1 << 30), definition=definition)]
    found += [s for s in searched_candidates(m, fixed.variances(1.0),
                                             optimize.Budget(LIMITS.search_units),
                                             definition=definition)
              if "bounded" in s.name]
    detail = Table(title=f"{name}, {definition}: every candidate")
    for column in ("candidate", "total", "worst query"):
        detail.add_column(column)
    for s in found:
        v = s.variances(1.0)
        detail.add_row(s.name, f"{v.sum():.1f}", f"{v.max():.1f}")
    return detail


def empirical(strategy, m: Matrices, exact: np.ndarray, draws: int) -> float:
    """The largest relative gap between the measured and the reported per-query variance."""
    samples = np.array([strategy.answer(exact, 1.0) for _ in range(draws)])
    return float(np.max(np.abs(samples.var(axis=0, ddof=1) / strategy.variances(1.0) - 1)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=3000)
    parser.add_argument("--hdmm-starts", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=3, help="cold searches timed per shape")
    parser.add_argument("--only", action="append", help="this workload only (repeatable)")
    parser.add_argument("--definitions", default=",".join(DEFINITIONS),
                        help="privacy definitions, comma-separated: pure (α), zcdp (ρ)")
    args = parser.parse_args()
    optimize.minimize()  # scipy loaded, then every BLAS on one thread, once for the process
    one_thread()
    data = load(DATASET)
    terms = most_frequent(data.records, 32)

    def counts(queries):
        return [data.count_containing(q.terms) for q in queries]

    console, failures = Console(width=220), 0
    for definition in args.definitions.split(","):
        failures += compare(definition, workloads(terms), args, counts, console)
    console.print(f"{args.draws} draws per workload and objective; a gap over 10%, a search over "
                  f"2 s of CPU, or a query above the best fixed candidate under 'per-query' "
                  f"counts as a failure: {failures}")
    return 1 if failures else 0


def compare(definition: str, texts: dict[str, str], args, counts, console: Console) -> int:
    """One definition's table (its candidates' tables first); the failures it counts."""
    budget = "α" if definition == PURE else "ρ"
    summary = Table(title=f"{definition}: total variance at {budget} = 1 (worst query in "
                          f"brackets), per objective")
    for column in ("workload", "objective", "u", "NOQ", "NOT", "best fixed", "chosen",
                   "queries above fixed", "strategy", "search s (CPU)", "HDMM (ours)",
                   "HDMM (issue)", "chosen/HDMM", "empirical gap"):
        summary.add_column(column)
    failures = 0
    for name, text in texts.items():
        if args.only and name not in args.only:
            continue
        m = Matrices(parse_batch(text))
        choices = {objective: timed_choice(m, objective, args.repeat, definition)
                   for objective in OBJECTIVES}
        fixed = choices[PER_QUERY][0].fixed
        console.print(candidates(m, fixed, name, definition))
        hdmm = hdmm_best(m, args.hdmm_starts, definition)
        issue = ISSUE_HDMM.get(name, np.nan) if definition == PURE else np.nan
        reference = min((x for x in (hdmm, issue) if not np.isnan(x)), default=np.nan)
        for objective, (choice, seconds, cpu) in choices.items():
            chosen, v = choice.optimized, choice.optimized.variances(1.0)
            gap = empirical(chosen, m, exact_vector(chosen, m, counts), args.draws)
            above = int(np.sum(v > fixed.variances(1.0) * (1 + 1e-9)))
            # wall time varies with other load; a query above fixed is the "total" trade-off
            failures += int(gap > 0.1) + int(cpu > 2) + int(objective == PER_QUERY and above > 0)
            summary.add_row(
                name, objective, str(len(m.terms)),
                *(f"{s.expected_error(1.0):.1f} ({s.variances(1.0).max():.1f})"
                  for s in (choice.noq, choice.not_, fixed)),
                f"{v.sum():.1f} ({v.max():.1f})", f"{above} of {len(v)}", chosen.name,
                f"{seconds:.2f} ({cpu:.2f})", f"{hdmm:.1f}",
                "–" if definition != PURE else
                str(ISSUE_HDMM.get(name, "tie" if name in TIED else "–")),
                "–" if np.isnan(reference) else f"{v.sum() / reference:.2f}", f"{gap:.1%}")
    console.print(summary)
    return failures


if __name__ == "__main__":
    sys.exit(main())
