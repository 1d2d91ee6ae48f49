"""The overlay tree: every record in one leaf cluster, patterns that route it there, balance."""

from __future__ import annotations

import pytest

from cocktail.overlay.tree import Tree, best_split, grow_tree
from cocktail.synthetic import SyntheticSpec, generate


@pytest.mark.parametrize("leaf_size", [50, 300, 5000])
def test_records_land_in_one_leaf_along_their_patterns(leaf_size):
    records = generate(SyntheticSpec(records=4000, items=300, seed=9))
    tree = grow_tree(records, leaf_size)
    seen = sorted(p for leaf in tree.leaves() for cluster in leaf.clusters for p in cluster)
    assert seen == list(range(len(records)))
    parents = tree.parents()
    leaf_of = {p: leaf.id for leaf in tree.leaves() for c in leaf.clusters for p in c}
    for position, record in enumerate(records):
        node = leaf_of[position]
        while node in parents:  # walk up: each step's pattern must describe the record
            parent = tree.nodes[parents[node]]
            pattern = "".join("1" if t in record else "0" for t in parent.split)
            assert parent.children[pattern] == node
            node = parent.id
    for leaf in tree.leaves():
        assert all(0 < len(c) <= leaf_size for c in leaf.clusters)
    if leaf_size >= len(records):
        assert len(tree.nodes) == 1


def test_best_split_prefers_balance():
    # "a" splits the records in half, "b" is in nearly all of them, "c" in few.
    records = [frozenset({"a", "b"})] * 50 + [frozenset({"b"})] * 45 + [frozenset({"c"})] * 5
    terms, entropy, sizes = best_split(records, max_terms=1)
    assert terms == ("a",) and sorted(sizes) == [50, 50] and entropy == pytest.approx(1.0)


def test_small_pattern_groups_share_a_child():
    # Three terms, each alone in a few records: the rare patterns must not become tiny leaves.
    records = ([frozenset({"x"})] * 300 + [frozenset({"y"})] * 300 + [frozenset()] * 300
               + [frozenset({"x", "y"})] * 6 + [frozenset({"z"})] * 6)
    tree = grow_tree(records, 400)
    sizes = [len(c) for leaf in tree.leaves() for c in leaf.clusters]
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
