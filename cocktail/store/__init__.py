"""Hybrid-cloud storage backends, chosen by the ``--store`` value."""

from __future__ import annotations

from .base import ZONES, PrivacyViolation, Store, StoreError, ZoneReader
from .local import LocalStore


def open_store(spec: str) -> Store:
    """``path`` or ``local:path`` opens the embedded local store."""
    if spec.startswith("local:"):
        spec = spec[len("local:"):]
    if "://" in spec:
        raise StoreError(f"unsupported store {spec!r}: only local directories are available so far")
    return LocalStore(spec)


__all__ = ["ZONES", "LocalStore", "PrivacyViolation", "Store", "StoreError", "ZoneReader",
           "open_store"]
