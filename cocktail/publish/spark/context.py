"""The Spark context a publish runs in: its settings, the driver's class-data archive, and a
running context borrowed and left as it was found."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ...jvm import (ClassArchive, class_archive, java_identity, spark_driver_logging,
                    spark_java_options)


@dataclass(frozen=True)
class SparkSettings:
    master: str = "local[2]"
    conf: tuple[tuple[str, str], ...] = ()  # extra spark.* settings


def spark_context(settings: SparkSettings, archive: ClassArchive | None = None):
    """A context whose executors run this interpreter (it has cocktail installed).  A plain
    ``SparkContext``: the engine runs RDDs only, and a ``SparkSession`` would start Spark
    SQL's session state too (1.4 s of a 4 s start, measured in docs/engines.md).  The
    driver's JVM maps ``archive`` or, where there is none yet, writes it as it exits."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext

    # pyspark's own py4j converter imports its test helpers, which warn about pandas 3 (a
    # warning about pandas features; this engine uses none).
    warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas",
                            FutureWarning)
    conf = SparkConf().setMaster(settings.master).setAppName("cocktail-publish")
    conf.setAll(_settings(settings).items())
    if archive is not None:
        conf.set(DRIVER_OPTIONS, f"{conf.get(DRIVER_OPTIONS, '')} {archive.flags}")
    if not settings.master.startswith("local") or "SPARK_LOCAL_IP" in os.environ:
        return SparkContext(conf=conf)
    # All of it on this machine: its ports on loopback, not on the address of another
    # interface that Spark picks (warning that the host name resolves to loopback).  Set for
    # the JVM's launch only: a later context may be a cluster's.
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    try:
        return SparkContext(conf=conf)
    finally:
        del os.environ["SPARK_LOCAL_IP"]


DRIVER_OPTIONS = "spark.driver.extraJavaOptions"


ARCHIVE_WAIT = 120.0  # seconds the driver's JVM has to write its class-data archive and exit


def _settings(settings: SparkSettings) -> dict[str, str]:
    """The engine's Spark settings, the user's (``settings.conf``) over them."""
    options = spark_java_options()
    options[DRIVER_OPTIONS] += " " + spark_driver_logging()
    return {"spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",  # ours is per phase
            "spark.log.level": "WARN",
            "spark.driver.memory": "1g",
            "spark.python.worker.reuse": "true",
            # Workers forked with the engine loaded and frozen (spark_daemon), from a daemon
            # that starts no BLAS thread before it forks.
            "spark.python.daemon.module": "cocktail.publish.spark_daemon",
            "spark.executorEnv.OPENBLAS_NUM_THREADS": "1",
            **options, **dict(settings.conf)}


def _driver_archive(settings: SparkSettings) -> ClassArchive | None:
    """The class-data archive of a local driver's JVM (:class:`cocktail.jvm.ClassArchive`),
    keyed by what its classes depend on: the Java, Spark's jars, the driver's classpath and
    flags.  None for a cluster's driver (its classpath holds Hadoop's configuration
    directory, which an archive cannot), or when this process runs a JVM already."""
    import pyspark
    from pyspark import SparkContext

    if not settings.master.startswith("local") or SparkContext._gateway is not None:
        return None
    home = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)
    jars = sorted(f"{jar.name}:{jar.stat().st_size}" for jar in (home / "jars").glob("*.jar"))
    driver = _settings(settings)
    return class_archive("spark", [java_identity(), str(home), *jars,
                                   driver.get(DRIVER_OPTIONS, ""),
                                   driver.get("spark.driver.extraClassPath", ""),
                                   os.environ.get("SPARK_CLASSPATH", "")])


def _keep_archive(archive: ClassArchive) -> None:
    """Ends the driver's JVM, as this process's exit would (its gateway's input closed), so
    that it writes ``archive``, and keeps what it wrote.  A later context in this process
    starts a JVM of its own."""
    from py4j.protocol import Py4JError
    from pyspark import SparkContext

    gateway, SparkContext._gateway, SparkContext._jvm = SparkContext._gateway, None, None
    # The publish is done: nothing here may fail it.  Without an archive this time, the
    # next run makes one (a half-written file is removed once stale).
    try:
        gateway.shutdown()
        gateway.proc.stdin.close()
        gateway.proc.wait(ARCHIVE_WAIT)
        archive.keep()
    except (OSError, subprocess.TimeoutExpired, Py4JError):
        pass


class _Borrowed:
    """A running context (a notebook's, the tests') as one publish uses it, and leaves it:
    each broadcast the publish made destroyed, each RDD it left persisted unpersisted.  The
    job a publish broadcasts holds the owner's pseudonym key and the publish's secret; kept,
    each broadcast stayed on the executors and in a file of the driver's temporary directory,
    and the parsed input on the executors' disks, until the context stopped."""

    def __init__(self, sc) -> None:
        self._sc, self._made = sc, []
        self._found = set(self._persisted())

    def _persisted(self) -> dict:
        return dict(self._sc._jsc.getPersistentRDDs())  # RDD id -> its JavaRDD

    def broadcast(self, value):
        made = self._sc.broadcast(value)
        self._made.append(made)
        return made

    def release(self) -> None:
        while self._made:
            self._made.pop().destroy()
        for rdd_id, rdd in self._persisted().items():
            if rdd_id not in self._found:
                rdd.unpersist()

    def __getattr__(self, name: str):
        return getattr(self._sc, name)


@contextmanager
def engine_context(settings: SparkSettings) -> Iterator[tuple[object, Callable[[], None]]]:
    """``(sc, done)``: the context this process already runs (a notebook's, the tests'), used
    as it is and left running as it was found (:class:`_Borrowed`), or a new one from
    ``settings``.  ``done()`` says Spark's last job is over: a new context stops then, in
    the background (its accumulator server takes a second to notice), while the driver goes
    on; it is stopped by the exit in any case."""
    from pyspark import SparkContext

    active = SparkContext._active_spark_context  # pyspark's own record of the running one
    if active is not None:
        borrowed = _Borrowed(active)
        try:
            yield borrowed, borrowed.release
        finally:
            borrowed.release()
        return
    archive = _driver_archive(settings)
    sc = spark_context(settings, archive)
    stopping = threading.Thread(target=sc.stop, name="spark-stop")
    try:
        yield sc, stopping.start
    finally:
        if stopping.ident is None:  # never done: a failure on the way
            sc.stop()
        else:
            stopping.join()
        if archive is not None and archive.making is not None:
            _keep_archive(archive)
