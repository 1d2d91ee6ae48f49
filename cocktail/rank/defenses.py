"""The paper's defenses: equivalent sets of cardinality ≥ l whose members share public values and
publish one averaged score, so that ranks cannot tell a member's private values from the others'.

* **ESVT** — each real tuple v gets l − 1 *virtual* tuples: v's public values, and on every
  private attribute values distinct from v's and from each other.  Generator secrecy (the
  notes' F2b: a deterministic generator that the adversary can run inverts itself): the default
  draws the values with ``secrets``; the paper's workload-aware Algorithm 1 (cardinality 2) is
  made an *involution* (f(f(c)) = c), so v → t1 and t1 → v are equally consistent.
* **ESTT** — sets of ≥ l *true* tuples with equal public values.  For l = 2 the pairing with
  the fewest agreeing private values (each agreement costs one obfuscation) is a minimum-weight
  matching — polynomial (blossom, via networkx), not NP-complete as the paper claims.  Values
  still short of l distinct are *obfuscated*: a duplicate is changed to a value drawn from
  those seen with the same public values (the validity oracle), else from the column.
  Leftovers are merged into a set of their group before anything is suppressed; only a group
  with fewer than l tuples is suppressed (its private values take no part in ranking).

A set's published vectors (real members' after obfuscation, then virtual ones) are all that
scoring sees.  All of it is private-zone state, and it is kept across rebuilds (:func:`carry`).
"""

from __future__ import annotations

import itertools
import math
import secrets
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..extras import require
from .model import RankTable, Schema, similarity

DEFENSES = ("none", "esvt", "estt", "dp")
EXACT_MATCHING = 120   # groups up to this size are matched exactly, on the complete graph
MAX_COMBINATIONS = 200_000  # Algorithm 1 enumerates at most this many candidate vectors
NEIGHBOURS = 12        # larger groups: each node's cheapest partners offered to matching

Vector = tuple[float, ...]


@dataclass
class EquivalentSet:
    real: list[str]               # ids of the real members, sorted
    vectors: list[Vector]         # what is published: one per member, real then virtual

    def as_dict(self) -> dict:
        return {"real": self.real, "vectors": [[_json(x) for x in v] for v in self.vectors]}

    @classmethod
    def from_dict(cls, d: dict) -> EquivalentSet:
        return cls(list(d["real"]), [tuple(math.nan if x is None else x for x in v)
                                     for v in d["vectors"]])


def _json(x: float) -> float | None:
    return None if math.isnan(x) else x


@dataclass
class Protection:
    sets: list[EquivalentSet] = field(default_factory=list)
    log: list[dict] = field(default_factory=list)   # obfuscations and suppressions

    def counts(self) -> dict[str, int]:
        kinds = Counter(entry["kind"] for entry in self.log)
        return {"sets": len(self.sets), "obfuscated": kinds["obfuscated"],
                "suppressed": kinds["suppressed"],
                "virtual": sum(len(s.vectors) - len(s.real) for s in self.sets)}


def domain(schema: Schema, table: RankTable, j: int) -> list[float]:
    """The encoded values a private attribute can take: category codes, or the numbers seen."""
    column = schema.private[j]
    if column in schema.numeric:
        return sorted(set(table.private[:, j].tolist()))
    return [float(code) for code in range(len(schema.domains[column]))]


def check_l(schema: Schema, table: RankTable, l: int) -> None:
    if l < 2:
        raise ValueError(f"l must be at least 2 (got {l})")
    for j, column in enumerate(schema.private):
        size = len(domain(schema, table, j))
        if size < l:
            raise ValueError(f"l={l} is larger than the domain of private column {column!r} "
                             f"({size} value(s)): no set could hold {l} distinct values")


# -- ESVT -----------------------------------------------------------------------------------

def esvt_random(table: RankTable, l: int, rows: Sequence[int] | None = None,
                shown: dict[Vector, list[Vector]] | None = None) -> Protection:
    """The paper's generator with secret randomness: l − 1 virtual tuples, distinct values,
    drawn once per private vector (``shown``: those drawn by an earlier build).  Tuples with
    equal private values (copies) then show one set: drawn apart, the only value their sets
    would share is the true one."""
    draw = secrets.SystemRandom()
    domains = [domain(table.schema, table, j) for j in range(len(table.schema.private))]
    shown = dict(shown or {})
    protection = Protection()
    for i in range(len(table.ids)) if rows is None else rows:
        v = tuple(table.private[i].tolist())
        if v not in shown:
            columns = [draw.sample([x for x in values if x != v[j]], l - 1)
                       for j, values in enumerate(domains)]
            shown[v] = [v, *(tuple(column[t] for column in columns) for t in range(l - 1))]
        protection.sets.append(EquivalentSet([table.ids[i]], list(shown[v])))
    return protection


def private_scores(schema: Schema, workload: Sequence[dict[int, float]],
                   vectors: np.ndarray) -> np.ndarray:
    """(vectors, queries): the private part of s(x|q) for each vector and workload query."""
    scores = np.zeros((len(vectors), len(workload)))
    for w, asked in enumerate(workload):
        for j, value in asked.items():
            scores[:, w] += schema.weight(schema.private[j]) * similarity(
                schema, schema.private[j], value, vectors[:, j])
    return scores


def algorithm1_candidates(schema: Schema, domains: Sequence[Sequence[float]],
                          workload: Sequence[dict[int, float]], v: Vector) -> list[list[float]]:
    """Per attribute: the workload's values other than v's, then one value no query asks
    (DS; any stands for all, the smallest is taken) — the paper's |W| + 1 candidates."""
    candidates = []
    for j, values in enumerate(domains):
        asked = sorted({q[j] for q in workload if j in q} - {v[j]})
        spare = [x for x in values if x != v[j] and x not in {q.get(j) for q in workload}]
        candidates.append(asked + spare[:1])
        if not candidates[-1]:
            raise ValueError(f"private column {schema.private[j]!r}: no value other than "
                             "the tuple's own; cardinality 2 is impossible")
    return candidates


def algorithm1(schema: Schema, domains: Sequence[Sequence[float]],
               workload: Sequence[dict[int, float]], v: Vector) -> tuple[Vector, float]:
    """The paper's ESVT Constructor (Eqs. 8–9), solved exactly by enumeration: the virtual
    t1 (t1[B_j] ≠ v[B_j] for all j) minimising Σ_q (s(v|q) − s(t1|q))²; ties: first found."""
    options = list(itertools.product(*algorithm1_candidates(schema, domains, workload, v)))
    if len(options) > MAX_COMBINATIONS:
        raise ValueError(f"Algorithm 1 would enumerate {len(options):,} candidates; use the "
                         "random generator (no --workload) for this table")
    scores = private_scores(schema, workload, np.array([v, *options], dtype=float))
    costs = ((scores[1:] - scores[0]) ** 2).sum(axis=1)
    best = int(np.argmin(costs))
    return tuple(options[best]), float(costs[best])


def esvt_workload(table: RankTable, workload: Sequence[dict[int, float]],
                  rows: Sequence[int] | None = None,
                  shown: dict[Vector, list[Vector]] | None = None) -> Protection:
    """Algorithm 1 made an involution.  The distinct private vectors are paired with each other
    by a minimum-cost matching (cost (s(c|q) − s(x|q))² over W, the same both ways; each vector
    joined to its cheapest partners that differ from it everywhere), so a matched pair {c, x}
    shows the same candidates whether c or x is real.  A vector left unmatched gets the
    cheapest vector no tuple has.  Node order is secret, so ties cannot be steered.  Pairs an
    earlier build formed (``shown``) are kept, both ways."""
    schema = table.schema
    domains = [domain(schema, table, j) for j in range(len(schema.private))]
    rows = range(len(table.ids)) if rows is None else rows
    vectors = {i: tuple(table.private[i].tolist()) for i in rows}
    partner: dict[Vector, Vector] = {c: vs[1] for c, vs in (shown or {}).items()}
    partner |= {x: c for c, x in partner.items() if x not in partner}
    distinct = sorted(set(vectors.values()) - partner.keys(), key=lambda _: secrets.randbits(64))
    points = np.array(distinct, dtype=float).reshape(len(distinct), len(schema.private))
    scores = private_scores(schema, workload, points)

    def row(a: int) -> tuple[np.ndarray, np.ndarray]:
        return ((scores - scores[a]) ** 2).sum(axis=1), (points != points[a]).all(axis=1)

    for a, b in cheapest_matching(len(distinct), row):
        partner[distinct[a]], partner[distinct[b]] = distinct[b], distinct[a]
    taken = {*distinct, *partner, *partner.values()}
    for c in distinct:
        if c not in partner:
            partner[c] = _free_partner(schema, domains, workload, c, taken)
            taken.add(partner[c])
    return Protection([EquivalentSet([table.ids[i]], [v, partner[v]])
                       for i, v in vectors.items()])


def _free_partner(schema: Schema, domains: Sequence[Sequence[float]],
                  workload: Sequence[dict[int, float]], c: Vector,
                  taken: set[Vector]) -> Vector:
    """The cheapest vector differing from c everywhere that no tuple has: among Algorithm 1's
    candidates, else among all such vectors; if every one is taken, a secret random one (that
    pair is not symmetric, but the adversary cannot re-run the draw)."""
    narrow = itertools.product(*algorithm1_candidates(schema, domains, workload, c))
    wide = itertools.islice(itertools.product(*[[x for x in values if x != c[j]]
                                                for j, values in enumerate(domains)]),
                            MAX_COMBINATIONS)
    for options in (narrow, wide):
        free = [o for o in options if o not in taken]
        if free:
            scores = private_scores(schema, workload, np.array([c, *free], dtype=float))
            return tuple(free[int(np.argmin(((scores[1:] - scores[0]) ** 2).sum(axis=1)))])
    draw = secrets.SystemRandom()
    return tuple(draw.choice([x for x in values if x != c[j]]) for j, values in enumerate(domains))


# -- ESTT -----------------------------------------------------------------------------------

def same(a: Vector, b: Vector) -> int:
    return sum(x == y for x, y in zip(a, b))


def cheapest_matching(n: int, row: Callable[[int], tuple[np.ndarray, np.ndarray]],
                      ) -> list[tuple[int, int]]:
    """As many pairs of nodes 0..n−1 as possible, then the least total cost: blossom matching
    (networkx).  ``row(a)`` gives a's cost to every node and which nodes it may pair with.
    Up to EXACT_MATCHING nodes the graph is complete and the matching exact; past it each
    node offers its NEIGHBOURS cheapest partners (blossom on a complete graph of thousands
    is too slow), and nodes left unmatched are matched again among themselves.  Equal costs
    go to the earlier node: callers give nodes in a secret random order, so ties cannot be
    steered."""
    nx = require("networkx")  # here, not above: it would slow every command's start

    pairs, left = [], list(range(n))
    while len(left) > 1:
        edges: dict[tuple[int, int], float] = {}
        for a in left:
            cost, allowed = row(a)
            near = [b for b in np.argsort(cost[left], kind="stable") if allowed[left[b]]
                    and left[b] != a][:len(left) if len(left) <= EXACT_MATCHING else NEIGHBOURS]
            edges.update(((min(a, left[b]), max(a, left[b])), float(cost[left[b]]))
                         for b in near)
        # one offset for every edge: maximum weight is then minimum cost
        top = max(edges.values(), default=0.0) + 1
        graph = nx.Graph()
        graph.add_nodes_from(left)
        graph.add_weighted_edges_from((a, b, top - c) for (a, b), c in edges.items())
        found = [tuple(sorted(pair)) for pair in nx.max_weight_matching(graph,
                                                                        maxcardinality=True)]
        if not found:
            break
        pairs += found
        used = {node for pair in found for node in pair}
        left = [node for node in left if node not in used]
    return pairs


def min_weight_pairs(vectors: dict[str, Vector]) -> list[tuple[str, str]]:
    """Pairs of ids with the fewest agreeing private values in total (each costs one
    obfuscation), as many pairs as possible."""
    ids = sorted(vectors, key=lambda _: secrets.randbits(64))
    points = np.array([vectors[rid] for rid in ids], dtype=float).reshape(len(ids), -1)

    def row(a: int) -> tuple[np.ndarray, np.ndarray]:
        return (points == points[a]).sum(axis=1).astype(float), np.ones(len(ids), bool)

    return [tuple(sorted((ids[a], ids[b]))) for a, b in cheapest_matching(len(ids), row)]


def greedy_groups(vectors: dict[str, Vector], l: int) -> list[list[str]]:
    """l > 2: sets of l grown greedily (a secret random start, then each time the member
    agreeing least with those chosen so far); fewer than l left over stay unplaced."""
    ids = sorted(vectors, key=lambda _: secrets.randbits(64))
    points = np.array([vectors[rid] for rid in ids], dtype=float).reshape(len(ids), -1)
    free = np.ones(len(ids), dtype=bool)
    groups = []
    while free.sum() >= l:
        start = int(np.flatnonzero(free)[0])
        group, agreeing = [start], (points == points[start]).sum(axis=1)
        free[start] = False
        while len(group) < l:
            pick = int(np.flatnonzero(free)[np.argmin(agreeing[free])])
            free[pick] = False
            group.append(pick)
            agreeing = agreeing + (points == points[pick]).sum(axis=1)
        groups.append([ids[i] for i in group])
    return groups


def estt(table: RankTable, l: int, rows: Sequence[int] | None = None,
         kept: Sequence[EquivalentSet] = ()) -> Protection:
    """Equivalent sets of true tuples for ``rows``; leftovers may join ``kept`` sets (from an
    earlier build) of their public group."""
    schema, draw = table.schema, secrets.SystemRandom()
    rows = list(range(len(table.ids))) if rows is None else list(rows)
    index = {rid: i for i, rid in enumerate(table.ids)}
    groups: dict[Vector, dict[str, Vector]] = defaultdict(dict)
    for i in rows:
        groups[tuple(table.public[i].tolist())][table.ids[i]] = tuple(table.private[i].tolist())
    valid = _valid_values(table)
    protection = Protection(list(kept))
    homes: dict[Vector, list[EquivalentSet]] = defaultdict(list)
    for s in kept:
        if s.real:
            homes[tuple(table.public[index[s.real[0]]].tolist())].append(s)
    for public, members in sorted(groups.items()):
        home = homes[public]
        formed = [list(p) for p in min_weight_pairs(members)] if l == 2 else \
            greedy_groups(members, l)
        placed = {rid for group in formed for rid in group}
        sets = [EquivalentSet(sorted(g), [members[r] for r in sorted(g)]) for g in formed]
        for rid in sorted(set(members) - placed):
            candidates = sets + home
            if not candidates:
                protection.sets.append(EquivalentSet([rid], [(math.nan,) * len(schema.private)]))
                protection.log.append({"kind": "suppressed", "id": rid})
                continue
            target = min(candidates, key=lambda s: sum(same(members[rid], v) for v in s.vectors))
            target.real = sorted([*target.real, rid])
            target.vectors.insert(target.real.index(rid), members[rid])
        for s in sets:
            _obfuscate(s, l, valid.get(public, {}), valid[None], protection.log, draw)
        protection.sets += sets
    return protection


def _valid_values(table: RankTable) -> dict:
    """Per public vector (and None: the whole table), per private column, the values seen."""
    seen: dict = defaultdict(lambda: defaultdict(Counter))
    for pub, priv in zip(table.public.tolist(), table.private.tolist()):
        for j, x in enumerate(priv):
            seen[tuple(pub)][j][x] += 1
            seen[None][j][x] += 1
    return seen


def _obfuscate(s: EquivalentSet, l: int, local: dict, overall: dict, log: list,
               draw: secrets.SystemRandom) -> None:
    """Give every private attribute of the set ≥ l distinct values: keep one member per value
    (chosen at random), change the others' to values not yet in the set, drawn from what the
    same public values show (else the column), by frequency."""
    for j in range(len(s.vectors[0])):
        values = [v[j] for v in s.vectors[:len(s.real)]]
        order = sorted(range(len(values)), key=lambda _: draw.random())
        seen: set[float] = set()
        for m in order:
            if len(set(values)) >= l:
                break
            if values[m] not in seen:
                seen.add(values[m])
                continue
            pool = Counter({x: c for x, c in local.get(j, Counter()).items() if x not in values})
            if not pool:
                pool = Counter({x: c for x, c in overall[j].items() if x not in values})
            new = draw.choices(list(pool), weights=list(pool.values()))[0]
            log.append({"kind": "obfuscated", "id": s.real[m], "column": j,
                        "old": values[m], "new": new})
            values[m] = new
            vector = list(s.vectors[m])
            vector[j] = new
            s.vectors[m] = tuple(vector)
