"""Appending records to a published store so that its releases never compose (docs/releases.md).

An append keeps every public chunk of the current release, with its id, term set and old
lines, and places each new record in one of three ways:

* **Extend an old cluster.** The record is routed down the overlay tree to a leaf, and offered
  to that leaf's smallest cluster. It qualifies when every one of its terms has a public chunk
  there: one of the cluster's own, or that of an aggregated cluster above it (a term new to
  the cluster is then passed up to it). A term that would be kept private keeps the record
  out: in an old cluster it would stay private for good, in a new one it may go public. The
  new subrecords that a chunk receives must be k^m-anonymous on their own (the residual
  rule): records that make a residual violate it are peeled off until every residual holds.
* **Join a new cluster.** Every record that does not extend a cluster goes to a pool, together
  with the records buffered before. A pool of at least ``min_new`` records is published like a
  first release: its own overlay tree, clusters, aggregation, chunks. That tree is added to the
  publication's forest; it holds new records only.
* **Wait in the buffer.** A smaller pool waits in the private zone: one private chunk of whole
  records, counted exactly by queries, retried at the next append.

Everything else is the publisher's: the staging names, the random write order, the release
log entry and the one atomic commit point.  Files no new record touches are carried over (a
hard link on the local store), so an append costs time in proportion to the records it adds
and the clusters they touch.
"""

from __future__ import annotations

import copy
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import combinations

from .. import chunkformat as fmt
from .. import releases
from ..dataset import Dataset
from ..overlay.layout import Layout, PhaseProgress, build_layout
from ..overlay.planner import aggregates_above
from ..overlay.tree import Node, Tree
from ..query.view import Publication
from ..store import Store, StoreError
from . import PublishParams, log_legacy_release, promotion, refuse_derived
from .batch import collector_paused
from .writer import (Placement, VersionWriter, owner_key, partitions, units_manifest,
                     write_layout)

ID_FORMATS = ("csv", "jsonl")  # formats whose records carry their own ids


@dataclass(frozen=True)
class AppendReport:
    store: str
    version: str
    records: int               # in the publication after the append, buffered ones included
    appended_records: int
    extended_clusters: int
    extended_records: int      # new records placed in old clusters
    new_clusters: int
    new_cluster_records: int   # records placed in new clusters (buffered ones included)
    buffered_records: int      # waiting in the private zone after this append
    promoted_chunks: int       # new public chunks over the forest's pooled private remainders
    promoted_pairs: int        # (record, term) pairs those chunks published
    private_pool_pairs: int | None  # what the promotion kept private (None: no promotion)
    public_chunks: int
    public_coverage: float | None  # share of (record, term) pairs in public chunks
    seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def _new_ids(dataset: Dataset, publication: Publication, version: str) -> list[str]:
    """Record ids for the new records; a file without ids gets the release's own."""
    if dataset.format not in ID_FORMATS:
        return [f"{version}:{rid}" for rid in dataset.ids]
    old = set(publication.record_ids)
    duplicate = next((rid for rid in dataset.ids if rid in old), None)
    if duplicate is not None:
        raise ValueError(f"{dataset.source}: record id {duplicate!r} is already published; an "
                         "append adds new records only")
    return list(dataset.ids)


def _violators(rows: Sequence[tuple[int, list[str]]], k: int, m: int) -> set[int]:
    """Records whose subrecord holds an itemset of at most m terms that fewer than k of the
    residual's subrecords hold."""
    support: Counter = Counter()
    for _, sub in rows:
        for size in range(1, min(m, len(sub)) + 1):
            support.update(combinations(sub, size))
    rare = {itemset for itemset, s in support.items() if s < k}
    if not rare:
        return set()
    return {p for p, sub in rows if any(i in rare for size in range(1, min(m, len(sub)) + 1)
                                        for i in combinations(sub, size))}


POOL = None  # a term's home when it goes to this append's promotion pool


@dataclass
class Extension:
    """The new records that extend old clusters."""

    members: dict[int, list[int]]                        # leaf unit -> positions it gains
    rows: dict[str, list[tuple[int, list[str]]]]         # chunk -> (position, subrecord)
    passed_up: dict[int, set[str]]                       # unit -> terms it now passes up
    pooled: list[tuple[int, frozenset[str]]]             # (position, terms) for the promotion

    def chunks_of(self, unit: int, publication: Publication) -> dict[str, list]:
        return {c: rows for c, rows in self.rows.items() if publication.chunk_unit(c) == unit}


class _Homes:
    """Where each of a record's terms would go in a cluster: where the planner will look for
    it.  A term the cluster has lives where it always did (one of its public chunks, or,
    passed up, the first aggregated cluster above that holds it); a term new to the cluster
    is passed up to the first aggregated cluster above that holds it.  A term whose home is
    a private remainder, or that nothing above holds, goes to this append's promotion pool
    (``pooling``): the promotion node above every tree takes over the remainders, so it is
    where the planner finds the term next.  Without pooling (a store published without
    aggregation) such a term keeps the record out: it would stay private for good in an old
    cluster, while in a new cluster it may go public."""

    def __init__(self, publication: Publication, pooling: bool) -> None:
        self.publication, self.pooling = publication, pooling
        self.parent = publication.tree.parents()

    def _above(self, unit: int) -> list[int]:
        """The aggregated clusters above the unit, nearest first."""
        return aggregates_above(self.publication.tree, self.publication.units[unit]["node"],
                                self.parent)

    def place(self, unit: int, terms: frozenset[str]
              ) -> dict[str, tuple[str | None, bool]] | None:
        """term -> (public chunk or POOL, whether the term is new to the cluster), or None."""
        known, unit_chunks = self.publication.locations[unit], self.publication.unit_chunks
        placed = {}
        for term in terms:
            new = term not in known
            chunk = known.get(term) or next((unit_chunks[a][term] for a in self._above(unit)
                                             if term in unit_chunks.get(a, {})), None)
            if chunk is None or self.publication.is_private(chunk):
                if not self.pooling:
                    return None
                chunk = POOL
            placed[term] = (chunk, new)
        return placed


def _extend(publication: Publication, records: dict[int, frozenset[str]], k: int, m: int,
            pooling: bool) -> tuple[Extension, list[int]]:
    """Offer each new record to a cluster of its leaf; keep what the residual rule allows.
    Returns the extension and the positions of the records that do not extend a cluster."""
    size = {u["id"]: u["members"] for u in publication.units}
    homes = _Homes(publication, pooling)
    offered: dict[int, dict[int, dict[str, tuple[str | None, bool]]]] = {}
    refused: list[int] = []
    for position, terms in records.items():
        leaf = publication.tree.route(publication.tree.roots[0], terms)
        units = leaf.units if leaf is not None else []
        unit = min(units, key=lambda u: (size[u], u)) if units else None
        placing = homes.place(unit, terms) if unit is not None else None
        if placing is None:
            refused.append(position)
        else:
            offered.setdefault(unit, {})[position] = placing
    while True:
        residual: dict[str, list[tuple[int, list[str]]]] = {}
        for placings in offered.values():
            for position, placing in placings.items():
                parts: dict[str, list[str]] = {}
                for term, (chunk, _) in placing.items():
                    if chunk is not POOL:
                        parts.setdefault(chunk, []).append(term)
                for chunk, sub in parts.items():
                    residual.setdefault(chunk, []).append((position, sorted(sub)))
        peeled = set().union(*(_violators(rows, k, m) for rows in residual.values()))
        if not peeled:
            break
        refused.extend(sorted(peeled))
        offered = {u: {p: x for p, x in ps.items() if p not in peeled}
                   for u, ps in offered.items()}
    passed_up: dict[int, set[str]] = {}
    pooled = []
    for unit, placings in offered.items():
        for position, placing in placings.items():
            passed_up.setdefault(unit, set()).update(t for t, (_, new) in placing.items() if new)
            to_pool = frozenset(t for t, (chunk, _) in placing.items() if chunk is POOL)
            if to_pool:
                pooled.append((position, to_pool))
    return Extension({u: sorted(ps) for u, ps in offered.items() if ps}, residual,
                     {u: ts for u, ts in passed_up.items() if ts}, sorted(pooled)), refused


def _buffered(publication: Publication) -> dict[int, frozenset[str]]:
    """Position -> terms of the records waiting in the buffer."""
    waiting = {p: frozenset() for unit in publication.units if unit["kind"] == "buffer"
               for p in publication.cluster_members(unit["id"])}
    for chunk in publication.chunks.values():
        if publication.units[chunk.unit]["kind"] == "buffer":
            names = publication.record_positions(chunk.id)
            for pseudonym, terms in publication.subrecords(chunk.id):
                waiting[names[pseudonym]] = frozenset(terms)
    return waiting


def append(dataset: Dataset, store: Store, min_new: int | None = None,
           progress: PhaseProgress | None = None) -> AppendReport:
    """Add ``dataset``'s records to the current release of ``store`` as a new release."""
    started = time.perf_counter()
    with releases.begin(store) as out, collector_paused():
        current = out.current
        if current is None:
            raise StoreError(f"{store.url} holds no publication yet: publish one first "
                             "(`cocktail publish FILE`), then append to it")
        refuse_derived(store, current)
        log_legacy_release(store, current)
        publication = Publication.open(store, current)
        params = PublishParams(**publication.manifest["params"])
        version = out.version
        ids = list(publication.record_ids) + _new_ids(dataset, publication, version)
        first_new = len(publication.record_ids)
        new = {first_new + i: r for i, r in enumerate(dataset.records)}
        extension, refused = _extend(publication, new, params.k, params.m, params.aggregate)
        waiting = _buffered(publication)
        pool = sorted(refused) + sorted(waiting)
        terms_of = new | waiting
        threshold = max(params.k, params.cluster_size // 4) if min_new is None else min_new
        tree = Tree.from_manifest(publication.tree.to_manifest(), publication.tree.roots)
        units = copy.deepcopy(publication.units)
        _empty_buffers(tree, units)
        remainders = promotion.old_tops(publication, tree) if params.aggregate \
            else promotion.Pool()
        layout = None
        if pool and len(pool) >= threshold:
            layout = build_layout(
                [terms_of[p] for p in pool], params,
                promotion.holding_back(remainders.held, params, partitions), progress)
        remainders.add_fresh(extension.pooled)
        where = Placement(pool, units=len(units), nodes=len(tree.nodes))
        if layout:
            if params.aggregate:
                promotion.add_new_tree(remainders, layout, pool,
                                       where.nodes + layout.tree.roots[0])
            tree.graft(layout.tree, len(units))
        promoted = None
        if remainders.promotes:
            promoted = promotion.promote(remainders, params, tree,
                                         len(units) + (len(layout.units) if layout else 0))
        else:
            remainders = promotion.Pool()  # nothing to gain: every top keeps its remainder
        writer = VersionWriter(out, owner_key(store), releases.ReleaseBuilder("append"),
                               params.index_shard)
        writer.carry_term_index(publication)  # the old records' index parts, by reference
        previous = releases.read_log(store, current)[-1]
        unit_of = list(publication.cluster_of) + [None] * len(dataset)
        totals = _carry_old(writer, publication, current, previous, extension, ids, unit_of,
                            remainders.emptied)
        for unit, positions in extension.members.items():
            units[unit]["members"] += len(positions)
        for unit, terms in extension.passed_up.items():
            units[unit]["passed_up"] = sorted(set(units[unit]["passed_up"]) | terms)
        for chunk in remainders.emptied:  # an old top's remainder now goes up to the promotion
            info = publication.chunks[chunk]
            units[info.unit]["passed_up"] = sorted(set(units[info.unit]["passed_up"])
                                                   | info.terms)
        buffered = [] if layout else pool
        if layout:
            added = write_layout(writer, ids, layout, where)
            units += units_manifest(layout, where)
            for local, unit in enumerate(layout.leaf_units(len(pool))):
                unit_of[pool[local]] = where.unit(unit)
            _add(totals, added)
        promotion_totals = None
        if promoted:
            promotion_totals = write_layout(writer, ids, Layout(tree, [promoted], True))
            units += units_manifest(Layout(tree, [promoted], True))
            _add(totals, promotion_totals)
        if buffered:
            _buffer(writer, tree, units, buffered, ids, terms_of, unit_of, totals)
        created = out.created
        public_manifest = writer.public_manifest(created, params.k, params.m)
        manifest = publication.manifest
        private_manifest = {
            "format": fmt.FORMAT, "version": version, "created": created,
            "params": manifest["params"], "source": manifest["source"],
            "appended": {"path": dataset.source, "format": dataset.format,
                         "records": len(dataset), "skipped_lines": dataset.skipped_lines},
            "tree": tree.to_manifest(), "roots": tree.roots, "units": units,
            "aggregation": manifest["aggregation"], "chunks": writer.chunks,
            "pairs": {"public": totals["public_pairs"], "private": totals["private_pairs"]}}
        records_bytes = fmt.encode_records(ids, unit_of)
        extended = sum(map(len, extension.members.values()))
        entry = writer.release.entry(
            version, created, params.k, params.m, method=params.method, records=len(ids),
            appended=len(dataset), buffered=len(buffered))
        writer.finish(public_manifest, private_manifest, records_bytes, len(ids), entry,
                      params.keep, {})
    pairs = totals["public_pairs"] + totals["private_pairs"]
    return AppendReport(
        store=store.url, version=version, records=len(ids), appended_records=len(dataset),
        extended_clusters=len(extension.members), extended_records=extended,
        new_clusters=sum(u.kind == "leaf" for u in layout.units) if layout else 0,
        new_cluster_records=len(pool) if layout else 0, buffered_records=len(buffered),
        promoted_chunks=promotion_totals["public"] if promotion_totals else 0,
        promoted_pairs=promotion_totals["public_pairs"] if promotion_totals else 0,
        private_pool_pairs=promotion_totals["private_pairs"] if promotion_totals else None,
        public_chunks=len(public_manifest["chunks"]),
        public_coverage=round(totals["public_pairs"] / pairs, 6) if pairs else None,
        seconds=round(time.perf_counter() - started, 3))


def _empty_buffers(tree: Tree, units: list[dict]) -> None:
    """The old buffer is emptied: its records are placed or buffered anew."""
    buffers = {u["id"] for u in units if u["kind"] == "buffer"}
    tree.roots = [r for r in tree.roots if not buffers.intersection(tree.nodes[r].units)]
    for node in tree.nodes:
        node.units = [u for u in node.units if u not in buffers]
    for unit in buffers:
        units[unit]["members"] = 0


def _buffer(writer: VersionWriter, tree: Tree, units: list[dict], buffered: list[int],
            ids: Sequence[str], terms_of: dict[int, frozenset[str]], unit_of: list,
            totals: dict) -> None:
    """Records too few to form clusters wait as one private chunk of whole records."""
    unit_id, node_id = len(units), len(tree.nodes)
    members = [(ids[p], p, sorted(terms_of[p])) for p in buffered if terms_of[p]]
    writer.add_chunk(unit_id, "buffer", True,
                     frozenset().union(*(terms_of[p] for p in buffered)), members)
    writer.close_unit(unit_id)
    totals["private_pairs"] += sum(len(sub) for _, _, sub in members)
    tree.nodes.append(Node(node_id, units=[unit_id]))
    tree.roots.append(node_id)
    units.append({"id": unit_id, "kind": "buffer", "node": node_id,
                  "members": len(buffered), "passed_up": [], "notes": {}})
    for p in buffered:
        unit_of[p] = unit_id


def _add(totals: dict, more: dict) -> None:
    for key in ("public_pairs", "private_pairs"):
        totals[key] += more[key]


def _pairs(publication: Publication) -> dict[str, int]:
    """(record, term) pairs in public and in private chunks, from the manifest, or counted
    once from the files for a publication written before the manifest kept them."""
    known = publication.manifest.get("pairs")
    if known:
        return {"public_pairs": known["public"], "private_pairs": known["private"]}
    totals = {"public_pairs": 0, "private_pairs": 0}
    for chunk in publication.chunks.values():
        key = "private_pairs" if chunk.private else "public_pairs"
        totals[key] += sum(len(terms) for _, terms in publication.subrecords(chunk.id))
    return totals


def _carry_old(writer: VersionWriter, publication: Publication, current: str,
               previous: dict, extension: Extension, ids: Sequence[str],
               unit_of: list, emptied: set[str]) -> dict:
    """Every old cluster into the new version: untouched files carried over, extended
    chunks rewritten with their new lines, the ``emptied`` private chunks (pooled by a
    promotion) left out; returns the (record, term) pair totals."""
    totals = _pairs(publication)
    chunks_of: dict[int, list] = {}
    for chunk in publication.chunks.values():
        chunks_of.setdefault(chunk.unit, []).append(chunk)
    for unit in publication.units:
        uid = unit["id"]
        if unit["kind"] == "buffer":  # its records are placed anew
            for chunk in chunks_of.get(uid, []):
                totals["private_pairs"] -= sum(len(t) for _, t in publication.subrecords(chunk.id))
            continue
        rows = extension.chunks_of(uid, publication)
        for chunk in chunks_of.get(uid, []):
            if chunk.id in emptied:
                totals["private_pairs"] -= sum(len(t) for _, t in publication.subrecords(chunk.id))
            elif chunk.id in rows:
                members = [(ids[p], p, sub) for p, sub in rows[chunk.id]]
                writer.extend_chunk(chunk.id, uid, unit["kind"], chunk.private, chunk.terms,
                                    list(publication.subrecords(chunk.id)), members)
                key = "private_pairs" if chunk.private else "public_pairs"
                totals[key] += sum(len(sub) for _, _, sub in members)
            else:
                writer.keep_chunk(current, chunk.id, publication.manifest["chunks"][chunk.id])
        map_path = fmt.pseudonym_map_path(current, uid)
        if rows or emptied.intersection(c.id for c in chunks_of.get(uid, [])):
            earlier = fmt.decode_pseudonym_map(publication.store.read("private", map_path))
            writer.close_unit(uid, [(c, name, p) for c, names in earlier.items()
                                    if c not in emptied for name, p in names.items()])
        elif publication.store.exists("private", map_path):
            writer.out.keep("private", current, f"{fmt.PSEUDONYM_DIR}/{uid}.tsv")
        for p in extension.members.get(uid, []):
            unit_of[p] = uid
        logged = previous["units"].get(str(uid))
        if logged:
            writer.release.carry(uid, logged, {c: chunk for c, chunk in previous["chunks"].items()
                                               if chunk["unit"] == uid})
    return totals
