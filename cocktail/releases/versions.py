"""Versions of a publication: the CURRENT pointer, the committed versions, and the clean-up.

A version is written under a staging name, renamed into place, and made current by replacing
the ``CURRENT`` pointer (:mod:`.commit`).  A crash at any point leaves the previous version
current; the next publish sweeps what the crash left behind.

An append's version carries the files it does not change by reference: they stay in the
directory of the version that wrote them, and the manifests name that *home*.  So pruning a
version deletes only what no later version references: its own manifests, and the files that
the next version *superseded* (listed in the next version's ``superseded.json``).  A version
without that list (a first release, a rebase, or one written before references) references
nothing older, so everything before it goes.  A pruned version's directory stays while later
versions reference files in it; it holds no manifest, so it is no longer a committed version.
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
    """The name the next committed version takes (after every directory, pruned ones too)."""
    existing = version_dirs(store, "public") + version_dirs(store, "private")
    return fmt.version_name(max((int(v[1:]) for v in existing), default=0) + 1)


def version_dirs(store: Store, zone: str) -> list[str]:
    """Every version directory of a zone, committed or pruned but still referenced."""
    return sorted(n for n in store.list(zone) if fmt.VERSION_RE.match(n))


def committed_versions(store: Store) -> list[str]:
    """Versions present in both zones with their public manifest (a pruned one has none),
    oldest first (not all of them need be current)."""
    both = set(version_dirs(store, "public")) & set(version_dirs(store, "private"))
    return sorted(v for v in both if store.exists("public", fmt.manifest_path(v)))


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
    """Keep the last ``keep`` committed versions (the current one included), and of older
    ones only the files a kept version still references.  Resumable: a version's public
    manifest goes first (it is no longer a version), its private one last (it is pruned), so
    a prune cut short is finished by the next one."""
    kept = [v for v in committed_versions(store) if v <= current][-keep:]
    names = sorted(set(version_dirs(store, "public")) | set(version_dirs(store, "private")))
    for version, following in zip(names, names[1:]):
        if version >= kept[0]:
            break
        manifest = fmt.manifest_path(version)
        if not (store.exists("public", manifest) or store.exists("private", manifest)):
            continue  # pruned already: it holds what later versions reference
        superseded = f"{following}/{fmt.SUPERSEDED}"
        if not store.exists("private", superseded):  # it references nothing older
            for zone in ("public", "private"):
                for name in version_dirs(store, zone):
                    if name <= version:
                        store.remove(zone, name)
            continue
        store.remove("public", manifest)
        store.remove("public", fmt.signature_path(version))  # it signs a manifest now gone
        listed = fmt.decode_json(store.read("private", superseded), f"private/{superseded}")
        for zone in ("public", "private"):
            for path in listed.get(zone, []):
                home = path.split("/", 1)[0]
                if fmt.VERSION_RE.match(home) and home <= version:  # never a kept one's file
                    store.remove(zone, path)
        store.remove("private", manifest)
    for zone in ("public", "private"):
        for name in version_dirs(store, zone):
            if name < kept[0] and not any(True for _ in store.walk(zone, name)):
                store.remove(zone, name)
