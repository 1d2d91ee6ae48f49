"""In-process exact counts from the publication's term bitmaps.

The fast path plays both clouds at once: in the private cloud it reads the version's term
index, one roaring bitmap of record positions per term
(:attr:`~cocktail.query.view.Publication.term_records`).  A conjunctive count is then the size
of an intersection, with no plan to build; every runner returns the same answers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...querylang import CountQuery
from ..termindex import count_conjunction
from ..view import Publication

READS = "index"  # what a reader opens ahead (Publication.warm): every term's bitmap


def counts(publication: Publication, queries: Sequence[CountQuery],
           log: Callable[[str], None] | None = None) -> list[int]:
    """Exact answers; ``CountQuery(())`` counts every record."""
    records = publication.term_records
    return [count_conjunction(records, query.terms) if query.terms
            else publication.live_records for query in queries]
