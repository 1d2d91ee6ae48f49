"""The Quest-style generator: reproducible, the requested shape, skewed and correlated."""

from __future__ import annotations

from collections import Counter
from itertools import combinations
from statistics import median

import pytest

from cocktail.dataset import load, write_fimi
from cocktail.synthetic import SyntheticSpec, generate

SPEC = SyntheticSpec(records=5_000, seed=3)


@pytest.fixture(scope="module")
def records() -> list[frozenset[str]]:
    return generate(SPEC)


def test_same_seed_same_records(records):
    assert generate(SPEC) == records


def test_different_seeds_differ(records):
    assert generate(SyntheticSpec(records=5_000, seed=4)) != records


def test_shape(records):
    assert len(records) == 5_000
    assert all(records)
    assert all(isinstance(r, frozenset) for r in records)
    items = set().union(*records)
    assert items <= {str(i) for i in range(1, SPEC.items + 1)}
    mean = sum(map(len, records)) / len(records)
    assert abs(mean - SPEC.avg_record_len) <= 0.15 * SPEC.avg_record_len


@pytest.mark.parametrize("avg", [1.0, 2.5, 12.0])
def test_average_length_follows_the_spec(avg):
    records = generate(SyntheticSpec(records=3_000, avg_record_len=avg, seed=1))
    assert abs(sum(map(len, records)) / len(records) - avg) <= 0.15 * avg


def test_item_popularity_is_skewed(records):
    counts = Counter(item for r in records for item in r)
    assert max(counts.values()) >= 5 * median(counts.values())


def test_patterns_correlate_items(records):
    n = len(records)
    single = Counter(item for r in records for item in r)
    pairs = Counter(pair for r in records for pair in combinations(sorted(r), 2))
    # lift = observed co-occurrence / what independent items would give
    lifts = [together * n / (single[a] * single[b])
             for (a, b), together in pairs.items() if together >= 50]
    assert max(lifts) >= 10


def test_uncorrelated_items_show_no_such_lift():
    # control for the test above: one-item patterns, nothing to co-occur but chance
    records = generate(SyntheticSpec(records=5_000, avg_pattern_len=1.0, correlation=0.0,
                                     zipf=0.0, seed=3))
    n = len(records)
    single = Counter(item for r in records for item in r)
    pairs = Counter(pair for r in records for pair in combinations(sorted(r), 2))
    assert max(together * n / (single[a] * single[b])
               for (a, b), together in pairs.items() if together >= 50) < 3


def test_tiny_item_universe_terminates():
    records = generate(SyntheticSpec(records=200, items=3, avg_record_len=6.0, seed=2))
    assert len(records) == 200
    assert all(1 <= len(r) <= 3 for r in records)


@pytest.mark.parametrize("field, value", [
    ("items", 0), ("patterns", 0), ("records", -1), ("avg_record_len", 0.5),
    ("avg_pattern_len", 0.0), ("zipf", -1.0), ("correlation", 1.5), ("corruption", -0.1),
])
def test_invalid_spec(field, value):
    with pytest.raises(ValueError):
        SyntheticSpec(**{field: value})


def test_write_fimi_then_load(tmp_path, records):
    path = tmp_path / "synthetic.dat"
    write_fimi(records, path)
    dataset = load(path)
    assert dataset.format == "fimi"
    assert dataset.records == tuple(records)
    assert dataset.ids == tuple(str(i) for i in range(1, len(records) + 1))
