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
from typing import Protocol


@dataclass(frozen=True)
class MapTask:
    chunk: str
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

    tree: Sequence[Mapping]  # nodes: split, children (pattern -> node), units, aggregate

    @property
    def unit_chunks(self) -> Mapping[int, Mapping[str, str]]: ...

    def passed_up(self, unit: int) -> frozenset[str]: ...

    def is_private(self, chunk_id: str) -> bool: ...


def _reachable_leaves(terms: set[str], tree: Sequence[Mapping], plan: Plan) -> list[int]:
    leaves, queue = [], deque([0])
    while queue:
        node = tree[queue.popleft()]
        plan.nodes_visited += 1
        if not node["split"]:
            leaves.append(node["id"])
            continue
        followed = set()
        for pattern, child in sorted(node["children"].items()):
            if all(bit == "1" for bit, t in zip(pattern, node["split"]) if t in terms):
                followed.add(child)  # a child answering to several patterns is followed once
        queue.extend(sorted(followed))
        plan.branches_pruned += len(set(node["children"].values()) - followed)
    return leaves


def _aggregates_above(leaf: int, tree: Sequence[Mapping]) -> list[int]:
    parent = {child: node["id"] for node in tree for child in node["children"].values()}
    chain, node = [], leaf
    while True:
        if tree[node]["aggregate"] is not None:
            chain.append(tree[node]["aggregate"])
        if node not in parent:
            return chain
        node = parent[node]


def plan_conjunction(terms: Sequence[str], layout: TreeLayout) -> Plan:
    plan = Plan(tuple(terms))
    wanted = set(terms)
    known: dict[MapTask, MapTask] = {}
    for leaf in _reachable_leaves(wanted, layout.tree, plan):
        chain = _aggregates_above(leaf, layout.tree)
        for unit in layout.tree[leaf]["units"]:
            located: dict[str, list[str]] = {}
            for term in terms:
                chunk = layout.unit_chunks.get(unit, {}).get(term)
                if chunk is None and term in layout.passed_up(unit):
                    chunk = next(layout.unit_chunks[g][term] for g in chain
                                 if term in layout.unit_chunks.get(g, {}))
                if chunk is None:
                    break
                located.setdefault(chunk, []).append(term)
            else:
                tasks = [known.setdefault(t, t) for t in
                         (MapTask(c, layout.is_private(c), tuple(ts))
                          for c, ts in sorted(located.items()))]
                plan.clusters[unit] = tasks
                continue
            plan.clusters_pruned += 1
    plan.tasks = list(known)
    return plan
