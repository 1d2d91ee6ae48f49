"""In-process execution of map tasks straight from the chunks' inverted indexes.

The fast path plays both clouds at once, so it resolves each index to record positions once
(cached) and intersects frozensets, instead of shipping pseudonyms around.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..overlay.planner import MapTask
from ..publication import Publication


def run_task(publication: Publication, task: MapTask) -> frozenset[int]:
    """Records whose subrecord in the task's chunk holds every term of the task."""
    index = publication.term_positions(task.chunk)
    sets = sorted((index.get(term, frozenset()) for term in task.terms), key=len)
    return sets[0].intersection(*sets[1:]) if len(sets) > 1 else sets[0]


def run_tasks(publication: Publication, tasks: Sequence[MapTask]) -> dict[MapTask, frozenset[int]]:
    return {task: run_task(publication, task) for task in tasks}
