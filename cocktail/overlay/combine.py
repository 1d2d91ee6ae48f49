"""The private cloud's final step: pseudonyms back to records, intersect per cluster, sum.

Within a cluster the chunks partition each record's terms, so a record satisfies the query iff
every task of that cluster returned one of its pseudonyms; clusters hold disjoint records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from .planner import MapTask


def count_matches(results: Mapping[MapTask, Iterable[str]],
                  resolve: Callable[[str], Mapping[str, int]]) -> int:
    """``results``: the pseudonyms each task returned; ``resolve(chunk)``: its pseudonym map."""
    per_cluster: dict[int, set[int]] = {}
    for task, pseudonyms in results.items():
        positions = resolve(task.chunk)
        records = {positions[p] for p in pseudonyms}
        if task.cluster in per_cluster:
            per_cluster[task.cluster] &= records
        else:
            per_cluster[task.cluster] = records
    return sum(len(records) for records in per_cluster.values())
