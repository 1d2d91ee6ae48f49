"""Vertical partitioning of a cluster into k^m-anonymous public chunks and a private chunk.

Pure functions, no I/O.  Each method is registered by the name the CLI and DESIGN.md use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .basic import partition_basic
from .improved import partition_improved, partition_improved_paper
from .model import Itemset, Partition, Record
from .optimal import partition_optimal
from .testing import partition_testing

Partitioner = Callable[[Sequence[Record], int, int], Partition]

METHODS: dict[str, Partitioner] = {
    "basic": partition_basic,
    "improved": partition_improved,
    "improved-paper": partition_improved_paper,
    "optimal": partition_optimal,
    "testing": partition_testing,
}


def partition(method: str, records: Sequence[Record], k: int, m: int,
              apart: frozenset[str] = frozenset()) -> Partition:
    """Split one cluster's records with the named method.  Terms in ``apart`` (sensitive
    terms) are split on their own, so that no public chunk holds one of them beside another
    term: no public subrecord then links them to what an adversary knows."""
    try:
        partitioner = METHODS[method]
    except KeyError:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}") from None
    if not apart:
        return partitioner(records, k, m)
    rest = partitioner([r - apart for r in records], k, m)
    kept = partitioner([r & apart for r in records], k, m)
    notes = {key: rest.notes.get(key, 0) + kept.notes.get(key, 0)
             for key in rest.notes.keys() | kept.notes.keys()}
    return Partition(rest.public + kept.public, rest.private | kept.private, notes)


__all__ = ["METHODS", "Itemset", "Partition", "Record", "partition"]
