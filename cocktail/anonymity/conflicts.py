"""Which frequent terms may share a chunk: the minimal forbidden itemsets of a cluster.

A set of frequent terms S is a valid chunk iff it contains no *forbidden* itemset of size 2..m:

* ``exact`` rule (DESIGN.md): forbidden = support in [1, k).  Support-0 itemsets are allowed.
* ``strict`` rule (the paper's Algorithm 2): forbidden = support < k, zero included, i.e. every
  <= m-subset of a concept must itself be a frequent concept.

Only minimal forbidden itemsets matter, and an itemset is minimally forbidden iff it is forbidden
and all its proper subsets are frequent (a subset of an itemset with support >= 1 has support
>= 1).  So the candidates of size l are apriori-gen of the frequent (l-1)-itemsets.

Pairs and triples are nearly all of them (one dense 773-record cluster of BMS-WebView-1 has
145,581 minimal forbidden triples), so they are counted with numpy over the records x frequent
terms matrix: pair supports from every record's pairs at once, and the supports of all triples
{a, b, c} with a < b < c as the Gram matrix of the records holding a, over the terms b, c > a
that form a frequent pair with a.  Under the exact rule, where a cluster's records are short (the
usual case: 5 terms on average in 1M synthetic baskets), every record's triples are counted
instead, with one sort for the whole cluster.  Sets of 4..m terms are apriori-gen of the
frequent itemsets concept mining (pyfim) provides, checked with bitset intersections.

Term sets are Python ints used as bitsets over the frequent terms (index 0 = most frequent):
growing a chunk by one term is then a handful of big-integer operations, not a loop.  Forbidden
triples are kept per pair of terms (the third terms as one bitset), so checking a term against a
chunk costs one lookup per chunk member rather than one per forbidden triple.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import chain, combinations

import numpy as np

from ..dataset import Records, key_type
from .concepts import mine_concepts
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
    pair_matrix: np.ndarray           # the same, as a symmetric boolean matrix
    triples: list[dict[int, int]] = field(default_factory=list)  # per term t: u -> the terms v
    #                                   with {t, u, v} forbidden
    partners: list[int] = field(default_factory=list)  # per term t: the keys u of triples[t]
    higher: list[list[int]] = field(default_factory=list)  # per term: rest of each forbidden
    #                                   set of size >= 4 that contains it
    larger: list[int] = field(default_factory=list)    # every forbidden set of size >= 4

    @property
    def all(self) -> int:
        return (1 << len(self.terms)) - 1

    def flags(self, group: int) -> np.ndarray:
        """``group`` as a boolean vector over the terms."""
        raw = np.frombuffer(group.to_bytes((len(self.terms) + 7) // 8, "little"), np.uint8)
        return np.unpackbits(raw, count=len(self.terms), bitorder="little").view(bool)

    def _thirds(self, term: int, group: int) -> int:
        """The terms v such that {term, u, v} is forbidden for some u in ``group``."""
        pairs, found = self.triples[term], 0
        for u in bits(group & self.partners[term]):
            found |= pairs[u]
        return found

    def joinable(self, term: int, group: int, candidates: int) -> int:
        """The candidates that can still join once ``term`` joins ``group`` (group + term valid)."""
        # A forbidden set is shut out by its one term still outside group + term.
        candidates &= ~self.conflict[term] & ~(1 << term)
        if group & self.partners[term]:  # (most calls have no triple to look up)
            candidates &= ~(self._thirds(term, group) & ~group)
        for rest in self.higher[term]:
            missing = rest & ~group
            if missing and missing & (missing - 1) == 0:
                candidates &= ~missing
        return candidates

    def fits(self, term: int, group: int) -> bool:
        """Whether group + term holds no forbidden set that contains ``term``."""
        if self.conflict[term] & group:
            return False
        if group & self.partners[term] and self._thirds(term, group) & group:
            return False
        return not any(rest & group == rest for rest in self.higher[term])

    def valid(self, group: int) -> bool:
        return all(self.fits(t, group) for t in bits(group))

    def forbidden(self) -> Iterator[int]:
        """Every forbidden set of size >= 3."""
        for t, pairs in enumerate(self.triples):
            for u, thirds in pairs.items():
                if u > t:
                    for v in bits((thirds >> (u + 1)) << (u + 1)):
                        yield 1 << t | 1 << u | 1 << v
        yield from self.larger

    def count_forbidden(self) -> int:
        """How many forbidden sets of size >= 3 (a triple is in six ``triples`` entries)."""
        found = sum(thirds.bit_count() for pairs in self.triples for thirds in pairs.values())
        return found // 6 + len(self.larger)

    def names(self, group: int) -> Itemset:
        return frozenset(self.terms[t] for t in np.flatnonzero(self.flags(group)).tolist())

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


def _bitsets(rows: np.ndarray) -> list[int]:
    """Each row of a boolean matrix as a Python int (column j = bit j)."""
    packed = np.packbits(rows, axis=1, bitorder="little")
    width = packed.shape[1]
    data = packed.tobytes()
    return [int.from_bytes(data[i:i + width], "little") for i in range(0, len(data), width)]


def _occurrences(records: Sequence[Record], k: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The frequent terms (by support descending, then term), and every occurrence of one as
    (term index, record position) arrays, by record."""
    if isinstance(records, Records):  # its term ids as they are, no set per record
        names, flat = records.names, records.indices
        owner = np.repeat(np.arange(len(records)), np.diff(records.indptr))
        support = np.bincount(flat, minlength=len(names))
        frequent = np.flatnonzero(support >= k)  # by name: ids follow name order
        frequent = frequent[np.argsort(-support[frequent], kind="stable")]
        rank = np.full(len(names), -1)
        rank[frequent] = np.arange(len(frequent))
        ids = rank[flat]
        return [names[i] for i in frequent.tolist()], ids[ids >= 0], owner[ids >= 0]
    occurring = list(chain.from_iterable(records))
    codes = {t: c for c, t in enumerate(dict.fromkeys(occurring))}
    flat = np.fromiter(map(codes.__getitem__, occurring), np.intp, len(occurring))
    owner = np.repeat(np.arange(len(records)), [len(r) for r in records])
    support = np.bincount(flat, minlength=len(codes)).tolist()
    terms = sorted((t for t, c in codes.items() if support[c] >= k),
                   key=lambda t: (-support[codes[t]], t))
    rank = np.full(len(codes), -1)
    rank[[codes[t] for t in terms]] = np.arange(len(terms))
    ids = rank[flat]
    return terms, ids[ids >= 0], owner[ids >= 0]


def _pair_supports(ids: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """The n x n matrix of pair supports (diagonal 0), counted over every record's pairs."""
    ends = np.cumsum(np.bincount(owner))[owner]
    later = ends - np.arange(len(ids)) - 1           # partners after each occurrence
    first = np.repeat(np.arange(len(ids)), later)
    step = np.arange(len(first)) - np.repeat(np.cumsum(later) - later, later)
    keys = ids[first] * n + ids[first + 1 + step]
    counts = np.zeros(n * n, np.int32)
    if n * n <= 8 * len(keys):  # dense enough to count every cell
        counts += np.bincount(keys, minlength=n * n).astype(np.int32)
    else:  # a large pool of short records: a 3,077-term matrix of int64 took 76 MB
        present, times = np.unique(keys, return_counts=True)
        counts[present] = times
    counts = counts.reshape(n, n)
    return counts + counts.T


# Counting every record's triples costs about 0.1 us a triple; a Gram matrix about 100 us a term
# (measured on the clusters of 1M synthetic baskets and of BMS-WebView-1 and -2).
COUNTED_TRIPLES_PER_TERM = 1000


def _forbidden_triples(ids: np.ndarray, owner: np.ndarray, records: int, frequent: np.ndarray,
                       k: int, strict: bool) -> np.ndarray:
    """Rows (a, b, c), c < b < a, of the minimal forbidden triples: every pair frequent (the
    boolean matrix ``frequent``), support below k, and above 0 unless ``strict``."""
    lengths = np.bincount(owner, minlength=records)
    triples = int((lengths * (lengths - 1) * (lengths - 2) // 6).sum())
    lower = np.tril(frequent, -1)
    looped = np.flatnonzero(np.count_nonzero(lower, axis=1) >= 2)  # the Gram matrices' terms
    if not strict and triples <= COUNTED_TRIPLES_PER_TERM * len(looped):
        return _counted_triples(ids, lengths, frequent, k)
    return _gram_triples(ids, owner, records, frequent, lower, looped, k, strict)


@cache
def _combinations(length: int) -> np.ndarray:
    return np.array(list(combinations(range(length), 3)), np.intp).reshape(-1, 3)


def _counted_triples(ids: np.ndarray, lengths: np.ndarray, frequent: np.ndarray,
                     k: int) -> np.ndarray:
    """The exact rule's triples, from every triple of every record (records of one length at
    a time, each record's term ids sorted descending): a triple absent from every record has
    support 0 and is allowed."""
    n = len(frequent)
    starts = np.cumsum(lengths) - lengths
    dtype = key_type(n ** 3)
    keys = [np.empty(0, dtype)]
    for length in np.unique(lengths[lengths >= 3]).tolist():
        first = starts[lengths == length]
        held = -np.sort(-ids[first[:, None] + np.arange(length)].astype(dtype), axis=1)
        abc = held[:, _combinations(length)]
        keys.append(((abc[..., 0] * n + abc[..., 1]) * n + abc[..., 2]).ravel())
    key, support = np.unique(np.concatenate(keys), return_counts=True)
    a, bc = np.divmod(key[support < k], n * n)
    b, c = np.divmod(bc, n)
    keep = frequent[a, b] & frequent[a, c] & frequent[b, c]
    return np.column_stack([a[keep], b[keep], c[keep]])


def _gram_triples(ids: np.ndarray, owner: np.ndarray, records: int, frequent: np.ndarray,
                  lower: np.ndarray, looped: np.ndarray, k: int, strict: bool) -> np.ndarray:
    """:func:`_forbidden_triples` for long records or the strict rule (``lower``: the frequent
    pairs below the diagonal; ``looped``: the terms a with two or more of them).

    Each triple is counted from the records of its least frequent term a (the highest index),
    and of those only the records holding two more of a's frequent partners: a term x record
    matrix of just those, gathered from the occurrences (a dense one of every term and record
    took 409 MB for BMS-WebView-2's root pool)."""
    starts = np.searchsorted(owner, np.arange(records + 1))  # occurrences are by record
    holding = np.argsort(ids, kind="stable")                 # occurrences by term, then record
    term_starts = np.searchsorted(ids[holding], np.arange(len(frequent) + 1))
    column = np.full(len(frequent), -1)
    found = [np.empty((0, 3), np.intp)]
    for a in looped:
        earlier = np.flatnonzero(lower[a])
        column[earlier] = np.arange(len(earlier))
        held = owner[holding[term_starts[a]:term_starts[a + 1]]]  # the records holding a
        lengths = starts[held + 1] - starts[held]
        local = np.repeat(np.arange(len(held)), lengths)
        at = np.repeat(starts[held] - np.cumsum(lengths) + lengths, lengths) + \
            np.arange(len(local))
        where = column[ids[at]]
        sub = np.zeros((len(earlier), len(held)), np.float32)  # BLAS counts exactly below 2^24
        sub[where[where >= 0], local[where >= 0]] = 1
        column[earlier] = -1
        sub = sub[:, np.count_nonzero(sub, axis=0) >= 2]
        support = sub @ sub.T
        rare = frequent[earlier][:, earlier] & (support < k)
        if not strict:
            rare &= support > 0
        b, c = np.nonzero(rare)
        b, c = earlier[b[b > c]], earlier[c[b > c]]
        found.append(np.column_stack([np.full(len(b), a), b, c]))
    return np.concatenate(found)


def _index_triples(space: ConflictSpace, found: np.ndarray) -> None:
    """Fill ``space.triples`` and ``space.partners`` from the rows of ``found``."""
    n = len(space.terms)
    a, b, c = found.T
    pairs = np.concatenate([a * n + b, a * n + c, b * n + c])  # each unordered pair once
    third = np.concatenate([c, b, a])
    keys, slot = np.unique(pairs, return_inverse=True)
    packed = np.zeros((len(keys), (n + 7) // 8), np.uint8)
    np.bitwise_or.at(packed, (slot, third >> 3), np.left_shift(1, third & 7).astype(np.uint8))
    width = packed.shape[1]
    data = packed.tobytes()
    for key, start in zip(keys.tolist(), range(0, len(data), width)):
        thirds = int.from_bytes(data[start:start + width], "little")
        t, u = divmod(key, n)
        space.triples[t][u] = space.triples[u][t] = thirds
    linked = np.zeros((n, n), bool)
    linked[keys // n, keys % n] = True
    space.partners = _bitsets(linked | linked.T)


def _add_larger(space: ConflictSpace, records: Sequence[Record], k: int, m: int,
                rule: str) -> None:
    """The minimal forbidden sets of 4..m terms, from concept mining's frequent itemsets."""
    levels: dict[int, set[tuple[str, ...]]] = {}
    for items, _ in mine_concepts(records, k, m):
        levels.setdefault(len(items), set()).add(tuple(sorted(items)))
    index = {t: i for i, t in enumerate(space.terms)}
    tids = [0] * len(space.terms)
    if rule == "exact":
        for position, record in enumerate(records):
            for term in record:
                if term in index:
                    tids[index[term]] |= 1 << position
    for size in range(4, m + 1):
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
            space.larger.append(forbidden)
            for t in members:
                space.higher[t].append(forbidden & ~(1 << t))


def find_conflicts(records: Sequence[Record], k: int, m: int,
                   rule: str = "exact") -> ConflictSpace:
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; choose one of {', '.join(RULES)}")
    terms, ids, owner = _occurrences(records, k)
    n = len(terms)
    space = ConflictSpace(terms, [0] * n, np.zeros((n, n), bool), [{} for _ in terms], [0] * n,
                          [[] for _ in terms])
    if m < 2 or n == 0:
        return space  # only single terms are adversary knowledge: nothing conflicts
    strict = rule == "strict"
    pairs = _pair_supports(ids, owner, n)
    frequent = pairs >= k
    # strict: every pair that is not frequent, co-occurring or not; exact: the rare pairs
    rare = ~frequent if strict else (pairs > 0) & ~frequent
    np.fill_diagonal(rare, False)
    space.conflict, space.pair_matrix = _bitsets(rare), rare
    if m >= 3:
        _index_triples(space, _forbidden_triples(ids, owner, len(records), frequent, k, strict))
    if m >= 4:
        _add_larger(space, records, k, m, rule)
    return space
