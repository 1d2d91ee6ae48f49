"""Independent checks of a ranking's versions.

* From the public zone alone: each version shows exactly ``public.csv`` and ``manifest.json``;
  the table's columns are ``id`` and the manifest's public columns, one row per tuple, ids
  distinct; nothing else sits beside the versions.
* Owner check, from the private zone: no private column is shown, and the public table is
  exactly the id and public values of the tuples the owner ranked (nothing else leaked in).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import chunkformat as fmt
from ..releases import committed_versions, current_version
from ..releases.layout import RANKS, publication_entry
from ..store import Store, StoreError
from ..tables.audit import Findings
from ..tables.data import decode_csv, encode_csv

PUBLIC_CSV, MANIFEST = RANKS.public_files
STATE = "state.json"


@dataclass
class RankingAuditReport(Findings):
    store: str
    version: str | None
    defense: str | None = None
    tuples: int = 0
    versions: int = 0
    violations: list[str] = field(default_factory=list)


def audit_ranking(rstore: Store) -> RankingAuditReport:
    report = RankingAuditReport(rstore.url, current_version(rstore))
    if report.version is None:
        raise StoreError(f"{rstore.url}: no ranking to audit (no {fmt.POINTER} pointer)")
    report.violations += [f"{name}: unexpected file in the public zone"
                          for name in rstore.list("public") if not publication_entry(name)]
    for version in committed_versions(rstore):
        report.versions += 1
        _check_version(rstore, version, report)
    return report


def _check_version(rstore: Store, version: str, report: RankingAuditReport) -> None:
    shown = rstore.list("public", version)
    if sorted(shown) != sorted(RANKS.public_files):
        report.violations.append(f"{version}: the public zone holds {shown}, expected "
                                 f"{list(RANKS.public_files)}")
        return
    manifest = fmt.decode_json(rstore.read("public", f"{version}/{MANIFEST}"), MANIFEST)
    data = rstore.read("public", f"{version}/{PUBLIC_CSV}")
    header, rows = decode_csv(data)
    if header != ["id", *manifest["public"]]:
        report.violations.append(f"{version}: public columns {header}, expected "
                                 f"{['id', *manifest['public']]}")
    if len(rows) != manifest["tuples"] or len({r[0] for r in rows}) != len(rows):
        report.violations.append(f"{version}: {len(rows)} rows with "
                                 f"{len({r[0] for r in rows})} distinct ids for "
                                 f"{manifest['tuples']} tuples")
    state = fmt.decode_json(rstore.read("private", f"{version}/{STATE}"), STATE)
    private = set(state["schema"]["private"]) & set(header)
    if private:
        report.violations.append(f"{version}: private column(s) {sorted(private)} shown")
    owner = sorted([rid, *public] for rid, public, _ in state["tuples"])
    if data != encode_csv(["id", *manifest["public"]], owner):
        report.violations.append(f"{version}: {PUBLIC_CSV} is not the ranked tuples' ids and "
                                 "public values")
    if version == report.version:
        report.defense, report.tuples = manifest["defense"], len(rows)
