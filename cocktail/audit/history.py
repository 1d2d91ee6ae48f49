"""The whole release history (owner: reads the private release log): every pair of
consecutive releases against the release invariant (docs/releases.md), every residual for
k^m, the remaining public files against the log, and the joint-view attacker on the small
clusters of all releases together."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field

from .. import chunkformat as fmt
from .. import releases
from ..attacks.joint_view import ChunkView, TooLarge, attack
from ..store import Store, StoreError
from .indexes import audit_record_segments, audit_references, audit_term_indexes
from .public import km_violations
from .report import DEFAULT_MAX_ITEMSETS, EXAMPLES, Violation, violations_frame
from .signatures import _signature


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
        later = appended or entry["kind"] in releases.ERASURES
        if before:
            self.report.pairs_checked += 1
            self._check_pair(before, entry, pair)
        if not later:  # a fresh partition: cluster ids start again
            if before:
                self.flag("release-invariant", pair, f"{version} re-partitioned records the "
                          f"public cloud had seen ({entry['kind']}, {entry['created']})")
            self.members, self.owner = {}, {}
        old_members = {u: set(ms) for u, ms in self.members.items()}
        self._check_members(entry, pair, later)
        for chunk_id, chunk in entry["chunks"].items():
            added = releases.decode_multiset(chunk["added"])
            self._check_residual(added, entry, f"{pair} cluster {chunk['unit']} chunk {chunk_id}")
            carried = before is not None and chunk_id in before["chunks"]
            self.content[chunk_id] = (self.content[chunk_id] if carried else Counter()) + added
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
