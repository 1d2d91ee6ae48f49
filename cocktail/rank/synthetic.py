"""A synthetic table in the shape of the ranked-retrieval paper's experiment (its eHarmony data
is not public): public columns A1.. and private columns B1.. with the paper's domain sizes
(5, 2, 2, 5, 6 each), distinct tuples only.

Private values lean on public ones, as real profiles do (the paper's domain expert exploits
such a correlation): B_j copies A_j (mod its domain) with probability ``correlation``, else it
is uniform.  Tuples are drawn until ``tuples`` distinct ones have appeared and kept in the
order they first appeared.  Test data only: this module is not privacy code.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PAPER_DOMAINS = (5, 2, 2, 5, 6)
_BATCH = 1 << 20


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
    sizes = np.array([*spec.public, *spec.private], dtype=np.int64)
    kept, seen = [], set()
    while len(seen) < spec.tuples:
        public = np.stack([rng.integers(0, d, _BATCH) for d in spec.public], axis=1)
        private = np.stack([np.where(rng.random(_BATCH) < spec.correlation,
                                     public[:, j % len(spec.public)] % d,
                                     rng.integers(0, d, _BATCH))
                            for j, d in enumerate(spec.private)], axis=1)
        rows = np.hstack([public, private])
        codes = np.ravel_multi_index(rows.T, sizes)
        _, first = np.unique(codes, return_index=True)
        for i in np.sort(first):
            if len(seen) == spec.tuples:
                break
            if codes[i] not in seen:
                seen.add(int(codes[i]))
                kept.append(rows[i])
    return np.array(kept)


def write_table(spec: RankSpec, path: str | Path) -> int:
    rows = generate_table(spec)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(spec.columns)
        writer.writerows(rows.tolist())
    return len(rows)
