"""Where the owner's ledger lives, and the store's identity, as the store's private zone says.

The ledger is a local SQLite file on the overlay host.  For the embedded local store it sits in
the private zone (``private/ledger.sqlite``); any store can name another path once, with
``cocktail ledger path PATH`` (an owner command), in ``private/ledger.json``.  The location
never comes from whoever runs a command: a caller who could point it elsewhere could make
their own roles and budgets.

The ledger keys stored answers by the store they were computed from (one ledger may serve
several stores), and analysts see that key in ``answer_id``: so a store is named by a random
identity made once and kept in ``private/store-id``, never by its path or its hosts.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from .store import LocalStore, Store, StoreError

LEDGER_CONFIG = "ledger.json"
LEDGER_FILE = "ledger.sqlite"
STORE_ID = "store-id"


def ledger_location(store: Store) -> Path:
    if store.exists("private", LEDGER_CONFIG):
        raw = store.read("private", LEDGER_CONFIG)
        try:
            return Path(json.loads(raw)["path"])
        except (ValueError, KeyError, TypeError):
            raise StoreError(f"{store.url}: private/{LEDGER_CONFIG} names no ledger path; "
                             "set one with `cocktail ledger path PATH`") from None
    if isinstance(store, LocalStore):
        return store.root / "private" / LEDGER_FILE
    raise StoreError(f"{store.url} keeps no ledger location yet: as the owner, run "
                     f"`cocktail ledger path /var/lib/cocktail/ledger.sqlite --store {store.url}` "
                     "once on the overlay host")


def set_ledger_location(store: Store, path: Path) -> Path:
    path = path.expanduser().resolve()
    store.write("private", LEDGER_CONFIG, json.dumps({"path": str(path)}).encode() + b"\n",
                pri_label=True)
    return path


def store_identity(store: Store) -> str:
    if not store.exists("private", STORE_ID):
        store.write("private", STORE_ID, secrets.token_hex(8).encode() + b"\n", pri_label=True)
    return store.read("private", STORE_ID).decode().strip()
