"""Every number of the owner's report, gathered from the store (and the ledger) as one JSON-ready
dict: the same numbers `publish --json`, `audit --json` and the ledger give, and the
distributions behind them.  The page (:mod:`cocktail.report.page`) only draws them."""

from __future__ import annotations

import datetime as dt
from collections import Counter

from .. import releases
from ..audit import audit_store
from ..dp.ledger import Ledger
from ..overlay.tree import Tree
from ..query import Publication
from ..private_config import ledger_location
from ..rank.audit import RankingAuditReport
from ..releases import current_version
from ..releases.layout import TABLES, names, parts
from ..store import Store, StoreError
from ..tables.release import MANIFEST, read_json, table_store
from ..tables.release import read_log as table_log


def gather(store: Store, ledger: Ledger | None) -> dict:
    """The report of ``store``'s current version, its releases, its tables and the ledger."""
    return store_numbers(store) | {"ledger": ledger_numbers(ledger) if ledger else None}


def store_numbers(store: Store) -> dict:
    """Everything but the ledger: what changes only when a version does."""
    version = current_version(store)
    report = {"store": store.url, "version": version,
              "generated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    audited = audit_store(store) if version is not None or parts(store) else None
    if version is not None:
        publication = Publication.open(store, version)
        report["publication"] = publication_numbers(publication)
        report["distributions"] = distributions(publication)
        report["audit"] = audited.as_dict()
        report["releases"] = release_history(store, version)
    report["tables"] = table_history(store)
    report["rankings"] = ranking_numbers(audited.rankings) if audited else []
    return report


def publication_numbers(publication: Publication) -> dict:
    """The counts `publish --json` reports, recomputed from the version's private manifest,
    and the coverage: how much went public, against the floor no k^m rule can publish."""
    manifest = publication.manifest
    chunks = manifest["chunks"].values()
    public = [c for c in chunks if not c["priLabel"]]
    private = [c for c in chunks if c["priLabel"]]
    pairs = manifest["pairs"]
    occurrences = pairs["public"] + pairs["private"]
    support = {term: len(records) for term, records in publication.term_records.items()}
    k = publication.k
    private_records, private_terms = _private_holders(publication)
    return {
        "version": publication.version, "k": k, "m": publication.m,
        "method": manifest["params"]["method"], "records": len(publication.record_ids),
        "clusters": sum(u["kind"] == "leaf" for u in publication.units),
        "aggregated_clusters": sum(u["kind"] == "aggregate" for u in publication.units),
        "public_chunks": len(public), "private_chunks": len(private),
        "public_subrecords": sum(c["subrecords"] for c in public),
        "private_subrecords": sum(c["subrecords"] for c in private),
        "private_terms": manifest["aggregation"]["after"]["private_terms"],
        "private_term_share": round(pairs["private"] / occurrences, 6) if occurrences else 0.0,
        "private_before_aggregation": manifest["aggregation"]["before"],
        "coverage": {
            "occurrences": occurrences, "public_occurrences": pairs["public"],
            "private_occurrences": pairs["private"],
            "floor_occurrences": sum(s for s in support.values() if s < k),
            "records": len(publication.record_ids), "records_with_private": private_records,
            "terms": len(support), "terms_with_private": private_terms,
            "terms_below_k": sum(s < k for s in support.values())},
    }


def _private_holders(publication: Publication) -> tuple[int, int]:
    """How many records, and how many distinct terms, have an occurrence in a private chunk."""
    records: set[int] = set()
    terms: set[str] = set()
    for chunk in publication.chunks.values():
        if chunk.private:
            positions = publication.record_positions(chunk.id)
            for pseudonym, held in publication.subrecords(chunk.id):
                records.add(positions[pseudonym])
                terms.update(held)
    return len(records), len(terms)


def distributions(publication: Publication) -> dict:
    """Cluster sizes, chunks per cluster, terms and subrecords per public chunk, private
    subrecords per leaf cluster before and after aggregation, the tree's depth and fan-out."""
    manifest = publication.manifest
    leaves = [u for u in publication.units if u["kind"] == "leaf"]
    public = [c for c in manifest["chunks"].values() if not c["priLabel"]]
    per_unit = Counter(c["unit"] for c in public)
    before, after = _private_per_leaf(publication)
    depth, fan_out = _tree_shape(publication.tree)
    return {
        "cluster_sizes": sorted(u["members"] for u in leaves),
        "chunks_per_cluster": sorted(per_unit[u["id"]] for u in leaves),
        "terms_per_chunk": sorted(c["terms"] if isinstance(c["terms"], int) else len(c["terms"])
                                  for c in public),
        "subrecords_per_chunk": sorted(c["subrecords"] for c in public),
        "private_per_cluster": [{"cluster": u["id"], "before": before[u["id"]],
                                 "after": after[u["id"]]} for u in leaves],
        "tree": {"nodes": len(publication.tree.nodes), "depth": depth, "fan_out": fan_out},
    }


def _private_per_leaf(publication: Publication) -> tuple[Counter, Counter]:
    """Per leaf cluster: its private subrecords before aggregation (the records it passed up,
    and the private chunk of a leaf that keeps its own) and after (those private at the end)."""
    before, after = Counter(), Counter()
    kinds = {u["id"]: u["kind"] for u in publication.units}
    passed_up: set[int] = set()
    for chunk in publication.chunks.values():
        aggregated = kinds[chunk.unit] == "aggregate"
        if not (aggregated or chunk.private):
            continue
        positions = publication.record_positions(chunk.id)
        held = [positions[p] for p, _ in publication.subrecords(chunk.id)]
        if aggregated:  # an aggregated cluster's members are the leaves' passed-up parts
            passed_up.update(held)
        else:
            before.update(publication.cluster_of[r] for r in held)
        if chunk.private:
            after.update(publication.cluster_of[r] for r in held)
    before.update(publication.cluster_of[r] for r in passed_up)
    return before, after


def _tree_shape(tree: Tree) -> tuple[int, list[int]]:
    """The overlay forest's depth (edges from a root to its deepest leaf) and the number of
    children of each inner node (a parent always precedes its children)."""
    level = {root: 0 for root in tree.roots}
    for node in tree.nodes:
        for child in set(node.children.values()):
            level[child] = level[node.id] + 1
    return max(level.values(), default=0), sorted(len(set(n.children.values()))
                                                  for n in tree.nodes if n.children)


def release_history(store: Store, current: str) -> list[dict]:
    """Per release: its kind, the input it came from (None for releases logged before
    inputs were), records appended and buffered, public chunks, subrecords and occurrences (a
    chunk's lines accumulate over the releases that added to it)."""
    history, held = [], Counter()
    for entry in releases.read_log(store, current):
        chunks = entry.get("chunks", {})
        for chunk_id, chunk in chunks.items():
            held[chunk_id] += sum(len(terms) * count for terms, count in chunk["added"])
        history.append({"version": entry["version"], "kind": entry.get("kind"),
                        "created": entry.get("created"), "k": entry.get("k"),
                        "m": entry.get("m"), "records": entry.get("records"),
                        "appended": entry.get("appended"), "buffered": entry.get("buffered"),
                        "public_chunks": len(chunks),
                        "public_subrecords": sum(c["subrecords"] for c in chunks.values()),
                        "public_occurrences": sum(held[c] for c in chunks),
                        "input": (entry.get("input") or {}).get("path")})  # logged since 66
    return history


def table_history(store: Store) -> list[dict]:
    """Every `cocktail table` of the store: its model and level, its current partitions (with
    their ranges, for (k,e)), and per release the partitions and the tuples buffered."""
    found = []
    for name in names(store, TABLES):
        tstore = table_store(store, name)
        current = current_version(tstore)
        if current is None:
            continue
        manifest = read_json(tstore, "public", current, MANIFEST)
        found.append({
            "name": name, "version": current, "model": manifest["model"],
            "level": {key: manifest[key] for key in ("k", "e", "rho", "l") if key in manifest},
            "partitions": manifest.get("partitions", []),
            "releases": [{"version": e["version"], "kind": e["kind"], "created": e["created"],
                          "partitions": len(e.get("partitions") or e.get("groups") or ()),
                          "buffered": len(e.get("buffered") or ())}
                         for e in table_log(tstore)]})
    return found


def ranking_numbers(audited: dict[str, RankingAuditReport]) -> list[dict]:
    """Every ranking of the store: its defense and size, the versions kept, and its audit."""
    return [{"name": name, "version": r.version, "defense": r.defense, "tuples": r.tuples,
             "versions": r.versions,
             "audit": "pass" if r.ok else f"{len(r.violations)} violation(s)"}
            for name, r in audited.items()]


def ledger_numbers(ledger: Ledger, last: int | None = None) -> dict:
    """Budgets per role and user, what was spent and when (the ``last`` charges only, if
    given), and the refused requests."""
    return ledger.overview(last)


def owner_ledger(store: Store) -> Ledger | None:
    """The store's ledger if it has one (a report never creates it)."""
    try:
        path = ledger_location(store)
    except StoreError:
        return None
    return Ledger(path) if path.exists() else None
