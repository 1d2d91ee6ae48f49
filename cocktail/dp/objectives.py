"""What an analyst may ask the strategy choice to minimise (:mod:`.strategies`), here apart
from the engine: the analyst's client names them on an install without it."""

# The analyst's choice, when the two cannot both hold: "total" (the default) takes the lowest
# total, though some queries may then be answered less accurately than by the best fixed
# candidate; "per-query" keeps every query's variance at or below that candidate's, at a cost
# in the total and often in the worst query too (docs/dp.md, "The analyst's objective").
OBJECTIVES = ("per-query", "total")
PER_QUERY, TOTAL = OBJECTIVES
DEFAULT_OBJECTIVE = TOTAL
