"""What a store may hold: the registry every writer, the auditor and the report read.

A store's zones hold, at the top, the basket publication (``CURRENT``, its versions, staging
folders and, in the private zone, the release log) and one folder per *area* of named parts:
``tables/N/`` (a table's releases) and ``ranks/N/`` (a ranking's versions).  Each named part is
laid out like a publication of its own: its own pointer, versions and release log.

A basket publication is either the owner's (partitioned from the raw records) or *derived*
(a stricter re-share of another store's public view, ``cocktail republish``): its versions hold
``derived.json`` in the private zone and nothing else private.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import chunkformat as fmt
from ..store import Prefixed, Store, StoreError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
DERIVED = "derived.json"


class Refused(StoreError):
    """A write the store refuses: it would mix what must stay apart (exit status 3)."""


@dataclass(frozen=True)
class Area:
    folder: str                     # under both zones
    kind: str                       # what one named part is, for messages
    public_files: tuple[str, ...]   # what one of its versions may show the public cloud


TABLES = Area("tables", "table", ("table.csv", "manifest.json"))
RANKS = Area("ranks", "ranking", ("public.csv", "manifest.json"))
AREAS = (TABLES, RANKS)


def named_store(store: Store, area: Area, name: str) -> Prefixed:
    """The part of ``store`` that holds the table or ranking called ``name``."""
    if not NAME_RE.match(name):
        raise ValueError(f"{area.kind} name {name!r}: use letters, digits, '_', '.' or '-'")
    return Prefixed(store, f"{area.folder}/{name}")


def names(store: Store, area: Area) -> list[str]:
    """The named parts of ``area`` the store holds (the private zone knows them all)."""
    return [n for n in store.list("private", area.folder) if NAME_RE.match(n)]


def parts(store: Store) -> list[tuple[Area, str]]:
    """Every named part of the store, area by area."""
    return [(area, name) for area in AREAS for name in names(store, area)]


def publication_entry(name: str) -> bool:
    """Whether ``name`` may sit at the top of a publication's zone (a store's or a part's)."""
    return name in (fmt.POINTER, fmt.POINTER + ".tmp") or bool(fmt.VERSION_RE.match(name)) \
        or name.startswith(fmt.STAGING_PREFIX)


def top_level_entry(name: str) -> bool:
    """Whether ``name`` may sit at the top of a store's public zone."""
    return publication_entry(name) or name in {a.folder for a in AREAS}


def is_derived(store: Store, version: str) -> bool:
    return store.exists("private", f"{version}/{DERIVED}")
