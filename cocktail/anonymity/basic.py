"""The `basic` scheme: EQI-identifying, then the greedy EQI-partitioning of Algorithm 1.

Algorithm 1 repeatedly takes the concept with the largest intension as a public chunk and
*reduces* every other concept by it (I_j - I_U); concepts it covers become empty and vanish.
Each chunk is a (reduced) concept: a subset of a frequent itemset of size <= m, whose every
subset has support >= k, so every chunk is k^m-anonymous.  Terms in no concept (support < k)
form the private chunk.  Chunks hold at most m terms, which is why `improved` exists.

The reduce step never changes the outcome: concepts are downward closed (Lemma 2), so a reduced
concept U*(I_j - I_U, q(I_j - I_U)) (Definition 5) is a concept already in the set U, and U is a
set, so reducing adds nothing and only drops what the chunk covers.  Algorithm 1 is therefore
exactly "walk the concepts by size, then support, descending; take each one disjoint from every
chunk taken so far": one sort and one pass, which matters when a cluster of long records has
millions of concepts.  tests/test_anonymity.py checks this against a literal transcription of
the reduce-and-resort loop.
"""

from __future__ import annotations

from collections.abc import Sequence

from .concepts import Concept, mine_concepts
from .model import Itemset, Partition, Record, check_parameters, cluster_terms


def greedy_partition(concepts: Sequence[Concept]) -> list[Itemset]:
    """Algorithm 1 over a concept set: disjoint chunks, largest concept first, then by support.

    Remaining ties keep the mining order (the sort is stable and mining is deterministic).
    """
    frequent_terms = sum(1 for terms, _ in concepts if len(terms) == 1)
    taken: set[str] = set()
    chunks: list[Itemset] = []
    for terms, _ in sorted(concepts, key=lambda c: (-len(c[0]), -c[1])):
        if taken.isdisjoint(terms):
            chunks.append(frozenset(terms))
            taken.update(terms)
            if len(taken) == frequent_terms:
                break  # every frequent term is placed; the rest would reduce to nothing
    return chunks


def partition_basic(records: Sequence[Record], k: int, m: int) -> Partition:
    check_parameters(k, m)
    concepts = mine_concepts(records, k, m)
    public = greedy_partition(concepts)
    public_terms = set().union(*public) if public else set()
    private = frozenset(cluster_terms(records) - public_terms)
    return Partition(tuple(public), private, {"concepts": len(concepts)})
