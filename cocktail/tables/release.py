"""Where table releases live, and how one is committed.

A table named N keeps its releases under ``tables/N/`` in both zones of a store, with its own
CURRENT pointer and versions (the set-valued publication's rules: staged, renamed into place,
made current by one pointer swap, older versions pruned) and its own release log
(``tables/N/releases/<version>.json`` in the private zone, kept for good: the multi-release
audit needs every release ever shown).

Public zone, per version: ``table.csv`` (partition, QI columns, sensitive column) and
``manifest.json``.  Private zone: ``tuples.csv`` (every tuple received so far, with its id,
the buffered ones included) and ``state.json`` (the model's parameters and what waits).
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from .. import chunkformat as fmt
from .. import releases
from ..store import Prefixed, Store, StoreError
from ..versions import commit, current_version, next_version, prune, sweep
from .data import Row, Table, decode_csv, encode_csv, number

TABLES = "tables"
PUBLIC_TABLE = "table.csv"
MANIFEST = "manifest.json"
TUPLES = "tuples.csv"
STATE = "state.json"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def named_store(store: Store, area: str, kind: str, name: str) -> Prefixed:
    """The part of ``store`` that holds the ``kind`` (table, ranking) called ``name``."""
    if not NAME_RE.match(name):
        raise ValueError(f"{kind} name {name!r}: use letters, digits, '_', '.' or '-'")
    return Prefixed(store, f"{area}/{name}")


def table_store(store: Store, name: str) -> Prefixed:
    return named_store(store, TABLES, "table", name)


@dataclass
class Staged:
    """One release's files and its log entry, as a model built them."""

    public: dict[str, bytes] = field(default_factory=dict)
    private: dict[str, bytes] = field(default_factory=dict)
    entry: dict = field(default_factory=dict)


# build(current version or None, new version, creation time) -> the release's files
Builder = Callable[[str | None, str, str], Staged]


def commit_release(tstore: Store, build: Builder, keep: int) -> str:
    """Build and commit the next version under the store's publish lock; returns its name.
    Files go out in a random order and the public ones share one modification time, so a
    listing shows nothing of how they were made."""
    with tstore.publish_lock():
        current = current_version(tstore)
        sweep(tstore, current)
        version = next_version(tstore)
        now = datetime.now(timezone.utc).replace(microsecond=0)
        staged = build(current, version, now.isoformat(timespec="seconds"))
        staging = fmt.STAGING_PREFIX + version
        files = [("public", name, data) for name, data in staged.public.items()] + \
                [("private", name, data) for name, data in staged.private.items()]
        secrets.SystemRandom().shuffle(files)
        for zone, name, data in files:
            tstore.write(zone, f"{staging}/{name}", data, pri_label=zone == "private")
            if zone == "public":
                tstore.stamp(zone, f"{staging}/{name}", now.timestamp())
        entry = {"format": 1, "version": version, **staged.entry}
        commit(tstore, staging, version, lambda: tstore.write(
            "private", releases.entry_path(version), fmt.encode_json(entry, compact=True),
            pri_label=True))
        prune(tstore, version, keep)
    return version


def require_current(tstore: Store) -> str:
    current = current_version(tstore)
    if current is None:
        raise StoreError(f"{tstore.url}: no table release yet (run `cocktail table publish`)")
    return current


def read_json(tstore: Store, zone: str, version: str, name: str) -> dict:
    return fmt.decode_json(tstore.read(zone, f"{version}/{name}"), f"{version}/{name}")


def read_log(tstore: Store) -> list[dict]:
    """Every release the table ever had, oldest first."""
    return releases.read_log(tstore)


def log_entry(tstore: Store, version: str) -> dict:
    entries = [e for e in releases.read_log(tstore, up_to=version) if e["version"] == version]
    if not entries:
        raise StoreError(f"{tstore.url}: the release log has no entry for {version}")
    return entries[0]


def encode_tuples(table: Table) -> bytes:
    return encode_csv(["id", *table.qi, table.sensitive],
                      ([row.id, *row.qi, row.s if isinstance(row.s, str) else number(row.s)]
                       for row in table.rows))


def read_tuples(tstore: Store, version: str, state: dict) -> Table:
    """Every tuple the owner has given so far, from the private zone."""
    header, rows = decode_csv(tstore.read("private", f"{version}/{TUPLES}"))
    width = len(state["qi"])
    value = float if state.get("numeric", True) else str
    return Table(tuple(state["qi"]), state["sensitive"],
                 [Row(int(r[0]), tuple(r[1:1 + width]), value(r[1 + width])) for r in rows])


def timed() -> Callable[[], float]:
    started = time.perf_counter()
    return lambda: round(time.perf_counter() - started, 3)
