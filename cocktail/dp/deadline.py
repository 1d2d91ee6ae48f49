"""When an answer leaves: a time fixed by the request alone, never by the data.

Computing an answer takes longer when the terms are frequent than when they are absent, so an
analyst who times replies learns what the noise hides (Haeberlen, Pierce and Narayan,
"Differential Privacy Under Fire", 2011).  Like their Fuzz, Cocktail answers at a deadline:

* a fresh answer leaves exactly ``base + per_count × 2^⌈log2 E⌉`` after its strategy is chosen,
  where E is the number of conjunctive counts the strategy needs (a function of the workload's
  shape; powers of two keep the classes few);
* a workload whose strategy is searched (:func:`.strategies.searched`) has it chosen
  ``search_ms`` after arrival, and E is the most any candidate needs whichever strategy wins
  (its 2^u cells, or past them the largest closure of term subsets searched,
  :func:`.strategies.most_counts`): its reply time
  is the same whether the shape was searched now, kept from another role's search, or cut
  short by the load (a search not done by then gives way to NOQ or NOT);
* a refusal or a reused answer, which does no work on the data, leaves ``base`` after arrival;
* every reply of ``POST /v1/rank`` (a top-k answer or a refusal) leaves ``rank_ms`` per
  started 300,000 tuples of the ranking after arrival (its size is public; a dp ranking's
  ``RANK_DP_FACTOR`` times that per started ``RANK_DP_RESULTS`` results), and a top k not
  ready by then is not sent late: the reply is 503 "ask again" (a late reply's time would tell
  how long the private scores took to rank).  Each admitted ranking is booked a share of
  1/``rank_slots`` of that deadline on its lane's worker (``cocktail.rank.admission``): the
  deadline must cover ``rank_slots`` worst cases in a row;
* if the counts are not ready by the deadline, the mechanism runs over an all-zero vector (the
  default value) and the miss is logged for the owner, never shown to the analyst.

The owner sets ``base`` and ``per_count`` for the runner in use, and ``search_ms`` (``cocktail
serve --deadline-base-ms --deadline-count-ms --deadline-search-ms``); ``GET /v1/limits``
publishes the schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

from .limits import Limits
from .marginals import MAX_SUBSETS
from .workload import MAX_GROUPED_CELL_TERMS

RANK_TUPLES = 300_000  # a top 10 over 300,000 tuples takes ~50-300 ms
# A dp top k is OpenDP's noisy top k over every tuple: ~0.45 s for a top 10 over 300,000
# tuples here (8x a ranking without dp at its worst), and ~9 ms more per result (9.6 s for a
# top 1,000).  Both are public (the ranking's defense, k), so its deadline grows with them.
RANK_DP_FACTOR = 8
RANK_DP_RESULTS = 50  # each started 50 results of a dp top k: another step of its deadline


@dataclass(frozen=True)
class Deadlines:
    base_ms: float
    count_ms: float
    rank_ms: float = 400  # a top-k answer (POST /v1/rank) per RANK_TUPLES tuples
    # A searched strategy's choice, after arrival: the search's CPU ceiling
    # (dp.strategies.SEARCH_CPU_SECONDS) with room for a loaded machine.
    search_ms: float = 2_000
    rank_slots: int = 4   # rankings booked per rank deadline, each for 1/rank_slots of it

    def __post_init__(self) -> None:
        if not (0 < self.base_ms < 3.6e6 and 0 <= self.count_ms < 3.6e6
                and 0 < self.rank_ms < 3.6e6 and 0 < self.search_ms < 3.6e6):
            raise ValueError("deadlines need a base, a rank and a search time in (0, 1 h) and "
                             "a per-count time in [0, 1 h)")
        if not (isinstance(self.rank_slots, int) and 1 <= self.rank_slots <= 1000):
            raise ValueError("rank slots must be a whole number from 1 to 1000")

    @staticmethod
    def size_class(evaluations: int) -> int:
        """E rounded up to a power of two."""
        return 1 << max(0, (evaluations - 1).bit_length())

    def fresh(self, evaluations: int) -> float:
        """Seconds from the strategy's choice to a fresh answer."""
        return (self.base_ms + self.count_ms * self.size_class(evaluations)) / 1000

    @property
    def search(self) -> float:
        """Seconds from arrival to a searched strategy's choice."""
        return self.search_ms / 1000

    @property
    def refusal(self) -> float:
        """Seconds from arrival to a refusal or a reused answer."""
        return self.base_ms / 1000

    @staticmethod
    def rank_steps(tuples: int, k: int = 1, noisy: bool = False) -> int:
        """How many ``rank_ms`` a top ``k`` of a ranking of ``tuples`` tuples is given,
        ``noisy`` if its defense is dp: the work grows with these public quantities, and the
        deadline with it, so that a large one is not answered whenever it is done, nor a dp
        top 1,000 always too late."""
        steps = max(1, -(-tuples // RANK_TUPLES))
        if noisy:
            steps *= RANK_DP_FACTOR * max(1, -(-k // RANK_DP_RESULTS))
        return steps

    def rank(self, tuples: int, k: int = 1, noisy: bool = False) -> float:
        """Seconds from arrival to any reply of POST /v1/rank (answer or refusal alike)."""
        return self.rank_ms * self.rank_steps(tuples, k, noisy) / 1000

    def schedule(self, limits: Limits) -> dict:
        largest = max(limits.counts, 1 << MAX_GROUPED_CELL_TERMS, MAX_SUBSETS)
        classes = sorted({self.size_class(e) for e in range(1, largest + 1)})
        return {"refusal_or_reuse_ms": self.base_ms,
                "fresh_ms": {str(c): self.base_ms + self.count_ms * c for c in classes},
                "search_ms": self.search_ms,
                "rank_ms": self.rank_ms, "rank_ms_per_tuples": RANK_TUPLES,
                "rank_dp_factor": RANK_DP_FACTOR, "rank_dp_results_per_step": RANK_DP_RESULTS,
                "rank_slots": self.rank_slots}


# Per runner: an in-process count takes well under a millisecond on a warm publication; an
# mrjob job takes seconds to start (inline, local, spark) or tens of seconds on YARN.
DEFAULT_DEADLINES = {
    "fast": Deadlines(base_ms=30, count_ms=1),
    "inline": Deadlines(base_ms=5_000, count_ms=20),
    "local": Deadlines(base_ms=60_000, count_ms=50),
    "spark": Deadlines(base_ms=120_000, count_ms=50),
    "hadoop": Deadlines(base_ms=300_000, count_ms=100),
}
# A job over the index parts starts as a job over the chunks does, and counts in memory.
DEFAULT_DEADLINES |= {f"index-{runner}": deadlines
                      for runner, deadlines in DEFAULT_DEADLINES.items() if runner != "fast"}
