"""Versions of a publication: the CURRENT pointer, the committed versions, and the clean-up.

A version is written under a staging name, renamed into place, and made current by replacing
the ``CURRENT`` pointer (:mod:`.commit`).  A crash at any point leaves the previous version
current; the next publish sweeps what the crash left behind.
"""

from __future__ import annotations

from .. import chunkformat as fmt
from ..store import Store, StoreError
from .log import sweep_log


def current_version(store: Store) -> str | None:
    if not store.exists("public", fmt.POINTER):
        return None
    name = store.read("public", fmt.POINTER).decode().strip()
    if not fmt.VERSION_RE.match(name):
        raise StoreError(f"{store.url}: {fmt.POINTER} names no version ({name!r})")
    return name


def next_version(store: Store) -> str:
    """The name the next committed version takes."""
    existing = committed_versions(store)
    return fmt.version_name(int(existing[-1][1:]) + 1 if existing else 1)


def committed_versions(store: Store) -> list[str]:
    """Versions present in both zones, oldest first (not all of them need be current)."""
    public = {n for n in store.list("public") if fmt.VERSION_RE.match(n)}
    return sorted(public & {n for n in store.list("private") if fmt.VERSION_RE.match(n)})


def sweep(store: Store, current: str | None) -> None:
    """Remove what an interrupted publish left: staging dirs and versions never made current.

    Without a pointer nothing but staging dirs is removed: a lost pointer must not cost data.
    """
    for zone in ("public", "private"):
        for name in store.list(zone):
            stale_version = current is not None and fmt.VERSION_RE.match(name) and name > current
            if name.startswith(fmt.STAGING_PREFIX) or stale_version:
                store.remove(zone, name)
    if current is not None:
        sweep_log(store, current)


def prune(store: Store, current: str, keep: int) -> None:
    """Remove committed versions beyond the last ``keep``, except the term-index parts that a
    kept version references (their home's private directory keeps them alone, and is no
    longer a committed version); and such leftovers once no kept version references them."""
    committed = committed_versions(store)
    older = [v for v in committed if v < current]
    pruned = older[: max(0, len(older) - (keep - 1))]
    spared = _index_parts(store, [v for v in committed if v not in pruned])
    for version in pruned:
        store.remove("public", version)
        _remove_except(store, version, spared)
    for name in store.list("private"):  # what pruning left of a version: index parts alone
        if fmt.VERSION_RE.match(name) and name < current and name not in committed and \
                all(n == fmt.TERM_PART_DIR or n.startswith(f"{fmt.TERM_PART_DIR}.")
                    for n in store.list("private", name)):
            _remove_except(store, name, spared)


def _index_parts(store: Store, versions: list[str]) -> set[str]:
    """Private paths of the term-index parts ``versions`` reference (``terms/parts.json``)."""
    paths = set()
    for version in versions:
        listing = f"{version}/{fmt.TERM_PARTS}"
        if store.exists("private", listing):
            for part in fmt.decode_json(store.read("private", listing), listing)["parts"]:
                names = [*part["files"], *([part["order"]] if part["order"] else [])]
                paths.update(f"{part['home']}/{name}" for name in names)
    return paths


def _remove_except(store: Store, path: str, spared: set[str]) -> None:
    """Remove ``path`` of the private zone but the ``spared`` files under it."""
    if path in spared:
        return
    if not any(s.startswith(path + "/") for s in spared):
        store.remove("private", path)
        return
    for name in store.list("private", path):
        _remove_except(store, f"{path}/{name}", spared)
