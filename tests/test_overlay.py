"""The overlay tree: every record in one leaf cluster, patterns that route it there, balance."""

from __future__ import annotations

import math
from itertools import combinations

import pytest

from cocktail.dataset import Records
from cocktail.overlay.layout import LayoutParams, cut_clusters, leaf_clusters
from cocktail.overlay.tree import Tree, best_split, grow_tree
from cocktail.synthetic import SyntheticSpec, generate


@pytest.mark.parametrize("leaf_size", [50, 300, 5000])
def test_records_land_in_one_leaf_along_their_patterns(leaf_size):
    records = generate(SyntheticSpec(records=4000, items=300, seed=9))
    tree, clusters, _ = leaf_clusters(Records.of(records), LayoutParams(cluster_size=leaf_size))
    seen = sorted(p for _, cluster in clusters for p in cluster)
    assert seen == list(range(len(records)))
    parents = tree.parents()
    leaf_of = {p: leaf for leaf, cluster in clusters for p in cluster}
    for position, record in enumerate(records):
        node = leaf_of[position]
        while node in parents:  # walk up: each step's pattern must describe the record
            parent = tree.nodes[parents[node]]
            pattern = "".join("1" if t in record else "0" for t in parent.split)
            assert parent.children[pattern] == node
            node = parent.id
    assert all(0 < len(cluster) <= leaf_size for _, cluster in clusters)
    if leaf_size >= len(records):
        assert len(tree.nodes) == 1


def test_best_split_prefers_balance():
    # "a" splits the records in half, "b" is in nearly all of them, "c" in few.
    records = [frozenset({"a", "b"})] * 50 + [frozenset({"b"})] * 45 + [frozenset({"c"})] * 5
    terms, entropy, sizes = best_split(records, max_terms=1)
    assert terms == ("a",) and sorted(sizes) == [50, 50] and entropy == pytest.approx(1.0)


def brute_force_split(records, max_terms, pool, combo_pool):
    """The most balanced split counted record by record: candidates with support closest to
    half (ties by name), alone from the first ``pool``, in pairs and triples from the first
    ``combo_pool``; the first best in that order wins."""
    names, n = sorted(set().union(*records)), len(records)
    support = {t: sum(t in r for r in records) for t in names}
    ranked = sorted((t for t in names if 0 < support[t] < n),
                    key=lambda t: (abs(support[t] - n / 2), t))[:pool]
    best = None
    for size in range(1, max_terms + 1):
        for split in combinations(sorted(ranked if size == 1 else ranked[:combo_pool]), size):
            sizes = [0] * (1 << size)
            for record in records:
                sizes[int("".join("1" if t in record else "0" for t in split), 2)] += 1
            entropy = -sum(c / n * math.log2(c / n) for c in sizes if c)
            if best is None or entropy > best[1] + 1e-9:
                best = (split, entropy, [c for c in sizes if c])
    return best


@pytest.mark.parametrize("max_terms", [1, 2, 3])
@pytest.mark.parametrize("seed", [3, 4])
def test_the_best_split_is_the_one_counted_record_by_record(max_terms, seed):
    # pairs and triples are counted from the candidates' co-occurrences, not per split
    records = generate(SyntheticSpec(records=600, items=40, seed=seed))
    terms, entropy, sizes = best_split(records, max_terms=max_terms, pool=10, combo_pool=6)
    expected = brute_force_split(records, max_terms, 10, 6)
    assert (terms, sizes) == (expected[0], expected[2])
    assert entropy == pytest.approx(expected[1])


def test_small_pattern_groups_share_a_child():
    # Three terms, each alone in a few records: the rare patterns must not become tiny leaves.
    records = ([frozenset({"x"})] * 300 + [frozenset({"y"})] * 300 + [frozenset()] * 300
               + [frozenset({"x", "y"})] * 6 + [frozenset({"z"})] * 6)
    tree = grow_tree(records, 400)
    sizes = [len(c) for leaf in tree.leaves() for c in cut_clusters(leaf.positions, 400)]
    assert min(sizes) >= 100
    assert any(len(set(n.children.values())) < len(n.children) for n in tree.nodes)


def test_bad_parameters():
    with pytest.raises(ValueError, match="leaf size"):
        grow_tree([], 0)
    with pytest.raises(ValueError, match="1 to 3"):
        grow_tree([], 10, max_terms=4)


def test_the_tree_round_trips_through_the_manifest_and_grafts_a_forest():
    records = [frozenset(r) for r in ("ab", "ac", "bc", "a", "b", "c", "abc", "d") * 60]
    tree = grow_tree(records, 50)
    for number, leaf in enumerate(tree.leaves()):
        leaf.units = [number]
    again = Tree.from_manifest(tree.to_manifest(), tree.roots)
    assert again.to_manifest() == tree.to_manifest() and again.roots == [0]
    assert all(again.route(0, r).units == tree.route(0, r).units for r in records)
    other = grow_tree(records[:100], 50)
    other.nodes[0].units = [0] if other.nodes[0].is_leaf else []
    again.graft(other, units=100)
    assert again.roots == [0, len(tree.nodes)]
    assert again.nodes[len(tree.nodes)].units == [u + 100 for u in other.nodes[0].units]
