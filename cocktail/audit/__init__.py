"""The independent verifier: is what the public cloud holds safe to hold?

It reads the public zone only (it is handed a read-only view of it) and recomputes everything
from the published files, sharing no algorithm with the partitioners:

* every public chunk is k^m-anonymous: every itemset of at most m terms that occurs in its
  subrecords occurs in at least k of them (counted directly, itemset by itemset);
* no pseudonym occurs in two chunks (which would let the public cloud join them);
* nothing private is there: every file is a listed public chunk, its index, the manifest or
  its signature, every chunk is labelled public (in the manifest and, on HDFS, in its own
  priLabel xattr), the files match their checksums, each index matches its chunk;
* who vouches for it: the version's signature covers its manifest and every hop of its chain
  verifies (:mod:`.releases.signing`), from a pinned key when one is given; an unsigned version
  is reported as such.

:func:`audit_store` audits whatever the store holds: the basket publication, and each table
(:mod:`.tables.audit`) and ranking (:mod:`.rank.audit`) the layout registry finds.

On a store with blocks (HDFS) it also checks where the private zone's bytes physically are:
every replica of every private file must sit on a datanode in a private rack.  That check reads
block locations only, never the private files.

One module per kind of check: :mod:`.public` (one version's public zone),
:mod:`.signatures`, :mod:`.placement`, :mod:`.history` (the release history),
:mod:`.indexes` (term indexes, record segments), :mod:`.chain`, and :mod:`.views` (a view
read back to derive from); their findings in :mod:`.report`.  This entry point audits what
is asked: the whole store, one version, or the release history.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .. import chunkformat as fmt
from ..rank.audit import audit_ranking
from ..rank.release import rank_store
from ..releases.layout import RANKS, TABLES, names
from ..store import Store, StoreError
from ..tables.audit import audit_table
from ..tables.release import table_store
from .chain import ChainAuditReport, audit_chain
from .history import ReleaseAuditReport, audit_releases
from .indexes import audit_term_indexes
from .public import _check_zone_top, audit, km_violations
from .report import DEFAULT_MAX_ITEMSETS, VIOLATION_COLUMNS, AuditReport, Violation
from .views import UnverifiedView, public_view, verified_view

__all__ = ["DEFAULT_MAX_ITEMSETS", "AuditReport", "ChainAuditReport", "ReleaseAuditReport",
           "StoreAudit", "UnverifiedView", "Violation", "audit", "audit_as_asked",
           "audit_chain", "audit_releases", "audit_store", "audit_term_indexes",
           "km_violations", "public_view", "verified_view"]


@dataclass
class StoreAudit:
    """Everything a store holds: its basket publication (if any), every table and ranking."""

    store: str
    baskets: AuditReport | None
    layout: list[Violation]  # the top of the public zone, checked even without baskets
    tables: dict = field(default_factory=dict)    # name -> TableAuditReport
    rankings: dict = field(default_factory=dict)  # name -> RankingAuditReport

    @property
    def ok(self) -> bool:
        parts = [*self.tables.values(), *self.rankings.values()]
        return not self.layout and (self.baskets is None or self.baskets.ok) and \
            all(p.ok for p in parts)

    def as_dict(self) -> dict:
        head = self.baskets.as_dict() if self.baskets else {
            "store": self.store, "version": None,
            "violations": [v.__dict__ for v in self.layout]}
        return head | {"ok": self.ok,
                       "tables": {n: r.as_dict() for n, r in self.tables.items()},
                       "rankings": {n: r.as_dict() for n, r in self.rankings.items()}}

    def to_pandas(self):
        """Every violation, a row each (part, kind, where, detail), the part being
        ``baskets``, ``layout``, ``table NAME`` or ``ranking NAME``: empty when it passed."""
        from ..frames import to_frame

        rows = [asdict(v) | {"part": "baskets"}
                for v in (self.baskets.violations if self.baskets else [])]
        rows += [asdict(v) | {"part": "layout"} for v in self.layout]
        for kind, parts in (("table", self.tables), ("ranking", self.rankings)):
            rows += [{"part": f"{kind} {name}", "kind": kind, "where": name, "detail": text}
                     for name, part in parts.items() for text in part.violations]
        return to_frame(rows, ["part", *VIOLATION_COLUMNS])


def audit_store(store: Store, max_itemsets: int = DEFAULT_MAX_ITEMSETS,
                trust: str | None = None) -> StoreAudit:
    """The basket publication (when there is one), each table and each ranking the layout
    registry finds; a store that holds none of them has nothing to audit."""
    zone = store.zone("public")
    baskets = audit(store, max_itemsets=max_itemsets, trust=trust) \
        if zone.exists(fmt.POINTER) else None
    layout = AuditReport(store.url, None)
    if baskets is None:
        _check_zone_top(zone, layout)
    result = StoreAudit(store.url, baskets, layout.violations)
    result.tables = {n: audit_table(table_store(store, n)) for n in names(store, TABLES)}
    result.rankings = {n: audit_ranking(rank_store(store, n)) for n in names(store, RANKS)}
    if baskets is None and not result.tables and not result.rankings:
        raise StoreError(f"{store.url}: no publication to audit (and no table or ranking)")
    return result


def audit_as_asked(store: Store, *, releases: bool = False, version: str | None = None,
                   k: int | None = None, m: int | None = None,
                   max_itemsets: int = DEFAULT_MAX_ITEMSETS, trust: str | None = None
                   ) -> StoreAudit | AuditReport | ReleaseAuditReport:
    """What `cocktail audit` checks: the whole release history (``releases``, the owner's
    check), one version (``version``, or a stricter ``k`` or ``m``), else the whole store."""
    if releases:
        if trust:
            raise ValueError("a trusted key checks a public view's signature; the release "
                             "audit is the owner's check of its own history")
        return audit_releases(store, max_itemsets=max_itemsets)
    if version or k or m:
        return audit(store, version=version, k=k, m=m, max_itemsets=max_itemsets, trust=trust)
    return audit_store(store, max_itemsets=max_itemsets, trust=trust)
