"""The one commit step of every writer: basket publish and append, republish, tables, rankings.

:func:`begin` takes the store's publish lock, sweeps what a crashed writer left and names the
next version; the :class:`Release` it yields collects the version's files.  ``commit`` then
writes them in a random order (from a local spool) and stamps the public ones with one common
time — otherwise creation order, inode numbers, HDFS file and block ids and modification times
would group files by how they were made, for anyone who lists them — renames the staging
folders into place in both zones, writes the release-log entry, and makes the version current by
replacing the pointer: the one atomic step, after everything is durable.  Older versions are
pruned last.
"""

from __future__ import annotations

import hashlib
import secrets
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from typing import BinaryIO

from .. import chunkformat as fmt
from ..store import Store
from .log import write_entry
from .versions import current_version, next_version, prune, sweep


class Release:
    """One version being staged."""

    def __init__(self, store: Store, current: str | None) -> None:
        self.store, self.current = store, current
        self.version = next_version(store)
        self.staging = fmt.STAGING_PREFIX + self.version
        now = datetime.now(timezone.utc).replace(microsecond=0)
        self.created = now.isoformat(timespec="seconds")
        self.mtime = now.timestamp()  # every public file's modification time
        self._spool = tempfile.TemporaryFile(prefix="cocktail-spool-")
        self._files: list[tuple[str, str, int, int]] = []  # zone, path, offset and size in the spool

    def put(self, zone: str, name: str, data: bytes | Iterable[bytes]) -> None:
        """A file of the version: its bytes, or its pieces in order (a large one is never
        held whole)."""
        start = self._spool.tell()
        for piece in (data,) if isinstance(data, bytes) else data:
            self._spool.write(piece)
        self._files.append((zone, f"{self.staging}/{name}", start, self._spool.tell() - start))

    def staged_sha256(self, zone: str, name: str) -> str:
        """The SHA-256 of the bytes a file of the version was given (what a signature must
        cover), read back in pieces: a 10M-record manifest is tens of MB."""
        path = f"{self.staging}/{name}"
        for staged_zone, staged_path, start, size in self._files:
            if (staged_zone, staged_path) == (zone, path):
                digest = hashlib.sha256()
                self._spool.seek(start)
                while size > 0:
                    piece = self._spool.read(min(size, 1 << 20))
                    digest.update(piece)
                    size -= len(piece)
                self._spool.seek(0, 2)  # the next file goes at the end
                return digest.hexdigest()
        raise KeyError(f"{zone}/{path} is not staged")

    def write_private(self, name: str, data: bytes | BinaryIO) -> None:
        """Straight to the store: a private file (its order shows nothing) that may be large."""
        self.store.write("private", f"{self.staging}/{name}", data, pri_label=True)

    def commit(self, entry: dict, keep: int | None) -> None:
        """Write, log ``entry``, make current; keep ``keep`` versions (None: all of them)."""
        self._write_files()
        for zone in ("public", "private"):
            self.store.rename(zone, self.staging, self.version)
        write_entry(self.store, {"format": 1, "version": self.version} | entry)
        self.store.sync()
        self.store.write("public", fmt.POINTER + ".tmp", f"{self.version}\n".encode(),
                         pri_label=False)
        self.store.rename("public", fmt.POINTER + ".tmp", fmt.POINTER)  # the commit point
        self.store.sync()
        if keep is not None:
            prune(self.store, self.version, keep)

    def discard(self) -> None:
        """Drop the spool (what was staged in the store the next writer sweeps)."""
        self._spool.close()

    def _write_files(self) -> None:
        order = list(range(len(self._files)))
        secrets.SystemRandom().shuffle(order)
        shuffled = (self._files[i] for i in order)
        _run(self.store, (partial(self.store.write, zone, path, self._read(start, size),
                                  pri_label=zone == "private")
                          for zone, path, start, size in shuffled))
        self.discard()
        in_path_order = sorted(self._files)  # random ids, no history
        _run(self.store, (partial(self.store.stamp, zone, path, self.mtime)
                          for zone, path, *_ in in_path_order if zone == "public"))

    def _read(self, start: int, size: int) -> bytes:
        self._spool.seek(start)
        return self._spool.read(size)


def _run(store: Store, calls: Iterable[Callable[[], None]]) -> None:
    """Make each call, started in the order given, up to ``store.concurrent_writes`` at once;
    ``calls`` is drawn from here (a file's bytes are read from the spool only when its turn
    comes) and a few ahead, so a large version is never held whole."""
    if store.concurrent_writes == 1:
        for call in calls:
            call()
        return
    with ThreadPoolExecutor(store.concurrent_writes) as pool:
        in_flight: deque[Future] = deque()
        try:
            for call in calls:
                in_flight.append(pool.submit(call))
                if len(in_flight) >= 2 * store.concurrent_writes:
                    in_flight.popleft().result()
            while in_flight:
                in_flight.popleft().result()
        except BaseException:
            for queued in in_flight:  # a failed write stops the rest that have not started
                queued.cancel()
            raise


MAIN_GUARD = ("put the script's work under `if __name__ == \"__main__\":` (Python's "
              "multiprocessing runs the main script again in each worker it starts)")


# multiprocessing.spawn's functions that run the main script again in a worker: a script
# given by path (`python script.py`), or by module (`python -m package.script`)
_RUNS_MAIN = ("_fixup_main_from_path", "_fixup_main_from_name")


class ImportedByWorker(RuntimeError):
    """A release begun by a script that a worker process is importing."""


def refuse_in_worker_import() -> None:
    """A worker that multiprocessing starts (the publish's own partitioning workers are)
    runs the main script again before its first job; a script that releases at its top level,
    without the ``__main__`` guard, would release again in every worker, each refused by the
    lock, and the pool would break with nothing said of why."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name in _RUNS_MAIN and \
                frame.f_globals.get("__name__") == "multiprocessing.spawn":
            raise ImportedByWorker(f"a worker process is importing the main script, and it "
                                   f"writes a release: {MAIN_GUARD}")
        frame = frame.f_back


@contextmanager
def begin(store: Store) -> Iterator[Release]:
    """The next version of ``store``, under its publish lock; nothing is current until
    :meth:`Release.commit`."""
    refuse_in_worker_import()
    with store.publish_lock():
        current = current_version(store)
        sweep(store, current)
        release = Release(store, current)
        try:
            yield release
        finally:
            release.discard()


@dataclass
class Staged:
    """One small release's files and its log entry (a table's, a ranking's)."""

    public: dict[str, bytes] = field(default_factory=dict)
    private: dict[str, bytes] = field(default_factory=dict)
    entry: dict = field(default_factory=dict)


# build(current version or None, new version, creation time) -> the release's files
Builder = Callable[[str | None, str, str], Staged]


def commit_release(store: Store, build: Builder, keep: int) -> str:
    """Build and commit the next version of a small part; returns its name."""
    with begin(store) as release:
        staged = build(release.current, release.version, release.created)
        for zone, files in (("public", staged.public), ("private", staged.private)):
            for name, data in files.items():
                release.put(zone, name, data)
        release.commit(staged.entry, keep)
    return release.version
