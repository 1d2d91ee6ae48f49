"""In-process execution of map tasks straight from the chunks' inverted indexes."""

from __future__ import annotations

from ..overlay.combine import count_matches
from ..overlay.planner import MapTask, plan_conjunction
from ..publication import Publication
from ..querylang import CountQuery


def run_task(publication: Publication, task: MapTask) -> list[str]:
    """Pseudonyms of the chunk's subrecords holding every term of the task (what a mapper emits)."""
    postings = publication.postings(task.chunk)
    lists = sorted((postings.get(term, []) for term in task.terms), key=len)
    matched = set(lists[0]).intersection(*lists[1:])
    return sorted(matched)


def exact_count(publication: Publication, query: CountQuery) -> int:
    """The exact answer (owner only: it never leaves the private cloud otherwise)."""
    plan = plan_conjunction(query.terms, publication)
    results = {task: run_task(publication, task) for task in plan.tasks}
    return count_matches(plan, results, publication.record_positions, publication.cluster_of)
