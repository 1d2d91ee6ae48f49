"""EQI-identifying: concepts are the itemsets of size <= m that at least k records contain.

Concept mining is frequent-itemset mining bounded by size, so it is delegated to Christian
Borgelt's C implementation of Eclat (pyfim) rather than a Python Apriori.  Concepts stay the
plain ``(terms, support)`` tuples pyfim returns: clusters of long records yield millions of them.
"""

from __future__ import annotations

from collections.abc import Sequence

import fim

from .model import Record

Concept = tuple[tuple[str, ...], int]  # (intension I, support |q(I)|)


def mine_concepts(records: Sequence[Record], k: int, m: int) -> list[Concept]:
    """All concepts U(I, q(I)) with 1 <= |I| <= m and |q(I)| >= k (paper 3.1.1, steps 1-4).

    Transactions are passed with sorted terms so the output order does not depend on string
    hashing: partitions are reproducible run to run.
    """
    transactions = [sorted(r) for r in records if r]
    if not transactions:
        return []
    # A negative `supp` is an absolute minimum support in pyfim.
    return fim.eclat(transactions, target="s", supp=-k, zmin=1, zmax=m, report="a")
