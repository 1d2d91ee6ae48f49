"""Turn a conjunctive query into map tasks: one per (chunk, query terms held by that chunk).

A cluster can only contribute records when it holds every query term, so clusters missing one
are pruned before any chunk is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class MapTask:
    cluster: int
    chunk: str
    private: bool
    terms: tuple[str, ...]


class ChunkLayout(Protocol):
    """What the planner needs to know of a publication (the private manifest)."""

    @property
    def term_chunks(self) -> Mapping[str, Mapping[int, str]]: ...

    def is_private(self, chunk_id: str) -> bool: ...


def plan_conjunction(terms: Sequence[str], layout: ChunkLayout) -> list[MapTask]:
    """Map tasks for ``count(t1 & ... & tn)``, grouped by cluster, clusters in order."""
    where = [layout.term_chunks.get(term, {}) for term in terms]
    clusters = set(where[0]).intersection(*where[1:]) if where else set()
    tasks = []
    for cluster in sorted(clusters):
        by_chunk: dict[str, list[str]] = {}
        for term, places in zip(terms, where):
            by_chunk.setdefault(places[cluster], []).append(term)
        tasks.extend(MapTask(cluster, chunk, layout.is_private(chunk), tuple(held))
                     for chunk, held in sorted(by_chunk.items()))
    return tasks
