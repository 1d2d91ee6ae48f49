"""The `testing` baseline: EQI-testing, i.e. VERPART of Terrovitis et al.'s disassociation.

Terms with support >= k are taken in descending support order (ties by term) and each is put
into the first chunk that stays k^m-anonymous with it, or opens a new chunk.  Terms with support
< k are private.  Since k^m-anonymity is monotone under removing terms, this first-fit is the
same as VERPART's fill-one-chunk-at-a-time loop.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import combinations

from .model import Itemset, Partition, Record, check_parameters


def _can_extend(chunk: set[str], holders: Sequence[Record], k: int, m: int) -> bool:
    """Whether chunk + {t} is still k^m-anonymous, given the records `holders` that contain t.

    Only itemsets that contain t are new; their support is the number of holders whose
    projection on the chunk contains the rest of the itemset (support 0 never arises here).
    """
    counts: Counter[tuple[str, ...]] = Counter()
    for record in holders:
        projection = sorted(record & chunk)
        for size in range(1, min(m - 1, len(projection)) + 1):
            counts.update(combinations(projection, size))
    return all(count >= k for count in counts.values())


def partition_testing(records: Sequence[Record], k: int, m: int) -> Partition:
    check_parameters(k, m)
    holders: dict[str, list[Record]] = {}
    for record in records:
        for term in record:
            holders.setdefault(term, []).append(record)
    frequent = sorted((t for t, rs in holders.items() if len(rs) >= k),
                      key=lambda t: (-len(holders[t]), t))
    chunks: list[set[str]] = []
    tests = 0
    for term in frequent:
        for chunk in chunks:
            tests += 1
            if _can_extend(chunk, holders[term], k, m):
                chunk.add(term)
                break
        else:
            chunks.append({term})
    private = frozenset(t for t, rs in holders.items() if len(rs) < k)
    public: tuple[Itemset, ...] = tuple(frozenset(c) for c in chunks)
    return Partition(public, private, {"extension_tests": tests})
