"""Hybrid-cloud storage backends, chosen by the ``--store`` value."""

from __future__ import annotations

from .base import (ZONES, Prefixed, PrivacyViolation, Store, StoreError, StoreUnavailable,
                   ZoneReader)
from .local import LocalStore


def __getattr__(name: str):
    # WebHdfsStore is imported when first used: its HTTP client would slow every command's start
    if name == "WebHdfsStore":
        from .webhdfs import WebHdfsStore
        return WebHdfsStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def not_empty(spec: str) -> str:
    """``spec``, unless it is empty (an unset variable, often), which would make the current
    directory a store: then a :class:`StoreError` (bad usage)."""
    if not spec.removeprefix("local:").strip():
        raise StoreError(f"the store {spec!r} is empty (an unset variable?): give its "
                         "directory (`.` for this one) or its webhdfs:// URL")
    return spec


def open_store(spec: str) -> Store:
    """``path`` or ``local:path`` opens the embedded local store; ``webhdfs://...`` HDFS.
    An empty one is refused (:func:`not_empty`)."""
    not_empty(spec)
    if spec.startswith("webhdfs://"):
        from .webhdfs import WebHdfsStore
        return WebHdfsStore(spec)
    if spec.startswith("local:"):
        spec = spec[len("local:"):]
    if "://" in spec:
        raise StoreError(f"unsupported store {spec!r}: give a directory or a webhdfs:// URL")
    return LocalStore(spec)


__all__ = ["ZONES", "LocalStore", "Prefixed", "PrivacyViolation", "Store", "StoreError",
           "StoreUnavailable", "WebHdfsStore", "ZoneReader", "not_empty", "open_store"]
