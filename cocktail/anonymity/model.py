"""Value types shared by every partitioner."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..dataset import Records

Record = frozenset[str]
Itemset = frozenset[str]


@dataclass(frozen=True)
class Partition:
    """The vertical split of one cluster.

    ``public`` are the term sets of the chunks that go to the public cloud, each k^m-anonymous;
    ``private`` holds every other term of the cluster.  Together they partition the cluster's terms.
    """

    public: tuple[Itemset, ...]
    private: Itemset
    notes: dict[str, int] = field(default_factory=dict)  # e.g. concepts mined, caps hit


def cluster_terms(records: Sequence[Record]) -> set[str]:
    if isinstance(records, Records):  # from its term ids, no set per record
        return {records.names[i] for i in np.unique(records.indices).tolist()}
    return set().union(*records)


def check_parameters(k: int, m: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if m < 1:
        raise ValueError(f"m must be at least 1, got {m}")
