"""Releases of one independent publisher with a categorical sensitive attribute: ρ-cloned
(:mod:`.rho`), or ℓ-diverse by Mondrian (:mod:`.mondrian`, the baseline the composition
attack defeats).

Both are kept as *groups* — a set of tuples and the sensitive multiset published for it — in
the release log, which is what the composition attack (:mod:`cocktail.attacks.composition`)
reads.  Public files:

* ρ-clone: ``subgroups.csv`` (class, sub-class, size and the QI micro-statistics) and
  ``sensitive.csv`` (class, value, count): Anatomy-style, no tuple is linked to a value;
* ℓ-diverse: ``table.csv`` (group, generalised QIs, the tuple's own value), rows in content
  order.

Private: ``tuples.csv``, ``state.json`` (with the counterfeits flagged by id and the
suppressed tuples), and ``persons.csv`` when ``--id`` names an individual column.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass

from .. import chunkformat as fmt
from ..releases import RebaseRefused, Staged, commit_release
from ..store import Store
from . import rho
from .data import Table, columns, encode_csv, read_table
from .mondrian import generalize, mondrian
from .release import (MANIFEST, PUBLIC_TABLE, STATE, TUPLES,
                      encode_tuples, timed)

PERSONS = "persons.csv"
MODELS = ("rho-clone", "l-diverse")


@dataclass
class PublisherReport:
    store: str
    version: str
    model: str
    tuples: int           # published, counterfeits included
    groups: int
    counterfeit: int
    suppressed: int
    distorted_share: float  # (counterfeit + suppressed) / input tuples
    rho: float            # measured: max |f_group(s) − f_table(s)|
    seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def numeric_columns(table: Table) -> list[bool]:
    """A QI is numeric when every value of it parses as a number."""
    def parses(text: str) -> bool:
        try:
            float(text)
        except ValueError:
            return False
        return True
    return [all(parses(row.qi[i]) for row in table.rows) for i in range(len(table.qi))]


def publish_group_model(tstore: Store, path: str, qi: str, sensitive: str, model: str, k: int,
                        l: int | None, person: str | None, keep: int) -> PublisherReport:
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}")
    elapsed = timed()
    table = read_table(path, columns(qi), sensitive, numeric=False, person=person)
    numeric = numeric_columns(table)
    if model == "rho-clone":
        made = _cloned(table, numeric, k)
    else:
        if l is None or l < 1:
            raise ValueError("--model l-diverse needs --l (at least 1)")
        made = _diverse(table, numeric, l)
    groups, public, extra = made

    def build(current: str | None, version: str, created: str) -> Staged:
        if current is not None:
            raise RebaseRefused(f"{tstore.url} already has release {current}: an independent "
                                f"publisher releases once per store")
        manifest = {"format": 1, "version": version, "created": created, "model": model,
                    "qi": list(table.qi), "sensitive": table.sensitive, **extra["public"]}
        private = {TUPLES: encode_tuples(table),
                   STATE: fmt.encode_json({"model": model, "qi": list(table.qi),
                                           "sensitive": table.sensitive, "numeric": False,
                                           "numeric_qi": numeric, **extra["private"]})}
        if table.persons:
            private[PERSONS] = encode_csv(["id", "person"], sorted(table.persons.items()))
        return Staged(public={**public, MANIFEST: fmt.encode_json(manifest)}, private=private,
                      entry={"created": created, "kind": "fresh", "model": model,
                             "groups": [{"members": sorted(members),
                                         "sensitive": dict(sorted(values.items()))}
                                        for members, values in groups]})

    version = commit_release(tstore, build, keep)
    stats = extra["public"]
    return PublisherReport(
        store=tstore.url, version=version, model=model,
        tuples=sum(len(m) for m, _ in groups), groups=len(groups),
        counterfeit=stats.get("counterfeit", 0), suppressed=stats.get("suppressed", 0),
        distorted_share=round((stats.get("counterfeit", 0) + stats.get("suppressed", 0))
                              / len(table.rows), 6),
        rho=stats["rho"], seconds=elapsed())


def _cloned(table: Table, numeric: list[bool], k: int) -> tuple[list, dict, dict]:
    made = rho.clone(table.rows, numeric, k)
    qi = made.qi
    values = {row.id: row.s for row in table.rows} | made.counterfeit
    order = sorted(range(len(made.classes)), key=lambda c: _class_key(made, c, qi, numeric))
    header = ["class", "subclass", "size"]
    for name, is_numeric in zip(table.qi, numeric):
        header += [f"{name}_avg", f"{name}_low", f"{name}_high"] if is_numeric \
            else [f"{name}_distinct"]
    sub_rows, sensitive_rows, groups = [], [], []
    for number, c in enumerate(order, start=1):
        held = Counter(values[t] for t in made.classes[c])
        groups.append((made.classes[c], held))
        sensitive_rows += [(number, value, count) for value, count in sorted(held.items())]
        for s, members in enumerate(made.subclasses[c], start=1):
            stats = rho.micro_statistics(members, qi, numeric, beta=1)
            sub_rows.append((number, s, len(members), *[v for stat in stats for v in stat]))
    extra = {"public": {"k": k, "rho": round(made.rho, 6), "classes": len(groups),
                        "counterfeit": len(made.counterfeit),
                        "suppressed": len(made.suppressed), "b": made.plan.b},
             "private": {"counterfeit": {str(t): v for t, v in made.counterfeit.items()},
                         "suppressed": made.suppressed}}
    return groups, {"subgroups.csv": encode_csv(header, sub_rows),
                    "sensitive.csv": encode_csv(["class", "value", "count"], sensitive_rows)}, \
        extra


def _class_key(made: rho.Cloned, c: int, qi: dict, numeric: list[bool]) -> tuple:
    """Classes numbered by content (their first sub-class's statistics), not creation."""
    first = made.subclasses[c][0]
    return tuple(rho.micro_statistics(first, qi, numeric, beta=1)), c


def _diverse(table: Table, numeric: list[bool], l: int) -> tuple[list, dict, dict]:
    rows = table.by_id()
    classes = mondrian(table.rows, numeric, l)
    described = sorted((generalize([rows[t] for t in members], numeric), sorted(members))
                       for members in classes)
    public_rows, groups = [], []
    for number, (shown, members) in enumerate(described, start=1):
        held = Counter(rows[t].s for t in members)
        groups.append((members, held))
        public_rows += sorted((number, *shown, rows[t].s) for t in members)
    counts = Counter(row.s for row in table.rows)
    extra = {"public": {"l": l, "groups": len(groups),
                        "rho": round(rho.rho([held for _, held in groups], counts), 6)},
             "private": {}}
    return groups, {PUBLIC_TABLE: encode_csv(["group", *table.qi, table.sensitive],
                                             public_rows)}, extra
