"""EQI-identifying: concepts are the itemsets of size <= m that at least k records contain.

Concept mining is frequent-itemset mining bounded by size, so it is delegated to Christian
Borgelt's C implementation of Eclat (pyfim) rather than a Python Apriori.  Concepts stay the
plain ``(terms, support)`` tuples pyfim returns: clusters of long records yield millions of them.

Some clusters hold a few near-identical very long records (crawlers in BMS-WebView-1): at m=4
one 2000-record cluster has 22 million concepts.  So mining is bounded.  A concept of size s is
contained in at least k records, so there are at most sum over records of C(|r|, s), over k; when
that is within ``max_concepts`` one pyfim call mines everything.  Otherwise mining goes level by
level and bounds each level by apriori-gen's join (candidates of size l are pairs of frequent
(l-1)-itemsets sharing their first l-2 terms); past ``max_concepts`` it refuses with
:class:`ClusterTooDense` instead of exhausting memory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from math import comb

import fim

from .model import Record

Concept = tuple[tuple[str, ...], int]  # (intension I, support |q(I)|)
MAX_CONCEPTS = 6_000_000
_SENTINEL = object()


def eclat(transactions: Sequence[Sequence], min_support: int, max_size: int) -> list[tuple]:
    """pyfim's Eclat: every itemset of 1..max_size items in >= min_support transactions.

    pyfim silently drops an item that occurs in *every* transaction from the singletons it
    reports (overlay-tree clusters split on a term are exactly such inputs), so one extra
    transaction holding only a sentinel object is added, and the sentinel filtered out.
    """
    found = fim.eclat([*transactions, [_SENTINEL]], target="s", supp=-min_support, zmin=1,
                      zmax=max_size, report="a")
    return [(items, support) for items, support in found if _SENTINEL not in items]


class ClusterTooDense(ValueError):
    """Concept mining would exceed its budget on this cluster."""


def _join_bound(level: list[tuple[str, ...]]) -> int:
    """How many candidates apriori-gen's join makes from the (sorted) itemsets of one level."""
    prefixes = Counter(itemset[:-1] for itemset in level)
    return sum(comb(count, 2) for count in prefixes.values())


def mine_concepts(records: Sequence[Record], k: int, m: int,
                  max_concepts: int = MAX_CONCEPTS) -> list[Concept]:
    """All concepts U(I, q(I)) with 1 <= |I| <= m and |q(I)| >= k (paper 3.1.1, steps 1-4).

    Transactions are passed with sorted terms so the output order does not depend on string
    hashing: partitions are reproducible run to run.
    """
    transactions = [sorted(r) for r in records if r]
    if not transactions:
        return []

    def mine(depth: int) -> list[Concept]:
        return eclat(transactions, k, depth)

    longest = max(map(len, transactions))
    subsets = [sum(comb(n, s) for s in range(1, m + 1)) for n in range(longest + 1)]
    if sum(subsets[len(t)] for t in transactions) // k <= max_concepts:
        return mine(m)
    concepts = mine(1)
    for depth in range(2, m + 1):
        top = [tuple(sorted(items)) for items, _ in concepts if len(items) == depth - 1]
        bound = len(concepts) + _join_bound(top)
        if bound > max_concepts:
            raise ClusterTooDense(
                f"a cluster of {len(records)} records would have up to {bound:,} concepts of "
                f"size <= {depth} (budget {max_concepts:,}): lower m, raise k or use smaller "
                "clusters")
        if not top:
            break
        concepts = mine(depth)
    return concepts
