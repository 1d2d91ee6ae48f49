"""What an analyst may ask the strategy choice to minimise (:mod:`.strategies`), here apart
from the engine: the analyst's client names them on an install without it."""

# The analyst's choice, when the two cannot both hold: "per-query" (the default) keeps every
# query's variance at or below the best fixed candidate's; "total" takes the lowest total,
# though some queries may then be answered less accurately than by the fixed candidate.
OBJECTIVES = ("per-query", "total")
PER_QUERY, TOTAL = OBJECTIVES
