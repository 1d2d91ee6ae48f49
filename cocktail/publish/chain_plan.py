"""The owner plans every hop of a chain at once: stricter (k, m) at each hop, each hop nested in
the one before, the sum of the hops' utilities as high as it can make it.

A recipient re-sharing on its own (:mod:`.republish`) can only split and withhold inside the
clusters it received, laid out for the first hop's level.  The owner has the data, so it can
lay the records out for the *strictest* level (the overlay tree and aggregation at k_L, m_L:
clusters large enough for every hop; the default) or the first, and then chooses, cluster by
cluster, one chunking per hop such that every chunk of hop i+1 lies inside a chunk of hop i
(same rows: a projection, which ``cocktail audit --chain`` checks).  Nesting forces one
clustering for the whole chain: a stricter hop can only use the same rows or fewer.

Utility is what the hops keep of the records' *associations*: U_i counts, over every public
subrecord, the term pairs it shows together; U_0 is the same count on the whole records, so
UL_i = 1 − U_i/U_0.  (Public occurrences are reported too, but every strategy shows every term
frequent at its level in its cluster, so they cannot tell strategies apart.)

Strategies, per cluster:

``greedy``    forward, as a chain of re-shares would: hop 1 is the partitioner's chunking at
              (k_1, m_1); each hop splits every chunk of the hop before at its own level.
``backward``  strictest first (the notes' plan): hop L is the partitioner's chunking at
              (k_L, m_L); each laxer hop merges the stricter hop's chunks, and the terms
              frequent only at its level, as *super-terms* while the union stays k^m-anonymous.
``lookahead`` a rollout over ``greedy``: at every chunk and hop it weighs the greedy split and
              the backward plan's level by their utility plus what greedy makes of the hops
              after, and takes the better; then keeps whichever of that chain and the backward
              chain sums higher.  A rollout never does worse than its base heuristic, so
              lookahead ≥ max(greedy, backward) in ΣU, cluster by cluster.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cached_property

from ..anonymity import Itemset, Record, partition
from ..anonymity.conflicts import find_conflicts
from ..overlay.layout import LayoutParams, build_layout
from ..query.view import Publication
from ..store import Store
from .republish import write_view
from .writer import partitions

STRATEGIES = ("greedy", "backward", "lookahead")
CLUSTERINGS = ("strictest", "first")  # the hop whose level the overlay layout is built for

Level = tuple[int, int]          # (k, m)
Chunking = list[Itemset]         # one hop's public chunks of one cluster
Chain = list[Chunking]           # one chunking per hop, hop 1 first


def check_levels(ks: Sequence[int], ms: Sequence[int]) -> list[Level]:
    if len(ks) != len(ms):
        raise ValueError(f"--k names {len(ks)} hop(s) and --m {len(ms)}: give one (k, m) per hop")
    if not ks:
        raise ValueError("a chain needs at least one hop")
    levels = list(zip(ks, ms))
    for k, m in levels:
        if k < 2 or m < 1:
            raise ValueError(f"every hop needs k ≥ 2 and m ≥ 1 (got k={k}, m={m})")
    for hop, ((k0, m0), (k1, m1)) in enumerate(zip(levels, levels[1:]), start=2):
        if k1 < k0 or m1 < m0:
            raise ValueError(f"hop {hop} (k={k1}, m={m1}) is laxer than hop {hop - 1} "
                             f"(k={k0}, m={m0}): every hop must be at least as strict")
    return levels


# -- one cluster and its utility -------------------------------------------------------------

class Cluster:
    """The records (or subrecords) one chunking covers, with the rows of every term."""

    def __init__(self, records: Sequence[Record]) -> None:
        self.records = records

    @cached_property
    def rows(self) -> dict[str, list[int]]:
        index: dict[str, list[int]] = {}
        for i, record in enumerate(self.records):
            for term in record:
                index.setdefault(term, []).append(i)
        return index

    def associations(self, chunk: Itemset) -> int:
        """Term pairs the chunk shows together, summed over its subrecords."""
        held = Counter(i for term in chunk for i in self.rows.get(term, ()))
        return sum(c * (c - 1) // 2 for c in held.values())

    def utility(self, chunking: Chunking) -> int:
        return sum(self.associations(chunk) for chunk in chunking)

    def chain_utility(self, chain: Chain) -> int:
        return sum(self.utility(chunking) for chunking in chain)

    def project(self, chunk: Itemset) -> Cluster:
        """The chunk's subrecords (the records' non-empty parts inside it), in record order."""
        return Cluster([part for part in (r & chunk for r in self.records) if part])


# -- the strategies, on one cluster -----------------------------------------------------------

@dataclass(frozen=True)
class Planner:
    method: str = "improved"
    apart: frozenset[str] = frozenset()

    def chunking(self, cluster: Cluster, level: Level) -> Chunking:
        return list(partition(self.method, cluster.records, *level, apart=self.apart).public)

    def greedy(self, cluster: Cluster, levels: Sequence[Level]) -> Chain:
        if not levels:
            return []
        first = self.chunking(cluster, levels[0])
        return [first, *self.split(cluster, first, levels[1:])]

    def split(self, cluster: Cluster, chunks: Chunking, levels: Sequence[Level]) -> Chain:
        """Greedy on from every chunk, each on its own subrecords; hops concatenated."""
        chain: Chain = [[] for _ in levels]
        for chunk in chunks:
            for hop, part in enumerate(self.greedy(cluster.project(chunk), levels)):
                chain[hop] += part
        return chain

    def backward(self, cluster: Cluster, levels: Sequence[Level]) -> Chain:
        if not levels:
            return []
        chain = [self.chunking(cluster, levels[-1])]
        for level in reversed(levels[:-1]):
            chain.insert(0, self.merge(cluster, chain[0], level))
        return chain

    def merge(self, cluster: Cluster, stricter: Chunking, level: Level) -> Chunking:
        """The stricter chunks, and every term frequent here but not there, as super-terms,
        merged greedily (largest first, into the group it shares most pairs with) while the
        union stays k^m-anonymous.  Sensitive terms (``apart``) only join sensitive terms,
        as the partitioner keeps them."""
        space = find_conflicts(cluster.records, *level)
        shown = set().union(*stricter) if stricter else set()
        supers = [*stricter, *(frozenset([t]) for t in space.terms if t not in shown)]
        supers.sort(key=lambda s: (-len(s), sorted(s)))
        tids = {t: sum(1 << i for i in cluster.rows[t]) for s in supers for t in s}
        groups: list[tuple[int, set[str]]] = []   # (mask over space.terms, terms)
        for sup in supers:
            mask, best, best_gain = space.mask(sup), None, 0
            for g, (group_mask, terms) in enumerate(groups):
                if bool(sup & self.apart) != bool(terms & self.apart) or \
                        not space.valid(group_mask | mask):
                    continue
                gain = sum((tids[a] & tids[b]).bit_count() for a in sup for b in terms)
                if gain > best_gain:
                    best, best_gain = g, gain
            if best is None:
                groups.append((mask, set(sup)))
            else:
                group_mask, terms = groups[best]
                groups[best] = (group_mask | mask, terms | sup)
        return [frozenset(terms) for _, terms in groups]

    def lookahead(self, cluster: Cluster, levels: Sequence[Level]) -> Chain:
        rolled, backward = self._rollout(cluster, levels), self.backward(cluster, levels)
        if cluster.chain_utility(backward) > cluster.chain_utility(rolled):
            return backward
        return rolled

    def _rollout(self, cluster: Cluster, levels: Sequence[Level]) -> Chain:
        if not levels:
            return []
        candidates = [self.chunking(cluster, levels[0]), self.backward(cluster, levels)[0]]
        best = max(candidates, key=lambda c: cluster.utility(c) + cluster.chain_utility(
            self.split(cluster, c, levels[1:])))  # ties: the greedy one (first)
        chain: Chain = [best, *([] for _ in levels[1:])]
        for chunk in best:
            for hop, part in enumerate(self._rollout(cluster.project(chunk), levels[1:]),
                                       start=1):
                chain[hop] += part
        return chain

    def plan(self, cluster: Cluster, levels: Sequence[Level], strategy: str) -> Chain:
        check_strategy(strategy)
        return getattr(self, strategy)(cluster, levels)


def check_strategy(strategy: str) -> None:
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")


# -- a whole publication ----------------------------------------------------------------------

@dataclass
class PlanReport:
    store: str
    version: str
    strategy: str
    clusters_for: str         # the hop the clusters were laid out for
    clusters: int
    records: int
    occurrences: int          # the owner's (record, term) pairs
    associations: int         # U_0: the owner's term pairs within records
    hops: list[dict]          # k, m, public chunks, occurrences, U_i, UL_i (+ store, version)
    total_utility: int        # ΣU
    seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def plan_chain(source: Store, ks: Sequence[int], ms: Sequence[int], strategy: str,
               out: Sequence[Store] = (), clusters_for: str = "strictest") -> PlanReport:
    """Plan every hop from the owner's records in ``source``; with ``out`` (one store per
    hop), write each hop there as a public-only view.

    Every hop lives in one clustering (nested chunks share rows), laid out for the strictest
    hop's level (clusters large enough that its frequent terms stay public) or the first's
    (smaller clusters, more pairs early, terms withheld later)."""
    started = time.perf_counter()
    levels = check_levels(ks, ms)
    check_strategy(strategy)
    if clusters_for not in CLUSTERINGS:
        raise ValueError(f"unknown clustering {clusters_for!r}; choose one of "
                         f"{', '.join(CLUSTERINGS)}")
    if out and len(out) != len(levels):
        raise ValueError(f"{len(levels)} hop(s) need {len(levels)} output stores, "
                         f"got {len(out)}")
    publication = Publication.open(source)
    records = publication.owner_records()
    params = publication.manifest["params"]
    kept = {name: params[name] for name in LayoutParams.__dataclass_fields__ if name in params}
    k, m = levels[-1] if clusters_for == "strictest" else levels[0]
    layout_params = LayoutParams(**kept | {"k": k, "m": m,
                                          "sensitive": tuple(params.get("sensitive") or ())})
    layout = build_layout(records, layout_params, lambda clusters, n: partitions(
        clusters, layout_params, 1, n))
    planner = Planner(layout_params.method, frozenset(layout_params.sensitive))
    parts: list[list[list[tuple[str, list[str]]]]] = [[] for _ in levels]
    hops = [{"k": k, "m": m, "public_chunks": 0, "public_occurrences": 0, "utility": 0}
            for k, m in levels]
    ids = publication.record_ids
    for unit in layout.units:
        own = [(p, terms if unit.keeps_private else terms - unit.partition.private)
               for p, terms in unit.members]
        own = [(p, terms) for p, terms in own if terms]
        cluster = Cluster([terms for _, terms in own])
        for hop, chunking in enumerate(planner.plan(cluster, levels, strategy)):
            hops[hop]["public_chunks"] += len(chunking)
            hops[hop]["utility"] += cluster.utility(chunking)
            for chunk in chunking:
                members = [(ids[p], sorted(terms & chunk)) for p, terms in own if terms & chunk]
                hops[hop]["public_occurrences"] += sum(len(sub) for _, sub in members)
                parts[hop].append(members)
    occurrences = sum(len(r) for r in records)
    pairs = sum(len(r) * (len(r) - 1) // 2 for r in records)
    for hop, report in enumerate(hops):
        report["utility_loss"] = round(1 - report["utility"] / pairs, 6) if pairs else 0.0
        report["occurrence_share"] = round(report["public_occurrences"] / occurrences, 6)
        if out:
            report["store"] = out[hop].url
            report["version"] = write_view(out[hop], parts[hop], *levels[hop], {
                "planned_from": source.url, "source_version": publication.version,
                "strategy": strategy, "clusters_for": clusters_for, "hop": hop + 1,
                "levels": levels}, signer=source)  # the owner vouches for its own plan
    return PlanReport(source.url, publication.version, strategy, clusters_for, len(layout.units),
                      len(records), occurrences, pairs, hops,
                      sum(h["utility"] for h in hops), round(time.perf_counter() - started, 3))
