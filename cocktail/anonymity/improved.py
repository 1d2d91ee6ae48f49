"""The `improved` scheme (paper 3.2): concepts beyond m, then a greedy partition into them.

A concept of any size is a set of frequent terms containing no forbidden itemset
(:mod:`.conflicts`); the maximal ones are the non-covered set U_c of Algorithm 2.  Choosing the
fewest concepts that partition the frequent terms is hypergraph colouring, hence NP-hard
(Theorem 1); the paper's route is a greedy over U_c.  Two variants are registered:

``improved`` (the default) — Algorithm 2 lazily, one concept per round.  The paper's Algorithm 1
    takes a concept and reduces all others by it; over the *complete* U_c the reduced family holds
    every valid set of the remaining terms, so each round can simply grow one maximal concept
    inside the remaining terms.  Growth follows Leighton's RLF rule (start from the term with the
    most conflicts, then add the candidate that conflicts most with the terms already shut out),
    which on BMS-WebView gives fewer chunks than "largest concept first" (docs/partitioning.md).
    Then Algorithm 3's aim, dropping redundant concepts, is applied to the chunks themselves: a
    chunk whose every term fits into another chunk is dissolved, lightest concept weight first.
    Work is O(rounds x terms^2) bit operations: no enumeration, nothing to cap.

``improved-paper`` — the printed pipeline: Bron-Kerbosch enumeration of U_c (bounded by
    ``max_sets`` and ``max_steps``; ``notes['expansion_capped']`` says when a cap stopped it, and
    terms no enumerated concept covers then get a concept grown from them), Algorithm 3 on U_c,
    and Algorithm 1 with reduction.  Kept to measure the paper's own method.

Both use DESIGN.md's exact k^m rule unless ``rule='strict'`` (the paper's: every <= m-subset of
a concept frequent) is asked for.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .conflicts import ConflictSpace, bits, find_conflicts
from .model import Partition, Record, check_parameters, cluster_terms

DEFAULT_MAX_SETS = 512
DEFAULT_MAX_STEPS = 20_000


# -- the default: RLF-grown concepts, then dissolving redundant chunks ----------------------

def grow_concept(space: ConflictSpace, remaining: int) -> int:
    """One maximal concept inside ``remaining``, grown by the RLF rule.

    After the first term, scores are counts kept for the candidates only (index-aligned with
    ``open_``), updated as terms are shut out: candidates only ever leave."""
    # The first term has the most conflicts overall (ties: the lowest index).
    term = max(bits(remaining), key=lambda t: ((space.conflict[t] & remaining).bit_count(), -t))
    candidates, group = remaining, 0
    open_ = np.flatnonzero(space.flags(remaining))  # the candidates, ascending
    shut_out = np.zeros(len(open_), np.intp)  # per candidate: its conflicts with shut-out terms
    while True:
        still = space.joinable(term, group, candidates)
        keep = space.flags(still)[open_]
        closed = open_[~keep & (open_ != term)]
        open_, shut_out = open_[keep], shut_out[keep]
        if len(closed):
            shut_out += space.pair_matrix[closed][:, open_].sum(axis=0)
        group |= 1 << term
        candidates = still
        if not candidates:
            return group
        # the most conflicts with the shut-out terms; ties: the lowest index (argmax: the first)
        term = int(open_[np.argmax(shut_out)])


def dissolve_redundant(space: ConflictSpace, chunks: list[int]) -> list[int]:
    """Algorithm 3's goal on a partition: remove chunks whose terms all fit elsewhere.

    Chunks are tried by ascending concept weight (here: their number of terms, the overlap
    they would bring to the others) and first-fit into the other chunks.
    """
    chunks = list(chunks)
    changed = True
    while changed:
        changed = False
        for victim in sorted(range(len(chunks)), key=lambda i: (chunks[i].bit_count(), i)):
            others = [c for i, c in enumerate(chunks) if i != victim]
            for term in bits(chunks[victim]):
                home = next((i for i, c in enumerate(others) if space.fits(term, c)), None)
                if home is None:
                    break
                others[home] |= 1 << term
            else:
                chunks, changed = others, True
                break
    return chunks


def partition_improved(records: Sequence[Record], k: int, m: int, *,
                       rule: str = "exact") -> Partition:
    check_parameters(k, m)
    space = find_conflicts(records, k, m, rule)
    remaining, grown = space.all, []
    while remaining:
        concept = grow_concept(space, remaining)
        grown.append(concept)
        remaining &= ~concept
    chunks = dissolve_redundant(space, grown)
    private = frozenset(cluster_terms(records) - set(space.terms))
    return Partition(tuple(space.names(c) for c in chunks), private,
                     {"grown_concepts": len(grown), "dissolved": len(grown) - len(chunks),
                      "forbidden_higher": space.count_forbidden()})


# -- the paper's pipeline, literally ---------------------------------------------------------

@dataclass(frozen=True)
class Expansion:
    concepts: list[int]   # maximal concepts found, in enumeration order
    capped: bool          # stopped at a cap: maximal concepts may be missing
    steps: int


def enumerate_maximal(space: ConflictSpace, max_sets: int = DEFAULT_MAX_SETS,
                      max_steps: int = DEFAULT_MAX_STEPS) -> Expansion:
    """Algorithm 2 as Bron-Kerbosch over the conflict hypergraph (no pivot, iterative, bounded).

    A frame is (group, candidates, excluded); candidates are taken lowest index (highest
    support) first, and a group is maximal when no candidate and no excluded term can join.
    """
    found: list[int] = []
    steps = 0
    stack = [[0, space.all, 0]]
    while stack:
        frame = stack[-1]
        group, candidates, excluded = frame
        if not candidates:
            stack.pop()
            if not excluded and group:
                found.append(group)
                if len(found) >= max_sets:
                    return Expansion(found, True, steps)
            continue
        steps += 1
        if steps > max_steps:
            return Expansion(found, True, steps)
        low = candidates & -candidates
        term = low.bit_length() - 1
        frame[1] ^= low
        frame[2] |= low
        stack.append([group | low, space.joinable(term, group, candidates ^ low),
                      space.joinable(term, group, excluded)])
    return Expansion(found, False, steps)


def grow_in_order(space: ConflictSpace, seed: int) -> int:
    """A maximal concept containing ``seed``, adding compatible terms by support."""
    group = 1 << seed
    candidates = space.joinable(seed, 0, space.all)
    while candidates:
        low = candidates & -candidates
        candidates = space.joinable(low.bit_length() - 1, group, candidates ^ low)
        group |= low
    return group


def eliminate_redundant(concepts: Sequence[int]) -> list[int]:
    """Algorithm 3: keep concepts with a term of their own; then the redundant ones by
    descending concept weight (Equation 4), each only while it still covers something new."""
    counts: dict[int, int] = {}
    for concept in concepts:
        for term in bits(concept):
            counts[term] = counts.get(term, 0) + 1
    essential = [c for c in concepts if any(counts[t] == 1 for t in bits(c))]
    redundant = [c for c in concepts if all(counts[t] > 1 for t in bits(c))]
    weight = {c: sum(counts[t] - 1 for t in bits(c)) for c in redundant}  # sum of |U ∩ U_i|
    kept, covered = list(essential), 0
    for concept in essential:
        covered |= concept
    for concept in sorted(redundant, key=lambda c: (-weight[c], -c.bit_count(), c)):
        if concept & ~covered:
            kept.append(concept)
            covered |= concept
    return kept


def greedy_with_reduction(concepts: Sequence[int]) -> list[int]:
    """Algorithm 1 as printed: take the largest, reduce the others by it, repeat.  A lazy heap:
    keys are upper bounds of reduced sizes; ties keep the input order."""
    heap = [(-c.bit_count(), i, c) for i, c in enumerate(concepts)]
    heapq.heapify(heap)
    taken, chunks = 0, []
    while heap:
        neg_size, order, concept = heapq.heappop(heap)
        reduced = concept & ~taken
        if reduced.bit_count() == -neg_size:
            chunks.append(reduced)
            taken |= reduced
        elif reduced:
            heapq.heappush(heap, (-reduced.bit_count(), order, reduced))
    return chunks


def partition_improved_paper(records: Sequence[Record], k: int, m: int, *, rule: str = "exact",
                             max_sets: int = DEFAULT_MAX_SETS,
                             max_steps: int = DEFAULT_MAX_STEPS) -> Partition:
    check_parameters(k, m)
    space = find_conflicts(records, k, m, rule)
    expansion = enumerate_maximal(space, max_sets, max_steps)
    concepts, covered = list(expansion.concepts), 0
    for concept in concepts:
        covered |= concept
    for term in bits(space.all & ~covered):
        if not (covered >> term) & 1:
            concepts.append(grow_in_order(space, term))
            covered |= concepts[-1]
    non_covered = [c for c in dict.fromkeys(concepts)
                   if not any(c != o and c & o == c for o in concepts)]
    kept = eliminate_redundant(non_covered)
    chunks = greedy_with_reduction(kept)
    private = frozenset(cluster_terms(records) - set(space.terms))
    return Partition(tuple(space.names(c) for c in chunks), private, {
        "maximal_concepts": len(non_covered), "kept_concepts": len(kept),
        "expansion_steps": expansion.steps, "expansion_capped": int(expansion.capped)})
