"""The private cloud's final step: pseudonyms back to records, intersect per cluster, sum.

A record lies in exactly one leaf cluster, and within it each query term lives in exactly one
chunk, so a record matches iff every task of its cluster returned one of its pseudonyms.  Tasks
over aggregated chunks return records of several clusters: the intersection keeps the ones of
the cluster at hand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from .planner import MapTask, Plan


def count_matches(plan: Plan, results: Mapping[MapTask, Iterable[str]],
                  resolve: Callable[[str], Mapping[str, int]],
                  cluster_of: Sequence[int]) -> int:
    """``results``: pseudonyms per task; ``resolve(chunk)``: its pseudonym -> record position;
    ``cluster_of[position]``: the record's leaf cluster."""
    positions: dict[MapTask, set[int]] = {}
    for task in plan.tasks:
        names = resolve(task.chunk)
        positions[task] = {names[p] for p in results[task]}
    total = 0
    for cluster, tasks in plan.clusters.items():
        ordered = sorted(tasks, key=lambda t: len(positions[t]))
        matched = {p for p in positions[ordered[0]] if cluster_of[p] == cluster}
        for task in ordered[1:]:
            if not matched:
                break
            matched &= positions[task]
        total += len(matched)
    return total
