"""The composition attack (Ganta, Kasiviswanathan and Smith, KDD 2008) across independent
releases of overlapping people.

An adversary knows that a victim is in two or more releases and which group holds them in each
(the strongest adversary: with generalised QIs it usually can tell; ρ-cloned micro-statistics
make it harder, which this tool does not credit).  Each group publishes a multiset of
sensitive values; intersecting the victim's groups' values across releases leaves the
candidates.  One candidate is a *certain disclosure*.  The adversary's guess is the candidate
with the highest smallest frequency among the victim's groups (the paper's "min rule", its
Eq. 3), scored against the truth and against guessing the most common value.

The tool reads the releases' private zones (it is the owners' or an evaluator's measurement,
not something an analyst runs): each group's members, and who each tuple is — the ``--id``
column given at publish, or else the whole row (QIs and value).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from statistics import median

from ..releases import current_version
from ..store import StoreError, open_store
from ..tables.data import decode_csv
from ..tables.release import STATE, log_entry, read_json, read_tuples, require_current, \
    table_store

PERSONS = "persons.csv"


@dataclass
class GroupRelease:
    """One release as the adversary sees it, with the truth the evaluation needs."""

    label: str
    groups: list[Counter]          # published sensitive multisets
    group_of: dict[str, int]       # person -> their group (persons not shown are absent)
    truth: dict[str, str]          # person -> their sensitive value


def is_table_release(spec: str) -> bool:
    """``STORE#TABLE``, or a store without a basket publication."""
    return "#" in spec or current_version(open_store(spec)) is None


def load_table_release(spec: str) -> GroupRelease:
    """``STORE`` or ``STORE#TABLE`` (default table name ``table``), current version."""
    where, _, name = spec.partition("#")
    tstore = table_store(open_store(where), name or "table")
    version = require_current(tstore)
    entry = log_entry(tstore, version)
    if "groups" not in entry:
        raise StoreError(f"{spec}: a {entry.get('model')} release has no sensitive groups to "
                         f"compose (publish with --model rho-clone or l-diverse)")
    state = read_json(tstore, "private", version, STATE)
    table = read_tuples(tstore, version, state)
    rows = table.by_id()
    if tstore.exists("private", f"{version}/{PERSONS}"):
        _, pairs = decode_csv(tstore.read("private", f"{version}/{PERSONS}"))
        person = {int(t): p for t, p in pairs}
    else:
        person = {t: "\x1f".join((*row.qi, str(row.s))) for t, row in rows.items()}
    groups, group_of = [], {}
    for number, group in enumerate(entry["groups"]):
        groups.append(Counter(group["sensitive"]))
        for t in group["members"]:
            if t >= 0:  # counterfeits belong to no one
                group_of.setdefault(person[t], number)
    truth = {person[t]: str(row.s) for t, row in rows.items()}
    return GroupRelease(spec, groups, group_of, truth)


@dataclass
class CompositionReport:
    releases: list[str]
    overlapping: int          # people in two or more of the releases
    attacked: int             # of them, shown in two or more
    certain_disclosures: int  # a single candidate left, and it is the truth
    candidates_min: int | None
    candidates_median: float | None
    attacker_accuracy: float | None   # the min-rule guess
    baseline_accuracy: float | None   # always guessing the most common value

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Victim:
    person: str
    candidates: frozenset[str]
    truth: str
    guess: str | None   # the min-rule guess


def victims(releases: Sequence[GroupRelease]) -> list[Victim]:
    """Everyone shown in two or more of the releases, attacked."""
    shown = Counter(p for release in releases for p in release.group_of)
    found = []
    for person in sorted(p for p, n in shown.items() if n >= 2):
        held = [r.groups[r.group_of[person]] for r in releases if person in r.group_of]
        candidates = frozenset.intersection(*(frozenset(v for v, c in g.items() if c)
                                              for g in held))
        score = {v: min(g[v] / sum(g.values()) for g in held) for v in candidates}
        guess = min(candidates, key=lambda v: (-score[v], v)) if candidates else None
        truth = next(r.truth[person] for r in releases if person in r.truth)
        found.append(Victim(person, candidates, truth, guess))
    return found


def majority(releases: Sequence[GroupRelease]) -> str | None:
    """The most common published value: the guess that needs no victim."""
    overall = Counter()
    for release in releases:
        for group in release.groups:
            overall.update(group)
    return min(overall, key=lambda v: (-overall[v], v)) if overall else None


def composition(releases: Sequence[GroupRelease]) -> CompositionReport:
    if len(releases) < 2:
        raise ValueError("the composition attack needs two releases or more")
    seen = Counter(p for release in releases for p in release.truth)
    attacked = victims(releases)
    common = majority(releases)
    sizes = [len(v.candidates) for v in attacked]
    n = len(attacked)
    return CompositionReport(
        releases=[r.label for r in releases], overlapping=sum(c >= 2 for c in seen.values()),
        attacked=n, certain_disclosures=sum(v.candidates == {v.truth} for v in attacked),
        candidates_min=min(sizes) if sizes else None,
        candidates_median=median(sizes) if sizes else None,
        attacker_accuracy=round(sum(v.guess == v.truth for v in attacked) / n, 6) if n else None,
        baseline_accuracy=round(sum(common == v.truth for v in attacked) / n, 6) if n else None)
