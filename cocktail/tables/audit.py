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

from ..releases import committed_versions
from ..store import Store
from . import ke
from .attack import atoms, differential_attack
from .data import decode_csv
from .paper import breach
from .rho import rho
from .release import (MANIFEST, PUBLIC_TABLE, STATE, log_entry, read_json, read_log, read_tuples,
                      require_current)


class Findings:
    """A part's audit: it passes when nothing was found."""

    violations: list[str]

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


@dataclass
class TableAuditReport(Findings):
    store: str
    version: str
    k: int | None
    e: float | None = None
    model: str = "ke"
    l: int | None = None
    rho: float | None = None  # ρ-clone: recomputed from the public classes
    partitions: int = 0
    tuples: int = 0
    releases: int = 0
    atoms: int = 0
    pairwise_breaches: int = 0       # the paper's Definition 5 test, for comparison
    violations: list[str] = field(default_factory=list)


def audit_table(tstore: Store, whole_history: bool = False) -> TableAuditReport:
    version = require_current(tstore)
    manifest = read_json(tstore, "public", version, MANIFEST)
    if manifest["model"] != "ke":
        if whole_history:
            raise ValueError(f"--releases is for ke tables; a {manifest['model']} store holds "
                             f"one release")
        return _audit_groups(tstore, version, manifest)
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
    entry = log_entry(tstore, version)
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


def _audit_groups(tstore: Store, version: str, manifest: dict) -> TableAuditReport:
    """A ρ-cloned or ℓ-diverse release: only the expected public files; ρ-clone: sub-classes
    of at least k, each class's multiset as large as its sub-classes, ρ as reported (from the
    public classes against the private table); ℓ-diverse: ℓ distinct values per group."""
    model = manifest["model"]
    report = TableAuditReport(tstore.url, version, manifest.get("k"), model=model,
                              l=manifest.get("l"))
    expected = {MANIFEST, *(("subgroups.csv", "sensitive.csv") if model == "rho-clone"
                            else (PUBLIC_TABLE,))}
    for extra in sorted(set(tstore.list("public", version)) - expected):
        report.violations.append(f"{version}/{extra}: unexpected file in the public zone")
    if model == "rho-clone":
        _check_cloned(tstore, version, manifest, report)
    else:
        header, rows = decode_csv(tstore.read("public", f"{version}/{PUBLIC_TABLE}"))
        if header != ["group", *manifest["qi"], manifest["sensitive"]]:
            report.violations.append(f"public table columns {header}")
        groups: dict[str, set[str]] = defaultdict(set)
        for row in rows:
            groups[row[0]].add(row[-1])
        for name, values in sorted(groups.items()):
            if len(values) < report.l:
                report.violations.append(f"{version} group {name}: {len(values)} distinct "
                                         f"value(s), needs l={report.l}")
        report.partitions, report.tuples = len(groups), len(rows)
    return report


def _check_cloned(tstore: Store, version: str, manifest: dict,
                  report: TableAuditReport) -> None:
    _, subs = decode_csv(tstore.read("public", f"{version}/subgroups.csv"))
    _, held = decode_csv(tstore.read("public", f"{version}/sensitive.csv"))
    classes: dict[str, Counter] = defaultdict(Counter)
    for name, value, count in held:
        classes[name][value] += int(count)
    sizes: Counter = Counter()
    for row in subs:
        sizes[row[0]] += int(row[2])
        if int(row[2]) < report.k:
            report.violations.append(f"{version} class {row[0]} sub-class {row[1]}: "
                                     f"{row[2]} tuples, needs k={report.k}")
    for name, values in sorted(classes.items()):
        if sizes[name] != sum(values.values()):
            report.violations.append(f"{version} class {name}: its sub-classes hold "
                                     f"{sizes[name]} tuples, its values {sum(values.values())}")
    state = read_json(tstore, "private", version, STATE)
    counts = Counter(str(row.s) for row in read_tuples(tstore, version, state).rows)
    report.rho = round(rho(list(classes.values()), counts), 6)
    if abs(report.rho - manifest["rho"]) > 1e-6:
        report.violations.append(f"{version}: ρ is {report.rho}, the manifest says "
                                 f"{manifest['rho']}")
    if len(state["counterfeit"]) != manifest["counterfeit"]:
        report.violations.append(f"{version}: {len(state['counterfeit'])} counterfeits "
                                 f"flagged privately, the manifest says "
                                 f"{manifest['counterfeit']}")
    report.partitions, report.tuples = len(classes), sum(sizes.values())
