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


def open_store(spec: str) -> Store:
    """``path`` or ``local:path`` opens the embedded local store; ``webhdfs://...`` HDFS."""
    if spec.startswith("webhdfs://"):
        from .webhdfs import WebHdfsStore
        return WebHdfsStore(spec)
    if spec.startswith("local:"):
        spec = spec[len("local:"):]
    if "://" in spec:
        raise StoreError(f"unsupported store {spec!r}: give a directory or a webhdfs:// URL")
    return LocalStore(spec)


__all__ = ["ZONES", "LocalStore", "Prefixed", "PrivacyViolation", "Store", "StoreError",
           "StoreUnavailable", "WebHdfsStore", "ZoneReader", "open_store"]
