"""The input, read by the executors (a text file, a byte range or a partition of lines a task)
or at the driver (a table, an append's pool), with the single-machine loader's parsers and
messages: :class:`Input`, the records in input order, a :class:`~.blocks.Block` a partition."""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import numpy as np
from pyspark import StorageLevel

from ...dataset import (NUMBERED_FORMATS, CsvLayout, Dataset, HeaderCheck, InputError,
                        InputOptions, MalformedLine, PackedIds, Records, RecordsBuilder,
                        detect_format, duplicate_id, encoding_hint, fimi_lines, first_csv_layout,
                        format_by_name, from_frame, line_range, load, parse_line,
                        read_fimi_lines, reading, sniff_format, spmf_item_name)
from .blocks import Block

NOT_UTF8 = "not valid UTF-8"
INPUT_SPLIT = 8 << 20       # bytes of input per partition: a partition is one tree block
RECORDS_PER_TASK = 50_000   # records per task of each shuffle


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


def read_records(sc, source: str, data_format: str | None, skip_bad_lines: bool,
                 options: InputOptions = InputOptions()) -> Input:
    """The records of a text input in input order, a :class:`Block` a partition.  The first
    bad line stops the publish with its number, as the single-machine loader does."""
    data_format = format_of(sc, source, data_format)
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
            if message == NOT_UTF8:  # Spark's reader replaced the bytes: read them again
                message = _utf8_error(sc, source, number)
            if message.startswith(NOT_UTF8):  # with what to do, as the loader says it
                message += encoding_hint("utf-8")
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


def collect_dataset(data: Input) -> Dataset:
    """The batch's records at the driver, in input order, as the loader would give them."""
    blocks = data.records.collect()  # in position order: partitions keep the input order
    joined = Records.joined([block.records for block in blocks])
    return Dataset(tuple(record_id for block in blocks for record_id in block.ids.strings()),
                   Records(data.names, joined.indptr, joined.indices), data.source,
                   data.format, skipped_lines=data.skipped, numbered=data.numbered)


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


def format_of(sc, source, data_format: str | None) -> str | None:
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
        lambda line: (line[1] + 1, line[0])).take(1)  # partitions in input order: the first
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
    first = rows.filter(lambda item: item[1] == number).take(1)  # one row a line
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
        "bad", item[1], duplicate_id(*first[item[1]])))
