"""In-process execution of a map task straight from the chunk's inverted index."""

from __future__ import annotations

from ..overlay.planner import MapTask
from ..publication import Publication


def run_task(publication: Publication, task: MapTask) -> list[str]:
    """Pseudonyms of the chunk's subrecords holding every term of the task (what a mapper emits)."""
    postings = publication.postings(task.chunk)
    lists = sorted((postings.get(term, []) for term in task.terms), key=len)
    matched = set(lists[0]).intersection(*lists[1:])
    return sorted(matched)
