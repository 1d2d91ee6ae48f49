"""Synthetic data for the demo, the tests and the benchmarks (test data only: this module is not
privacy code).

**Baskets** in the manner of IBM's Quest generator (Agrawal & Srikant, VLDB 1994).

A pool of weighted patterns ("potentially large itemsets") is drawn first; each record then takes
a Poisson length and is filled with corrupted copies of patterns picked by weight.  Departures
from Quest, for simplicity: item popularity is a truncated Zipf law (Quest: uniform), an item of a
pattern is dropped independently with the pattern's corruption level, and the pattern that would
overshoot the record's length is cut to fit (a random subset of its items), so the mean record
length is the one asked for.

**Ranking tables** (:class:`RankSpec`) in the shape of the ranked-retrieval paper's experiment
(its eHarmony data is not public): public columns A1.. and private columns B1.. with the paper's
domain sizes (5, 2, 2, 5, 6 each), distinct tuples only.  Private values lean on public ones, as
real profiles do (the paper's domain expert exploits such a correlation): B_j copies A_j (mod
its domain) with probability ``correlation``, else it is uniform.  Tuples are drawn until
``tuples`` distinct ones have appeared, kept in the order they first appeared.
"""

from __future__ import annotations

import csv
import heapq
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_CORRUPTION_SPREAD = 0.1  # standard deviation of the per-pattern corruption levels
_BATCH = 1 << 16          # random numbers drawn per numpy call; Python loops consume them


@dataclass(frozen=True)
class SyntheticSpec:
    records: int = 20_000
    items: int = 1_000
    avg_record_len: float = 5.0
    patterns: int = 200
    avg_pattern_len: float = 4.0
    zipf: float = 1.1           # skew of item popularity: P(item of rank r) ∝ 1 / r^zipf
    correlation: float = 0.5    # mean fraction of a pattern's items taken from the previous one
    corruption: float = 0.25    # mean probability an item of a pattern is dropped when used
    seed: int = 0

    def __post_init__(self) -> None:
        if self.records < 0 or self.items < 1 or self.patterns < 1:
            raise ValueError("need records >= 0, items >= 1 and patterns >= 1")
        if self.avg_record_len < 1 or self.avg_pattern_len < 1:
            raise ValueError("average record and pattern lengths must be at least 1")
        if self.zipf < 0 or not 0 <= self.correlation <= 1 or not 0 <= self.corruption <= 1:
            raise ValueError("need zipf >= 0 and correlation, corruption in [0, 1]")


def _stream(draw: Callable[[int], np.ndarray]) -> Iterator:
    """Values from batched numpy draws, one at a time (numpy per-call overhead dominates else)."""
    while True:
        yield from draw(_BATCH).tolist()


def _lengths(rng: np.random.Generator, mean: float, count: int, cap: int) -> np.ndarray:
    # 1 + Poisson(mean - 1): never empty, and the mean stays exactly `mean` (before the cap)
    return np.minimum(1 + rng.poisson(mean - 1, count), cap)


def generate(spec: SyntheticSpec) -> list[frozenset[str]]:
    """Records of item ids "1".."items" ("1" the most popular); same spec, same records."""
    rng = np.random.default_rng(spec.seed)
    names = [str(i) for i in range(1, spec.items + 1)]
    popularity = np.cumsum(1.0 / np.arange(1, spec.items + 1) ** spec.zipf)
    popularity /= popularity[-1]
    random_items = _stream(lambda n: np.searchsorted(popularity, rng.random(n), side="right"))

    patterns: list[tuple[str, ...]] = []
    previous: list[int] = []
    for size in _lengths(rng, spec.avg_pattern_len, spec.patterns, spec.items).tolist():
        reused = min(round(min(1.0, rng.exponential(spec.correlation)) * size), len(previous))
        chosen = rng.choice(previous, reused, replace=False).tolist() if reused else []
        seen = set(chosen)
        while len(chosen) < size:
            item = next(random_items)
            if item not in seen:
                seen.add(item)
                chosen.append(item)
        patterns.append(tuple(names[i] for i in chosen))
        previous = chosen
    weights = np.cumsum(rng.exponential(1.0, spec.patterns))
    weights /= weights[-1]
    corruption = np.clip(rng.normal(spec.corruption, _CORRUPTION_SPREAD, spec.patterns), 0, 1)
    levels = corruption.tolist()

    picks = _stream(lambda n: np.searchsorted(weights, rng.random(n), side="right"))
    uniform = _stream(rng.random)
    records = []
    for target in _lengths(rng, spec.avg_record_len, spec.records, spec.items).tolist():
        record: set[str] = set()
        # bounded so that patterns unable to fill a record (too few, too corrupted) cannot stall
        for _ in range(10 * target):
            p = next(picks)
            level = levels[p]
            # keep an item if its uniform draw clears the corruption level; the draws of the kept
            # items are i.i.d., so the largest ones are a uniformly random subset to cut to
            kept = [(u, item) for item in patterns[p]
                    if (u := next(uniform)) >= level and item not in record]
            room = target - len(record)
            if len(kept) > room:
                kept = heapq.nlargest(room, kept)
            record.update(item for _, item in kept)
            if len(record) == target:
                break
        while len(record) < target:
            record.add(names[next(random_items)])
        records.append(frozenset(record))
    return records


def random_conjunctions(records: Sequence[frozenset[str]], n: int, seed: int,
                        max_terms: int = 3) -> list[tuple[str, ...]]:
    """A query workload of 1..max_terms-term conjunctions for tests and benchmarks.

    Three in four are drawn from a real record (so most answers are non-zero), one in four from
    the whole vocabulary (so most of those are zero and cross clusters and chunks).
    """
    rng = np.random.default_rng(seed)
    vocabulary = sorted(set().union(*records))
    nonempty = [sorted(r) for r in records if r]
    queries = []
    for i in range(n):
        pool = nonempty[rng.integers(len(nonempty))] if i % 4 != 3 else vocabulary
        size = min(int(rng.integers(1, max_terms + 1)), len(pool))
        queries.append(tuple(pool[j] for j in rng.choice(len(pool), size, replace=False)))
    return queries


PAPER_DOMAINS = (5, 2, 2, 5, 6)
_ROWS = 1 << 20  # tuples drawn per round


@dataclass(frozen=True)
class RankSpec:
    tuples: int = 300_000
    public: tuple[int, ...] = PAPER_DOMAINS    # domain size of each public column
    private: tuple[int, ...] = PAPER_DOMAINS   # domain size of each private column
    correlation: float = 0.3
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.public or not self.private or min((*self.public, *self.private)) < 1:
            raise ValueError("give at least one public and one private column, domains >= 1")
        if not 0 <= self.correlation <= 1:
            raise ValueError("correlation must be in [0, 1]")
        if self.tuples < 1 or self.tuples > 0.9 * self.space:
            raise ValueError(f"{self.tuples:,} distinct tuples asked of a space of "
                             f"{self.space:,}: ask for at most 90% of it")

    @property
    def space(self) -> int:
        return int(np.prod(self.public, dtype=float) * np.prod(self.private, dtype=float))

    @property
    def columns(self) -> list[str]:
        return [f"A{i + 1}" for i in range(len(self.public))] + \
               [f"B{j + 1}" for j in range(len(self.private))]


def generate_table(spec: RankSpec) -> np.ndarray:
    """(tuples, public + private columns) of value codes, distinct rows."""
    rng = np.random.default_rng(spec.seed)
    kept, seen = [], set()
    while len(seen) < spec.tuples:
        public = np.stack([rng.integers(0, d, _ROWS) for d in spec.public], axis=1)
        private = np.stack([np.where(rng.random(_ROWS) < spec.correlation,
                                     public[:, j % len(spec.public)] % d,
                                     rng.integers(0, d, _ROWS))
                            for j, d in enumerate(spec.private)], axis=1)
        rows = np.hstack([public, private])
        _, first = np.unique(rows, axis=0, return_index=True)
        for i in np.sort(first):
            if len(seen) == spec.tuples:
                break
            key = rows[i].tobytes()
            if key not in seen:
                seen.add(key)
                kept.append(rows[i])
    return np.array(kept)


def write_table(spec: RankSpec, path: str | Path) -> int:
    rows = generate_table(spec)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(spec.columns)
        writer.writerows(rows.tolist())
    return len(rows)
