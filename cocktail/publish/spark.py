"""The publish pipeline on Spark: ``cocktail publish --engine spark [--master URL]``.

It makes the same publication as the single-machine engine (:func:`cocktail.publish.publish`)
from the same input: the same overlay tree, clusters, chunk term sets and subrecord multisets;
only the random chunk ids and pseudonyms differ.  The pure pieces are shared, not copied: the
tree's split statistics (:mod:`cocktail.overlay.tree`), the partitioners, the chunk codecs and
the chunk builder.  What differs is where they run:

* a local FIMI file is read in byte ranges, a task each, by the loader's own reader (a
  range's lines numbered from its first, the lines before it added once every range is
  counted); any other input (``hdfs://``, the other formats) is read by Spark's text reader
  and parsed by the same parsers, a FIMI partition of ASCII lines at once by the loader's
  block reader and anything else line by line; so bad lines get the loader's messages and
  numbers; a table (a Parquet file or URL, a DataFrame) is read at the driver by the loader's
  own code and handed to the executors in blocks;
* the tree grows level by level: per node, term supports and then split statistics are summed
  over the records' partitions; only those sums and each node's choice reach the driver;
* each leaf cluster is partitioned inside an executor; the private parts pooled up the tree
  (paper 5.2) are re-partitioned level by level, deepest first, in a second round;
* chunk, index and pseudonym-map files are written by the executors straight into the store's
  staging area, after a shuffle that sends every file to a random task and writes each task's
  files in a random order (no file order groups a cluster's chunks); the manifests, the release
  entry and the commit point stay at the driver, so the atomic version switch and the audit are
  the single-machine engine's;
* each task merges its units' term indexes into one piece, and the driver merges the pieces,
  one at a time, into the version's term index (it holds the index, a few bytes a record, and
  one piece), which the version writer cuts into parts (:mod:`cocktail.query.termindex`).

Chunk ids are drawn from a keyed hash of a fresh per-publish secret, the unit and the chunk's
rank, so that a task Spark re-runs writes the same files under the same names.

The driver holds the tree, the per-cluster summaries and the manifests; what grows with the
records there is the release log's member names (8 bytes a record, kept as arrays) and, for
the aggregation round, the pools pickled (the private parts passed up: a small share of the
subrecords), which it hands on to the one task that pools them without reading them.

Appends (``cocktail publish --append --engine spark``, :func:`append_spark`) make the same
release as the single-machine append from the same batch and store.  Spark reads the batch (the
same parsers and messages) and the driver collects it: a batch fits one machine.  The driver
then runs the append itself (:func:`cocktail.publish.append.append`): routing the new records
into old clusters under the residual rule, the buffer, the promotion, the manifests, the release
log and the commit; all of it in proportion to the batch and the clusters it touches.  The
clusters the append's pool forms are :class:`SparkClusters`'s, through the same pipeline as a
first publish (:meth:`_Run.lay_out`: the tree level by level, leaves partitioned in executors,
the aggregation round, files written by executors into the staging area in a random order),
with three differences, as on the single machine: the records are the pool's (numbered from 0
in pool order; positions, unit and node ids placed in the publication by the append's
:class:`~.writer.Placement`), the terms the promotion holds back are kept private in the leaf
clusters, and the root does not partition its pool but hands it back to the promotion.  The
driver holds the pool's records (the batch and the buffer) besides what the append holds.
"""

from __future__ import annotations

import codecs
import hashlib
import itertools
import os
import pickle
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..extras import require
from ..jvm import (ClassArchive, class_archive, java_identity, spark_driver_logging,
                   spark_java_options)

StorageLevel = require("pyspark").StorageLevel  # this module loads only with --engine spark

from .. import chunkformat as fmt
from .. import releases
from ..anonymity import partition
from ..blas import one_thread
from ..dataset import (NUMBERED_FORMATS, CsvLayout, Dataset, HeaderCheck, InputError,
                       InputOptions, MalformedLine, PackedIds, Records, RecordsBuilder,
                       detect_format, fimi_lines, first_csv_layout, format_by_name, from_frame,
                       line_range, load, parse_line, read_fimi_lines, reading, sniff_format,
                       spmf_item_name)
from ..overlay.layout import PhaseProgress, partitions_pool
from ..overlay.tree import (Node, SplitSearch, Tree, children_of, choose_split, grow,
                            pattern_codes, presence, rank_candidates, split_stats)
from ..query.termindex import TermIndexBuilder
from ..query.view import Publication
from ..store import Store, open_store
from . import Built, PublishParams, PublishReport, check_size, promotion, release
from .append import AppendReport, NewClusters, append
from .batch import collector_paused
from .writer import Placement, VersionWriter, build_drawn, unit_chunks

_NO_JOB = type("NoJob", (), {"stageIds": ()})()  # a job the tracker has already forgotten


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
def _engine_context(settings: SparkSettings) -> Iterator[tuple[object, Callable[[], None]]]:
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


# -- input ---------------------------------------------------------------------------------

def read_records(sc, source: str, data_format: str | None, skip_bad_lines: bool,
                 options: InputOptions = InputOptions()) -> Input:
    """The records of a text input in input order, a :class:`Block` a partition.  The first
    bad line stops the publish with its number, as the single-machine loader does."""
    data_format = _format_of(sc, source, data_format)
    options.check(data_format, source)
    if options.encoding != "utf-8":
        raise InputError(f"{source}: the Spark engine reads text as UTF-8; convert it (iconv "
                         f"-f {options.encoding} -t utf-8) or publish with --engine single")
    if data_format == "fimi" and "://" not in source:
        parts, bad_names = _fimi_ranges(sc, source), []
    else:
        parts, bad_names = _parsed_lines(sc, source, data_format, options)
    parts.persist(StorageLevel.DISK_ONLY)
    # One pass counts each partition's lines, records, pairs and bad lines (it caches the
    # parse); a byte range learns there how many lines stand before it.
    tallies = sorted(parts.mapPartitionsWithIndex(
        lambda index, found: [part.tally(index) for part in found]).collect())
    lines_before = dict(zip([tally[0] for tally in tallies],
                            np.cumsum([0, *[tally[6] or 0 for tally in tallies]]).tolist()))
    first_bad = sorted([(tally[4][0] + lines_before[tally[0]], tally[4][1])
                        for tally in tallies if tally[4]] + bad_names)
    skipped = 0
    if first_bad:
        if not skip_bad_lines:
            number, message = first_bad[0]
            if message == NOT_UTF8:
                message = _utf8_error(sc, source, number)
            raise InputError(f"{source}:{number}: {message}")
        skipped = sum(tally[3] for tally in tallies) + len(bad_names)
    counts = [tally[1] for tally in tallies]
    if not sum(counts):
        skipped_note = f"; {skipped} malformed line(s) skipped" if skipped else ""
        raise InputError(f"{source}: no records (empty file){skipped_note}")
    vocabulary = sorted(set().union(*(tally[5] for tally in tallies)))
    ids = sc.broadcast({term: i for i, term in enumerate(vocabulary)})
    first = dict(zip([tally[0] for tally in tallies], np.cumsum([0, *counts]).tolist()))

    def numbered(index: int, found: Iterator[Part]) -> Iterator[Block]:
        for part in found:
            yield part.block(first[index], ids.value, lines_before[index])

    return Input(parts.mapPartitionsWithIndex(numbered), tuple(vocabulary), skipped,
                 data_format, source, sum(counts), sum(tally[2] for tally in tallies),
                 data_format in NUMBERED_FORMATS)


def read_table(sc, source, data_format: str | None, skip_bad_lines: bool,
               options: InputOptions) -> Dataset | None:
    """A table's records (a DataFrame: Spark's, pandas', polars'; or a Parquet file) read at
    the driver, as the single machine reads them (the same checks and messages); None for a
    text input, which the executors read (:func:`read_records`).  The driver holds the
    table's records once, as it holds an append's batch: a publish larger than the driver
    takes a text input."""
    if not isinstance(source, str):
        return from_frame(source, options.id_column, options.terms_column,
                          skip_bad_lines=skip_bad_lines)
    if data_format != "parquet":
        return None
    if "://" not in source:
        return load(source, "parquet", skip_bad_lines=skip_bad_lines, **asdict(options))
    options.check(data_format, source)
    from pyspark.sql import SparkSession  # here: Spark SQL's session costs a second to start

    frame = SparkSession.builder.getOrCreate().read.parquet(source)
    return from_frame(frame, options.id_column, options.terms_column,
                      skip_bad_lines=skip_bad_lines, source=source)


def driver_input(sc, ids: list[str], records: Records, data: Dataset | None = None) -> Input:
    """Records held at the driver (a table read there, an append's pool), handed to the
    executors a block of a few thousand at a time; ``data``: the dataset they are, if any."""
    slices = max(2, sc.defaultParallelism, -(-len(records) // RECORDS_PER_TASK))
    cuts = np.linspace(0, len(records), slices + 1).astype(int).tolist()
    blocks = []
    for a, b in zip(cuts, cuts[1:]):
        part = records[a:b]  # term ids stand for themselves in a Block
        blocks.append(Block(np.arange(a, b, dtype=np.int64), PackedIds.of(ids[a:b]),
                            Records(range(len(records.names)), part.indptr, part.indices),
                            np.zeros(b - a, dtype=np.int64)))
    return Input(sc.parallelize(blocks, slices), tuple(records.names),
                 data.skipped_lines if data else 0, data.format if data else "pool",
                 data.source if data else "pool", len(records), records.pairs(),
                 bool(data and data.numbered))


def _fimi_ranges(sc, path: str):
    """A local FIMI file read by byte ranges, a task each (:func:`line_range`): the lines
    straight from the file into the loader's reader, numbered within their range.  Spark's
    text reader would move each line through the JVM and number the lines in a job of its
    own."""
    with reading(path):
        size = os.path.getsize(path)
    path = os.path.abspath(path)  # the executors' working directory may not be ours
    tasks = _input_partitions(sc, size)
    cuts = [size * i // tasks for i in range(tasks + 1)]
    return sc.parallelize(list(zip(cuts, cuts[1:])), tasks).map(
        lambda cut: _fimi_range(path, *cut))


def _fimi_range(path: str, start: int, end: int) -> Part:
    data = line_range(path, start, end)
    if start == 0:
        data = data.removeprefix(codecs.BOM_UTF8)  # as the loader reads a file
    read = read_fimi_lines(path, data)
    return Part(read.ids, read.records, read.skipped, read.first_bad, read.lines)


def _parsed_lines(sc, source: str, data_format: str, options: InputOptions):
    """The input read by Spark's text reader, each line numbered and parsed on its own (a
    FIMI partition of ASCII lines at once): :class:`Part`s, and SPMF's bad @ITEM lines."""
    length = _input_length(sc, source)
    lines = sc.textFile(source, minPartitions=_input_partitions(sc, length),
                        use_unicode=False).zipWithIndex()
    names, bad_names = {}, []
    if data_format == "spmf":  # @ITEM names apply to the whole file, wherever they stand
        named = lines.filter(lambda line: line[0].lstrip().startswith(b"@ITEM="))
        names, bad_names = spmf_names(named.map(lambda line: (line[1] + 1, line[0])).collect())
    layout = CsvLayout()
    if data_format == "csv":  # the first non-blank line says how the rows are laid out
        layout, first = _csv_layout(lines, source, options)
    if data_format == "fimi":
        parts = lines.mapPartitions(_fimi_part)
    else:
        parsed = lines.map(lambda line: _parse(data_format, line[0], line[1] + 1, names,
                                               layout))
        parsed = parsed.filter(lambda item: item is not None)
        if data_format == "csv":
            if layout.suspect:
                _refuse_header(parsed, source, *first)
            parsed = _csv_records(parsed)
        elif data_format == "jsonl":
            parsed = _without_duplicate_ids(parsed)
        parts = parsed.mapPartitions(_part)
    return parts, bad_names


@dataclass
class Part:
    """A partition's parsed lines before the vocabulary is known: its records' ids and
    terms (numbered over the partition's own terms) and its bad lines.  A byte range of a
    FIMI file (:func:`_fimi_ranges`) counts its ``lines``, and numbers them (its first bad
    line, its records' ids) from its own first line: the lines before it are added later."""

    ids: list[str]
    records: Records
    bad: int
    first_bad: tuple[int, str] | None  # (line number, message)
    lines: int | None = None           # None: numbered within the whole input

    def tally(self, index: int) -> tuple:
        """(index, records, their (record, term) pairs, bad lines, the first bad line or
        None, the terms its records hold, its lines if numbered within it)."""
        return (index, len(self.ids), self.records.pairs(), self.bad, self.first_bad,
                self.records.names, self.lines)

    def block(self, start: int, vocabulary: dict[str, int], lines_before: int) -> Block:
        """The records as a :class:`Block`, at positions from ``start`` on, their terms as
        ids of ``vocabulary`` (a renumbering in name order, so each row stays sorted).
        ``lines_before``: the input's lines before a byte range's."""
        renumber = np.fromiter(map(vocabulary.__getitem__, self.records.names), np.int32,
                               len(self.records.names))
        if self.lines is None:
            ids = PackedIds.of(self.ids)
        else:  # a FIMI id is its line's number
            ids = PackedIds.numbered(np.array(self.ids, dtype=np.int64) + lines_before)
        return Block(np.arange(start, start + len(self.ids), dtype=np.int64), ids,
                     Records(range(len(vocabulary)), self.records.indptr,
                             renumber[self.records.indices]),
                     np.zeros(len(self.ids), dtype=np.int64))


def _part(items: Iterator[tuple]) -> list[Part]:
    """A partition of parsed lines (:func:`_parse`'s) as one :class:`Part`."""
    ids, records, bad, first = [], RecordsBuilder(), 0, None
    for item in items:
        if item[0] == "record":
            ids.append(item[2])
            records.add(item[3])
        else:
            bad += 1
            first = min(first or item[1:], item[1:])
    return [Part(ids, records.build(), bad, first)]


def _fimi_part(lines: Iterator[tuple[bytes, int]]) -> list[Part]:
    """A partition of FIMI lines (and their indexes) read with arrays, as the loader reads an
    ASCII file; any other partition line by line."""
    lines = list(lines)
    found = fimi_lines(b"".join(line + b"\n" for line, _ in lines)) if lines else None
    if found is None or len(found[0]) != len(lines):
        return _part(item for item in (_parse("fimi", line, index + 1, {}, 1)
                                       for line, index in lines) if item is not None)
    kept, tokens, lengths = found
    records = RecordsBuilder()
    records.add_many(tokens, lengths)
    first = lines[0][1] + 1  # a partition's lines are consecutive
    return [Part([str(first + k) for k in np.flatnonzero(kept).tolist()], records.build(), 0,
                 None)]


NOT_UTF8 = "not valid UTF-8"
INPUT_SPLIT = 8 << 20       # bytes of input per partition: a partition is one tree block
RECORDS_PER_TASK = 50_000   # records per task of each shuffle
RECORDS_PER_REPORT = 500_000  # records whose reports make one partition (~10 MB)
REPORTS_AT_ONCE = 2  # report partitions the driver reads in one job: two executors' tasks
# A node of at most this many records grows its whole subtree in one task (a few tens of MB
# of term ids), not level by level: each level on the cluster costs two jobs, 0.6-1.2 s on a
# 2-core machine whatever its records, about what a task takes to grow a subtree this size.
# At 1M records: 100,000 gave 3 levels on the cluster and a 5.3 s tree, 300,000 one level and
# 3.6-3.8 s (500,000: 3.7 s; 1,000,000, all in one task: 4.2 s).
LOCAL_SUBTREE = 300_000


def _input_partitions(sc, length: int) -> int:
    """Enough partitions of ``length`` bytes that each holds a few MB: a partition's records
    are one block of the tree passes, and its outputs are cached whole in the JVM."""
    return max(2, sc.defaultParallelism, -(-length // INPUT_SPLIT))


def _input_length(sc, source: str) -> int:
    path = sc._jvm.org.apache.hadoop.fs.Path(source)
    return path.getFileSystem(sc._jsc.hadoopConfiguration()).getContentSummary(path).getLength()


def _utf8_error(sc, source: str, number: int) -> str:
    """The loader's message for a line that is not UTF-8, from the line's own bytes (Spark's
    text reader has already replaced them): read again, whole, by one task.  The error path
    only."""
    raw = sc.binaryFiles(source).map(lambda item: item[1].splitlines()[number - 1]).first()
    if number == 1:
        raw = raw.removeprefix(b"\xef\xbb\xbf")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"{NOT_UTF8} (byte 0x{raw[e.start]:02x} at column {e.start + 1})"
    return f"{NOT_UTF8} (it holds U+FFFD, which the Spark engine cannot tell from a bad byte)"


def _format_of(sc, source, data_format: str | None) -> str | None:
    """The input's format: as given, else found (None for a DataFrame)."""
    if data_format or not isinstance(source, str):
        return data_format
    if "://" not in source:
        return detect_format(source)
    return format_by_name(source) or sniff_format(sc.textFile(source).take(1000))


def _csv_layout(lines, source: str, options: InputOptions) -> tuple[CsvLayout, tuple]:
    """A CSV file's layout, from its first non-blank line (found by a job), and that line's
    (number, text)."""
    first = lines.filter(lambda line: line[0].strip()).map(
        lambda line: (line[1] + 1, line[0])).takeOrdered(1)
    if not first:
        return CsvLayout(options.delimiter), (0, None)
    number, raw = first[0]
    try:
        text = (raw.removeprefix(b"\xef\xbb\xbf") if number == 1 else raw).decode("utf-8")
    except UnicodeDecodeError:
        text = None  # the line's own parse reports it
    return first_csv_layout(text, number, options, source), (number, text)


def _refuse_header(parsed, source: str, number: int, text: str) -> None:
    """A first row read as data that looks like a header stops the publish, as the loader
    stops (:class:`HeaderCheck`), after a job over the other rows."""
    rows = parsed.filter(lambda item: item[0] == "row")
    first = rows.filter(lambda item: item[1] == number).collect()
    if first:  # else the first row is a bad line, reported as one
        others = rows.filter(lambda item: item[1] != number).map(
            lambda item: HeaderCheck.of(item[2], item[3])).fold(HeaderCheck(),
                                                                HeaderCheck.merged)
        others.check(source, number, text, first[0][2], first[0][3])


def _parse(data_format: str, raw: bytes, number: int, names: dict,
           layout: CsvLayout) -> tuple | None:
    """("record", number, id, terms), ("row", number, id, term) for CSV, ("bad", number,
    message), or None for a line that holds nothing."""
    if number == 1:
        raw = raw.removeprefix(b"\xef\xbb\xbf")
    text = raw.decode("utf-8")
    if "\ufffd" in text:  # the JVM replaced bytes that are not UTF-8 (or the input holds U+FFFD)
        return "bad", number, NOT_UTF8
    try:
        parsed = parse_line(data_format, text, number, names, layout)
    except MalformedLine as e:
        return "bad", number, str(e)
    if parsed is None:
        return None
    return (("row" if data_format == "csv" else "record"), number, *parsed)


def spmf_names(lines: list[tuple[int, bytes]]) -> tuple[dict, list[tuple[int, str]]]:
    """SPMF's @ITEM names, and the (line, message) of the bad ones."""
    names: dict[str, tuple[str, int]] = {}
    bad = []
    for number, raw in sorted(lines):
        try:
            spmf_item_name(raw.decode("utf-8").strip(), number, names)
        except MalformedLine as e:
            bad.append((number, str(e)))
        except UnicodeDecodeError:
            pass  # the line's own parse reports it
    return names, bad


def _csv_records(rows):
    """CSV rows grouped into records, in order of each id's first row."""
    data = rows.filter(lambda item: item[0] == "row")
    grouped = data.map(lambda item: (item[2], (item[1], item[3]))).groupByKey().map(
        lambda kv: (min(n for n, _ in kv[1]), kv[0],
                    [term for _, term in sorted(kv[1]) if term]))
    records = grouped.sortBy(lambda item: item[0]).map(
        lambda item: ("record", item[0], item[1], item[2]))
    return records.union(rows.filter(lambda item: item[0] == "bad"))


def _without_duplicate_ids(parsed):
    """A record id met again is a bad line naming the line it was first met on."""
    records = parsed.filter(lambda item: item[0] == "record")
    seen = records.map(lambda item: (item[2], item[1])).groupByKey().mapValues(sorted)
    repeated = seen.filter(lambda kv: len(kv[1]) > 1).flatMap(
        lambda kv: [(number, kv[0], kv[1][0]) for number in kv[1][1:]]).collect()
    if not repeated:
        return parsed
    first = {number: (record_id, line) for number, record_id, line in repeated}
    return parsed.map(lambda item: item if item[0] != "record" or item[1] not in first else (
        "bad", item[1], f"duplicate record id {first[item[1]][0]!r} "
                        f"(first on line {first[item[1]][1]})"))


# -- the tree, level by level ----------------------------------------------------------------

def grow_tree_distributed(sc, blocks, names: tuple[str, ...], total: int, leaf_size: int,
                          search: SplitSearch, max_share: float = 0.95):
    """The overlay tree of :func:`cocktail.overlay.tree.grow_tree`, each record's leaf (as
    :class:`Block` nodes, computed from ``held``), each leaf's number of records, each
    leaf's cluster starts when every leaf was grown in a task (:func:`_subtrees`; else None)
    and ``held``, the blocks kept on disk until the caller has cached what it needs of
    ``leaf_of``.
    ``blocks``: the records, a :class:`Block` a partition, so that a pass over a level is a
    few numpy operations per node.  Large nodes are split level by level on the cluster; a
    node of at most :data:`LOCAL_SUBTREE` records grows its subtree in one task.
    Nodes get temporary ids while the tree grows, then the single-machine engine's ids
    (depth first, the last child first)."""
    vocabulary = len(names)
    blocks.persist(StorageLevel.DISK_ONLY)
    cached = blocks  # the last level that was routed and summed in one job
    splits: dict[int, tuple[tuple[int, ...], list[tuple[list[str], int]]]] = {}
    leaves: dict[int, int] = {}
    starts: dict[int, np.ndarray] = {}  # a leaf grown in a task -> its cluster starts
    local: dict[int, int] = {}  # nodes whose subtree one task grows (a leaf's too: its starts)
    next_id = 1

    def large(frontier: dict[int, int]) -> dict[int, int]:
        """The nodes split on the cluster; the others go to ``local``."""
        local.update({node: n for node, n in frontier.items()
                      if n <= max(leaf_size, LOCAL_SUBTREE)})
        return {node: n for node, n in frontier.items() if n > max(leaf_size, LOCAL_SUBTREE)}

    sizes = large({0: total})
    ranked = _ranked(sc, blocks, sizes, vocabulary, search.pool) if sizes else {}
    while sizes:
        choices = _choices(sc, blocks, ranked, search)
        frontier, routes = {}, {}
        for node, n in sorted(sizes.items()):
            choice = choices.get(node)
            groups = children_of(choice, n, leaf_size, max_share)
            if not groups:
                leaves[node] = n
                continue
            children = []
            for patterns in groups:
                children.append((patterns, next_id))
                frontier[next_id] = sum(choice.sizes[int(p, 2)] for p in patterns)
                next_id += 1
            splits[node] = (choice.terms, children)
            routes[node] = (ranked[node], choice.terms, _route(choice.terms, children))
        blocks = _routed(cached, sc.broadcast(routes))
        sizes = large(frontier)
        if sizes:  # the job that routes the records (and caches them) sums the next supports
            blocks.persist(StorageLevel.DISK_ONLY)
            ranked = _ranked(sc, blocks, sizes, vocabulary, search.pool)
            cached.unpersist()
            cached = blocks
        # else the last level is routed again by each of the two jobs below: cheaper than
        # a job that caches it
    routes = {}
    for root, grown in _subtrees(sc, blocks, local, leaf_size, search, max_share).items():
        ids = {0: root}  # the subtree's own ids (a parent before its children) -> temporary
        for node, n, split, children, first in grown:
            if split is None:
                leaves[ids[node]], starts[ids[node]] = n, first
                continue
            for _, child in children:
                ids[child] = next_id
                next_id += 1
            children = [(patterns, ids[child]) for patterns, child in children]
            splits[ids[node]] = (split, children)
            routes[ids[node]] = (np.array(split), split, _route(split, children))
    final, tree = _number(splits, names)
    final_b, routes_b = sc.broadcast(final), sc.broadcast(routes)
    leaf_of = blocks.map(lambda block: block.descended(routes_b.value).renamed(final_b.value))
    # a node too large for a task that no split divides is a leaf without starts (rare)
    cut = {final[leaf]: first for leaf, first in starts.items()} \
        if len(starts) == len(leaves) else None
    return tree, leaf_of, {final[node]: n for node, n in leaves.items()}, cut, cached


def _routed(blocks, routes_b):
    """``blocks`` one level down (a function of its own: the map is lazy, and must keep this
    level's routes)."""
    return blocks.map(lambda block: block.routed(routes_b.value))


def _route(split: tuple[int, ...], children: list[tuple[list[str], int]]) -> np.ndarray:
    """Each presence pattern of the split terms, read as a binary number -> its child."""
    route = np.full(2 ** len(split), -1, dtype=np.int64)
    for patterns, child in children:
        route[[int(p, 2) for p in patterns]] = child
    return route


def _subtrees(sc, blocks, roots: dict[int, int], leaf_size: int, search: SplitSearch,
              max_share: float) -> dict[int, list[tuple]]:
    """Each of ``roots``' subtrees, grown in one task from the node's records, gathered from
    every block: (node, its number of records, split terms or None, children, and for a
    leaf its cluster starts) per node, parents first.  A leaf's cluster starts are the input
    positions that begin its clusters (every ``leaf_size``-th of its records in input order,
    as :func:`cut_clusters` cuts them): what numbers its records' clusters on any block,
    without counting a leaf's records block by block."""
    if not roots:
        return {}
    wanted = sc.broadcast(roots)

    def pieces(block: Block) -> Iterator:
        for node, rows in block.by_node(wanted.value):
            yield node, (block.positions[rows], block.records.take(rows))

    def subtree(item: tuple) -> tuple[int, list[tuple]]:
        one_thread()  # an executor's Python worker, once
        node, parts = item
        parts = list(parts)
        records = Records.joined([part[1] for part in parts])
        positions = np.concatenate([part[0] for part in parts])
        return node, [(g.id, len(g.positions), g.split, g.children,
                       np.sort(positions[g.positions])[::leaf_size] if g.split is None else None)
                      for g in grow(records, np.arange(len(records)), leaf_size, search,
                                    max_share)]

    return dict(blocks.flatMap(pieces).groupByKey().map(subtree).collect())


@dataclass
class Block:
    """One partition's records while the tree grows: term ids in compressed rows and each
    record's current node, so that a pass is numpy work per node, not a loop per record."""

    positions: np.ndarray  # input positions, ascending
    ids: PackedIds         # record ids
    records: Records       # term ids (names: the vocabulary's range)
    node: np.ndarray       # each record's current node

    def by_node(self, wanted=None, among: np.ndarray | None = None
                ) -> Iterator[tuple[int, np.ndarray]]:
        """(node, the rows at that node, ascending) for the nodes in ``wanted`` (None: all),
        of the rows ``among`` (ascending; None: all of them)."""
        if among is None and wanted is not None:
            among = self.at(wanted)
        rows = self.node if among is None else self.node[among]
        order = np.argsort(rows, kind="stable")
        nodes, starts = np.unique(rows[order], return_index=True)
        if among is not None:
            order = among[order]
        ends = [*starts[1:].tolist(), len(order)]
        for node, start, end in zip(nodes.tolist(), starts.tolist(), ends):
            if wanted is None or node in wanted:
                yield node, order[start:end]

    def at(self, nodes) -> np.ndarray:
        """The rows at any of ``nodes``, ascending."""
        return np.flatnonzero(np.isin(self.node, list(nodes)))

    def routed(self, routes: dict, among: np.ndarray | None = None) -> Block:
        """Each record at a node of ``routes`` (of the rows ``among``) one level down."""
        node = self.node.copy()
        for at, rows in self.by_node(routes, among):
            ranked, split, route = routes[at]
            node[rows] = route[pattern_codes(presence(self.records, rows, ranked), ranked,
                                             split)]
        return Block(self.positions, self.ids, self.records, node)

    def descended(self, routes: dict) -> Block:
        """Every record routed down to a node ``routes`` does not split (a subtree's leaf);
        each level sorts only the records still moving."""
        block, moving = self, self.at(routes)
        while len(moving):
            block = block.routed(routes, moving)
            moving = moving[np.isin(block.node[moving], list(routes))]
        return block

    def renamed(self, final: dict[int, int]) -> Block:
        """Each record's node under its id in ``final``."""
        nodes, inverse = np.unique(self.node, return_inverse=True)
        named = np.array([final[node] for node in nodes.tolist()], dtype=np.int64)
        return Block(self.positions, self.ids, self.records, named[inverse.reshape(-1)])

    def clustered(self, before: Counter, base: dict[int, int], size: int) -> Block:
        """Each record's leaf cluster (unit) in place of its leaf: a leaf's records are cut
        into clusters of ``size`` in input order from its first unit ``base[leaf]`` on,
        ``before[leaf]`` of them in earlier blocks (counted on here)."""
        unit = np.empty(len(self.node), dtype=np.int64)
        for leaf, rows in self.by_node():
            unit[rows] = base[leaf] + (before[leaf] + np.arange(len(rows))) // size
            before[leaf] += len(rows)
        return Block(self.positions, self.ids, self.records, unit)

    def cut(self, starts: dict[int, np.ndarray], base: dict[int, int]) -> Block:
        """Each record's leaf cluster (unit) in place of its leaf, from the leaf's cluster
        starts (:func:`_subtrees`): its first unit ``base[leaf]`` plus the starts at or
        before the record's position, less one."""
        unit = np.empty(len(self.node), dtype=np.int64)
        for leaf, rows in self.by_node():
            unit[rows] = base[leaf] - 1 + np.searchsorted(starts[leaf], self.positions[rows],
                                                          side="right")
        return Block(self.positions, self.ids, self.records, unit)

    def pieces(self) -> Iterator[tuple[int, tuple]]:
        """(node, (positions, record ids, term ids) of its records here) per node: what a
        shuffle by node moves, a few arrays rather than a tuple per record."""
        for node, rows in self.by_node():
            yield node, (self.positions[rows], self.ids.take(rows), self.records.take(rows))


def _ranked(sc, blocks, sizes: dict[int, int], vocabulary: int, pool: int) -> dict:
    wanted = sc.broadcast(sizes)

    def supports(block: Block) -> Iterator:
        for node, rows in block.by_node(wanted.value):
            yield node, np.bincount(block.records.rows(rows)[1], minlength=vocabulary)

    summed = blocks.flatMap(supports).reduceByKey(np.add)
    return dict(summed.map(lambda kv: (kv[0], rank_candidates(
        kv[1], wanted.value[kv[0]], pool))).collect())


def _choices(sc, blocks, ranked: dict, search: SplitSearch) -> dict:
    candidates = sc.broadcast({node: terms for node, terms in ranked.items() if len(terms)})

    def stats(block: Block) -> Iterator:
        one_thread()  # an executor's Python worker, once
        for node, rows in block.by_node(candidates.value):
            yield node, split_stats(presence(block.records, rows, candidates.value[node]),
                                    search)

    summed = blocks.flatMap(stats).reduceByKey(lambda a, b: a + b)
    return dict(summed.map(lambda kv: (kv[0], choose_split(
        kv[1], candidates.value[kv[0]], search))).collect())


def leaf_counts(leaf_of) -> dict[int, Counter]:
    """Each partition's records per leaf (``leaf_of``: blocks, each record's leaf its node),
    in the job that caches ``leaf_of``."""

    def counted(index: int, blocks: Iterator[Block]) -> list[tuple[int, Counter]]:
        found: Counter = Counter()
        for block in blocks:
            leaves, counts = np.unique(block.node, return_counts=True)
            found.update(dict(zip(leaves.tolist(), counts.tolist())))
        return [(index, found)]

    leaf_of.persist(StorageLevel.DISK_ONLY)
    return dict(leaf_of.mapPartitionsWithIndex(counted).collect())


def _number(splits: dict, names: tuple[str, ...]) -> tuple[dict[int, int], Tree]:
    """Temporary ids to the ids :func:`grow_tree` gives: children numbered when their parent
    is split, the last child split first."""
    final = {0: 0}
    nodes = [Node(0)]
    pending = [0]
    while pending:
        temporary = pending.pop()
        if temporary not in splits:
            continue
        node = nodes[final[temporary]]
        terms, children = splits[temporary]
        node.split = tuple(names[t] for t in terms)
        for patterns, child in children:
            final[child] = len(nodes)
            nodes.append(Node(len(nodes)))
            node.children.update({pattern: final[child] for pattern in patterns})
            pending.append(child)
    return final, Tree(nodes)


# -- clusters, partitions and chunk files on the executors ------------------------------------

@dataclass(frozen=True)
class UnitJob:
    """What an executor needs to partition and write units (broadcast once)."""

    names: tuple[str, ...]
    method: str
    k: int
    m: int
    aggregate: bool
    key: bytes          # the owner's pseudonym key: executors run on private hosts only
    secret: bytes       # this publish's chunk-id and write-order key
    store: str
    staging: str
    mtime: float
    # An append's pool (:class:`SparkClusters`); a first publish leaves them as they are.
    held: frozenset[str] = frozenset()  # kept private in the leaf clusters (promotion)
    pass_up_root: bool = False          # the root's pool goes up whole, unpartitioned
    positions: np.ndarray | None = None  # the records' positions in the publication
    units: int = 0                      # offset of the unit ids in the publication

    def unit(self, unit: int) -> int:
        """A unit's id in the publication."""
        return unit + self.units

    def position(self, position: int) -> int:
        """A record's position in the publication (the run numbers its records from 0)."""
        return position if self.positions is None else int(self.positions[position])

    def placed(self, positions: np.ndarray) -> np.ndarray:
        """The records' positions in the publication, as files and indexes name them."""
        return positions if self.positions is None else self.positions[positions]


def chunk_id_for(secret: bytes, unit: int, rank: int, attempt: int) -> str:
    """A chunk id only this publish can predict, and the same when a task is re-run."""
    digest = hashlib.blake2b(f"{unit}:{rank}:{attempt}".encode(), key=secret,
                             digest_size=fmt.CHUNK_ID_HEX // 2)
    return digest.hexdigest()


def unit_outputs(job: UnitJob, unit: int, kind: str, positions: np.ndarray, ids: list[str],
                 records: Records, chunk_terms: list[frozenset[str]],
                 public: int) -> Iterator[tuple]:
    """A partitioned unit's chunks: ("file", zone, path, bytes, private) for its chunk, index
    and pseudonym-map files and ("chunk", id, manifest entry, release entry or None, pairs)
    for the driver, ("keys", unit, added, public) with its records' names for the release
    log, and ("terms", its term index).  The unit's records: their ``positions`` in the
    publication, ``ids`` and terms."""
    chunks, (pair_rows, pair_terms) = unit_chunks(records, positions, ids, chunk_terms)
    index = TermIndexBuilder()
    index.add_pairs(records.names, pair_terms, positions[pair_rows])
    maps, added, shown = [], [], []
    drawn = build_drawn(job.key, chunks,
                        lambda rank, attempt: chunk_id_for(job.secret, unit, rank, attempt))
    for rank, (chunk_members, built) in enumerate(zip(chunks, drawn)):
        private = rank >= public
        zone = "private" if private else "public"
        for name, data in built.files():
            yield "file", zone, f"{job.staging}/{name}", data, private
        maps.append(built.map_lines(with_ids=private))
        chunk_added = chunk_members.added()
        added.append(chunk_added.keys)
        logged = None
        if not private:
            shown.append(chunk_added.keys)
            logged = releases.chunk_record(unit, chunk_terms[rank], chunk_added,
                                           built.sha256["chunk"])
        yield "chunk", built.chunk_id, built.entry(unit, private, chunk_terms[rank]), logged, \
            chunk_members.subrecords.pair_count()
    yield ("file", "private", f"{job.staging}/{fmt.PSEUDONYM_DIR}/{unit}.tsv",
           b"".join(maps), True)
    yield "keys", unit, kind, _distinct_keys(added), _distinct_keys(shown)
    yield "terms", index.encode_piece()


def _distinct_keys(keys: list[np.ndarray]) -> np.ndarray:
    return np.unique(np.concatenate([np.zeros(0, np.uint64), *keys]))  # none: empty


def reported(items: Iterable[tuple]) -> Iterator[tuple]:
    """What the driver takes of a task's outputs but its files: the units' term indexes
    merged into one piece (fewer, larger pieces for the driver), and the pools (a small share
    of the subrecords) as one pickle, which the driver hands on to the aggregation round
    unread; the rest as it is."""
    merged, pools = TermIndexBuilder(), []
    for item in items:
        if item[0] == "terms":
            merged.add_piece(item[1])
        elif item[0] == "pool":
            pools.append(item)
        else:
            yield item
    if merged.bitmaps:
        yield "terms", merged.encode_piece()
    if pools:
        yield "pools", pickle.dumps(pools, protocol=pickle.HIGHEST_PROTOCOL)


def partition_leaves(job_b, leaf_of_unit_b):
    """Per leaf unit: partition its records, write its chunks, pass its private part up."""

    def run(units: Iterator) -> Iterator[tuple]:
        one_thread()  # an executor's Python worker, once
        job, leaf_of_unit = job_b.value, leaf_of_unit_b.value
        with collector_paused():
            for unit, pieces in units:
                positions, ids, records = _unit_records(job.names, pieces)
                started = time.process_time()
                split = _partition_leaf(job, records)
                cpu = time.process_time() - started
                node, cluster = leaf_of_unit[unit]
                stored = [] if job.aggregate or not split.private else [split.private]
                parts = _private_parts(records, split.private)
                yield "unit", unit, _unit_summary("leaf", node, len(ids), split,
                                                  not job.aggregate, cpu,
                                                  [terms for _, terms in parts])
                yield from unit_outputs(job, job.unit(unit), "leaf", job.placed(positions), ids,
                                        records, [*split.public, *stored], len(split.public))
                if job.aggregate:
                    for row, terms in parts:
                        p = int(positions[row])
                        yield "pool", node, cluster, p, ids[row], terms

    return run


def _unit_records(names: tuple[str, ...], pieces) -> tuple[np.ndarray, list[str], Records]:
    """A unit's records from the pieces of it each block held (:meth:`Block.pieces`), in
    input order: their positions, ids and terms (as ids of ``names``)."""
    pieces = sorted(pieces, key=lambda piece: int(piece[0][0]))
    joined = Records.joined([piece[2] for piece in pieces])
    return (np.concatenate([piece[0] for piece in pieces]),
            PackedIds.joined([piece[1] for piece in pieces]).strings(),
            Records(names, joined.indptr, joined.indices))


def _private_parts(records: Records, private: frozenset[str]) -> list[tuple[int, frozenset]]:
    """(row, the terms of ``private`` it holds) for each record that holds some."""
    held = np.isin(records.indices, records.ids_of(private))
    rows = np.repeat(np.arange(len(records)), np.diff(records.indptr))[held]
    terms, names = records.indices[held].tolist(), records.names
    found, starts = np.unique(rows, return_index=True)
    ends = [*starts[1:].tolist(), len(terms)]
    return [(row, frozenset(names[t] for t in terms[start:end]))
            for row, start, end in zip(found.tolist(), starts.tolist(), ends)]


def _partition_leaf(job: UnitJob, records: Records):
    """A leaf cluster's partition, the held terms kept private (none in a first publish), as
    the single-machine engine's :func:`promotion.holding_back` does."""
    stripped, kept = promotion.strip_held(job.held, records)
    return promotion.keep_held(partition(job.method, stripped, job.k, job.m), kept)


def _unit_summary(kind: str, node: int, size: int, split, keeps_private: bool, cpu: float,
                  parts: list[frozenset[str]]) -> dict:
    """``parts``: the private terms of each record that holds some."""
    return {"kind": kind, "node": node, "members": size,
            "passed_up": [] if keeps_private else sorted(split.private),
            "notes": split.notes, "cpu": cpu, "keeps_private": keeps_private,
            "private_subrecords": len(parts),
            "private_terms": sorted(set().union(*parts)) if parts else []}


class _Carrier:
    """The partitioner of the shuffles that carry a job's outputs (:func:`carried_outputs`):
    a file (keyed by its keyed hash, bytes) to one of the ``writers`` partitions, a task's
    reports (keyed by the task's index) to one of the ``readers`` partitions after them.  A
    publish has one for all its shuffles: Spark joins two shuffles partition by partition
    only when their partitioners are one (pyspark tells them apart by identity)."""

    def __init__(self, writers: int, readers: int) -> None:
        self.writers, self.readers = writers, readers
        self.partitions = writers + readers
        self.report_partitions = range(writers, self.partitions)

    def __call__(self, key: bytes | int) -> int:
        if isinstance(key, int):
            return self.writers + key % self.readers
        return int.from_bytes(key, "big") % self.writers


def carried_outputs(job_b):
    """A task's outputs keyed for their shuffle (:class:`_Carrier`): each file by its keyed
    hash (:func:`_order`), the task's reports (:func:`reported`) by the task's index."""

    def run(index: int, items: Iterator[tuple]) -> Iterator[tuple]:
        secret, others = job_b.value.secret, []
        for item in items:
            if item[0] == "file":
                yield _order(secret, item[2]), item
            else:
                others.append(item)
        for report in reported(others):
            yield index, report

    return run


def _in_task_order(pairs: Iterator[tuple]) -> list[tuple]:
    """A report partition's reports task by task, each task's in its own order (a stable
    sort: the shuffle hands them over as they arrive)."""
    return [report for _, report in sorted(pairs, key=lambda pair: pair[0])]


def write_files(job_b):
    """A task's share of the files, written in a random order and the public ones stamped
    with the publish's one modification time."""

    def run(items: Iterator) -> Iterator[int]:
        job = job_b.value
        store = open_store(job.store)
        files = sorted(items, key=lambda item: item[0])  # the keyed hash: a random order
        for _, (_, zone, path, data, private) in files:
            store.write(zone, path, data, pri_label=private)
            if zone == "public":
                store.stamp(zone, path, job.mtime)
        yield len(files)

    return run


def _order(secret: bytes, path: str) -> bytes:
    return hashlib.blake2b(path.encode(), key=secret, digest_size=8, person=b"order").digest()


# -- the aggregation round -------------------------------------------------------------------

def aggregate_pools(job_b, volume: int, parents_b, first_unit: int):
    """The aggregation pass (paper 5.2, as :func:`cocktail.overlay.layout._aggregate`), in one
    task over all the private parts the leaves passed up (a small share of the subrecords):
    nodes in descending id (children before parents), each pooling what its sources passed
    up in the single-machine order (sources by descending child id, a leaf's clusters in
    order, records by position).  A big enough pool from two or more sources, and the root's,
    is partitioned into the next unit from ``first_unit`` on, and its files made; what stays
    private goes up.  Yields ("aggregate", node, unit, summary), the units' outputs
    (:func:`unit_outputs`) and the root's pool when the job passes it up."""

    def run(items: Iterator) -> Iterator[tuple]:
        job, parents = job_b.value, parents_b.value
        pools, sources = defaultdict(list), defaultdict(set)
        for _, node, cluster, p, record_id, terms in items:
            pools[node].append((cluster, p, record_id, terms))
        for node, pool in pools.items():  # a leaf's: its clusters in order, then by position
            pool.sort(key=lambda item: item[:2])
            sources[node] = {cluster for cluster, _, _, _ in pool}
            pools[node] = [item[1:] for item in pool]
        # Children have larger ids than their parents, so in descending id a node's sources
        # are done before it, and each appends its pool to its parent's in the single-machine
        # order (by descending child id): no pool is sorted again.
        unit = first_unit
        with collector_paused():
            while pools:
                node = max(pools)
                for found in _pool_step(job, node, pools.pop(node), len(sources.pop(node)),
                                        volume, parents.get(node), pools, sources):
                    if found[0] != "aggregate":
                        yield found
                        continue
                    _, _, summary, members, chunk_terms, public = found
                    yield "aggregate", node, unit, summary
                    positions = np.array([p for p, _, _ in members], dtype=np.int64)
                    yield from unit_outputs(job, job.unit(unit), "aggregate",
                                            job.placed(positions), [i for _, i, _ in members],
                                            Records.build(t for _, _, t in members),
                                            chunk_terms, public)
                    unit += 1

    return run


def _pool_step(job: UnitJob, node: int, members: list, sources: int, volume: int,
               parent: int | None, pools: dict, passed: dict) -> Iterator[tuple]:
    """One node's pool, ``members`` (position, record id, terms) from ``sources`` sources:
    partitioned if it qualifies, what stays private appended to the parent's."""
    is_root = parent is None
    if is_root and job.pass_up_root:  # an append's new tree: the pool goes to the promotion
        for p, _, terms in members:
            yield "root_pool", job.position(p), terms
        return
    if partitions_pool(is_root, sources, len(members), volume):
        started = time.process_time()
        split = partition(job.method, [terms for _, _, terms in members], job.k, job.m)
        cpu = time.process_time() - started
        stored = [split.private] if is_root and split.private else []
        members_before = members
        members = [(p, record_id, terms & split.private)
                   for p, record_id, terms in members if terms & split.private]
        yield ("aggregate", node, _unit_summary("aggregate", node, len(members_before), split,
                                                is_root, cpu, [t for _, _, t in members]),
               members_before, [*split.public, *stored], len(split.public))
    if not is_root and members:
        pools[parent].extend(members)
        passed[parent].add(node)


# -- the driver ------------------------------------------------------------------------------

def publish_spark(source, store: Store, params: PublishParams, settings: SparkSettings,
                  *, data_format: str | None = None, skip_bad_lines: bool = False,
                  options: InputOptions = InputOptions(), rebase: bool = False,
                  progress: PhaseProgress | None = None) -> PublishReport:
    """:func:`cocktail.publish.publish` on Spark, reading ``source``: a path or hdfs:// URL,
    or a DataFrame (Spark's, pandas', polars'; :func:`read_table`), ``options`` saying how
    it is laid out.  A context already running in this process (a notebook's, the tests')
    is used as it is, ``settings`` aside, and left running."""
    params.check()
    progress = progress or (lambda phase, done, total: None)
    with _engine_context(settings) as (sc, done):
        started = time.perf_counter()
        progress("load", 0, 1)
        data_format = _format_of(sc, source, data_format)
        table = read_table(sc, source, data_format, skip_bad_lines, options)
        data = (driver_input(sc, list(table.ids), table.records, table) if table
                else read_records(sc, source, data_format, skip_bad_lines, options))
        # On disk, not in the heap: the driver's JVM is the local executors' too, and each
        # cached partition would have to fit in it whole.
        data.records.persist(StorageLevel.DISK_ONLY)
        check_size(params, data.total)
        progress("load", 1, 1)
        loading = time.perf_counter() - started
        engine = _Run(sc, data, params, store, progress)

        def build(writer: VersionWriter, mtime: float) -> Built:
            try:
                return engine.build(writer, mtime)
            finally:
                done()  # the manifests and the commit need no Spark

        report = release(store, params, build, rebase=rebase, engine="spark")
    report.phase_seconds["load"] = round(loading, 3)
    return report


def append_spark(source, store: Store, settings: SparkSettings, *,
                 data_format: str | None = None, skip_bad_lines: bool = False,
                 options: InputOptions = InputOptions(), min_new: int | None = None,
                 progress: PhaseProgress | None = None,
                 loaded: Callable[[Dataset], None] | None = None,
                 allow_duplicate: bool = False) -> AppendReport:
    """:func:`cocktail.publish.append.append` on Spark: the batch is read by Spark's reader
    (the same parsing and bad-line messages as :func:`publish_spark`) and collected at the
    driver (a batch fits one machine), and the new clusters its pool forms are laid out and
    written by :class:`SparkClusters`; the rest of the append runs at the driver as on the
    single machine.  ``loaded(dataset)``: called once the batch is read.  A context already
    running is used as :func:`publish_spark` does."""
    refuse_cloned(store)
    with _engine_context(settings) as (sc, _):
        if progress:
            progress("load", 0, 1)
        data_format = _format_of(sc, source, data_format)
        dataset = read_table(sc, source, data_format, skip_bad_lines, options) or \
            collect_dataset(read_records(sc, source, data_format, skip_bad_lines, options))
        if progress:
            progress("load", 1, 1)
        if loaded:
            loaded(dataset)
        return append(dataset, store, min_new, progress, clusters=SparkClusters(sc),
                      allow_duplicate=allow_duplicate)


def refuse_cloned(store: Store) -> None:
    """A store published with sensitive terms grows ρ-cloned trees, which the single-machine
    engine alone makes."""
    if releases.current_version(store) is None:
        return  # the append says what to do
    sensitive = Publication.open(store).head["params"].get("sensitive")
    if sensitive:
        raise ValueError(f"{store.url} was published with sensitive terms (ρ-cloned "
                         "clusters): its appends run on the single-machine engine "
                         "(--engine single)")


def collect_dataset(data: Input) -> Dataset:
    """The batch's records at the driver, in input order, as the loader would give them."""
    blocks = data.records.collect()  # in position order: partitions keep the input order
    joined = Records.joined([block.records for block in blocks])
    return Dataset(tuple(record_id for block in blocks for record_id in block.ids.strings()),
                   Records(data.names, joined.indptr, joined.indices), data.source,
                   data.format, skipped_lines=data.skipped, numbered=data.numbered)


class SparkClusters:
    """The Spark engine of an append's new clusters (:data:`~.append.ClusterPool`): the pool
    laid out and written by :meth:`_Run.lay_out`, as a first publish's records are, with what
    the single-machine :func:`~.append.cluster_pool` does differently: the records are the
    pool's (numbered from 0 in pool order, placed by ``where``), the ``held`` terms are kept
    private in the leaf clusters, and the root's pool is handed back whole for the promotion,
    not partitioned.  The driver holds the pool's records (an append's batch and buffer)."""

    def __init__(self, sc) -> None:
        self.sc = sc

    def __call__(self, writer: VersionWriter, ids: dict[int, str], pool: list[int],
                 records: list[frozenset[str]], params: PublishParams, held: frozenset[str],
                 where: Placement, progress: PhaseProgress | None) -> NewClusters:
        if params.sensitive:
            raise ValueError("ρ-cloned clusters (sensitive terms) are the single-machine "
                             "engine's")
        data = driver_input(self.sc, [ids[position] for position in pool],
                            Records.build(records))
        run = _Run(self.sc, data, params, writer.out.store,
                   progress or (lambda phase, done, total: None))
        laid = run.lay_out(writer, run.job(
            writer, writer.out.mtime, held=held, pass_up_root=params.aggregate,
            positions=np.asarray(where.records, dtype=np.int64), units=where.units),
            beside=lambda units: units.flatMap(lambda block: zip(
                block.node.tolist(), block.positions.tolist())).collect())
        leaf_unit = {where.record(local): where.unit(unit) for unit, local in laid.beside}
        return NewClusters(laid.tree, _units_manifest(laid.summaries, where), leaf_unit,
                           laid.root_pool, laid.found.totals)


@dataclass
class Input:
    records: object          # RDD of Blocks, a partition's records each, in input order
    names: tuple[str, ...]   # term ids' names
    skipped: int
    format: str
    source: str
    total: int               # records
    pairs: int               # (record, term) pairs
    numbered: bool           # the ids are line or row numbers (Dataset.numbered)


class _Run:
    """One publish's Spark work, from the parsed records to the files in staging."""

    def __init__(self, sc, data: Input, params: PublishParams, store: Store,
                 progress: PhaseProgress) -> None:
        self.sc, self.data, self.total, self.params = sc, data, data.total, params
        self.store, self.progress = store, progress
        self.phases: dict[str, float] = {}
        # partitions of each shuffle: small ones, as a task holds its share at once (a
        # cluster's records, a write task's files)
        self.tasks = max(2, sc.defaultParallelism * 2, data.total // RECORDS_PER_TASK)
        self.carrier = _Carrier(self.tasks, -(-data.total // RECORDS_PER_REPORT))

    def _timed(self, phase: str, started: float) -> None:
        self.phases[phase] = time.perf_counter() - started

    def _tracked(self, phase: str, action: Callable[[], object]) -> object:
        """Run a Spark action, reporting its tasks as the phase's progress."""
        tracker, done = self.sc.statusTracker(), threading.Event()
        result: dict = {}

        def run() -> None:
            self.sc.setJobGroup(phase, phase)
            try:
                result["value"] = action()
            except BaseException as exc:  # re-raised in the caller's thread
                result["error"] = exc
            finally:
                done.set()

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        total = 1
        while not done.wait(0.5):
            stages = [tracker.getStageInfo(stage) for job in tracker.getJobIdsForGroup(phase)
                      for stage in (tracker.getJobInfo(job) or _NO_JOB).stageIds]
            stages = [stage for stage in stages if stage]
            if stages:
                total = sum(s.numTasks for s in stages)
                self.progress(phase, sum(s.numCompletedTasks for s in stages), total)
        worker.join()
        self.progress(phase, total, total)
        if "error" in result:
            raise result["error"]
        return result["value"]

    def job(self, writer: VersionWriter, mtime: float, **pool) -> UnitJob:
        """What the executors need; ``pool``: an append's (:class:`UnitJob`'s last fields)."""
        params = self.params
        return UnitJob(self.data.names, params.method, params.k, params.m, params.aggregate,
                       writer.key, secrets.token_bytes(32), self.store.url, writer.staging,
                       mtime, **pool)

    def build(self, writer: VersionWriter, mtime: float) -> Built:
        """A first publish (or a rebase): every record of the input."""
        laid = self.lay_out(writer, self.job(writer, mtime), beside=self._records_file)
        summaries = laid.summaries
        return Built(laid.tree, _units_manifest(summaries), _stats(summaries), laid.found.totals,
                     laid.beside, {"path": self.data.source, "format": self.data.format,
                               "records": self.total, "skipped_lines": self.data.skipped},
                     self.data.pairs,
                     sum(s["cpu"] for s in summaries.values()),
                     dict(self.phases))

    def lay_out(self, writer: VersionWriter, unit_job: UnitJob,
                beside: Callable[[object], object]) -> _Laid:
        """The records' overlay tree, clusters and aggregation, every unit's files written into
        the staging area by the executors and registered in ``writer`` (chunk entries, release
        log records and member keys, term index), as :func:`~.writer.write_layout` does.
        What a first publish and an append's pool share.  ``beside(units)`` (the blocks, each
        record's leaf unit as its node) runs beside the aggregation round, whose one task
        leaves the other executors idle."""
        sc, params, names = self.sc, self.params, self.data.names
        job = sc.broadcast(unit_job)
        started = time.perf_counter()
        self.progress("tree", 0, 1)
        if params.overlay:
            tree, leaf_of, leaves, starts, held = grow_tree_distributed(
                sc, self.data.records, names, self.total, params.cluster_size, SplitSearch())
        else:
            tree, leaves, starts = Tree([Node(0)]), {0: self.total}, None
            leaf_of = held = self.data.records  # every record at the root
        units, leaf_units = self._clusters(tree, leaf_of, leaves, starts)
        self.progress("tree", 1, 1)
        self._timed("tree", started)

        started = time.perf_counter()
        outputs = units.flatMap(Block.pieces).groupByKey(self.tasks).mapPartitions(
            partition_leaves(job, sc.broadcast(leaf_units)))
        carried = [self._carried(outputs, job)]
        summaries, found, pools = {}, _Collected(), []
        for item in self._reports(carried[0], "partition"):
            if item[0] == "unit":
                summaries[item[1]] = item[2]
            elif item[0] == "pools":
                pools.append(item[1])
            else:
                found.add(item)
        leaf_of.unpersist()  # the units are cached now
        held.unpersist()
        self._timed("partition", started)

        with ThreadPoolExecutor(1, "spark-beside") as pool:
            besides = pool.submit(beside, units)
            started = time.perf_counter()
            root_pool = []
            if params.aggregate:
                aggregated, root_pool = self._aggregate(tree, pools, job, summaries, found)
                carried.append(aggregated)
            self._timed("aggregate", started)

            started = time.perf_counter()
            self._tracked("write", lambda: self._write(carried, job))
            found.into(writer)
            done = besides.result()
            units.unpersist()
            self._timed("write", started)
        return _Laid(tree, summaries, found, root_pool, done)

    def _clusters(self, tree: Tree, leaf_of, leaves: dict[int, int],
                  starts: dict[int, np.ndarray] | None):
        """Each leaf's records (``leaf_of``: blocks, each record's leaf its node) cut into
        clusters in input order, as :func:`cut_clusters`: from each leaf's cluster starts
        when the tree gave them (:meth:`Block.cut`), else by counting (:meth:`_counted`).
        Returns the blocks with each record's unit as its node, cached, and each unit's
        (leaf, cluster)."""
        size = self.params.cluster_size
        base, leaf_units = {}, {}
        for leaf in sorted(leaves):
            base[leaf] = len(leaf_units)
            clusters = -(-leaves[leaf] // size)
            tree.nodes[leaf].units = list(range(base[leaf], base[leaf] + clusters))
            leaf_units.update({base[leaf] + c: (leaf, c) for c in range(clusters)})
        base_b = self.sc.broadcast(base)
        if starts is None:
            units = self._counted(leaf_of, base_b)
        else:
            starts_b = self.sc.broadcast(starts)
            units = leaf_of.map(lambda block: block.cut(starts_b.value, base_b.value))
        return units.persist(StorageLevel.DISK_ONLY), leaf_units

    def _counted(self, leaf_of, base_b):
        """``leaf_of`` with each record's unit as its node, from each partition's records per
        leaf (:func:`leaf_counts`, a job): a record's rank in its leaf is the count before it
        in earlier partitions plus its rank in its own (partitions keep input order)."""
        size = self.params.cluster_size
        offsets, seen = {}, Counter()
        for index, counted in sorted(leaf_counts(leaf_of).items()):
            offsets[index] = dict(seen)
            seen.update(counted)
        offsets_b = self.sc.broadcast(offsets)

        def number(index: int, blocks: Iterator[Block]) -> Iterator[Block]:
            before = Counter(offsets_b.value[index])
            for block in blocks:
                yield block.clustered(before, base_b.value, size)

        return leaf_of.mapPartitionsWithIndex(number)

    def _aggregate(self, tree: Tree, pools: list[bytes], job, summaries: dict,
                   found: _Collected):
        """The second round: the pools (pickled, a task's each), in one task (the job that
        makes its units reports them).  Returns the shuffle that carries the aggregated
        units' files (:meth:`_carried`), and the root's pool when the job passes it up
        ((position, terms), in pool order)."""
        parents_b = self.sc.broadcast(tree.parents())
        # Broadcast, not the task's own data: megabytes in a task are sent with it (and
        # warned about); a broadcast goes through the block manager.
        pools_b = self.sc.broadcast(pools)
        pooled = self.sc.parallelize([0], 1).flatMap(
            lambda _: itertools.chain.from_iterable(map(pickle.loads, pools_b.value)))
        written = self._carried(pooled.mapPartitions(aggregate_pools(
            job, self.params.aggregate_volume, parents_b, len(summaries))), job)
        root_pool = []
        for item in self._reports(written):
            if item[0] == "aggregate":
                _, node, unit, summary = item
                summaries[unit] = summary
                tree.nodes[node].aggregate = unit
            elif item[0] == "root_pool":
                root_pool.append(item[1:])
            else:
                found.add(item)
        return written, root_pool

    def _carried(self, outputs, job):
        """``outputs`` (a job's files and reports) in the one shuffle that carries them
        (:class:`_Carrier`): the files to the tasks that write them, the reports to the
        partitions after those.  No cache between: the job that makes the outputs writes
        the shuffle, the driver reads the reports from it, and the write job the files."""
        return outputs.mapPartitionsWithIndex(carried_outputs(job)).partitionBy(
            self.carrier.partitions, self.carrier)

    def _reports(self, carried, phase: str | None = None) -> Iterator[tuple]:
        """What the driver takes of a job's outputs (:func:`reported`), from the report
        partitions of their shuffle (:meth:`_carried`): REPORTS_AT_ONCE partitions a job (a
        job each cost 0.4 s at 1M, read one after the other), in task order.  The first job
        runs the tasks that make the outputs, every one at once (tracked as ``phase``'s
        progress when given)."""
        reports = carried.mapPartitions(_in_task_order)
        parts = list(self.carrier.report_partitions)
        first, *rest = [parts[at:at + REPORTS_AT_ONCE]
                        for at in range(0, len(parts), REPORTS_AT_ONCE)]

        def read(batch: list[int]) -> list[tuple]:
            return self.sc.runJob(reports, list, batch)  # in the order of ``batch``

        yield from self._tracked(phase, lambda: read(first)) if phase else read(first)
        for batch in rest:
            yield from read(batch)

    def _write(self, carried: list, job) -> None:
        """The write job: each task writes the files that the shuffles (the leaves' and the
        aggregation's) carried to its partition, together, in their keyed-hash order."""
        carrier = self.carrier
        files = self.sc.union(carried) if len(carried) > 1 else carried[0]
        if files.getNumPartitions() != carrier.partitions:
            # Spark joins shuffles partition by partition when their partitioners are equal
            # (the one carrier); were that lost, files would be written shuffle by shuffle.
            files = files.partitionBy(carrier.partitions, carrier)
        self.sc.runJob(files, write_files(job), list(range(carrier.writers)))

    def _records_file(self, units) -> BinaryIO:
        """records.jsonl: each record's id and leaf unit, streamed from the executors into a
        private temporary file, so the driver never holds it."""
        spool = tempfile.TemporaryFile()
        lines_of = units.map(
            lambda block: fmt.encode_records(block.ids.strings(), block.node.tolist()))
        for lines in lines_of.toLocalIterator(prefetchPartitions=True):
            spool.write(lines)
        return spool


class _Collected:
    """The chunks' manifest and release entries, the units' member names and the term index
    pieces, as the executors report them."""

    def __init__(self) -> None:
        self.chunks: dict[str, dict] = {}
        self.logged: dict[str, dict] = {}
        self.keys: list[tuple] = []
        self.pieces: list[bytes] = []  # term index pieces, a task's each
        self.totals = {"public": 0, "private": 0, "public_subrecords": 0,
                       "private_subrecords": 0, "public_pairs": 0, "private_pairs": 0}

    def add(self, item: tuple) -> None:
        if item[0] == "keys":
            self.keys.append(item[1:])
            return
        if item[0] == "terms":
            self.pieces.append(item[1])
            return
        _, chunk_id, entry, logged, pairs = item
        if chunk_id in self.chunks:
            raise RuntimeError(f"two chunks drew the id {chunk_id}: publish again")
        self.chunks[chunk_id] = entry
        kind = "private" if entry["priLabel"] else "public"
        self.totals[kind] += 1
        self.totals[f"{kind}_subrecords"] += entry["subrecords"]
        self.totals[f"{kind}_pairs"] += pairs
        if logged is not None:
            self.logged[chunk_id] = logged

    def into(self, writer: VersionWriter) -> None:
        """Registered as :meth:`VersionWriter.add_chunk` and ``close_unit`` would have."""
        taken = self.chunks.keys() & writer.chunks.keys()
        if taken:
            raise RuntimeError(f"two chunks drew the id {min(taken)}: run it again")
        writer.chunks.update(self.chunks)
        writer.release.chunks.update(self.logged)
        for unit, kind, added, public in self.keys:
            writer.release.add_keys(unit, kind, added, public)
            writer.maps_written.add(unit)
        started = time.perf_counter()
        for piece in self.pieces:
            writer.terms.add_piece(piece)
        writer.index_seconds += time.perf_counter() - started
        self.pieces = []


@dataclass
class _Laid:
    """What :meth:`_Run.lay_out` made: units numbered from 0, nodes the run's own."""

    tree: Tree
    summaries: dict[int, dict]  # unit -> what its executor reported
    found: _Collected           # the chunks' entries and the units' member names
    root_pool: list             # (publication position, terms) the root passed up, if asked
    beside: object              # what lay_out's ``beside`` gave


def _units_manifest(summaries: dict[int, dict], where: Placement | None = None) -> list[dict]:
    """As :func:`~.writer.units_manifest`: ``where`` places an append's units."""
    where = where or Placement()
    return [{"id": where.unit(unit), "kind": s["kind"], "node": s["node"] + where.nodes,
             "members": s["members"], "passed_up": s["passed_up"], "notes": s["notes"]}
            for unit, s in sorted(summaries.items())]


def _stats(summaries: dict[int, dict]) -> dict[str, dict[str, int]]:
    def count(units: list[dict]) -> dict[str, int]:
        return {"private_subrecords": sum(s["private_subrecords"] for s in units),
                "private_terms": len(set().union(*(s["private_terms"] for s in units)))}

    leaves = [s for s in summaries.values() if s["kind"] == "leaf"]
    return {"before": count(leaves),
            "after": count([s for s in summaries.values() if s["keeps_private"]])}
