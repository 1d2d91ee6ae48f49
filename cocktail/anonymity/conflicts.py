"""Which frequent terms may share a chunk: the minimal forbidden itemsets of a cluster.

A set of frequent terms S is a valid chunk iff it contains no *forbidden* itemset of size 2..m:

* ``exact`` rule (DESIGN.md): forbidden = support in [1, k).  Support-0 itemsets are allowed.
* ``strict`` rule (the paper's Algorithm 2): forbidden = support < k, zero included, i.e. every
  <= m-subset of a concept must itself be a frequent concept.

Only minimal forbidden itemsets matter, and an itemset is minimally forbidden iff it is forbidden
and all its proper subsets are frequent (a subset of an itemset with support >= 1 has support
>= 1).  So the candidates of size l are apriori-gen of the frequent (l-1)-itemsets, which concept
mining provides.

Term sets are Python ints used as bitsets over the frequent terms (index 0 = most frequent):
growing a chunk by one term is then a handful of big-integer operations, not a loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from .concepts import Concept, eclat, mine_concepts
from .model import Itemset, Record

RULES = ("exact", "strict")


def bits(mask: int) -> Iterable[int]:
    """Indexes of the set bits, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


@dataclass
class ConflictSpace:
    terms: list[str]                  # frequent terms, by support descending, then term
    conflict: list[int]               # per term: the terms it forms a forbidden pair with
    higher: list[list[int]] = field(default_factory=list)  # per term: rest of each forbidden
    #                                   set of size >= 3 that contains it
    forbidden: list[int] = field(default_factory=list)     # every forbidden set of size >= 3

    @property
    def all(self) -> int:
        return (1 << len(self.terms)) - 1

    def joinable(self, term: int, group: int, candidates: int) -> int:
        """The candidates that can still join once ``term`` joins ``group`` (group + term valid)."""
        candidates &= ~self.conflict[term] & ~(1 << term)
        for rest in self.higher[term]:
            missing = rest & ~group
            if missing and missing & (missing - 1) == 0:  # one term of the set is still outside
                candidates &= ~missing
        return candidates

    def valid(self, group: int) -> bool:
        if any(self.conflict[t] & group for t in bits(group)):
            return False
        return not any(f & group == f for f in self.forbidden)

    def names(self, group: int) -> Itemset:
        return frozenset(self.terms[t] for t in bits(group))

    def mask(self, names: Iterable[str]) -> int:
        index = {t: i for i, t in enumerate(self.terms)}
        return sum(1 << index[t] for t in set(names))


def _apriori_gen(frequent: set[tuple[str, ...]]) -> Iterable[tuple[str, ...]]:
    """Sorted l-tuples all of whose (l-1)-subsets are in ``frequent`` (sorted (l-1)-tuples)."""
    by_prefix: dict[tuple[str, ...], list[str]] = {}
    for itemset in frequent:
        by_prefix.setdefault(itemset[:-1], []).append(itemset[-1])
    for prefix, lasts in by_prefix.items():
        lasts.sort()
        for i, a in enumerate(lasts):
            for b in lasts[i + 1:]:
                candidate = (*prefix, a, b)
                if all(candidate[:j] + candidate[j + 1:] in frequent
                       for j in range(len(candidate) - 2)):
                    yield candidate


def _present_pairs(records: Sequence[Record], index: dict[str, int]) -> set[tuple[int, int]]:
    projected = [p for p in (sorted(index[t] for t in r if t in index) for r in records)
                 if len(p) > 1]
    if not projected:
        return set()
    return {tuple(sorted(items)) for items, _ in eclat(projected, 1, 2) if len(items) == 2}


def find_conflicts(records: Sequence[Record], k: int, m: int, rule: str = "exact",
                   concepts: Sequence[Concept] | None = None) -> ConflictSpace:
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; choose one of {', '.join(RULES)}")
    concepts = mine_concepts(records, k, m) if concepts is None else concepts
    levels: dict[int, set[tuple[str, ...]]] = {}
    support: dict[str, int] = {}
    for items, count in concepts:
        levels.setdefault(len(items), set()).add(tuple(sorted(items)))
        if len(items) == 1:
            support[items[0]] = count
    terms = sorted(support, key=lambda t: (-support[t], t))
    index = {t: i for i, t in enumerate(terms)}
    space = ConflictSpace(terms, [0] * len(terms), [[] for _ in terms])
    if m < 2:
        return space  # only single terms are adversary knowledge: nothing conflicts
    frequent_pairs = {tuple(sorted((index[a], index[b]))) for a, b in levels.get(2, set())}
    if rule == "strict":  # every pair that is not frequent, co-occurring or not
        pairs: Iterable[tuple[int, int]] = (p for p in combinations(range(len(terms)), 2)
                                            if p not in frequent_pairs)
    else:  # the rare pairs: co-occurring (support >= 1) but not frequent
        pairs = _present_pairs(records, index) - frequent_pairs
    for a, b in pairs:
        space.conflict[a] |= 1 << b
        space.conflict[b] |= 1 << a

    tids = [0] * len(terms)
    if rule == "exact":
        for position, record in enumerate(records):
            for term in record:
                if term in index:
                    tids[index[term]] |= 1 << position
    for size in range(3, m + 1):
        known = levels.get(size, set())
        for candidate in _apriori_gen(levels.get(size - 1, set())):
            if candidate in known:
                continue
            members = [index[t] for t in candidate]
            if rule == "exact":
                together = tids[members[0]]
                for t in members[1:]:
                    together &= tids[t]
                if not together:
                    continue
            forbidden = sum(1 << t for t in members)
            space.forbidden.append(forbidden)
            for t in members:
                space.higher[t].append(forbidden & ~(1 << t))
    return space
