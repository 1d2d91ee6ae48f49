"""(k,e)-anonymous table releases: the first one, and the appends that stay safe with it.

The public table holds every published tuple's QIs unchanged and, per partition, the
partition's S values permuted at random (``secrets``: a guessable permutation would undo the
model); the tuple → partition map and the unpermuted values stay in the private zone.
"""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass

from .. import chunkformat as fmt
from ..releases import RebaseRefused, Staged, commit_release
from ..store import Store
from . import ke
from .data import Table, columns, encode_csv, number, read_table
from .release import (MANIFEST, PUBLIC_TABLE, STATE, TUPLES,
                      encode_tuples, read_json, log_entry, read_tuples, timed)

MODEL = "ke"


@dataclass
class KeReport:
    store: str
    version: str
    kind: str            # fresh | append
    k: int
    e: float
    tuples: int          # published in this release
    appended: int        # tuples the owner gave this time
    buffered: int        # tuples waiting in the private zone
    partitions: int
    sum_of_errors: float
    seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def publish_ke(tstore: Store, path: str, qi: str, sensitive: str, k: int, e: float,
               keep: int) -> KeReport:
    """The first release of a table: the optimal (k,e) partitioning."""
    ke.check_params(k, e)
    elapsed = timed()
    table = read_table(path, columns(qi), sensitive)
    partitions = ke.static_ke(table.values(), k, e)  # Infeasible before anything is written

    def build(current: str | None, version: str, created: str) -> Staged:
        if current is not None:
            raise RebaseRefused(
                f"{tstore.url} already has release {current}: a fresh partitioning would let "
                f"anyone difference the two releases; use --append for new tuples")
        return _staged(table, partitions, frozenset(), k, e, version, created, "fresh",
                       len(table.rows))

    version = commit_release(tstore, build, keep)
    return _report(tstore, version, "fresh", table, partitions, frozenset(), k, e,
                   len(table.rows), elapsed())


def append_ke(tstore: Store, path: str, keep: int) -> KeReport:
    """The next release: the new tuples, and those buffered before, placed by the laminar
    rule against the latest release only."""
    elapsed = timed()
    found: dict = {}

    def build(current: str | None, version: str, created: str) -> Staged:
        if current is None:
            raise ValueError(f"{tstore.url}: nothing to append to (publish the table first)")
        state = read_json(tstore, "private", current, STATE)
        if state["model"] != MODEL:
            raise ValueError(f"{tstore.url}: a {state['model']} table; --append is for ke")
        old = read_tuples(tstore, current, state)
        new = read_table(path, state["qi"], state["sensitive"], first_id=state["next_id"])
        table = Table(old.qi, old.sensitive, old.rows + new.rows)
        previous = [frozenset(p) for p in log_entry(tstore, current)["partitions"]]
        placed = ke.laminar_ke(table.values(), previous, state["k"], state["e"])
        found.update(table=table, placed=placed, k=state["k"], e=state["e"],
                     appended=len(new.rows))
        return _staged(table, placed.partitions, placed.buffered, state["k"], state["e"],
                       version, created, "append", len(new.rows))

    version = commit_release(tstore, build, keep)
    placed = found["placed"]
    return _report(tstore, version, "append", found["table"], placed.partitions,
                   placed.buffered, found["k"], found["e"], found["appended"], elapsed())


def _staged(table: Table, partitions: ke.Partitioning, buffered: frozenset[int], k: int,
            e: float, version: str, created: str, kind: str, appended: int) -> Staged:
    rows = table.by_id()
    shuffle = secrets.SystemRandom().shuffle
    public_rows, described = [], []
    for number_, members in enumerate(partitions, start=1):
        ordered = sorted(members, key=lambda t: rows[t].qi)  # content order, not input order
        values = [rows[t].s for t in ordered]
        shuffle(values)
        public_rows += [(number_, *rows[t].qi, number(v)) for t, v in zip(ordered, values)]
        described.append({"id": number_, "tuples": len(members), "distinct": len(set(values)),
                          "min": number(min(values)), "max": number(max(values))})
    manifest = {"format": 1, "version": version, "created": created, "model": MODEL, "k": k,
                "e": number(float(e)), "qi": list(table.qi), "sensitive": table.sensitive,
                "tuples": len(public_rows), "partitions": described}
    state = {"model": MODEL, "k": k, "e": e, "qi": list(table.qi),
             "sensitive": table.sensitive, "buffered": sorted(buffered),
             "next_id": max(rows) + 1}
    return Staged(
        public={PUBLIC_TABLE: encode_csv(["partition", *table.qi, table.sensitive],
                                         sorted(public_rows)),
                MANIFEST: fmt.encode_json(manifest)},
        private={TUPLES: encode_tuples(table), STATE: fmt.encode_json(state)},
        entry={"created": created, "kind": kind, "model": MODEL, "k": k, "e": e,
               "appended": appended, "buffered": sorted(buffered),
               "partitions": [sorted(p) for p in partitions]})


def _report(tstore: Store, version: str, kind: str, table: Table, partitions: ke.Partitioning,
            buffered: frozenset[int], k: int, e: float, appended: int,
            seconds: float) -> KeReport:
    values = table.values()
    return KeReport(store=tstore.url, version=version, kind=kind, k=k, e=e,
                    tuples=sum(len(p) for p in partitions), appended=appended,
                    buffered=len(buffered), partitions=len(partitions),
                    sum_of_errors=number(float(ke.sum_of_errors(partitions, values))),
                    seconds=seconds)
