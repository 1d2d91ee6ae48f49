"""The daemon a Spark executor forks its Python workers from (``spark.python.daemon.module``,
set by :func:`cocktail.publish.spark.spark_context`): PySpark's own, started warm.

PySpark's daemon forks bare workers, each of which then imports the engine (0.3 s of CPU),
and a reused worker runs a full garbage collection after every task: over the ~48,000 objects
of the modules it holds, 20 ms of CPU and 35 ms of wall a task once a task's arrays have
churned the caches (a 1M-record publish runs 69 tasks on two workers: 1.4 s of CPU, 2.4 s of
the workers' wall).  This daemon loads the engine once and freezes what it holds
(:func:`gc.freeze`) before it forks: each worker starts with the engine loaded and its
collections skip those objects (0.05 s of CPU for the 69).  What a task leaves is collected
as before.  It also loads PySpark from the installed package when that is the very version
Spark ships beside itself: Spark puts its ``pyspark.zip`` first on the workers' path, and
Python compiles a zipped module's source at every import, as it writes no cache into a zip
(the daemon's imports: 0.9 s of CPU from the zips, 0.3 s from the installed packages).
It stands beside the engine's package, not in it: importing a module of the package runs the
package's ``__init__``, which loads PySpark before the daemon has put the installed copy first.
"""

from __future__ import annotations

import gc
import importlib.metadata
import os
import re
import sys
import zipfile

_ZIPPED_VERSION = re.compile(r"""__version__(?:\s*:\s*str)?\s*=\s*["']([^"']+)["']""")


def zipped_version(path: str) -> tuple[str, str] | None:
    """(distribution, version) of a zip Spark puts on the workers' path: its ``pyspark.zip``
    (the version its ``pyspark/version.py`` says) or ``py4j-VERSION-src.zip``; None for any
    other entry, or a zip that cannot be read."""
    name = os.path.basename(path)
    found = re.fullmatch(r"py4j-(.+)-src\.zip", name)
    if found:
        return "py4j", found[1]
    if name != "pyspark.zip":
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            text = archive.read("pyspark/version.py").decode("utf-8")
    except (OSError, KeyError, UnicodeDecodeError, zipfile.BadZipFile):
        return None
    found = _ZIPPED_VERSION.search(text)
    return ("pyspark", found[1]) if found else None


def installed_first(path: list[str]) -> list[str]:
    """``path`` without the zips whose very version is installed (the same code, whose
    compiled cache the installed copy keeps); a zip of another version stays first."""
    kept = []
    for entry in path:
        zipped = zipped_version(entry)
        if zipped is not None:
            distribution, version = zipped
            try:
                if importlib.metadata.version(distribution) == version:
                    continue
            except importlib.metadata.PackageNotFoundError:
                pass
        kept.append(entry)
    return kept


def main() -> None:
    sys.path[:] = installed_first(sys.path)
    from pyspark import daemon

    importlib.import_module(".spark", __package__)  # before the fork, for every worker
    gc.freeze()
    daemon.manager()


if __name__ == "__main__":
    main()
