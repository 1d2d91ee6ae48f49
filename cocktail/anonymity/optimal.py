"""The `optimal` baseline: exact Min-EP for small clusters, with OR-Tools CP-SAT.

Min-EP is colouring the conflict hypergraph (:mod:`.conflicts`) with the fewest colours: every
frequent term goes into exactly one public chunk and no chunk may contain a forbidden itemset.
Terms with support < k are private in every method; any term with support >= k can be public on
its own, so Min-EP keeps all of them public and the number of private terms is the same for
every solution: the tie-break "fewest private terms" never has to choose.

The model: x[t][c] = term t in chunk c, y[c] = chunk c used; one chunk per term; a forbidden set
may not lie inside one chunk; chunks are used in order and term i may only use chunks 0..i
(symmetry breaking); minimise the chunks used.  The `improved` partition is the upper bound and
the solver's hint.  Beyond ``max_terms`` frequent terms, or when optimality is not proven within
``max_seconds``, it refuses with :class:`TooLargeForOptimal` rather than return a guess.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..extras import require
from .conflicts import bits, find_conflicts
from .improved import partition_improved
from .model import Partition, Record, check_parameters, cluster_terms

MAX_TERMS = 60
MAX_SECONDS = 60.0


class TooLargeForOptimal(ValueError):
    """The cluster is beyond what the exact solver is allowed to take on."""


def partition_optimal(records: Sequence[Record], k: int, m: int, *, rule: str = "exact",
                      max_terms: int = MAX_TERMS, max_seconds: float = MAX_SECONDS) -> Partition:
    cp_model = require("ortools.sat.python.cp_model")  # heavy; loaded only when asked for

    check_parameters(k, m)
    space = find_conflicts(records, k, m, rule)
    n = len(space.terms)
    if n > max_terms:
        raise TooLargeForOptimal(
            f"optimal: the cluster has {n} frequent terms, more than the {max_terms} the exact "
            "solver takes on; use smaller clusters (--cluster-size) or another method")
    private = frozenset(cluster_terms(records) - set(space.terms))
    if n == 0:
        return Partition((), private, {"proven_optimal": 1})
    # Ordered by lowest term, the improved chunks respect the symmetry breaking below.
    start = sorted((space.mask(c) for c in partition_improved(records, k, m, rule=rule).public),
                   key=lambda c: c & -c)
    colours = len(start)
    model = cp_model.CpModel()
    x = [[model.new_bool_var(f"x{t}_{c}") for c in range(colours)] for t in range(n)]
    y = [model.new_bool_var(f"y{c}") for c in range(colours)]
    for t in range(n):
        model.add_exactly_one(x[t])
        for c in range(colours):
            model.add_implication(x[t][c], y[c])
            if c > t:
                model.add(x[t][c] == 0)
    for c in range(1, colours):
        model.add_implication(y[c], y[c - 1])
    forbidden = [[a, b] for a in range(n) for b in bits(space.conflict[a]) if a < b]
    forbidden += [list(bits(f)) for f in space.forbidden()]
    for members in forbidden:
        for c in range(colours):
            model.add(sum(x[t][c] for t in members) <= len(members) - 1)
    for c, chunk in enumerate(start):
        for t in range(n):
            model.add_hint(x[t][c], bool((chunk >> t) & 1))
    model.minimize(sum(y))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max_seconds
    solver.parameters.num_workers = 2
    status = solver.solve(model)
    if status != cp_model.OPTIMAL:
        raise TooLargeForOptimal(
            f"optimal: not proven within {max_seconds:g} s ({n} frequent terms, "
            f"{len(forbidden)} forbidden sets); use smaller clusters or another method")
    chunks = [sum(1 << t for t in range(n) if solver.value(x[t][c])) for c in range(colours)]
    public = tuple(space.names(c) for c in chunks if c)
    return Partition(public, private, {"proven_optimal": 1, "forbidden_sets": len(forbidden)})
