"""The flags Cocktail gives the JVMs it starts or configures: Hadoop's, MapReduce's, Spark's."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# Hadoop 3.4 on Java 17 needs these in every JVM it starts, containers included (HADOOP-19310).
JAVA17_OPENS = tuple(f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in (
    "java.io", "java.lang", "java.lang.reflect", "java.math", "java.net", "java.text",
    "java.util", "java.util.concurrent", "java.util.zip", "sun.security.util",
    "sun.security.x509"))

# For a JVM that lives seconds to minutes and mostly moves bytes to and from Python (a
# MapReduce container under streaming, a publish's Spark driver and executors): C2's compiles
# cost more CPU than they return, and one GC thread is enough.  Measured: half the CPU of a
# MapReduce application master, a third less for the Spark tests, a 1M-record Spark publish
# 8% faster (docs/engines.md).  Long-lived daemons keep C2 (hadoop.jvm_options).
SHORT_LIVED = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def spark_java_options() -> dict[str, str]:
    """The Spark settings that give its driver, executors and YARN application master
    SHORT_LIVED; a user's own value of one of them replaces it."""
    flags = " ".join(SHORT_LIVED)
    return {f"spark.{role}.extraJavaOptions": flags
            for role in ("driver", "executor", "yarn.am")}


# A local Spark driver's logging (spark-log4j2.properties beside this module): a driver on this
# machine only, as the file is not on a cluster's.
SPARK_LOG_CONFIG = Path(__file__).with_name("spark-log4j2.properties")


def spark_driver_logging() -> str:
    """log4j's configuration, and the JVM's own warnings on stderr: by default it prints them on
    stdout, which is the command's (``--json``'s one object)."""
    return (f"-Dlog4j2.configurationFile={SPARK_LOG_CONFIG.as_uri()} "
            "-Xlog:disable -Xlog:all=warning:stderr")


# Where class-data archives are kept (default: the user's cache directory); "off" makes none.
ARCHIVE_DIR = "COCKTAIL_CDS_DIR"
STALE_PART = 600  # seconds after which a half-written archive (its JVM killed) is removed


@dataclass(frozen=True)
class ClassArchive:
    """A class-data archive (Java's dynamic AppCDS): the classes a JVM loaded, as it holds
    them once parsed and verified.  A JVM that maps it skips loading them from the jars again:
    a local Spark driver started in 1.2-1.7 s instead of ~3 s (docs/engines.md).  A JVM that
    cannot use it (another classpath, a damaged file) starts as it would without it."""

    path: Path
    making: Path | None = None  # where this run's JVM writes it as it exits, when there is none

    @property
    def flags(self) -> str:
        """The JVM's flags, its notes on the archive silenced: the hundreds of classes it
        leaves out as it writes one, or why it cannot map one (it then goes on without)."""
        quiet = "-Xlog:cds*=off -Xlog:cds*=off:stderr"  # on either output
        if self.making is not None:
            return f"-XX:ArchiveClassesAtExit={self.making} {quiet}"
        return f"-XX:SharedArchiveFile={self.path} {quiet}"

    def keep(self) -> None:
        """Once the JVM that wrote it has exited: the archive put in place by one rename, the
        archives of other keys and stale halves removed (each is ~90 MB)."""
        if self.making is None:
            return
        made = self.making.is_file() and self.making.stat().st_size > 0
        if made:
            os.replace(self.making, self.path)
        self.making.unlink(missing_ok=True)
        for other in self.path.parent.glob(f"{self.path.stem.rsplit('-', 1)[0]}-*"):
            stale = other.suffix == ".part" and time.time() - other.stat().st_mtime > STALE_PART
            if stale or (made and other.suffix == ".jsa" and other != self.path):
                other.unlink(missing_ok=True)


def java_identity() -> str:
    """The Java that ``java`` runs where Spark's scripts look (``$JAVA_HOME/bin``, else the
    path): its home and its ``release`` file (the exact version and build)."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home, "bin", "java")) if java_home else shutil.which("java")
    if java is None:
        return ""
    home = Path(java).resolve().parent.parent
    release = home / "release"
    return f"{home}\n{release.read_text(errors='replace') if release.is_file() else ''}"


def class_archive(name: str, key: Iterable[str]) -> ClassArchive | None:
    """The archive of the JVMs that ``key`` describes (their Java, classpath and flags), or
    where one is to be written; None when archives are off or there is no place to keep one."""
    setting = os.environ.get(ARCHIVE_DIR)
    if setting is not None and setting.strip().lower() in ("", "off"):
        return None
    try:
        cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    except RuntimeError:  # no home directory to keep it in
        return None
    directory = Path(setting) if setting else Path(cache) / "cocktail" / "jvm"
    digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:16]
    path = directory / f"{name}-{digest}.jsa"
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _private(directory) or (path.exists() and not _private(path)):
            return None
    except OSError:
        return None
    if path.is_file():
        return ClassArchive(path)
    return ClassArchive(path, directory / f"{path.name}.{os.getpid()}.part")


def _private(path: Path) -> bool:
    """Whether only this user could have written ``path``: a JVM runs the classes of the
    archive it maps, so one that another user could have put there is not used."""
    status = path.stat()
    return status.st_uid == os.getuid() and not status.st_mode & 0o022
