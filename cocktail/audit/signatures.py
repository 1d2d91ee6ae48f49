"""Who vouches for a version: its signature checked against its own manifest's bytes, every
hop of its chain verified (:mod:`cocktail.releases.signing`), from a pinned key when one
is given; an unsigned version is reported as such."""

from __future__ import annotations

import hashlib

from .. import chunkformat as fmt
from ..releases.signing import Provenance, SignatureError, verify
from ..store import ZoneReader
from .report import Violation


def _signature(zone: ZoneReader, version: str, manifest: bytes, trust: str | None,
               violations: list[Violation]) -> Provenance:
    """``version``'s signature checked against its own manifest's bytes: one that does not
    verify (or covers another version's manifest) is a violation and an ``invalid`` status."""
    try:
        return verify(zone, version, manifest, trust)
    except SignatureError as exc:
        violations.append(Violation("signature", fmt.signature_path(version), str(exc)))
        return Provenance("invalid", version, hashlib.sha256(manifest).hexdigest(),
                          detail=str(exc))
