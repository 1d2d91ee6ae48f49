"""The small interface every hybrid-cloud backend implements.

A store has two zones: ``private`` (the private cloud) and ``public`` (the public cloud).  Paths
are relative, '/'-separated, inside a zone.  The store itself enforces the one rule no caller may
get wrong: a file labelled private (priLabel true) is never written to the public zone.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import BinaryIO

ZONES = ("private", "public")


class StoreError(RuntimeError):
    """A backend operation failed (missing file, unreachable service, permissions)."""


class StoreUnavailable(StoreError):
    """The backend failed: unreachable, out of space, permission denied."""


class PrivacyViolation(StoreError):
    """An attempt to put private data where the public cloud can read it."""


def check_zone(zone: str) -> None:
    if zone not in ZONES:
        raise ValueError(f"unknown zone {zone!r}; zones are {ZONES}")


class Store(ABC):
    url: str
    # Writes a writer may keep in flight at once: more than one where each write is a few
    # network round trips (WebHDFS), so that latency, not bandwidth, is what they share.
    concurrent_writes: int = 1

    @property
    def spec(self) -> str:
        """What opens this store from another process in another directory (a job's task)."""
        return self.url

    def write(self, zone: str, path: str, data: bytes | BinaryIO, *, pri_label: bool) -> None:
        """Write a file, from bytes or from a binary file read from its start (a file the
        writer spooled rather than held); private files (``pri_label``) are refused in the
        public zone."""
        check_zone(zone)
        if pri_label and zone == "public":
            raise PrivacyViolation(f"refusing to write private file {path!r} to the public zone")
        self._write(zone, path, data, pri_label)

    @abstractmethod
    def _write(self, zone: str, path: str, data: bytes | BinaryIO, pri_label: bool) -> None: ...

    @abstractmethod
    def read(self, zone: str, path: str) -> bytes: ...

    @abstractmethod
    def exists(self, zone: str, path: str) -> bool: ...

    @abstractmethod
    def list(self, zone: str, path: str = "") -> list[str]:
        """Names directly under a directory, sorted; empty if it does not exist."""

    @abstractmethod
    def walk(self, zone: str, path: str) -> Iterator[str]:
        """Every file under a directory, as paths relative to the zone."""

    @abstractmethod
    def rename(self, zone: str, src: str, dst: str) -> None:
        """Atomic rename; replaces an existing file at ``dst`` (not a directory)."""

    @abstractmethod
    def remove(self, zone: str, path: str) -> None:
        """Remove a file or a whole directory; no error if absent."""

    @abstractmethod
    def stamp(self, zone: str, path: str, mtime: float) -> None:
        """Set a file's modification time (seconds since the epoch)."""

    @abstractmethod
    def location(self, zone: str, path: str) -> str:
        """Where a job runner can read the file: a local path or a filesystem URI."""

    @abstractmethod
    def publish_lock(self) -> AbstractContextManager[None]:
        """Held while a publication is written, so two publishers never interleave."""

    @abstractmethod
    def sync(self) -> None:
        """Make everything written so far durable before the commit point."""

    def zone(self, name: str) -> ZoneReader:
        return ZoneReader(self, name)

    # Metadata some backends keep; None where a backend has no such thing.

    private_racks: str | None = None  # rack prefix of the private datanodes

    def pri_label(self, zone: str, path: str) -> str | None:
        """The file's own priLabel attribute (HDFS xattr), beside the manifests' labels."""
        return None

    def replicas(self, zone: str) -> Iterator[tuple[str, list[list[str]]]] | None:
        """(path, each block's replica rack paths) for every file of the zone."""
        return None


class ZoneReader:
    """Read-only view of one zone: what the auditor gets, so it cannot look elsewhere."""

    def __init__(self, store: Store, zone: str) -> None:
        check_zone(zone)
        self._store, self.name, self.url = store, zone, f"{store.url} ({zone})"

    def read(self, path: str) -> bytes:
        return self._store.read(self.name, path)

    def exists(self, path: str) -> bool:
        return self._store.exists(self.name, path)

    def list(self, path: str = "") -> list[str]:
        return self._store.list(self.name, path)

    def walk(self, path: str) -> Iterator[str]:
        return self._store.walk(self.name, path)

    def pri_label(self, path: str) -> str | None:
        return self._store.pri_label(self.name, path)


class Prefixed(Store):
    """A store inside another one, under ``prefix/`` in both zones: a table's releases keep
    their own CURRENT pointer and versions beside the set-valued publication's."""

    def __init__(self, store: Store, prefix: str) -> None:
        self.inner, self.prefix = store, prefix.strip("/")
        self.url = f"{store.url}#{self.prefix}"
        self.private_racks = store.private_racks
        self.concurrent_writes = store.concurrent_writes

    def _in(self, path: str) -> str:
        return f"{self.prefix}/{path}" if path else self.prefix

    def _write(self, zone: str, path: str, data: bytes | BinaryIO, pri_label: bool) -> None:
        self.inner.write(zone, self._in(path), data, pri_label=pri_label)

    def read(self, zone: str, path: str) -> bytes:
        return self.inner.read(zone, self._in(path))

    def exists(self, zone: str, path: str) -> bool:
        return self.inner.exists(zone, self._in(path))

    def list(self, zone: str, path: str = "") -> list[str]:
        return self.inner.list(zone, self._in(path))

    def walk(self, zone: str, path: str) -> Iterator[str]:
        cut = len(self.prefix) + 1
        return (found[cut:] for found in self.inner.walk(zone, self._in(path)))

    def rename(self, zone: str, src: str, dst: str) -> None:
        self.inner.rename(zone, self._in(src), self._in(dst))

    def remove(self, zone: str, path: str) -> None:
        self.inner.remove(zone, self._in(path))

    def stamp(self, zone: str, path: str, mtime: float) -> None:
        self.inner.stamp(zone, self._in(path), mtime)

    def location(self, zone: str, path: str) -> str:
        return self.inner.location(zone, self._in(path))

    def publish_lock(self) -> AbstractContextManager[None]:
        return self.inner.publish_lock()

    def sync(self) -> None:
        self.inner.sync()

    def pri_label(self, zone: str, path: str) -> str | None:
        return self.inner.pri_label(zone, self._in(path))
