"""A public view read back for deriving from it (`cocktail republish`, the chain audit): the
rows of each chunk checked against the manifest, and, for :func:`verified_view`, only once
the version passes the audit and its signature."""

from __future__ import annotations

import hashlib

from .. import chunkformat as fmt
from ..releases.signing import Provenance
from ..store import Store, StoreError
from .public import audit
from .report import DEFAULT_MAX_ITEMSETS, AuditReport


View = list[tuple[str, frozenset[str], list[tuple[str, list[str]]]]]


class UnverifiedView(StoreError):
    """A view refused as a source: it fails the verifier, its signature, or is unsigned
    (bad input, exit status 2, as an altered view always was)."""


def public_view(store: Store) -> tuple[str, dict, View]:
    """The current public view: version, manifest, and each chunk's id, terms and rows, each
    chunk checked against the manifest's checksum."""
    version, _, manifest, chunks = _read_view(store)
    return version, manifest, chunks


def verified_view(store: Store, trust: str | None = None, allow_unsigned: bool = False,
                  max_itemsets: int = DEFAULT_MAX_ITEMSETS
                  ) -> tuple[str, dict, View, Provenance]:
    """The current public view, only if it is fit to derive from: this verifier passes it at
    its own (k, m) (every chunk k^m-anonymous and what the manifest lists) and its signature
    covers the manifest, from the ``trust`` key's chain when one is pinned, or it is unsigned
    and ``allow_unsigned``.  The rows returned are checked against that very manifest.
    Anything else raises :class:`UnverifiedView`, naming why."""
    report = audit(store, trust=trust, max_itemsets=max_itemsets, placement=False)
    if not report.ok:
        shown = "; ".join(f"{v.kind} {v.where}: {v.detail}" for v in report.violations[:3])
        more = f" (and {len(report.violations) - 3} more)" if len(report.violations) > 3 else ""
        raise UnverifiedView(f"{store.url} {report.version} fails verification, so nothing "
                             f"is derived from it: {shown}{more}")
    if report.provenance.status == "unsigned" and not allow_unsigned:
        raise UnverifiedView(f"{store.url} {report.version} is unsigned: nothing shows who "
                             "made it. Re-share it only if you trust where you got it, with "
                             "--allow-unsigned (the derived view then records an unsigned "
                             "origin)")
    return (*_audited_view(store, report), report.provenance)


def _audited_view(store: Store, report: AuditReport) -> tuple[str, dict, View]:
    """The view of the version ``report`` audited, read again: its manifest must still be the
    bytes the audit verified (and signature covered), and each chunk matches that manifest."""
    version, digest, manifest, chunks = _read_view(store, report.version)
    if digest != report.provenance.manifest_sha256:
        raise UnverifiedView(f"{store.url} {version}: the manifest changed while it was "
                             "verified; run again")
    return version, manifest, chunks


def _read_view(store: Store, version: str | None = None) -> tuple[str, str, dict, View]:
    """Version, the manifest's sha256, the manifest, and each chunk's id, terms and rows,
    each chunk checked against the manifest's checksum."""
    zone = store.zone("public")
    if version is None and zone.exists(fmt.POINTER):
        version = zone.read(fmt.POINTER).decode().strip()
    if version is None:
        raise StoreError(f"{store.url} holds no publication (no {fmt.POINTER} pointer)")
    where = fmt.manifest_path(version)
    raw = zone.read(where)
    manifest = fmt.decode_json(raw, where)
    fmt.check_format(manifest.get("format"), f"public/{where}")
    chunks = []
    for entry in manifest["chunks"]:
        path = fmt.chunk_path(entry.get("home", version), entry["id"])
        data = zone.read(path)
        if hashlib.sha256(data).hexdigest() != entry["sha256"]["chunk"]:
            raise StoreError(f"{store.url}: {path} does not match its manifest's sha256: the "
                             "view was altered since it was published")
        rows = list(fmt.decode_chunk(data, path))
        chunks.append((entry["id"], frozenset(t for _, sub in rows for t in sub), rows))
    return version, hashlib.sha256(raw).hexdigest(), manifest, chunks
