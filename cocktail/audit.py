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
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations
from math import comb

import numpy as np
from pyroaring import BitMap

from . import chunkformat as fmt
from . import releases
from .attacks.joint_view import ChunkView, TooLarge, attack
from .query.termindex import IndexPart, as_array, bitmap_of, check_files, layout_from_manifest
from .query.view import Publication
from .rank.audit import audit_ranking
from .rank.release import rank_store
from .releases.layout import RANKS, TABLES, names, top_level_entry
from .releases.signing import Provenance, SignatureError, verify
from .store import Store, StoreError, ZoneReader
from .tables.audit import audit_table
from .tables.release import table_store

DEFAULT_MAX_ITEMSETS = 20_000_000  # combinations enumerated per chunk before giving up
EXAMPLES = 5                        # violating itemsets reported per chunk


@dataclass(frozen=True)
class Violation:
    kind: str  # km-anonymity, linkable-pseudonym, private-data, integrity, unverifiable,
    # placement, signature
    where: str
    detail: str


VIOLATION_COLUMNS = ["kind", "where", "detail"]


def violations_frame(violations: Sequence[Violation]):
    """Violations as a DataFrame (the ``frames`` extra), one row each."""
    from .frames import to_frame

    return to_frame(map(asdict, violations), VIOLATION_COLUMNS)


@dataclass
class AuditReport:
    store: str
    version: str | None
    k: int | None = None
    m: int | None = None
    chunks: int = 0
    subrecords: int = 0
    itemsets_checked: int = 0
    placement: dict | None = None  # block placement of the private zone, where there are blocks
    provenance: Provenance | None = None  # the version's signature, checked
    violations: list[Violation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_dict(self) -> dict:
        return {"ok": self.ok, "store": self.store, "version": self.version, "k": self.k,
                "m": self.m, "chunks": self.chunks, "subrecords": self.subrecords,
                "itemsets_checked": self.itemsets_checked, "placement": self.placement,
                "signature": self.provenance.as_dict() if self.provenance else None,
                "violations": [v.__dict__ for v in self.violations]}

    def to_pandas(self):
        """The violations, a row each (kind, where, detail): empty when the audit passed."""
        return violations_frame(self.violations)


def km_violations(subrecords: list[list[str]], k: int, m: int,
                  max_itemsets: int) -> tuple[int, list[tuple[tuple[str, ...], int]]] | None:
    """Count every itemset of size 1..m in the subrecords; return (itemsets, those below k).

    Identical subrecords are counted once with their multiplicity.  Returns None when the
    enumeration would exceed ``max_itemsets`` (the chunk cannot be verified within the budget).
    """
    distinct = Counter(tuple(sorted(set(s))) for s in subrecords)
    work = sum(comb(len(s), size) for s in distinct for size in range(1, m + 1))
    if work > max_itemsets:
        return None
    support: Counter[tuple[str, ...]] = Counter()
    for terms, weight in distinct.items():
        for size in range(1, min(m, len(terms)) + 1):
            for itemset in combinations(terms, size):
                support[itemset] += weight
    rare = sorted(((i, s) for i, s in support.items() if s < k), key=lambda x: (x[1], x[0]))
    return len(support), rare


class _Auditor:
    def __init__(self, zone: ZoneReader, version: str, report: AuditReport,
                 max_itemsets: int) -> None:
        self.zone, self.version, self.report = zone, version, report
        self.max_itemsets = max_itemsets
        self.owner_of: dict[str, str] = {}  # pseudonym -> chunk

    def flag(self, kind: str, where: str, detail: str) -> None:
        self.report.violations.append(Violation(kind, where, detail))

    def read_checked(self, path: str, expected_sha: str | None) -> bytes | None:
        if not self.zone.exists(path):
            self.flag("integrity", path, "listed in the manifest but missing")
            return None
        data = self.zone.read(path)
        if hashlib.sha256(data).hexdigest() != expected_sha:
            self.flag("integrity", path, "content does not match the manifest's sha256")
        return data

    def home(self, entry: dict) -> str | None:
        """The version whose directory holds the chunk's files: its own, or, carried by
        reference, an earlier one."""
        home = entry.get("home", self.version)
        if not isinstance(home, str) or not fmt.VERSION_RE.match(home) or home > self.version:
            self.flag("integrity", f"{fmt.manifest_path(self.version)} chunk "
                      f"{entry.get('id', '')}", f"home {home!r} is not this version or an "
                      "earlier one")
            return None
        return home

    def check_chunk(self, entry: dict, k: int, m: int) -> None:
        chunk_id = entry.get("id", "")
        home = self.home(entry)
        if home is None:
            return
        where = fmt.chunk_path(home, chunk_id)
        if entry.get("priLabel") is not False:
            self.flag("private-data", where, f"chunk is labelled priLabel={entry.get('priLabel')!r}")
        label = self.zone.pri_label(where) if self.zone.exists(where) else None
        if label not in (None, "false"):
            self.flag("private-data", where, f"the file's own priLabel attribute is {label!r}")
        sha = entry.get("sha256") or {}
        data = self.read_checked(where, sha.get("chunk"))
        index_where = fmt.index_path(home, chunk_id)
        index_data = self.read_checked(index_where, sha.get("index"))
        if data is None:
            return
        try:
            rows = list(fmt.decode_chunk(data, where))
        except (fmt.FormatError, UnicodeDecodeError) as exc:
            self.flag("integrity", where, str(exc))
            return
        self.report.chunks += 1
        self.report.subrecords += len(rows)
        self.check_rows(where, chunk_id, rows, entry)
        if index_data is not None:
            self.check_index(index_where, chunk_id, index_data, rows)
        result = km_violations([terms for _, terms in rows], k, m, self.max_itemsets)
        if result is None:
            self.flag("unverifiable", where, f"more than {self.max_itemsets:,} itemsets to count; "
                      "raise --max-itemsets to verify it")
            return
        counted, rare = result
        self.report.itemsets_checked += counted
        for itemset, support in rare[:EXAMPLES]:
            self.flag("km-anonymity", where,
                      f"itemset {list(itemset)} occurs in {support} subrecord(s) (< k={k})")
        if len(rare) > EXAMPLES:
            self.flag("km-anonymity", where, f"... and {len(rare) - EXAMPLES} more rare itemsets")

    def check_rows(self, where: str, chunk_id: str, rows: list[tuple[str, list[str]]],
                   entry: dict) -> None:
        if entry.get("subrecords") != len(rows):
            self.flag("integrity", where, f"{len(rows)} subrecords, manifest says "
                      f"{entry.get('subrecords')}")
        previous = ""
        for pseudonym, terms in rows:
            if not fmt.PSEUDONYM_RE.match(pseudonym):
                self.flag("private-data", where, f"{pseudonym!r} is not a pseudonym")
            if pseudonym <= previous:
                self.flag("integrity", where, "subrecords are not strictly ordered by pseudonym")
            previous = pseudonym
            if not terms or terms != sorted(set(terms)):
                self.flag("integrity", where, f"subrecord {pseudonym} is empty or not sorted")
            other = self.owner_of.setdefault(pseudonym, chunk_id)
            if other != chunk_id:
                self.flag("linkable-pseudonym", where,
                          f"pseudonym {pseudonym} also occurs in chunk {other}")

    def check_index(self, where: str, chunk_id: str, data: bytes,
                    rows: list[tuple[str, list[str]]]) -> None:
        expected: dict[str, list[str]] = {}
        for pseudonym, terms in rows:
            for term in terms:
                expected.setdefault(term, []).append(pseudonym)
        try:
            actual = dict(fmt.decode_index(data, chunk_id, where))
        except (fmt.FormatError, UnicodeDecodeError) as exc:
            self.flag("integrity", where, str(exc))
            return
        if actual != {t: sorted(ps) for t, ps in expected.items()}:
            self.flag("integrity", where, "inverted index does not match its chunk")

    def check_listing(self, manifests: dict[str, list[dict]]) -> None:
        """Every file of every version directory is a manifest or a chunk (or its index) that
        a manifest present lists with that home: ``manifests`` maps each version with a
        manifest to its chunk entries.  A pruned version's directory keeps only what later
        versions reference."""
        allowed = set()
        for version, chunks in manifests.items():
            allowed |= {fmt.manifest_path(version), fmt.signature_path(version)}
            for entry in chunks:
                chunk_id, home = entry.get("id", ""), entry.get("home", version)
                allowed |= {fmt.chunk_path(home, chunk_id), fmt.index_path(home, chunk_id)}
        for chunk_id in {e.get("id", "") for e in manifests.get(self.version, [])}:
            if not fmt.CHUNK_ID_RE.match(chunk_id):
                self.flag("private-data", chunk_id, "chunk id is not an opaque random id")
        for name in _versions(self.zone):
            for path in self.zone.walk(name):
                if path not in allowed:
                    self.flag("private-data", path, "file in the public zone that no manifest "
                              "lists as a public chunk")


def _check_zone_top(zone: ZoneReader, report: AuditReport) -> None:
    for name in zone.list():
        if top_level_entry(name):
            continue
        report.violations.append(Violation("private-data", name,
                                           "unexpected file in the public zone"))


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
        from .frames import to_frame

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


def _versions(zone: ZoneReader) -> Iterator[str]:
    return (n for n in zone.list() if fmt.VERSION_RE.match(n))


def audit(store: Store, *, version: str | None = None, k: int | None = None,
          m: int | None = None, max_itemsets: int = DEFAULT_MAX_ITEMSETS,
          trust: str | None = None, placement: bool = True) -> AuditReport:
    """Audit one version (the current one by default) from the public zone alone.

    ``k``/``m`` audit against stricter parameters than the manifest claims; by default the
    manifest's own are used.  ``trust``: the fingerprint the version's chain of signers must
    start from.  ``placement``: also check the private zone's block placement (an owner's
    check; a recipient re-sharing a view has no business there).
    """
    zone = store.zone("public")
    if version is None and zone.exists(fmt.POINTER):
        version = zone.read(fmt.POINTER).decode("utf-8", "replace").strip()
    report = AuditReport(store.url, version)
    _check_zone_top(zone, report)
    if version is None:
        raise StoreError(f"{store.url}: no publication to audit (no {fmt.POINTER} pointer)")
    if version not in set(_versions(zone)):
        report.violations.append(Violation("integrity", fmt.POINTER,
                                           f"names {version!r}, which is not in the public zone"))
        return report
    manifest_where = fmt.manifest_path(version)
    try:
        raw = zone.read(manifest_where)
        manifest = fmt.decode_json(raw, manifest_where)
        fmt.check_format(manifest.get("format"), f"public/{manifest_where}")
        chunks = manifest["chunks"]
        report.k = k or int(manifest["k"])
        report.m = m or int(manifest["m"])
    except fmt.UnknownFormat:
        raise  # not a fault of the store: this auditor cannot check it (exit 2, not a pass)
    except (fmt.FormatError, StoreError, KeyError, TypeError, ValueError) as exc:
        report.violations.append(Violation("integrity", manifest_where, f"unreadable: {exc}"))
        return report
    if report.k < int(manifest["k"]) or report.m < int(manifest["m"]):
        raise ValueError(f"audit parameters k={report.k}, m={report.m} are weaker than the "
                         f"publication's own (k={manifest['k']}, m={manifest['m']})")
    report.provenance = _signature(zone, version, raw, trust, report.violations)
    auditor = _Auditor(zone, version, report, max_itemsets)
    auditor.check_listing({version: chunks} | _other_manifests(zone, version, report))
    for entry in chunks:
        auditor.check_chunk(entry, report.k, report.m)
    if placement:
        check_placement(store, report)
    return report


def _signature(zone: ZoneReader, version: str, manifest: bytes, trust: str | None,
               violations: list[Violation]) -> Provenance:
    """``version``'s signature checked against its own manifest's bytes: one that does not
    verify (or covers another version's manifest) is a violation and an ``invalid`` status."""
    try:
        return verify(zone, version, manifest, trust)
    except SignatureError as exc:
        violations.append(Violation("signature", fmt.signature_path(version), str(exc)))
        return Provenance("invalid", version, hashlib.sha256(manifest).hexdigest(),
                          detail=str(exc))


def _other_manifests(zone: ZoneReader, version: str, report: AuditReport) -> dict[str, list]:
    """The chunk entries of every other version that still has its public manifest."""
    found = {}
    for name in _versions(zone):
        where = fmt.manifest_path(name)
        if name == version or not zone.exists(where):
            continue
        try:
            found[name] = list(fmt.decode_json(zone.read(where), where)["chunks"])
        except (fmt.FormatError, KeyError, TypeError) as exc:
            report.violations.append(Violation("integrity", where, f"unreadable: {exc}"))
    return found


View = list[tuple[str, frozenset[str], list[tuple[str, list[str]]]]]


class UnverifiedView(StoreError):
    """A view refused as a source: it fails the verifier, its signature, or is unsigned
    (bad input, exit status 2, as an altered view always was)."""


def public_view(store: Store) -> tuple[str, dict, View]:
    """The current public view: version, manifest, and each chunk's id, terms and rows, each
    chunk checked against the manifest's checksum."""
    version, _, manifest, chunks = _read_view(store)
    return version, manifest, chunks


def verified_view(store: Store, trust: str | None = None, allow_unsigned: bool = False,
                  max_itemsets: int = DEFAULT_MAX_ITEMSETS
                  ) -> tuple[str, dict, View, Provenance]:
    """The current public view, only if it is fit to derive from: this verifier passes it at
    its own (k, m) (every chunk k^m-anonymous and what the manifest lists) and its signature
    covers the manifest, from the ``trust`` key's chain when one is pinned, or it is unsigned
    and ``allow_unsigned``.  The rows returned are checked against that very manifest.
    Anything else raises :class:`UnverifiedView`, naming why."""
    report = audit(store, trust=trust, max_itemsets=max_itemsets, placement=False)
    if not report.ok:
        shown = "; ".join(f"{v.kind} {v.where}: {v.detail}" for v in report.violations[:3])
        more = f" (and {len(report.violations) - 3} more)" if len(report.violations) > 3 else ""
        raise UnverifiedView(f"{store.url} {report.version} fails verification, so nothing "
                             f"is derived from it: {shown}{more}")
    if report.provenance.status == "unsigned" and not allow_unsigned:
        raise UnverifiedView(f"{store.url} {report.version} is unsigned: nothing shows who "
                             "made it. Re-share it only if you trust where you got it, with "
                             "--allow-unsigned (the derived view then records an unsigned "
                             "origin)")
    return (*_audited_view(store, report), report.provenance)


def _audited_view(store: Store, report: AuditReport) -> tuple[str, dict, View]:
    """The view of the version ``report`` audited, read again: its manifest must still be the
    bytes the audit verified (and signature covered), and each chunk matches that manifest."""
    version, digest, manifest, chunks = _read_view(store, report.version)
    if digest != report.provenance.manifest_sha256:
        raise UnverifiedView(f"{store.url} {version}: the manifest changed while it was "
                             "verified; run again")
    return version, manifest, chunks


def _read_view(store: Store, version: str | None = None) -> tuple[str, str, dict, View]:
    """Version, the manifest's sha256, the manifest, and each chunk's id, terms and rows,
    each chunk checked against the manifest's checksum."""
    zone = store.zone("public")
    if version is None and zone.exists(fmt.POINTER):
        version = zone.read(fmt.POINTER).decode().strip()
    if version is None:
        raise StoreError(f"{store.url} holds no publication (no {fmt.POINTER} pointer)")
    where = fmt.manifest_path(version)
    raw = zone.read(where)
    manifest = fmt.decode_json(raw, where)
    fmt.check_format(manifest.get("format"), f"public/{where}")
    chunks = []
    for entry in manifest["chunks"]:
        path = fmt.chunk_path(entry.get("home", version), entry["id"])
        data = zone.read(path)
        if hashlib.sha256(data).hexdigest() != entry["sha256"]["chunk"]:
            raise StoreError(f"{store.url}: {path} does not match its manifest's sha256: the "
                             "view was altered since it was published")
        rows = list(fmt.decode_chunk(data, path))
        chunks.append((entry["id"], frozenset(t for _, sub in rows for t in sub), rows))
    return version, hashlib.sha256(raw).hexdigest(), manifest, chunks


@dataclass
class ChainAuditReport:
    ok: bool
    hops: list[dict]          # store, version, k, m, k^m ok, violations
    violations: list[str]     # laxer hops, chunks that are no projection, shared pseudonyms

    def as_dict(self) -> dict:
        return asdict(self)


def audit_chain(stores: Sequence[Store], trust: str | None = None) -> ChainAuditReport:
    """Each hop k^m-anonymous at its own (k, m) and its signature sound (every signer chain
    starting at ``trust`` when one is pinned), no laxer than the hop before, nested in it
    (every chunk the projection of one chunk of the hop before; no pseudonym shared), and a
    hop signed as a re-share naming the hop before's current version as its source."""
    hops, views, signed, violations = [], [], [], []
    for store in stores:
        report = audit(store, trust=trust)
        hops.append({"store": store.url, "version": report.version, "k": report.k,
                     "m": report.m, "ok": report.ok, "violations": len(report.violations),
                     "signature": report.provenance.as_dict() if report.provenance else None})
        views.append(_audited_view(store, report)[2] if report.ok else None)  # else: altered
        signed.append(report.provenance if report.ok else None)
    for (before, after), (a, b), (was, now) in zip(zip(hops, hops[1:]), zip(views, views[1:]),
                                                    zip(signed, signed[1:])):
        if after["k"] < before["k"] or after["m"] < before["m"]:
            violations.append(f"{after['store']}: k={after['k']}, m={after['m']} is laxer than "
                              f"the hop before (k={before['k']}, m={before['m']})")
        received = now.hops[-1]["statement"]["received"] if now and now.hops else None
        if was and received is not None and received != was.received():
            violations.append(f"{after['store']}: signed as derived from {received['version']} "
                              f"(manifest sha256 {received['manifest_sha256']}, signer "
                              f"{received['signer']}), not from {before['store']}'s "
                              f"{was.version}")
        if a is None or b is None:
            continue
        for chunk_id, terms, rows in b:
            shown = Counter(frozenset(sub) for _, sub in rows)
            if not any(terms <= t and Counter(frozenset(terms.intersection(sub))
                                              for _, sub in r if terms.intersection(sub))
                       == shown for _, t, r in a):
                violations.append(f"{after['store']}: chunk {chunk_id} is not a projection of "
                                  f"any chunk of {before['store']} (not nested)")
        names = {n for _, _, r in a for n, _ in r} & {n for _, _, r in b for n, _ in r}
        if names:
            violations.append(f"{after['store']}: {len(names)} pseudonym(s) shared with the hop "
                              f"before (rows linkable across hops)")
    return ChainAuditReport(all(h["ok"] for h in hops) and not violations, hops, violations)


def check_placement(store: Store, report: AuditReport) -> None:
    """Every replica of every private file on a private-rack datanode (block metadata only)."""
    located = store.replicas("private")
    if located is None:
        return
    files = blocks = replicas = 0
    outside: list[tuple[str, int, str]] = []
    for path, racks in located:
        files += 1
        blocks += len(racks)
        for number, block in enumerate(racks):
            replicas += len(block)
            outside += [(path, number, where) for where in block
                        if not where.startswith(store.private_racks)]
    report.placement = {"private_files": files, "blocks": blocks, "replicas": replicas,
                        "replicas_outside_private_racks": len(outside),
                        "private_racks": store.private_racks}
    for path, number, where in outside[:EXAMPLES * 4]:
        report.violations.append(Violation("placement", path,
                                           f"block {number} has a replica on {where}"))
    if len(outside) > EXAMPLES * 4:
        report.violations.append(Violation("placement", "private zone", f"... and "
                                           f"{len(outside) - EXAMPLES * 4} more such replicas"))


# -- the whole release history (owner: reads the private release log) ----------------------

@dataclass
class ReleaseAuditReport:
    store: str
    releases: list[dict] = field(default_factory=list)  # version, kind, created, signature
    pairs_checked: int = 0
    residuals_checked: int = 0
    files_checked: int = 0
    clusters_attacked: int = 0
    clusters_too_large: int = 0
    pinned: list[dict] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_dict(self) -> dict:
        return {"ok": self.ok, "store": self.store, "releases": self.releases,
                "pairs_checked": self.pairs_checked, "residuals_checked": self.residuals_checked,
                "files_checked": self.files_checked,
                "clusters_attacked": self.clusters_attacked,
                "clusters_too_large": self.clusters_too_large, "pinned": self.pinned,
                "violations": [v.__dict__ for v in self.violations]}

    def to_pandas(self):
        """The violations of the release history, a row each (kind, where, detail)."""
        return violations_frame(self.violations)


MEMBER_UNITS = ("leaf", "new")  # units a record belongs to for good (aggregates pool parts)


def audit_releases(store: Store, max_itemsets: int = DEFAULT_MAX_ITEMSETS) -> ReleaseAuditReport:
    """Check every pair of consecutive releases against the release invariant
    (docs/releases.md), every residual for k^m, the remaining public files against the log,
    each remaining version's signature against its manifest, each version's term index against
    its chunks, and run the joint-view attacker on the small clusters of all releases
    together."""
    current = store.read("public", fmt.POINTER).decode().strip() \
        if store.exists("public", fmt.POINTER) else None
    log = releases.read_log(store, current)
    if any(e["kind"] == "derived" for e in log):
        raise StoreError(f"{store.url} holds a view derived by `cocktail republish`: it has no "
                         "owner's releases to check; audit it with `cocktail audit --chain`")
    report = ReleaseAuditReport(store.url, [
        {"version": e["version"], "kind": e["kind"], "created": e["created"],
         "signature": None} for e in log])  # None: pruned, the log alone speaks for it
    history = _History(report, max_itemsets)
    for entry in log:
        history.add(entry)
    _check_files(store, log, report)
    report.violations += audit_term_indexes(store)
    report.violations += audit_record_segments(store)
    report.violations += audit_references(store)
    history.attack()
    return report


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


class _History:
    def __init__(self, report: ReleaseAuditReport, max_itemsets: int) -> None:
        self.report, self.max_itemsets = report, max_itemsets
        self.previous: dict | None = None
        self.content: dict[str, Counter] = {}                 # chunk -> all its subrecords
        self.members: dict[str, set[str]] = {}                # unit -> its records so far
        self.owner: dict[str, str] = {}                       # record -> its leaf/new unit
        self.views: dict[frozenset, list[tuple[str, int, tuple]]] = {}
        self.retired: set[str] = set()                        # chunks erasures retired

    def flag(self, kind: str, where: str, detail: str) -> None:
        self.report.violations.append(Violation(kind, where, detail))

    def add(self, entry: dict) -> None:
        before, version = self.previous, entry["version"]
        pair = f"{before['version']}→{version}" if before else version
        appended = entry["kind"] == "append"
        continuing = appended or entry["kind"] in releases.ERASURES
        if before:
            self.report.pairs_checked += 1
            self._check_pair(before, entry, pair)
        if not continuing:  # a fresh partition: cluster ids start again
            if before:
                self.flag("release-invariant", pair, f"{version} re-partitioned records the "
                          f"public cloud had seen ({entry['kind']}, {entry['created']})")
            self.members, self.owner = {}, {}
        old_members = {u: set(ms) for u, ms in self.members.items()}
        self._check_members(entry, pair, continuing)
        for chunk_id, chunk in entry["chunks"].items():
            added = releases.decode_multiset(chunk["added"])
            self._check_residual(added, entry, f"{pair} cluster {chunk['unit']} chunk {chunk_id}")
            continuing = before is not None and chunk_id in before["chunks"]
            self.content[chunk_id] = (self.content[chunk_id] if continuing else Counter()) + added
        for unit, info in entry["units"].items():
            chunks = {c: self.content[c] for c, ch in entry["chunks"].items()
                      if str(ch["unit"]) == unit}
            if not chunks:
                continue
            self._view(self.members[unit], version, info["public_records"], chunks, entry)
            if appended and unit in before["units"] and unit in old_members:
                old = {c: self.content[c] - releases.decode_multiset(entry["chunks"][c]["added"])
                       for c in chunks if c in before["chunks"]}
                self._view(old_members[unit], version + " (old records)",
                           before["units"][unit]["public_records"], old, entry)
        self.previous = entry

    def _check_pair(self, before: dict, entry: dict, pair: str) -> None:
        retiring = set(entry.get("retired", ())) if entry["kind"] in releases.ERASURES else set()
        for chunk_id in entry["chunks"].keys() & self.retired:
            self.flag("release-invariant", f"{pair} chunk {chunk_id}", "a chunk an erasure "
                      "retired is public again")
        self.retired |= retiring
        for chunk_id, old in before["chunks"].items():
            where = f"{pair} cluster {old['unit']} chunk {chunk_id}"
            new = entry["chunks"].get(chunk_id)
            if new is None and chunk_id in retiring:
                continue  # an erasure retired its whole cluster: no line of it changed
            if new is None:
                self.flag("release-invariant", where, "a public chunk of the earlier release is "
                          "missing from the later one")
            elif new["terms"] != old["terms"] or new["unit"] != old["unit"]:
                self.flag("release-invariant", where, "the chunk's term set or cluster changed")
            elif new["carried_sha256"] != old["sha256"]:
                self.flag("release-invariant", where, "its subrecords over old records changed")

    def _check_members(self, entry: dict, pair: str, later: bool) -> None:
        for unit, info in entry["units"].items():
            added = set(info["added_members"])
            if later and info["kind"] in MEMBER_UNITS:
                moved = [m for m in added if m in self.owner and self.owner[m] != unit]
                again = [m for m in added if self.owner.get(m) == unit]
                if moved or again:
                    self.flag("release-invariant", f"{pair} cluster {unit}",
                              f"{len(moved) + len(again)} record(s) of earlier releases "
                              f"{'moved into' if moved else 'added again to'} this cluster")
            if info["kind"] in MEMBER_UNITS:
                self.owner.update({m: unit for m in added if m not in self.owner})
            self.members.setdefault(unit, set()).update(added)

    def _check_residual(self, added: Counter, entry: dict, where: str) -> None:
        if not added:
            return
        self.report.residuals_checked += 1
        subrecords = [list(terms) for terms, n in added.items() for _ in range(n)]
        result = km_violations(subrecords, entry["k"], entry["m"], self.max_itemsets)
        if result is None:
            self.flag("unverifiable", where, "the residual is too large to enumerate")
        elif result[1]:
            shown = ", ".join(f"{{{', '.join(i)}}}={s}" for i, s in result[1][:EXAMPLES])
            self.flag("km-anonymity", where, f"the subrecords this release added are not "
                      f"{entry['k']}^{entry['m']}-anonymous on their own: {shown}")

    def _view(self, members: set[str], label: str, records: int, chunks: dict[str, Counter],
              entry: dict) -> None:
        view = tuple(sorted(
            (ChunkView(frozenset(entry["chunks"][c]["terms"]),
                       Counter({frozenset(t): n for t, n in content.items()}))
             for c, content in chunks.items() if content),
            key=lambda v: sorted(v.terms)))
        self.views.setdefault(frozenset(members), []).append(
            (label, records, view, entry["k"], entry["m"]))

    def attack(self) -> None:
        for members, seen in self.views.items():
            distinct = {}
            for label, records, view, k, m in seen:
                key = tuple((v.terms, frozenset(v.subrecords.items())) for v in view)
                distinct.setdefault(key, (label, records, view, k, m))
            if len(distinct) < 2:
                continue
            labels = [d[0] for d in distinct.values()]
            counts = {d[1] for d in distinct.values()}
            k, m = max(d[3] for d in distinct.values()), max(d[4] for d in distinct.values())
            try:
                found = attack([d[2] for d in distinct.values()], max(counts), k, m,
                               allow_empty=len(counts) > 1)
            except TooLarge:
                self.report.clusters_too_large += 1
                continue
            self.report.clusters_attacked += 1
            for itemset, support in sorted(found.composition.items()):
                self.report.pinned.append({"releases": labels, "records": len(members),
                                           "itemset": list(itemset), "support": support})
                self.flag("composition", f"releases {', '.join(labels)}",
                          f"together they pin supp{{{', '.join(itemset)}}} = {support} < k={k} "
                          f"in a cluster of {len(members)} records")


def _check_files(store: Store, log: list[dict], report: ReleaseAuditReport) -> None:
    """The public files that remain must be what the log says each release held, and each
    remaining version's signature must cover that version's manifest."""
    zone = store.zone("public")
    for entry, shown in zip(log, report.releases):
        where = fmt.manifest_path(entry["version"])
        if not zone.exists(where):
            continue  # pruned: the log alone speaks for it
        raw = zone.read(where)
        shown["signature"] = _signature(zone, entry["version"], raw, None,
                                        report.violations).status
        homes = {c["id"]: c.get("home", entry["version"])
                 for c in fmt.decode_json(raw, where)["chunks"]}
        for chunk_id, chunk in entry["chunks"].items():
            path = fmt.chunk_path(homes.get(chunk_id, entry["version"]), chunk_id)
            report.files_checked += 1
            if not zone.exists(path):
                report.violations.append(Violation("integrity", path, "the release log lists "
                                                   "it, the public zone lacks it"))
            elif hashlib.sha256(zone.read(path)).hexdigest() != chunk["sha256"]:
                report.violations.append(Violation("integrity", path, "differs from what the "
                                                   "release log says was published"))


def audit_term_indexes(store: Store) -> list[Violation]:
    """Owner check: each committed version's term index is what its chunks and private maps
    resolve to (a wrong index gives wrong exact answers, and the DP layer's noise would hide
    it).  Each part its manifest lists: at home in this version or an earlier one, its files
    there and matching their sha256s, its positions inside its range, its order a numbering of
    its range; the parts tiling the version's records; ``terms/parts.json`` the manifest's list.
    A part several versions share is read once."""
    found: list[Violation] = []
    checked: dict[IndexPart, tuple[list[Violation], dict[str, BitMap] | None]] = {}
    for version in releases.committed_versions(store):
        publication = Publication(store, version)
        listed = publication.manifest.get("term_index")
        manifest = f"private/{fmt.manifest_path(version)}"
        if not listed:
            for path in (f"{version}/{fmt.TERM_PARTS}", fmt.term_index_path(version)):
                if store.exists("private", path):
                    found.append(Violation("integrity", f"private/{path}", "a term index the "
                                           "private manifest does not list"))
            continue
        try:
            layout = layout_from_manifest(version, listed, manifest)
        except fmt.FormatError as exc:
            found.append(Violation("integrity", manifest, str(exc)))
            continue
        where = f"private/{fmt.term_index_path(version)}" if layout.legacy else \
            f"private/{version}/{fmt.TERM_PARTS}"
        if not layout.legacy:
            _check_parts_list(store, version, listed, where, found)
        sound = True
        problem = layout.gaps()
        if problem:
            found.append(Violation("integrity", manifest, f"term index: {problem}"))
            sound = False
        stored: dict[str, BitMap] = {}
        for part in layout.parts:
            if not isinstance(part.home, str) or not fmt.VERSION_RE.match(part.home) or \
                    part.home > version:
                found.append(Violation("integrity", manifest, f"term index part "
                                       f"{part.start}..{part.stop}: home {part.home!r} is not "
                                       f"{version} or an earlier version"))
                sound = False
                continue
            if part not in checked:
                checked[part] = _check_part(store, part)
            problems, postings = checked[part]
            found += [Violation(v.kind, v.where, f"{v.detail} (in the index of {version})")
                      for v in problems]
            if postings is None:
                sound = False
                continue
            for term, positions in postings.items():
                stored[term] = stored[term] | positions if term in stored else positions
        resolved = publication.resolved_term_records()
        if resolved.repeated:
            found.append(Violation("release-invariant", manifest,
                                   f"{resolved.repeated} (record, term) pair(s) are held by "
                                   "more than one chunk: what one chunking published, another "
                                   "shows again"))
        if sound:
            wrong = sorted(t for t in set(stored) | set(resolved)
                           if stored.get(t) != resolved.get(t))
            if wrong:
                found.append(Violation("integrity", where, f"{len(wrong)} term(s) disagree with "
                                       f"the chunks, e.g. {', '.join(map(repr, wrong[:EXAMPLES]))}"))
        if layout.records != len(publication.record_ids):
            found.append(Violation("integrity", where, f"counts {layout.records} records, the "
                                   f"version holds {len(publication.record_ids)}"))
    return found


def audit_record_segments(store: Store) -> list[Violation]:
    """Owner check: each committed version's segments of record ids tile its positions, each
    holds as many lines as its range, and each keys file holds exactly its segment's keys (a
    wrong one would let an append publish an id twice)."""
    found = []
    for version in releases.committed_versions(store):
        publication = Publication(store, version)
        at = 0
        for segment in publication.record_segments:
            where = f"private/{segment['home']}/{fmt.records_name(segment['start'])}"
            stop = segment.get("stop")
            if segment["start"] != at or not fmt.VERSION_RE.match(segment["home"]) \
                    or segment["home"] > version:
                found.append(Violation("integrity", where, f"a segment of {version} from "
                                       f"{segment['start']} (in {segment['home']}) does not "
                                       f"follow position {at}"))
                break
            try:
                rows = publication.segment_rows(segment)
            except (fmt.FormatError, StoreError) as exc:
                found.append(Violation("integrity", where, str(exc)))
                break
            at = segment["start"] + len(rows)
            if stop is not None and stop != at:
                found.append(Violation("integrity", where, f"{len(rows)} records, the "
                                       f"manifest says {stop - segment['start']}"))
            if "keys" in segment:
                path = f"{segment['keys']}/{fmt.record_keys_name(segment['start'])}"
                keys = np.sort(np.fromiter((releases.member_key(r[0]) for r in rows
                                            if r[0] is not None),  # None: erased
                                           dtype=np.uint64))
                try:
                    stored = fmt.decode_record_keys(store.read("private", path), path)
                except (fmt.FormatError, StoreError) as exc:
                    found.append(Violation("integrity", f"private/{path}", str(exc)))
                    continue
                if not np.array_equal(stored, keys):
                    found.append(Violation("integrity", f"private/{path}", "does not hold "
                                           "exactly the keys of its segment's record ids"))
        counted = publication.head.get("records", {}).get("count")
        if counted is not None and counted != at:
            found.append(Violation("integrity", f"private/{fmt.manifest_path(version)}",
                                   f"counts {counted} records, its segments hold {at}"))
    return found


def audit_references(store: Store) -> list[Violation]:
    """Owner check: every file a committed version's private manifest names by its home (each
    chunk's file and index, each unit's pseudonym map) is there. A prune that deletes a file a
    later version still names leaves that version unreadable in part, which nothing else
    reads until an append or a query needs it (a map of an emptied buffer once dangled so)."""
    found = []
    for version in releases.committed_versions(store):
        publication = Publication(store, version)
        named = [("private", fmt.pseudonym_map_path(publication.map_home(u["id"]), u["id"]))
                 for u in publication.units]
        for chunk in publication.chunks.values():
            zone = "private" if chunk.private else "public"
            named += [(zone, fmt.chunk_path(chunk.home, chunk.id)),
                      (zone, fmt.index_path(chunk.home, chunk.id))]
        found += [Violation("integrity", f"{zone}/{path}", f"{version}'s manifest names it; "
                            "the store lacks it (a dangling reference)")
                  for zone, path in named if not store.exists(zone, path)]
    return found


def _check_parts_list(store: Store, version: str, listed: dict, where: str,
                      found: list[Violation]) -> None:
    """``terms/parts.json`` (what readers that skip the manifest go by) is the manifest's."""
    path = f"{version}/{fmt.TERM_PARTS}"
    if not store.exists("private", path):
        found.append(Violation("integrity", where, "listed in the manifest but missing"))
        return
    try:
        stored = fmt.decode_json(store.read("private", path), where)
    except fmt.FormatError as exc:
        found.append(Violation("integrity", where, str(exc)))
        return
    if stored != listed:
        found.append(Violation("integrity", where, "differs from the private manifest's "
                               "term_index"))


def _check_part(store: Store, part: IndexPart) -> tuple[list[Violation], dict[str, BitMap] | None]:
    """A part's problems, and its bitmaps by record position (None when it cannot be read
    soundly)."""
    found: list[Violation] = []
    label = f"the part over {part.start}..{part.stop} at home in {part.home}"
    if not store.exists("private", part.home):
        return [Violation("integrity", f"private/{part.home}", f"{label}: its home does not "
                          "exist")], None
    if len(part.sha256) != len(part.files):
        found.append(Violation("integrity", f"private/{part.paths()[0]}", f"{label}: the "
                               f"manifest lists {len(part.sha256)} sha256 for {len(part.files)} "
                               "file(s)"))
    files = []
    for number, path in enumerate(part.paths()):
        if not store.exists("private", path):
            found.append(Violation("integrity", f"private/{path}", f"{label}: listed in the "
                                   "manifest but missing"))
            return found, None
        data = store.read("private", path)
        if number >= len(part.sha256) or hashlib.sha256(data).hexdigest() != part.sha256[number]:
            found.append(Violation("integrity", f"private/{path}", "content does not match the "
                                   "private manifest's sha256"))
        try:
            files.append(fmt.decode_term_index(data, f"private/{path}"))
        except fmt.FormatError as exc:
            found.append(Violation("integrity", f"private/{path}", str(exc)))
            return found, None
    try:
        check_files(files, part.start, part.stop, f"private/{part.paths()[0]}")
    except fmt.FormatError as exc:
        found.append(Violation("integrity", f"private/{part.paths()[0]}", str(exc)))
        return found, None
    sound = True
    for path, file in zip(part.paths(), files):
        outside = [t for t, b in file.bitmaps.items() if not _within(b, file.start, file.stop)]
        if outside:
            found.append(Violation("integrity", f"private/{path}", f"{len(outside)} term(s) hold "
                                   f"positions outside the part's {file.start}..{file.stop}"))
            sound = False
    order = _part_order(store, part, found)
    if order is None or not sound:
        return found, None
    postings: dict[str, list[np.ndarray]] = {}
    for file in files:
        for term, data in file.bitmaps.items():
            positions = as_array(BitMap.deserialize(data)) - np.uint32(part.start)
            postings.setdefault(term, []).append(order[positions])
    return found, {term: bitmap_of(np.concatenate(pieces)) for term, pieces in postings.items()}


def _part_order(store: Store, part: IndexPart, found: list[Violation]) -> np.ndarray | None:
    """The part's order, checked against the manifest's sha256 and to number each record of
    its range exactly once (the identity for a part in record order); None if unsound."""
    if part.order is None:
        if part.order_sha256:
            found.append(Violation("integrity", f"private/{part.home}", f"the part over "
                                   f"{part.start}..{part.stop} lists an order's sha256 but no "
                                   "order"))
            return None
        return np.arange(part.start, part.stop, dtype=np.uint32)
    path = part.order_path
    if not store.exists("private", path):
        found.append(Violation("integrity", f"private/{path}", "listed in the manifest but "
                               "missing"))
        return None
    data = store.read("private", path)
    if hashlib.sha256(data).hexdigest() != part.order_sha256:
        found.append(Violation("integrity", f"private/{path}", "content does not match the "
                               "private manifest's sha256"))
    try:
        order = fmt.decode_term_order(data, part.records, f"private/{path}")
    except fmt.FormatError as exc:
        found.append(Violation("integrity", f"private/{path}", str(exc)))
        return None
    if not np.array_equal(np.sort(order), np.arange(part.start, part.stop, dtype=order.dtype)):
        found.append(Violation("integrity", f"private/{path}", f"does not number each of the "
                               f"part's records {part.start}..{part.stop} exactly once"))
        return None
    return order


def _within(serialized: memoryview, start: int, stop: int) -> bool:
    positions = BitMap.deserialize(serialized)
    return not positions or (positions.min() >= start and positions.max() < stop)
