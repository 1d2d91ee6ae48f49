"""A batch of linear queries as matrices the strategies work on.

Let U be the u distinct terms of the workload.  Every record falls in exactly one *cell*: the
pattern of which terms of U it holds (2^u cells).  A counting query q_j is the sum of the cells
whose pattern contains its terms (matrix C, m x 2^u); the workload is W (n x m), so over cells it
is W C.  Cells give every strategy one currency: each record moves one cell by one, so a
strategy A over cells has L1 sensitivity max_column ||A||_1.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..querylang import Workload

# 256 cells: choosing among the cell strategies (least squares over 2^u columns) costs O(8^u),
# about 0.1 s at 8 terms and 200 s at 12; beyond, only NOQ and NOT are offered.
MAX_CELL_TERMS = 8
# Up to 10 terms (1,024 cells) p-Identity is still searched under pure DP: over the groups of
# cells with equal columns, its least squares in closed form (no pseudo-inverse, no 8^u).
MAX_GROUPED_CELL_TERMS = 10


@dataclass(frozen=True)
class Matrices:
    workload: Workload

    @cached_property
    def terms(self) -> tuple[str, ...]:
        return self.workload.terms

    @cached_property
    def W(self) -> np.ndarray:  # noqa: N802 - the paper's name
        return np.array(self.workload.matrix(), dtype=float)

    @cached_property
    def shape(self) -> tuple:
        """What the strategies depend on: W and which terms each counting query holds."""
        index = {t: i for i, t in enumerate(self.terms)}
        return (len(self.terms), self.W.shape, self.W.tobytes(),
                tuple(tuple(index[t] for t in q.terms) for q in self.workload.counts))

    @cached_property
    def masks(self) -> np.ndarray:
        """Each counting query's terms as a bitmask over ``terms``."""
        index = {t: i for i, t in enumerate(self.terms)}
        return np.array([sum(1 << index[t] for t in q.terms) for q in self.workload.counts],
                        dtype=np.int64)

    @property
    def cells_feasible(self) -> bool:
        return len(self.terms) <= MAX_CELL_TERMS

    @property
    def groups_feasible(self) -> bool:
        """Whether p-Identity over the groups of cells is searched (pure DP)."""
        return len(self.terms) <= MAX_GROUPED_CELL_TERMS

    @cached_property
    def C(self) -> np.ndarray:  # noqa: N802
        """Counting queries over cells: C[j, P] = 1 iff pattern P holds every term of q_j."""
        patterns = np.arange(1 << len(self.terms), dtype=np.int64)
        return ((self.masks[:, None] & ~patterns[None, :]) == 0).astype(float)

    @cached_property
    def W_cells(self) -> np.ndarray:  # noqa: N802
        return self.W @ self.C
