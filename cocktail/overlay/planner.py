"""Turn a conjunctive query into map tasks by a breadth-first walk of the overlay tree.

At a node split on terms P, a child whose presence pattern says "absent" for a query term in P
cannot hold a matching record, so its subtree is pruned.  For every leaf cluster reached, each
query term is located: in one of the cluster's public chunks, or, if the cluster passed that
term up, in the chunk of the first aggregated cluster above it that holds the term (the root's
private chunk at the end of the chain).  A cluster lacking a query term altogether is pruned.
One map task per (chunk, query terms it must match); clusters share tasks over aggregated chunks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from .tree import Node, Tree


class MapTask(NamedTuple):  # a tuple: hashed in C, and plans hash a great many
    chunk: str
    unit: int        # the cluster (leaf or aggregated) the chunk belongs to
    private: bool
    terms: tuple[str, ...]


@dataclass
class Plan:
    terms: tuple[str, ...]
    tasks: list[MapTask] = field(default_factory=list)                 # distinct, in order
    clusters: dict[int, list[MapTask]] = field(default_factory=dict)    # leaf unit -> its tasks
    nodes_visited: int = 0
    branches_pruned: int = 0
    clusters_pruned: int = 0


class TreeLayout(Protocol):
    """What the planner needs of a publication: the private manifest's view."""

    tree: Tree

    @property
    def locations(self) -> Mapping[int, Mapping[str, str]]:
        """Built by :func:`term_locations`, once per publication."""

    @property
    def term_units(self) -> Mapping[str, frozenset[int]]: ...

    @property
    def split_terms(self) -> frozenset[str]: ...

    def is_private(self, chunk_id: str) -> bool: ...

    def chunk_unit(self, chunk_id: str) -> int: ...


def aggregates_above(tree: Tree, node: int, parent: Mapping[int, int] | None = None) -> list[int]:
    """The aggregated units on the way from ``node`` to its root, nearest first."""
    parent = tree.parents() if parent is None else parent
    found = []
    while True:
        if tree.nodes[node].aggregate is not None:
            found.append(tree.nodes[node].aggregate)
        if node not in parent:
            return found
        node = parent[node]


def term_locations(tree: Tree, unit_chunks: Mapping[int, Mapping[str, str]],
                   passed_up: Sequence[frozenset[str]]) -> dict[int, dict[str, str]]:
    """For every leaf cluster: each of its terms -> the chunk holding it for its records.

    A term the cluster passed up is held by the first aggregated cluster above it that has the
    term in a stored chunk (public, or the root's private one)."""
    parent = tree.parents()
    located: dict[int, dict[str, str]] = {}
    for node in tree.nodes:
        chain = [unit_chunks.get(a, {}) for a in aggregates_above(tree, node.id, parent)]
        for unit in node.units:
            where = dict(unit_chunks.get(unit, {}))
            for term in passed_up[unit]:
                where[term] = next(chunks[term] for chunks in chain if term in chunks)
            located[unit] = where
    return located


def _reachable_leaves(terms: set[str], tree: Tree, plan: Plan) -> list[Node]:
    leaves, queue = [], deque(tree.roots)
    while queue:
        node = tree.nodes[queue.popleft()]
        plan.nodes_visited += 1
        if not node.split:
            leaves.append(node)
            continue
        followed = set()
        for pattern, child in sorted(node.children.items()):
            if all(bit == "1" for bit, t in zip(pattern, node.split) if t in terms):
                followed.add(child)  # a child answering to several patterns is followed once
        queue.extend(sorted(followed))
        plan.branches_pruned += len(set(node.children.values()) - followed)
    return leaves


def plan_conjunction(terms: Sequence[str], layout: TreeLayout) -> Plan:
    plan = Plan(tuple(terms))
    if layout.split_terms.isdisjoint(terms):  # nothing to prune on: every leaf is reached
        plan.nodes_visited = len(layout.tree.nodes)
        leaves = layout.tree.leaves()
    else:
        leaves = _reachable_leaves(set(terms), layout.tree, plan)
    reached = [unit for leaf in leaves for unit in leaf.units]
    holding = frozenset(reached).intersection(
        *(layout.term_units.get(term, frozenset()) for term in terms))
    plan.clusters_pruned = len(reached) - len(holding)
    known: dict[tuple[str, tuple[str, ...]], MapTask] = {}
    for unit in sorted(holding):
        where = layout.locations[unit]
        by_chunk: dict[str, list[str]] = {}
        for term in terms:
            by_chunk.setdefault(where[term], []).append(term)
        tasks = []
        for chunk, held in sorted(by_chunk.items()):
            key = (chunk, tuple(held))
            if key not in known:
                known[key] = MapTask(chunk, layout.chunk_unit(chunk), layout.is_private(chunk),
                                     key[1])
            tasks.append(known[key])
        plan.clusters[unit] = tasks
    plan.tasks = list(known.values())
    return plan
