"""The joint-view attacker: every public view of one cluster's records, taken together.

Each view is one release's public chunks of the same records: a term set per chunk with the
multiset of its (non-empty) subrecords.  The attacker knows how many records there are (every
one holds at least one published term) and enumerates every dataset — a multiset of that many
non-empty sets of published terms — whose projection on every chunk of every view is exactly
that chunk's multiset.  An itemset of at most m terms whose support is the same number s,
0 < s < k, in every consistent dataset is *pinned*: an adversary who knows those terms of a
victim isolates fewer than k records.  Pins that a single view already gives are reported
apart from those only the combination gives (the composition leak).

Enumeration is exponential: it is meant for small clusters (a few published terms, a dozen
records), where the counterexamples live, and refuses bigger ones rather than run for ever.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations

Subrecord = frozenset[str]


@dataclass(frozen=True)
class ChunkView:
    terms: frozenset[str]
    subrecords: Counter  # Subrecord -> how many


View = Sequence[ChunkView]  # one release's public chunks of the cluster


@dataclass
class Findings:
    datasets: int                                   # consistent datasets enumerated
    pinned: dict[tuple[str, ...], int] = field(default_factory=dict)   # joint view
    pinned_alone: dict[tuple[str, ...], int] = field(default_factory=dict)  # by some one view

    @property
    def composition(self) -> dict[tuple[str, ...], int]:
        """What only the combination of views pins."""
        return {i: s for i, s in self.pinned.items() if i not in self.pinned_alone}


class TooLarge(ValueError):
    pass


MAX_TERMS = 8
MAX_RECORDS = 14


def consistent_datasets(views: Sequence[View], records: int,
                        allow_empty: bool = False) -> list[Counter]:
    """Every multiset of ``records`` term sets (non-empty unless ``allow_empty``: records
    that hold no published term) that projects onto every chunk of every view exactly."""
    chunks = [chunk for view in views for chunk in view]
    terms = sorted(frozenset().union(*(c.terms for c in chunks))) if chunks else []
    if len(terms) > MAX_TERMS or records > MAX_RECORDS:
        raise TooLarge(f"{len(terms)} published terms and {records} records: too many to "
                       f"enumerate (limits {MAX_TERMS} and {MAX_RECORDS})")
    candidates = [frozenset(s) for n in range(0 if allow_empty else 1, len(terms) + 1)
                  for s in combinations(terms, n)]
    found: list[Counter] = []

    def fits(dataset: list[Subrecord], complete: bool) -> bool:
        for chunk in chunks:
            projected = Counter(r & chunk.terms for r in dataset if r & chunk.terms)
            if complete and projected != chunk.subrecords:
                return False
            if any(n > chunk.subrecords.get(s, 0) for s, n in projected.items()):
                return False
        return True

    def extend(dataset: list[Subrecord], start: int) -> None:
        if len(dataset) == records:
            if fits(dataset, complete=True):
                found.append(Counter(dataset))
            return
        for i in range(start, len(candidates)):
            dataset.append(candidates[i])
            if fits(dataset, complete=False):
                extend(dataset, i)  # non-decreasing order: each multiset once
            dataset.pop()

    extend([], 0)
    return found


def _pinned(datasets: list[Counter], terms: Sequence[str], k: int, m: int
            ) -> dict[tuple[str, ...], int]:
    pinned = {}
    for size in range(1, m + 1):
        for itemset in combinations(terms, size):
            wanted = frozenset(itemset)
            supports = {sum(n for r, n in d.items() if wanted <= r) for d in datasets}
            if len(supports) == 1 and 0 < (support := supports.pop()) < k:
                pinned[itemset] = support
    return pinned


def attack(views: Sequence[View], records: int, k: int, m: int,
           allow_empty: bool = False) -> Findings:
    """Pinned itemsets of the joint view, and of each view alone."""
    terms = sorted(frozenset().union(*(c.terms for view in views for c in view)))
    joint = consistent_datasets(views, records, allow_empty)
    findings = Findings(len(joint), _pinned(joint, terms, k, m) if joint else {})
    for view in views:
        alone = consistent_datasets([view], records, allow_empty)
        view_terms = sorted(frozenset().union(*(c.terms for c in view))) if view else []
        findings.pinned_alone |= _pinned(alone, view_terms, k, m) if alone else {}
    return findings
