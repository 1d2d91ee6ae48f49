"""A hadoop job's files through the store: mrjob's filesystem for the private zone's scratch.

mrjob's hadoop runner makes its job directory, uploads each job file, lists and reads the
output and removes it all with one ``hadoop fs`` command each: a JVM started a dozen times a
job, 2-3 s apiece on a loaded machine, half a minute before and after the job itself.  The
store already speaks WebHDFS to the same namenode, so here each is one HTTP call; uploads go
through the store's own write, which keeps private bytes off public datanodes and labels them.
Imported only when a job runs (mrjob is the ``hadoop`` extra).
"""

from __future__ import annotations

from collections.abc import Iterator

from mrjob.cat import decompress
from mrjob.fs.base import Filesystem
from mrjob.fs.composite import CompositeFilesystem

from ...store import Store

ZONE = "private"  # job files name matched pseudonyms and query terms: private-cloud data
GLOB = frozenset("*?[{")


class ScratchFilesystem(Filesystem):
    """The URIs under the private zone's root (``store.location("private", "")``).  Only
    those in the job directory ``scratch`` are read, written or removed (its globs are left to
    ``hadoop fs``, which expands them): any other private path, a glob too, is refused here
    rather than handed on to ``hadoop fs``, so no job's bookkeeping can list, overwrite or
    delete the owner's files (its key, a version)."""

    def __init__(self, store: Store, scratch: str) -> None:
        self.store = store
        self.root = store.location(ZONE, "").rstrip("/") + "/"
        self.scratch = scratch.strip("/")

    def can_handle_path(self, path: str) -> bool:
        return path.startswith(self.root) and not (
            GLOB & set(path) and self._inside(self._under_root(path)))

    def _under_root(self, path: str) -> str:
        return path[len(self.root):].strip("/")

    def _inside(self, relative: str) -> bool:
        return relative == self.scratch or relative.startswith(self.scratch + "/")

    def _relative(self, path: str) -> str:
        relative = self._under_root(path)
        if not self._inside(relative):
            raise PermissionError(f"{path}: outside {self.root}{self.scratch}/, where a job's "
                                  "files are kept")
        return relative

    def ls(self, path_glob: str) -> Iterator[str]:
        relative = self._relative(path_glob)
        found = [self.root + name for name in self.store.walk(ZONE, relative)]
        if not found and relative and self.store.exists(ZONE, relative):
            found = [path_glob]  # a file lists as itself
        yield from found

    def _cat_file(self, path: str) -> Iterator[bytes]:
        yield from decompress(iter([self.store.read(ZONE, self._relative(path))]), path)

    def exists(self, path_glob: str) -> bool:
        return self.store.exists(ZONE, self._relative(path_glob))

    def mkdir(self, path: str) -> None:
        """Nothing to do: HDFS makes a file's parent directories when it is created, and mrjob
        makes a directory only to put files in it."""

    def put(self, src: str, path: str) -> None:
        relative = self._relative(path)
        if path.endswith("/"):
            raise ValueError("put() destination may not be a directory")
        with open(src, "rb") as data:
            self.store.write(ZONE, relative, data, pri_label=True)

    def rm(self, path_glob: str) -> None:
        self.store.remove(ZONE, self._relative(path_glob))

    def touchz(self, path: str) -> None:
        relative = self._relative(path)
        if self.store.exists(ZONE, relative) and self.store.read(ZONE, relative):
            raise OSError(f"non-empty file {path!r} already exists")
        self.store.write(ZONE, relative, b"", pri_label=True)


def scratch_first(runner, store: Store, scratch: str) -> None:
    """Route ``runner``'s paths under the private zone through the store (those outside its
    job directory ``scratch`` refused), the rest as before (its own ``hadoop`` and ``local``
    filesystems)."""
    composite = CompositeFilesystem()
    composite.add_fs("scratch", ScratchFilesystem(store, scratch))
    composite.add_fs("hadoop", runner.fs.hadoop)
    composite.add_fs("local", runner.fs.local)
    runner._fs = composite  # mrjob 0.7 keeps a runner's filesystem there and has no setter
