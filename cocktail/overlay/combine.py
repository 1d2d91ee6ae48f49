"""The private cloud's final step: records matched per task, intersected per cluster, summed.

A record lies in exactly one leaf cluster, and within it each query term lives in exactly one
chunk, so a record matches iff every task of its cluster returned it.  Tasks over aggregated
chunks return records of several clusters: those are narrowed to the cluster at hand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Set

from .planner import MapTask, Plan


def resolve(results: Mapping[MapTask, Iterable[str]],
            positions_of: Callable[[str], Mapping[str, int]]) -> dict[MapTask, set[int]]:
    """Pseudonyms returned by map tasks -> record positions, through the private maps."""
    resolved = {}
    for task, pseudonyms in results.items():
        names = positions_of(task.chunk)
        resolved[task] = {names[p] for p in pseudonyms}
    return resolved


def count_matches(plan: Plan, matched: Mapping[MapTask, Set[int]],
                  members: Callable[[int], Set[int]]) -> int:
    """``matched``: record positions per task; ``members(cluster)``: a leaf cluster's records."""
    total = 0
    for cluster, tasks in plan.clusters.items():
        if len(tasks) == 1:
            found = matched[tasks[0]]
        else:
            sets = sorted((matched[t] for t in tasks), key=len)
            found = sets[0].intersection(*sets[1:])
        if any(t.unit != cluster for t in tasks):
            found = found & members(cluster)
        total += len(found)
    return total
