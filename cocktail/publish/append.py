"""Appending records to a published store so that its releases never compose (docs/releases.md).

An append keeps every public chunk of the current release, with its id, term set and old
lines, and places each new record in one of three ways:

* **Extend an old cluster.** The record is routed down the overlay tree to a leaf, and offered
  to that leaf's smallest cluster.  Each of its terms goes where the planner looks for it
  there: one of the cluster's public chunks, or that of an aggregated cluster above it (a term
  new to the cluster is then passed up to it).  A term whose home is private, or that nothing
  above holds, goes to the promotion pool (:mod:`.promotion`), above every tree.  The new
  subrecords that a chunk receives must be k^m-anonymous on their own (the residual rule):
  records that make a residual violate it are peeled off until every residual holds.  A few
  more go to new clusters when the promotion needs their terms to publish a tail.
* **Join a new cluster.** Every record that does not extend a cluster goes to a pool, together
  with the records buffered before.  A pool of at least ``min_new`` records (default: k) is
  published like a first release: its own overlay tree, clusters, aggregation, chunks.  That
  tree is added to the publication's forest; it holds only records no earlier release made
  public.
* **Wait in the buffer.** A smaller pool waits in the private zone: one private chunk of whole
  records, counted exactly by queries, retried at the next append.

Then the forest's private remainders are promoted (:mod:`.promotion`).

An append reads what it changes and little else: the private manifest's head (tree, units,
parameters), the entries, maps and files of the units it touches (the clusters its records
extend and the aggregated clusters above them, the buffer, the tops whose remainders it
pools), and the keys of the record ids when new ids must be checked.  It writes those units,
one segment of record ids, and its part of the term index, and splices the other chunks'
manifest lines in unparsed; every other file is carried by reference.  So it costs time and
memory in proportion to the records it adds and the clusters they touch.  Everything else is
the publisher's: the staging names, the random write order, the release log entry (which lists
what this release added, and carries the rest of the last one) and the one atomic commit point.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from itertools import combinations

import numpy as np

from .. import chunkformat as fmt
from .. import releases
from ..dataset import Dataset
from ..overlay.layout import Layout, PhaseProgress, build_layout
from ..overlay.planner import aggregates_above
from ..overlay.tree import Node, Tree
from ..query.view import Publication
from ..store import Store, StoreError
from . import PublishParams, log_legacy_release, promotion, refuse_derived, source_of
from .batch import collector_paused
from .carried import carried_lines
from .writer import (Placement, VersionWriter, owner_key, partitions, units_manifest,
                     write_layout)


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
    private_pool_terms: int | None  # the terms of those pairs: each waits for k to meet
    public_chunks: int
    public_coverage: float | None  # share of (record, term) pairs in public chunks
    seconds: float  # wall time of the whole append, reading the input included

    def as_dict(self) -> dict:
        return asdict(self)


def _new_ids(dataset: Dataset, version: str, segments: list[dict], publication: Publication,
             writer: VersionWriter) -> tuple[list[str], bytes]:
    """Record ids for the new records (a file without ids gets the release's own: new by
    construction), refused when one is already published; and their sorted keys.  Published
    ids are checked by their keys (64 bits of SHA-256: a false "already published" among 10^7
    records and 10^4 new ones has probability about 5·10^-9)."""
    own = dataset.numbered  # line or row numbers are no ids
    ids = [f"{version}:{rid}" for rid in dataset.ids] if own else list(dataset.ids)
    keys = np.fromiter((releases.member_key(i) for i in ids), dtype=np.uint64, count=len(ids))
    if not own:
        for segment in segments:
            hit = np.flatnonzero(np.isin(keys, _segment_keys(segment, publication, writer)))
            if len(hit):
                raise ValueError(f"{dataset.source}: record id {ids[hit[0]]!r} is already "
                                 "published; an append adds new records only")
    return ids, fmt.encode_record_keys(keys)


def _segment_keys(segment: dict, publication: Publication, writer: VersionWriter) -> np.ndarray:
    """The sorted keys of a segment's ids: read, or computed once from its ids (a segment
    written before keys) and kept in this version for the appends to come."""
    if "keys" in segment:
        path = f"{segment['keys']}/{fmt.record_keys_name(segment['start'])}"
        return fmt.decode_record_keys(publication.store.read("private", path), f"private/{path}")
    keys = np.sort(np.fromiter((releases.member_key(rid)
                                for rid, _ in publication.segment_rows(segment)),
                               dtype=np.uint64))
    writer.out.write_private(fmt.record_keys_name(segment["start"]),
                             fmt.encode_record_keys(keys))
    segment["keys"] = writer.version
    return keys


def _old_segments(publication: Publication, records: int) -> list[dict]:
    """The previous version's segments of record ids, each with its end."""
    segments = [dict(s) for s in publication.record_segments]
    for segment, following in zip(segments, [*segments[1:], None]):
        segment.setdefault("stop", following["start"] if following else records)
    return segments


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

    def _above(self, unit: int) -> list[dict[str, str]]:
        """The aggregated clusters above the unit, nearest first: each one's term -> chunk."""
        return [self.publication.unit_terms(a) for a in aggregates_above(
            self.publication.tree, self.publication.units[unit]["node"], self.parent)]

    def place(self, unit: int, terms: frozenset[str]
              ) -> dict[str, tuple[str | None, bool]] | None:
        """term -> (public chunk or POOL, whether the term is new to the cluster), or None."""
        known = self.publication.location(unit)
        placed = {}
        for term in terms:
            new = term not in known
            chunk = known.get(term) or next((chunks[term] for chunks in self._above(unit)
                                             if term in chunks), None)
            if chunk is None or self.publication.is_private(chunk):
                if not self.pooling:
                    return None
                chunk = POOL
            placed[term] = (chunk, new)
        return placed


def _extend(publication: Publication, records: dict[int, frozenset[str]], k: int, m: int,
            pooling: bool, tails: Counter | None = None) -> tuple[Extension, list[int]]:
    """Offer each new record to a cluster of its leaf; keep what the residual rule allows,
    less the records that complete a tail (:func:`_completing`).  Returns the extension and
    the positions of the records that do not extend a cluster."""
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
        if not peeled and tails:
            peeled = _completing(offered, [records[p] for p in refused], tails, k)
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


def _completing(offered: dict[int, dict[int, dict[str, tuple[str | None, bool]]]],
                refused: list[frozenset[str]], tails: Counter, k: int) -> set[int]:
    """Extending records to send to new clusters instead, so that tails go public.

    ``tails``: term -> its occurrences that the forest keeps private above its trees (fewer
    than k each).  The promotion publishes a tail once k of its term meet in its pool, where
    the refused records' occurrences go (their new clusters hold the tails' terms back) and
    the extending records' homeless ones.  But a term that old clusters publish may arrive
    mostly in records that extend them, each chunk's residual holding k of it or more, and
    its tail would wait for good.  When what goes to the pool anyway is short of k, and the
    extending records hold enough of the term to make up the difference, just that many
    are sent to new clusters: their occurrences of the term join the pool, and the tail goes
    public with them.  Only the routing changes; the residuals are checked again after."""
    arriving = Counter(t for terms in refused for t in terms if t in tails)
    holders: dict[str, list[int]] = {}
    for placings in offered.values():
        for position, placing in placings.items():
            for term, (chunk, _) in placing.items():
                if term in tails:
                    if chunk is POOL:
                        arriving[term] += 1
                    else:
                        holders.setdefault(term, []).append(position)
    sent: set[int] = set()
    for term in sorted(holders):
        free = [p for p in holders[term] if p not in sent]
        lacking = k - tails[term] - arriving[term] - (len(holders[term]) - len(free))
        if 0 < lacking <= len(free):
            sent.update(free[:lacking])
    return sent


def _buffered(publication: Publication) -> dict[int, frozenset[str]]:
    """Position -> terms of the records waiting in the buffer (read from the buffer's own
    chunk; a buffer written before it listed its positions has them from the record ids)."""
    waiting: dict[int, frozenset[str]] = {}
    for unit in publication.units:
        if unit["kind"] != "buffer" or not unit["members"]:
            continue
        listed = unit.get("positions")
        waiting.update((p, frozenset()) for p in (listed if listed is not None else
                                                   publication.cluster_members(unit["id"])))
        for chunk in publication.unit_chunk_infos(unit["id"]):
            names = publication.record_positions(chunk.id)
            for pseudonym, terms in publication.subrecords(chunk.id):
                waiting[names[pseudonym]] = frozenset(terms)
    return waiting


@dataclass
class NewClusters:
    """The clusters an append forms from its pool, as a first release's (overlay tree, leaf
    clusters, aggregation), already written: what an engine hands back to be grafted."""

    tree: Tree                  # the new tree, unit ids its own (from 0), its root unpooled
    units: list[dict]           # the units' manifest entries, ids and nodes the publication's
    leaf_unit: dict[int, int]   # publication position -> its leaf unit
    root_pool: list             # the root's pool, (position, terms): for the promotion
    totals: dict                # chunks, subrecords and (record, term) pairs written

    @property
    def clusters(self) -> int:
        return sum(u["kind"] == "leaf" for u in self.units)


# (writer, ids, pool positions, their terms, params, terms held back, placement, progress)
ClusterPool = Callable[[VersionWriter, dict, list[int], list[frozenset[str]], PublishParams,
                        frozenset[str], Placement, PhaseProgress | None], NewClusters]


def cluster_pool(writer: VersionWriter, ids: dict[int, str], pool: list[int],
                 records: list[frozenset[str]], params: PublishParams, held: frozenset[str],
                 where: Placement, progress: PhaseProgress | None) -> NewClusters:
    """The single-machine engine's new clusters: laid out, the root's pool taken out whole
    (:func:`promotion.pass_up_root`), written."""
    layout = build_layout(records, params, promotion.holding_back(held, params, partitions),
                          progress)
    root_pool = promotion.pass_up_root(layout, pool) if params.aggregate else []
    totals = write_layout(writer, ids, layout, where)
    leaf_unit = {pool[local]: where.unit(unit)
                 for local, unit in enumerate(layout.leaf_units(len(pool)))}
    return NewClusters(layout.tree, units_manifest(layout, where), leaf_unit, root_pool, totals)


class DuplicateBatch(releases.Refused):
    """A batch whose content an earlier release added already (exit status 3)."""


def _batches(head: dict, dataset: Dataset, version: str, allow_duplicate: bool
             ) -> dict[str, str]:
    """The publication's batch digests with this one's; a batch without ids (FIMI, SPMF)
    that an earlier release added already is refused unless ``allow_duplicate``: its records
    would get new ids, and every count would double."""
    known = dict(head.get("batches", {}))
    digest = dataset.content_digest
    if digest is None:
        return known
    if digest in known and not allow_duplicate:
        raise DuplicateBatch(f"{dataset.source}: release {known[digest]} added the same "
                             f"records already ({len(dataset):,} records, content SHA-256 "
                             f"{digest[:16]}…); nothing written. Append it again with "
                             "--allow-duplicate if that is meant")
    return {digest: version} | known  # a repeat allowed keeps the first release's name


def append(dataset: Dataset, store: Store, min_new: int | None = None,
           progress: PhaseProgress | None = None,
           clusters: ClusterPool = cluster_pool, allow_duplicate: bool = False
           ) -> AppendReport:
    """Add ``dataset``'s records to the current release of ``store`` as a new release;
    ``clusters``: the engine that lays out and writes the new clusters;
    ``allow_duplicate``: accept a FIMI or SPMF batch an earlier release added already."""
    started = time.perf_counter()
    with releases.begin(store) as out, collector_paused():
        if out.current is None:
            raise StoreError(f"{store.url} holds no publication yet: publish one first "
                             "(`cocktail publish FILE`), then append to it")
        refuse_derived(store, out.current)
        log_legacy_release(store, out.current)
        run = _Append(out, store, dataset, allow_duplicate)
        run.place(min_new, clusters, progress)
        return run.commit(started, progress or (lambda phase, done, total: None))


class _Append:
    """One append: where each new record goes, what is written, the commit."""

    def __init__(self, out: releases.Release, store: Store, dataset: Dataset,
                 allow_duplicate: bool = False) -> None:
        self.out, self.dataset = out, dataset
        self.publication = Publication.open(store, out.current)
        self.batches = _batches(self.publication.head, dataset, out.version, allow_duplicate)
        self.params = PublishParams(**self.publication.head["params"])
        self.writer = VersionWriter(out, owner_key(store), releases.ReleaseBuilder("append"),
                                    self.params.index_shard)
        self.first_new = self.publication.record_count
        self.records = self.first_new + len(dataset)
        self.segments = _old_segments(self.publication, self.first_new)
        new_ids, self.new_keys = _new_ids(dataset, out.version, self.segments,
                                          self.publication, self.writer)
        self.ids = dict(enumerate(new_ids, self.first_new))  # position -> id, of what it writes
        self.tree = Tree.from_manifest(self.publication.head["tree"],
                                       self.publication.tree.roots)
        self.units = _carried_units(self.publication)
        self.unit_of: dict[int, int] = {}  # position -> leaf unit, of the records placed now
        self.new: NewClusters | None = None
        self.promoted: dict | None = None  # what the promotion wrote
        self.buffered: list[int] = []

    def place(self, min_new: int | None, clusters: ClusterPool,
              progress: PhaseProgress | None) -> None:
        """Extend old clusters, form new ones or buffer, promote; write what changes."""
        publication, params, writer = self.publication, self.params, self.writer
        added = {self.first_new + i: r for i, r in enumerate(self.dataset.records)}
        _empty_buffers(self.tree, self.units)
        remainders = promotion.old_tops(publication, self.tree) if params.aggregate \
            else promotion.Pool()
        self.ids.update(remainders.ids)
        extension, refused = _extend(publication, added, params.k, params.m, params.aggregate,
                                     remainders.tails())
        waiting = _buffered(publication)
        self.ids.update(publication.record_ids_at(waiting))
        pool = sorted(refused) + sorted(waiting)
        terms_of = added | waiting
        remainders.add_fresh(extension.pooled)
        writer.supersede_version(publication.version, publication.head)
        writer.carry_term_index(publication)  # the old records' index parts, by reference
        # k records make a cluster: what its partition keeps private goes up to the
        # promotion, while a buffered record keeps every pair private until the next append.
        threshold = params.k if min_new is None else min_new
        if pool and len(pool) >= threshold:
            where = Placement(pool, units=len(self.units), nodes=len(self.tree.nodes))
            self.new = clusters(writer, self.ids, pool, [terms_of[p] for p in pool], params,
                                remainders.held, where, progress)
            self.tree.graft(self.new.tree, len(self.units))
            promotion.add_new_tree(remainders, self.new.root_pool,
                                   where.nodes + self.new.tree.roots[0])
            self.units += self.new.units
            self.unit_of.update(self.new.leaf_unit)
        else:
            self.buffered = pool
        if not remainders.promotes:
            remainders = promotion.Pool()  # nothing to gain: every top keeps its remainder
        self.totals, self.replaced = _rewrite_touched(writer, publication, self.units,
                                                      extension, self.ids, remainders.emptied)
        self._extended(extension, remainders.emptied)
        if self.new:
            _add(self.totals, self.new.totals)
        if remainders.promotes:
            self._promote(remainders)
        if self.buffered:
            _buffer(writer, self.tree, self.units, self.buffered, self.ids, terms_of,
                    self.unit_of, self.totals)
        self.extension = extension

    def _extended(self, extension: Extension, emptied: set[str]) -> None:
        """The old units' new members and passed-up terms."""
        for unit, positions in extension.members.items():
            self.units[unit]["members"] += len(positions)
            self.unit_of.update(dict.fromkeys(positions, unit))
        for unit, terms in extension.passed_up.items():
            self.units[unit]["passed_up"] = sorted(set(self.units[unit]["passed_up"]) | terms)
        for chunk in emptied:  # an old top's remainder now goes up to the promotion
            info = self.publication.chunk_info(chunk)
            self.units[info.unit]["passed_up"] = sorted(set(self.units[info.unit]["passed_up"])
                                                        | info.terms)

    def _promote(self, remainders: promotion.Pool) -> None:
        unit = promotion.promote(remainders, self.params, self.tree, len(self.units))
        layout = Layout(self.tree, [unit], True)
        self.promoted = write_layout(self.writer, self.ids, layout) | {
            "private_terms": len(unit.partition.private)}
        self.units += units_manifest(layout)
        _add(self.totals, self.promoted)

    def commit(self, started: float, progress: PhaseProgress) -> AppendReport:
        """Record ids, manifests, release log entry, and the commit point."""
        publication, params, writer, out = self.publication, self.params, self.writer, self.out
        progress("commit", 0, 1)
        _write_records(writer, publication, self.segments, self.unit_of, self.ids,
                       self.first_new, self.records, self.new_keys)
        public_manifest = writer.public_manifest(out.created, params.k, params.m)
        carried = carried_lines(publication, self.replaced)
        public_chunks = len(carried.public) + len(public_manifest["chunks"])
        head, totals, dataset = publication.head, self.totals, self.dataset
        private_manifest = {
            "format": fmt.FORMAT, "version": out.version, "created": out.created,
            "params": head["params"], "source": head["source"],
            "appended": source_of(dataset),
            "batches": self.batches,
            **({"erased_records": head["erased_records"]} if "erased_records" in head else {}),
            "tree": self.tree.to_manifest(), "roots": self.tree.roots,
            "units": writer.homed_units(self.units), "aggregation": head["aggregation"],
            "chunks": writer.chunks,
            "pairs": {"public": totals["public_pairs"], "private": totals["private_pairs"]}}
        entry = writer.release.entry(
            out.version, out.created, params.k, params.m, method=params.method,
            records=self.records, appended=len(dataset), buffered=len(self.buffered),
            carries=publication.version, input=source_of(dataset))
        writer.finish(public_manifest, private_manifest, None, self.records, entry, params.keep,
                      {}, carried)
        progress("commit", 1, 1)
        pairs = totals["public_pairs"] + totals["private_pairs"]
        promoted = self.promoted or {}
        return AppendReport(
            store=self.publication.store.url, version=out.version, records=self.records,
            appended_records=len(dataset), extended_clusters=len(self.extension.members),
            extended_records=sum(map(len, self.extension.members.values())),
            new_clusters=self.new.clusters if self.new else 0,
            new_cluster_records=len(self.new.leaf_unit) if self.new else 0,
            buffered_records=len(self.buffered),
            promoted_chunks=promoted.get("public", 0),
            promoted_pairs=promoted.get("public_pairs", 0),
            private_pool_pairs=promoted.get("private_pairs"),
            private_pool_terms=promoted.get("private_terms"),
            public_chunks=public_chunks,
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
        units[unit]["positions"] = []


def _buffer(writer: VersionWriter, tree: Tree, units: list[dict], buffered: list[int],
            ids: dict[int, str], terms_of: dict[int, frozenset[str]], unit_of: dict[int, int],
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
    units.append({"id": unit_id, "kind": "buffer", "node": node_id, "members": len(buffered),
                  "positions": sorted(buffered), "passed_up": [], "notes": {}})
    unit_of.update(dict.fromkeys(buffered, unit_id))


def _write_records(writer: VersionWriter, publication: Publication, segments: list[dict],
                   unit_of: dict[int, int], ids: dict[int, str], first_new: int, records: int,
                   new_keys: bytes) -> None:
    """The new records' segment; an old segment whose records (buffered before) moved to
    another cluster is rewritten; the others are carried by reference."""
    for segment in segments:
        moved = [p for p in unit_of if segment["start"] <= p < segment["stop"]]
        if not moved:
            writer.carry_records(segment)
            continue
        rows = publication.segment_rows(segment)
        for p in moved:
            rows[p - segment["start"]][1] = unit_of[p]
        writer.write_records(segment["start"], segment["stop"],
                             fmt.encode_records([r[0] for r in rows], [r[1] for r in rows]),
                             segment.get("keys"))
        writer.superseded.append(("private", f"{segment['home']}/"
                                             f"{fmt.records_name(segment['start'])}"))
    added = range(first_new, records)
    writer.write_records(first_new, records, fmt.encode_records([ids[p] for p in added],
                                                                [unit_of[p] for p in added]),
                         new_keys)


def _add(totals: dict, more: dict) -> None:
    for key in ("public_pairs", "private_pairs"):
        totals[key] += more[key]


def _pairs(publication: Publication) -> dict[str, int]:
    """(record, term) pairs in public and in private chunks, from the manifest, or counted
    once from the files for a publication written before the manifest kept them."""
    known = publication.head.get("pairs")
    if known:
        return {"public_pairs": known["public"], "private_pairs": known["private"]}
    totals = {"public_pairs": 0, "private_pairs": 0}
    for chunk in publication.chunks.values():
        key = "private_pairs" if chunk.private else "public_pairs"
        totals[key] += sum(len(terms) for _, terms in publication.subrecords(chunk.id))
    return totals


def _rewrite_touched(writer: VersionWriter, publication: Publication, units: list[dict],
                     extension: Extension, ids: dict[int, str], emptied: set[str]
                     ) -> tuple[dict, set[str]]:
    """The old units this append changes: extended chunks rewritten with their new lines,
    the buffer's and the ``emptied`` private chunks (pooled by a promotion) dropped, and
    their pseudonym maps rewritten; every other unit is carried as it is.  Returns the
    (record, term) pair totals and the chunks whose old manifest lines are replaced."""
    totals = _pairs(publication)
    touched = {u["id"] for u in publication.units if u["kind"] == "buffer" and u["members"]}
    touched |= {publication.chunk_unit(c) for c in (*extension.rows, *emptied)}
    replaced: set[str] = set()
    for uid in sorted(touched):
        unit, home = publication.units[uid], publication.map_home(uid)
        buffer = unit["kind"] == "buffer"
        rows = extension.chunks_of(uid, publication)
        for chunk in publication.unit_chunk_infos(uid):
            if buffer or chunk.id in emptied:
                totals["private_pairs"] -= sum(len(t) for _, t in publication.subrecords(chunk.id))
                writer.drop_chunk(chunk.id, chunk.home, chunk.private)
            elif chunk.id in rows:
                members = [(ids[p], p, sub) for p, sub in rows[chunk.id]]
                writer.extend_chunk(chunk.id, chunk.home, uid, unit["kind"], chunk.private,
                                    chunk.terms, publication.chunk_files(chunk.id), members)
                key = "private_pairs" if chunk.private else "public_pairs"
                totals[key] += sum(len(sub) for _, _, sub in members)
            else:
                continue
            replaced.add(chunk.id)
        if buffer:  # its records are placed anew: its map, empty now, is this version's own
            writer.close_unit(uid, replaces=home)  # (no later version names the old one)
            continue
        own = emptied.intersection(c.id for c in publication.unit_chunk_infos(uid))
        writer.close_unit(uid, fmt.map_without(publication.map_bytes(uid), own), replaces=home)
        writer.release.carry(uid, unit["kind"], units[uid]["public_records"])
    return totals, replaced


def _carried_units(publication: Publication) -> list[dict]:
    """The units' manifest entries, each naming the home of its pseudonym map and how many of
    its records hold a published term (the release log's figure: a version written before
    the manifest kept it has it from its log entry)."""
    current = publication.version
    units = [u | {"map": u.get("map", current)} for u in publication.units]
    if any("public_records" not in u for u in units):
        logged = releases.read_log(publication.store, current)[-1]["units"]
        for unit in units:
            unit.setdefault("public_records",
                            logged.get(str(unit["id"]), {}).get("public_records", 0))
    return units
