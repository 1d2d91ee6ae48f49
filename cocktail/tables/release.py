"""Where table releases live (committed by :func:`cocktail.releases.commit_release`).

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

import time
from collections.abc import Callable

from .. import chunkformat as fmt
from .. import releases
from ..releases import current_version
from ..releases.layout import TABLES, named_store
from ..store import Prefixed, Store, StoreError
from .data import Row, Table, decode_csv, encode_csv, number

PUBLIC_TABLE, MANIFEST = TABLES.public_files
TUPLES = "tuples.csv"
STATE = "state.json"


def table_store(store: Store, name: str) -> Prefixed:
    return named_store(store, TABLES, name)


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
