"""In-process exact counts from the publication's term bitmaps.

The fast path plays both clouds at once: in the private cloud it reads the version's term
index, one roaring bitmap of record positions per term
(:attr:`~cocktail.query.view.Publication.term_records`).  A conjunctive count is then the size
of an intersection, with no plan to build; every runner returns the same answers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...querylang import CountQuery
from ..view import Publication


def counts(publication: Publication, queries: Sequence[CountQuery],
           log: Callable[[str], None] | None = None) -> list[int]:
    """Exact answers; ``CountQuery(())`` counts every record."""
    records, everyone = publication.term_records, publication.record_count
    answers = []
    for query in queries:
        found = [records.get(term) for term in query.terms]
        if not found:
            answers.append(everyone)
        elif any(f is None for f in found):
            answers.append(0)
        elif len(found) == 1:
            answers.append(len(found[0]))
        else:
            found.sort(key=len)
            common = found[0]
            for other in found[1:-1]:
                common = common & other
            answers.append(common.intersection_cardinality(found[-1]))
    return answers
