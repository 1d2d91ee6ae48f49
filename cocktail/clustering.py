"""Horizontal split of the records into clusters, the unit EQI-partitioning works on.

For now a fixed-size split in input order; the term-based overlay tree (paper 5.1) will replace
it behind the same shape: a list of clusters, each a list of record positions.
"""

from __future__ import annotations


def fixed_size_clusters(n_records: int, size: int) -> list[list[int]]:
    if size < 1:
        raise ValueError(f"cluster size must be at least 1, got {size}")
    return [list(range(start, min(start + size, n_records))) for start in range(0, n_records, size)]
