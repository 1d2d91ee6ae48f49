"""One version of the public zone, from the public zone alone: every chunk k^m-anonymous
(counted directly, itemset by itemset), no pseudonym in two chunks, nothing private there
(every file a listed public chunk, its index, a manifest or its signature; every chunk
labelled public), the files matching their checksums and each index its chunk."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from itertools import combinations
from math import comb

from .. import chunkformat as fmt
from ..releases.layout import top_level_entry
from ..store import Store, StoreError, ZoneReader
from .placement import check_placement
from .report import DEFAULT_MAX_ITEMSETS, EXAMPLES, AuditReport, Violation
from .signatures import _signature


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
