"""Independent checks of a table's (k,e) releases.

* From the public zone alone (what the public cloud holds): the public table has exactly the
  partition, QI and sensitive columns; every partition has at least k distinct values and a
  range of at least e; the manifest agrees with the table.
* Owner checks, from the private zone: each public partition is a permutation of its private
  tuples' values over the same QIs.
* ``releases``: every release in the log is (k,e)-valid and coarsens the one before by the
  laminar rule, and the multi-release differential attacker (:mod:`.attack`) finds no derived
  set with fewer than k values or a range below e.  The paper's pairwise Definition 5 test is
  reported beside it, to show what it misses.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field

from ..store import Store
from ..versions import committed_versions
from . import ke
from .attack import atoms, differential_attack
from .data import decode_csv
from .paper import breach
from .release import (MANIFEST, PUBLIC_TABLE, STATE, read_json, read_log, read_tuples,
                      require_current)


@dataclass
class TableAuditReport:
    store: str
    version: str
    k: int
    e: float
    partitions: int = 0
    tuples: int = 0
    releases: int = 0
    atoms: int = 0
    pairwise_breaches: int = 0       # the paper's Definition 5 test, for comparison
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def audit_table(tstore: Store, whole_history: bool = False) -> TableAuditReport:
    version = require_current(tstore)
    manifest = read_json(tstore, "public", version, MANIFEST)
    report = TableAuditReport(tstore.url, version, manifest["k"], manifest["e"])
    public = _check_public(tstore, version, manifest, report)
    _check_permutation(tstore, version, public, report)
    if whole_history:
        _check_history(tstore, report)
    return report


def _check_public(tstore: Store, version: str, manifest: dict,
                  report: TableAuditReport) -> dict[str, list[list[str]]]:
    header, rows = decode_csv(tstore.read("public", f"{version}/{PUBLIC_TABLE}"))
    expected = ["partition", *manifest["qi"], manifest["sensitive"]]
    if header != expected:
        report.violations.append(f"public table columns {header}, expected {expected}")
        return {}
    partitions: dict[str, list[list[str]]] = defaultdict(list)
    for row in rows:
        partitions[row[0]].append(row)
    k, e = manifest["k"], manifest["e"]
    for name, members in sorted(partitions.items()):
        values = [float(row[-1]) for row in members]
        if not ke.ke_valid(values, k, e):
            report.violations.append(
                f"{version} partition {name}: {len(set(values))} distinct value(s), range "
                f"{ke.error(values):g} (needs k={k}, e={e:g})")
    described = {str(p["id"]): (p["tuples"], p["distinct"]) for p in manifest["partitions"]}
    seen = {name: (len(m), len({float(r[-1]) for r in m})) for name, m in partitions.items()}
    if described != seen:
        report.violations.append(f"{version}: the manifest's partitions disagree with the table")
    report.partitions, report.tuples = len(partitions), len(rows)
    return partitions


def _check_permutation(tstore: Store, version: str, public: dict[str, list[list[str]]],
                       report: TableAuditReport) -> None:
    state = read_json(tstore, "private", version, STATE)
    rows = read_tuples(tstore, version, state).by_id()
    entry = next(e for e in read_log(tstore) if e["version"] == version)
    private = sorted((sorted(Counter(rows[t].qi for t in p).items()),
                      sorted(rows[t].s for t in p)) for p in entry["partitions"])
    shown = sorted((sorted(Counter(tuple(r[1:-1]) for r in m).items()),
                    sorted(float(r[-1]) for r in m)) for m in public.values())
    if private != shown:
        report.violations.append(f"{version}: the public partitions are not permutations of "
                                 f"the private ones")


def _check_history(tstore: Store, report: TableAuditReport) -> None:
    log = read_log(tstore)
    latest = committed_versions(tstore)[-1]
    state = read_json(tstore, "private", latest, STATE)
    values = read_tuples(tstore, latest, state).values()
    history: list[ke.Partitioning] = []
    for entry in log:
        partitions = [frozenset(p) for p in entry["partitions"]]
        k, e = entry["k"], entry["e"]
        for number, members in enumerate(partitions, start=1):
            if not ke.ke_valid((values[t] for t in members), k, e):
                report.violations.append(f"{entry['version']} partition {number} is not "
                                         f"(k={k}, e={e:g})-valid")
        if history:
            report.violations += _laminar_violations(history[-1], partitions, values, k, e,
                                                     entry["version"])
            report.pairwise_breaches += sum(
                breach(old, new, values, k, e) is not None
                for earlier in history for old in earlier for new in partitions)
        history.append(partitions)
    labels = [entry["version"] for entry in log]
    for finding in differential_attack(history, values, report.k, report.e):
        report.violations.append(f"differential attack: {finding.describe(labels)}")
    report.releases, report.atoms = len(log), len(atoms(history))


def _laminar_violations(previous: ke.Partitioning, partitions: ke.Partitioning,
                        values: dict[int, float], k: int, e: float, version: str) -> list[str]:
    found = []
    home = {t: i for i, p in enumerate(partitions) for t in p}
    for old in previous:
        if len({home.get(t) for t in old}) != 1 or home.get(next(iter(old))) is None:
            found.append(f"{version} splits or drops an earlier partition")
    old_tuples = set().union(*previous)
    for number, members in enumerate(partitions, start=1):
        residual = [values[t] for t in members - old_tuples]
        if residual and not ke.ke_valid(residual, k, e):
            found.append(f"{version} partition {number}: its new tuples alone are not "
                         f"(k={k}, e={e:g})-valid, so differencing isolates them")
    return found
