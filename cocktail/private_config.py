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

from .releases import current_version, signing
from .releases.layout import parts
from .store import LocalStore, Store, StoreError

LEDGER_CONFIG = "ledger.json"
LEDGER_FILE = "ledger.sqlite"
STORE_ID = "store-id"


class NoPublication(StoreError):
    """An owner command given a store that holds nothing of the owner's yet: most often a
    mistyped ``--store``, which would otherwise become a new, empty store."""


def set_up(store: Store) -> bool:
    """Whether the store holds anything of its owner's: a publication (baskets, a table, a
    ranking), or a ledger or signing key set up before the first one."""
    return (current_version(store) is not None or bool(parts(store))
            or any(store.exists("private", name)
                   for name in (LEDGER_CONFIG, LEDGER_FILE, signing.KEY_FILE)))


def require_set_up(store: Store, create: bool = False, can_create: bool = True,
                   create_hint: str = "--create") -> None:
    """Refuse a store that holds nothing yet, unless ``create`` says making it is meant
    (``create_hint``: how the caller says so)."""
    if not create and not set_up(store):
        raise NoPublication(f"no publication at {store.url}; publish one first"
                            + (f" or pass {create_hint}" if can_create else ""))


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


def open_ledger(store: Store, create: bool = False):
    """The owner's ledger, where the store's private zone says it is (never the caller), of a
    store that holds a publication or a ledger already (else only with ``create``)."""
    from .dp.ledger import Ledger

    require_set_up(store, create)
    return Ledger(ledger_location(store))
