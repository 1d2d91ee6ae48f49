"""The public cloud's view of file metadata: does any order of the files group them by cluster?"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence


def cluster_changes(clusters_in_order: Sequence[int]) -> int:
    """How often two neighbours in the order belong to different clusters."""
    return sum(a != b for a, b in zip(clusters_in_order, clusters_in_order[1:]))


def expected_changes(clusters: Sequence[int]) -> float:
    """The same count's expectation when the order is a uniformly random permutation."""
    n = len(clusters)
    same = sum(c * (c - 1) for c in Counter(clusters).values()) / (n * (n - 1))
    return (n - 1) * (1 - same)


def assert_no_grouping(orders: dict[str, Sequence[int]]) -> None:
    """Every named order of the files (by inode, time, file id...) looks random in clusters:
    no fewer cluster changes than a random order gives, less four standard deviations (about
    binomial).  Written cluster by cluster, they change cluster about once per cluster."""
    for name, clusters in orders.items():
        changes, expected = cluster_changes(clusters), expected_changes(clusters)
        p = expected / (len(clusters) - 1)
        floor = expected - 4 * math.sqrt((len(clusters) - 1) * p * (1 - p))
        assert changes >= floor, f"sorted by {name}: {changes} cluster changes among " \
            f"{len(clusters)} files, a random order gives {expected:.0f}"
