"""Reading set-valued data (FIMI, SPMF, CSV, JSON Lines; Parquet and DataFrames through
pyarrow) into records, with line-precise errors.

Every reader turns its input into record ids and records (sets of string terms).  A malformed
line stops the load with ``file:line: what is wrong`` (a table's bad row with ``row N: ...``),
or, with ``skip_bad_lines``, is skipped and counted.  Lines are decoded one by one so that a
stray byte the encoding does not allow is reported at its line.
Duplicate terms in a record collapse; empty records are kept (they are records of the dataset).
Records are held compactly (:class:`Records`): a term id per (record, term) pair, not a set of
strings per record, so a million records take tens of megabytes, not a gigabyte.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import json
import os
import re
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import compress
from pathlib import Path
from typing import BinaryIO

import numpy as np

from .extras import require

FORMATS = ("fimi", "spmf", "csv", "jsonl", "parquet")
NUMBERED_FORMATS = ("fimi", "spmf")  # a record's id is its line's number
_EXTENSIONS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl",
               ".parquet": "parquet", ".pq": "parquet"}
_PARQUET_MAGIC = b"PAR1"
_CSV_HEADER = ["record_id", "term"]
# The column names a table's (or a CSV header's) record ids and terms are found by.
ID_COLUMNS = ("record_id", "id")
TERMS_COLUMNS = ("terms", "term")
_NUMBER = re.compile(r"[+-]?\d+(?:\.\d*)?", re.ASCII)
Progress = Callable[[str, int, int], None]  # (phase, done, total), as a publish reports
PROGRESS_LINES = 1 << 16  # a load reports its progress every this many lines
SKIPPED_SHOWN = 5  # the skipped lines a load names (with their reasons); the rest are counted
_OTHER_BYTE_BREAKS = re.compile(rb"[\x0b\x0c\x1c\x1d\x1e]")  # str.splitlines's, in ASCII
_BREAK = re.compile(rb"\r\n|\r|\n")  # bytes.splitlines's, and Hadoop's text reader's
_NEGATIVE_NUMBER = re.compile(r"-\d+(?:\.\d*)?", re.ASCII)

PathLike = str | os.PathLike[str]


class InputError(ValueError):
    """Unreadable or malformed input; the message names the file and, if any, the line."""


def key_type(limit: int) -> type:
    """int32 if every sort key is below ``limit``, else int64: numpy sorts 32-bit keys in
    about half the time, and a publish sorts a key per (record, term) pair several times."""
    return np.int32 if limit <= 1 << 31 else np.int64


class Records(Sequence[frozenset[str]]):
    """Records as term ids in compressed rows (CSR): record ``i`` holds the terms
    ``names[indices[indptr[i]:indptr[i + 1]]]``.  Term ids follow name order, so that anything
    ranking terms by id (the overlay tree's tie-breaks) ranks them by name.  Reading a record
    gives a frozenset, built on demand."""

    def __init__(self, names: Sequence[str], indptr: np.ndarray, indices: np.ndarray) -> None:
        self.names = names
        self.indptr = indptr
        self.indices = indices

    @classmethod
    def build(cls, records: Iterable[Iterable[str]]) -> Records:
        builder = RecordsBuilder()
        for record in records:
            builder.add(record)
        return builder.build()

    @classmethod
    def of(cls, records: Sequence[frozenset[str]]) -> Records:
        """``records`` held compactly (as they are if they already are)."""
        return records if isinstance(records, Records) else cls.build(records)

    @classmethod
    def of_pairs(cls, names: Sequence[str], rows: np.ndarray, ids: np.ndarray,
                 records: int) -> tuple[Records, int]:
        """``records`` records from (record, term id) pairs in any order, and how many pairs
        were given more than once (kept once)."""
        indices, lengths = distinct_pairs(rows, ids, records, len(names))
        indptr = np.zeros(records + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        return cls(names, indptr, indices), len(rows) - len(indices)

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def __getitem__(self, item):
        if isinstance(item, slice):
            start, stop, step = item.indices(len(self))
            if step != 1:
                return Records.build(self[i] for i in range(start, stop, step))
            return Records(self.names, self.indptr[start:stop + 1] - self.indptr[start],
                           self.indices[self.indptr[start]:self.indptr[stop]])
        if not -len(self) <= item < len(self):
            raise IndexError("record index out of range")
        item %= len(self)
        ids = self.indices[self.indptr[item]:self.indptr[item + 1]].tolist()
        return frozenset(map(self.names.__getitem__, ids))

    def __iter__(self) -> Iterator[frozenset[str]]:
        ids, ends, names = self.indices.tolist(), self.indptr.tolist(), self.names
        for start, stop in zip(ends, ends[1:]):
            yield frozenset([names[i] for i in ids[start:stop]])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Sequence[frozenset[str]]) -> Records:
        return Records.build([*self, *other])

    def __repr__(self) -> str:
        return f"Records({len(self):,} records, {len(self.names):,} terms)"

    def pairs(self) -> int:
        """(record, term) pairs over all records."""
        return len(self.indices)

    @staticmethod
    def joined(parts: Sequence[Records]) -> Records:
        """``parts`` (over the same names) one after the other."""
        lengths = np.concatenate([np.diff(part.indptr) for part in parts])
        indptr = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        return Records(parts[0].names, indptr, np.concatenate([part.indices for part in parts]))

    def take(self, positions: np.ndarray) -> Records:
        """The records at ``positions``, in that order."""
        ids, lengths = self._gathered(positions)
        indptr = np.zeros(len(positions) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        return Records(self.names, indptr, ids)

    def ids_of(self, terms: Iterable[str]) -> list[int]:
        """The ids of those of ``terms`` that some record may hold (``names`` is sorted)."""
        terms = list(terms)
        found = [bisect_left(self.names, term) for term in terms]
        return [i for i, term in zip(found, terms)
                if i < len(self.names) and self.names[i] == term]

    def sorted_terms(self) -> list[tuple[str, ...]]:
        """Each record's terms in name order (which term ids follow)."""
        ids, ends, names = self.indices.tolist(), self.indptr.tolist(), self.names
        return [tuple([names[i] for i in sorted(ids[start:stop])])
                for start, stop in zip(ends, ends[1:])]

    def rows(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row within ``positions``, term id) of every term of the records at ``positions``."""
        ids, lengths = self._gathered(positions)
        return np.repeat(np.arange(len(positions)), lengths), ids

    def _gathered(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The term ids of the records at ``positions``, one record after another, and how
        many each has."""
        starts = self.indptr[positions]
        lengths = self.indptr[positions + 1] - starts
        ends = np.cumsum(lengths)
        # pair i of row r sits at starts[r] + (i - where row r's pairs begin)
        at = np.repeat(starts - (ends - lengths), lengths) + np.arange(ends[-1] if len(ends) else 0)
        return self.indices[at], lengths


class PackedIds:
    """Record ids as one UTF-8 buffer cut into rows (a :class:`Records` whose terms are byte
    values; surrogates pass through, so any id round-trips): a block of many thousands
    pickles, gathers and joins as two arrays, not an object an id (the Spark engine's)."""

    BYTES = range(256)

    def __init__(self, rows: Records) -> None:
        self.rows = rows

    @classmethod
    def of(cls, ids: Sequence[str]) -> PackedIds:
        encoded = [record_id.encode("utf-8", "surrogatepass") for record_id in ids]
        indptr = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=indptr[1:])
        return cls(Records(cls.BYTES, indptr, np.frombuffer(b"".join(encoded), np.uint8)))

    @classmethod
    def numbered(cls, numbers: np.ndarray) -> PackedIds:
        """``numbers`` in decimal (a FIMI record's id is its line's number)."""
        text = np.asarray(numbers, dtype=np.int64).astype(np.bytes_)
        lengths = np.char.str_len(text)
        grid = text.view(np.uint8).reshape(len(text), text.dtype.itemsize)
        indptr = np.zeros(len(text) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        return cls(Records(cls.BYTES, indptr, grid[np.arange(grid.shape[1]) < lengths[:, None]]))

    @staticmethod
    def joined(parts: Sequence[PackedIds]) -> PackedIds:
        return PackedIds(Records.joined([part.rows for part in parts]))

    def __len__(self) -> int:
        return len(self.rows)

    def take(self, positions: np.ndarray) -> PackedIds:
        """The ids at ``positions``, in that order."""
        return PackedIds(self.rows.take(positions))

    def strings(self) -> list[str]:
        data, ends = self.rows.indices.tobytes(), self.rows.indptr.tolist()
        return [data[start:stop].decode("utf-8", "surrogatepass")
                for start, stop in zip(ends, ends[1:])]


def distinct_pairs(rows: np.ndarray, ids: np.ndarray, records: int,
                   width: int) -> tuple[np.ndarray, np.ndarray]:
    """(record, term id) pairs, each kept once: the term ids record by record (in id order)
    and how many each of ``records`` records has.  ``width``: how many term ids there are."""
    width = max(1, width)
    dtype = key_type(records * width)
    keys = rows.astype(dtype)  # in place from here: a key per pair is the scratch
    keys *= width
    keys += ids
    keys.sort()  # by record, then term
    keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if len(keys) else keys
    return (keys % width).astype(np.int32, copy=False), np.bincount(keys // width,
                                                                    minlength=records)


class RecordsBuilder:
    """Collects records one by one into :class:`Records` (ids first in order of appearance,
    renumbered by name at the end)."""

    def __init__(self) -> None:
        self._vocabulary: dict[str, int] = {}
        self._lengths = array("q")
        self._ids = array("i")

    def add(self, record: Iterable[str]) -> int:
        """Add one record; returns its number of distinct terms."""
        vocabulary = self._vocabulary
        ids = {vocabulary.setdefault(term, len(vocabulary)) for term in record}
        self._ids.extend(ids)
        self._lengths.append(len(ids))
        return len(ids)

    def add_many(self, tokens: list[str], lengths: np.ndarray) -> int:
        """Add records given as all their terms in a row and how many each has; a term
        repeated within a record is kept once.  Returns the distinct terms added."""
        vocabulary = self._vocabulary
        for term in dict.fromkeys(tokens):
            vocabulary.setdefault(term, len(vocabulary))
        ids = np.fromiter(map(vocabulary.__getitem__, tokens), np.int32, len(tokens))
        rows = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
        ids, lengths = distinct_pairs(rows, ids, len(lengths), len(vocabulary))
        self._ids.frombytes(ids.tobytes())
        self._lengths.frombytes(lengths.astype(np.int64).tobytes())
        return len(ids)

    def build(self) -> Records:
        names = sorted(self._vocabulary)
        rank = np.empty(len(names), dtype=np.int32)
        rank[[self._vocabulary[t] for t in names]] = np.arange(len(names), dtype=np.int32)
        indices = rank[np.frombuffer(self._ids, dtype=np.int32)] if self._ids \
            else np.zeros(0, dtype=np.int32)
        indptr = np.zeros(len(self._lengths) + 1, dtype=np.int64)
        np.cumsum(np.frombuffer(self._lengths, dtype=np.int64), out=indptr[1:])
        return Records(tuple(names), indptr, indices)


@dataclass(frozen=True)
class Dataset:
    """Records in input order with their unique ids.  ``numbered``: the ids are the records'
    line or row numbers, not ids the input gives (by default, for FIMI and SPMF)."""

    ids: tuple[str, ...]
    records: Records
    source: str
    format: str
    skipped_lines: int = 0
    duplicate_terms: int = 0
    numbered: bool | None = None
    skipped_examples: tuple[tuple[int, str], ...] = ()  # the first skipped: (line, why)

    def __post_init__(self) -> None:
        if self.numbered is None:
            object.__setattr__(self, "numbered", self.format in NUMBERED_FORMATS)
        object.__setattr__(self, "records", Records.of(self.records))
        if len(self.ids) != len(self.records):
            raise ValueError(f"{len(self.ids)} ids for {len(self.records)} records")
        if len(set(self.ids)) != len(self.ids):
            raise ValueError("record ids are not unique")

    def __len__(self) -> int:
        return len(self.records)

    @property
    def empty_records(self) -> int:
        return sum(1 for r in self.records if not r)

    def terms(self) -> set[str]:
        """The distinct terms of all records."""
        names = self.records.names
        return {names[i] for i in np.unique(self.records.indices).tolist()}

    def count_containing(self, terms: Iterable[str]) -> int:
        """Brute force over the raw records: the oracle exact answers are checked against.  A
        scan of every stored term (no index, nothing of the publication's): a record holds
        each term once, so it holds them all when as many of its terms are wanted.  Vectorised,
        as a Python loop over frozensets took 16 s for 200 queries on BMS-WebView-2."""
        wanted = set(terms)
        records = self.records
        if not wanted:
            return len(records)
        names = records.names
        ids = [bisect_left(names, term) for term in wanted]
        if any(i == len(names) or names[i] != term for i, term in zip(ids, wanted)):
            return 0  # a term no record holds
        rows = np.repeat(np.arange(len(records)), np.diff(records.indptr))
        held = np.bincount(rows[np.isin(records.indices, ids)], minlength=len(records))
        return int(np.count_nonzero(held == len(ids)))

    @property
    def content_digest(self) -> str | None:
        """The SHA-256 of the records' terms in input order (term ids follow name order, each
        record's sorted): what tells a batch appended twice.  None when the input names its
        records: a repeated id is refused already, and repeated content may be meant."""
        if not self.numbered:
            return None
        records = self.records
        indices = np.asarray(records.indices, dtype=np.int64)
        used = np.unique(indices)  # a slice keeps every name: only the held ones count
        indices = np.searchsorted(used, indices)
        rows = np.repeat(np.arange(len(records)), np.diff(records.indptr))
        digest = hashlib.sha256(b"cocktail-batch/1\0")
        digest.update("\0".join(records.names[i] for i in used.tolist())
                      .encode("utf-8", "surrogatepass") + b"\0")
        digest.update(np.diff(records.indptr).astype(np.int64).tobytes())
        digest.update(indices[np.lexsort((indices, rows))].tobytes())
        return digest.hexdigest()

    def head(self, n: int) -> Dataset:
        """The first ``n`` records with their ids (a subsample for tests and experiments)."""
        return Dataset(self.ids[:n], self.records[:n], self.source, self.format,
                       numbered=self.numbered)


@dataclass(frozen=True)
class InputOptions:
    """How an input is laid out beyond its format (``cocktail publish``'s options of the same
    names).  ``header``: whether a CSV file's first row is a header (None: a first row
    ``record_id,term`` is, and a first row that looks like one is refused).  ``id_column``
    and ``terms_column`` name a CSV header's or a table's columns (None: found by name or
    shape)."""

    encoding: str = "utf-8"         # text formats
    delimiter: str = ","            # CSV
    header: bool | None = None      # CSV
    id_column: str | None = None    # CSV (a header's names), Parquet, DataFrames
    terms_column: str | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "encoding", codecs.lookup(self.encoding).name)
        except LookupError:
            raise ValueError(f"unknown encoding {self.encoding!r}") from None
        if len(self.delimiter) != 1 or self.delimiter in "\"\r\n":
            raise ValueError(f"a CSV delimiter is one character, not a quote or a line break; "
                             f"got {self.delimiter!r}")
        if self.header is False and self.named:
            raise ValueError("column names need a header row (--id-column and --terms-column "
                             "name its columns); drop --no-header")

    @property
    def named(self) -> bool:
        return self.id_column is not None or self.terms_column is not None

    def check(self, format: str, source: str) -> None:
        """Refuse options the input's format has no use for."""
        given = [name for name, used, formats in (
            ("encoding", self.encoding != "utf-8", [f for f in FORMATS if f != "parquet"]),
            ("delimiter", self.delimiter != ",", ["csv"]),
            ("header", self.header is not None, ["csv"]),
            ("column names", self.named, ["csv", "parquet"])) if used and format not in formats]
        if given:
            raise InputError(f"{source}: {format} input takes no {' or '.join(given)}")


class MalformedLine(ValueError):
    """A bad line, raised by the per-line parsers; the message says what is wrong (the reader
    adds the file and line)."""


class _Lines:
    """The numbered, decoded lines of a file; bad lines either raise or are counted.
    ``encoding``: one whose line breaks are ASCII's (:func:`_line_encoded`)."""

    def __init__(self, source: str, data: bytes, skip_bad_lines: bool,
                 encoding: str = "utf-8", progress: Progress | None = None) -> None:
        self.source = source
        self._data = data
        self._skip = skip_bad_lines
        self._encoding = encoding
        self._progress = progress
        self.skipped = 0
        self.examples: list[tuple[int, str]] = []  # the first skipped: (line number, message)

    def __iter__(self) -> Iterator[tuple[int, str]]:
        # bytes.splitlines breaks only at \n, \r and \r\n, unlike str.splitlines (\x1c, \u2028, ...)
        lines = self._data.splitlines()
        progress = self._progress or (lambda phase, done, total: None)
        progress("load", 0, len(lines))
        for number, raw in enumerate(lines, 1):
            if not number % PROGRESS_LINES:
                progress("load", number, len(lines))
            try:
                yield number, raw.decode(self._encoding)
            except UnicodeDecodeError as e:
                self.bad(number, f"not valid {_encoding_name(self._encoding)} (byte "
                                 f"0x{raw[e.start]:02x} at column {e.start + 1})",
                         encoding_hint(self._encoding))
        progress("load", len(lines), len(lines))

    @property
    def data(self) -> bytes:
        return self._data

    @property
    def first_bad(self) -> tuple[int, str] | None:
        return self.examples[0] if self.examples else None

    def bad(self, number: int, message: str, hint: str = "") -> None:
        """Line ``number`` is malformed: stop (saying what to do, ``hint``), or skip it."""
        if not self._skip:
            raise InputError(f"{self.source}:{number}: {message}{hint}")
        self.skipped += 1
        if len(self.examples) < SKIPPED_SHOWN:
            self.examples.append((number, message))


@contextmanager
def reading(path: PathLike) -> Iterator[None]:
    """An input file's open and read errors as :class:`InputError`s, in the loader's words."""
    try:
        yield
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror or e})") from None


def _read_bytes(path: PathLike) -> bytes:
    with reading(path):
        data = Path(path).read_bytes()
    return data.removeprefix(codecs.BOM_UTF8)


def encoding_hint(encoding: str) -> str:
    """What to do about a byte the file's encoding does not decode."""
    if encoding == "utf-8":
        return ("; give the file's encoding (--encoding cp1252, latin-1, ...), re-encode it "
                "(iconv -f cp1252 -t utf-8 IN > OUT), or skip such lines (--skip-bad-lines)")
    return (f"; is the file in another encoding than {encoding}? (--encoding); or skip such "
            "lines (--skip-bad-lines)")


def _encoding_name(encoding: str) -> str:
    return "UTF-8" if encoding == "utf-8" else encoding


def _line_encoded(data: bytes, encoding: str, source: str) -> tuple[bytes, str]:
    """``data`` and its encoding, where a line break is the byte it is in ASCII (UTF-8,
    Latin-1, cp1252, ...: lines are cut and decoded one by one, a bad byte named at its
    line); any other encoding (UTF-16, UTF-32) is transcoded to UTF-8 at once."""
    if "\r\n \t".encode(encoding, "replace") == b"\r\n \t":
        return data, encoding
    try:
        return data.decode(encoding).encode("utf-8"), "utf-8"
    except UnicodeDecodeError as e:
        raise InputError(f"{source}: not valid {encoding} (at byte {e.start})") from None


def format_by_name(path: PathLike) -> str | None:
    return _EXTENSIONS.get(Path(path).suffix.lower())


def sniff_format(lines: Iterable[str]) -> str:
    """'spmf' if the first data line ends with the SPMF end-of-sequence marker, else 'fimi'."""
    for line in lines:
        tokens = line.split()
        if tokens and tokens[0][0] not in "@#%":
            return "spmf" if tokens[-1] == "-2" else "fimi"
    return "fimi"


def detect_format(path: PathLike) -> str:
    """The format of a file: from its extension, else from its content (Parquet, SPMF or
    FIMI)."""
    by_name = format_by_name(path) or _parquet_by_content(path)
    if by_name:
        return by_name
    with reading(path), open(path, encoding="utf-8-sig", errors="replace", newline="") as f:
        return sniff_format(f)


def _parquet_by_content(path: PathLike) -> str | None:
    """'parquet' for a file that starts as Parquet files do."""
    with reading(path), open(path, "rb") as f:
        return "parquet" if f.read(len(_PARQUET_MAGIC)) == _PARQUET_MAGIC else None


def load(path: PathLike, format: str | None = None, *, skip_bad_lines: bool = False,
         encoding: str = "utf-8", delimiter: str = ",", header: bool | None = None,
         id_column: str | None = None, terms_column: str | None = None,
         progress: Progress | None = None) -> Dataset:
    """Read a dataset; ``format`` defaults to :func:`detect_format`'s answer.  The other
    options are :class:`InputOptions`' (a format refuses those it has no use for);
    ``progress("load", lines, total)`` follows a text file's lines as they are parsed."""
    reported = []

    def step(phase: str, done: int, total: int) -> None:
        reported.append(done)
        if progress:
            progress(phase, done, total)
    dataset = _load(path, format, skip_bad_lines,
                    InputOptions(encoding, delimiter, header, id_column, terms_column), step)
    if progress and not reported:  # read at once (Parquet, FIMI's fast path): one step
        progress("load", 1, 1)
    return dataset


def _load(path: PathLike, format: str | None, skip_bad_lines: bool, options: InputOptions,
          progress: Progress) -> Dataset:
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")
    source = str(path)
    format = format or format_by_name(path) or _parquet_by_content(path)
    if format == "parquet":
        options.check(format, source)
        return _read_parquet(source, skip_bad_lines, options)
    data, encoding = _line_encoded(_read_bytes(path), options.encoding, source)
    if format is None:
        # sniff the bytes already read rather than opening the file twice
        format = sniff_format(raw.decode(encoding, "replace") for raw in data.splitlines())
    options.check(format, source)
    lines = _Lines(source, data, skip_bad_lines, encoding, progress)
    ids, records, duplicates = (_read_csv(lines, options) if format == "csv"
                                else _READERS[format](lines))
    if not records:
        skipped = f"; every line skipped: {skipped_text(lines.skipped, lines.examples)}" \
            if lines.skipped else ""
        raise InputError(f"{source}: no records (empty file){skipped}")
    return Dataset(ids=tuple(ids), records=records, source=source, format=format,
                   skipped_lines=lines.skipped, duplicate_terms=duplicates,
                   skipped_examples=tuple(lines.examples))


def skipped_text(count: int, examples: Sequence[tuple[int, str]], unit: str = "line") -> str:
    """``3 malformed lines: line 4 (why), line 9 (why), ...``: what --skip-bad-lines left out."""
    shown = ", ".join(f"{unit} {number} ({why})" for number, why in examples)
    more = count - len(examples)
    return (f"{count:,} malformed {unit}{'' if count == 1 else 's'}"
            + (f": {shown}" if shown else "") + (f" and {more:,} more" if shown and more > 0
                                                 else ""))


_Parsed = tuple[list[str], Records, int]  # ids, records, duplicate terms dropped


def _read_fimi(lines: _Lines) -> _Parsed:
    return _fimi_at_once(lines.data) or _fimi_by_line(lines)


@dataclass
class FimiLines:
    """Whole FIMI lines read as the loader reads a file, numbered from the first of them."""

    ids: list[str]     # each record's line number
    records: Records
    lines: int
    skipped: int       # bad lines
    first_bad: tuple[int, str] | None  # (line number, message)


def read_fimi_lines(source: str, data: bytes) -> FimiLines:
    """FIMI lines (a piece of a file cut at line starts: :func:`line_range`) read as
    :func:`load` reads a whole file, bad lines counted rather than raised."""
    lines = _Lines(source, data, skip_bad_lines=True)
    ids, records, _ = _read_fimi(lines)
    return FimiLines(ids, records, _count_lines(data), lines.skipped, lines.first_bad)


def line_range(path: PathLike, start: int, end: int) -> bytes:
    """The whole lines of a file that start at a byte in [start, end), where a line starts at
    0 and after each \\r, \\n or \\r\\n, as Hadoop's text reader cuts a file among tasks:
    the ranges that cut a file hold each of its lines once."""
    with open(path, "rb") as f:
        end = min(end, os.fstat(f.fileno()).st_size)
        if start >= end:
            return b""
        first, last = _line_start(f, start), _line_start(f, end)
        f.seek(first)
        return f.read(last - first)


LINE_SEEK = 1 << 16  # bytes read at a time looking for a line's start


def _line_start(f: BinaryIO, position: int) -> int:
    """The first line start at or after ``position``, or the end of the file."""
    if position <= 0:
        return 0
    f.seek(position - 1)
    seen, searched = bytearray(), 0  # a long line grows it in amortised time
    while True:
        chunk = f.read(LINE_SEEK)
        seen += chunk
        found = _BREAK.search(seen, searched)
        # a \r read last may be the start of \r\n: one more byte decides
        if found and (chunk == b"" or found.end() < len(seen) or found.group() != b"\r"):
            return position - 1 + found.end()
        if not chunk:
            return position - 1 + len(seen)
        searched = found.start() if found else len(seen)


def _fimi_by_line(lines: _Lines) -> _Parsed:
    ids: list[str] = []
    records = RecordsBuilder()
    duplicates = 0
    for number, text in lines:
        tokens = fimi_line(text)
        if tokens is None:
            continue
        duplicates += len(tokens) - records.add(tokens)
        ids.append(str(number))
    return ids, records.build(), duplicates


FIMI_BLOCK = 1 << 20  # bytes read as arrays at a time: a term's string lives a block, not a load


def _fimi_at_once(data: bytes) -> _Parsed | None:
    """A FIMI file that is ASCII and breaks lines only at \\r, \\n or \\r\\n, read with
    arrays, a block of whole lines at a time.  None for any other file (the line-by-line reader
    takes it)."""
    ids: list[str] = []
    records = RecordsBuilder()
    duplicates = start = lines = 0
    while start < len(data):
        end = data.find(b"\n", start + FIMI_BLOCK) + 1 or len(data)  # a block ends a line
        block = fimi_lines(data[start:end])
        if block is None:
            return None
        kept, tokens, lengths = block
        ids += [str(lines + n) for n in (np.flatnonzero(kept) + 1).tolist()]
        duplicates += len(tokens) - records.add_many(tokens, lengths)
        lines += len(kept)
        start = end
    return ids, records.build(), duplicates


def fimi_lines(data: bytes) -> tuple[np.ndarray, list[str], np.ndarray] | None:
    """Whole FIMI lines read with arrays (:func:`_fimi_block`), or None where only the
    line-by-line reader reads them as the loader must: bytes that are not ASCII, or a line
    break other than \\r, \\n or \\r\\n."""
    if not data.isascii() or _OTHER_BYTE_BREAKS.search(data):
        return None
    return _fimi_block(data)


def _fimi_block(data: bytes) -> tuple[np.ndarray, list[str], np.ndarray] | None:
    """Whole FIMI lines: whether each is a record (not a comment), their terms in a row, how
    many each record has.  Where each token starts says its line, and a line whose first token
    starts with # or % is a comment."""
    raw = np.frombuffer(data, dtype=np.uint8)
    cr, lf = raw == 13, raw == 10
    ends = cr.copy()
    ends[1:] |= lf[1:] & ~cr[:-1]  # \\r\\n ends one line
    ends[:1] |= lf[:1]
    line = np.cumsum(ends) - ends  # each byte's line, from 0
    space = cr | lf | (raw == 32) | (raw == 9) | (raw == 31)  # str.split's, in ASCII
    starts = np.flatnonzero(~space & np.concatenate(([True], space[:-1])))
    tokens = data.decode("ascii").split()
    if len(tokens) != len(starts):
        return None
    token_line = line[starts]
    first = np.concatenate(([True], token_line[1:] != token_line[:-1]))
    kept = np.ones(_count_lines(data), dtype=bool)
    kept[token_line[first & ((raw[starts] == 35) | (raw[starts] == 37))]] = False  # # or %
    if not kept.all():
        keep = kept[token_line]
        tokens = list(compress(tokens, keep.tolist()))
        token_line = token_line[keep]
    record = np.cumsum(kept) - 1
    lengths = np.bincount(record[token_line], minlength=int(kept.sum()))
    return kept, tokens, lengths


def _count_lines(data: bytes) -> int:
    """The lines bytes.splitlines finds."""
    breaks = data.count(b"\r") + data.count(b"\n") - data.count(b"\r\n")
    return breaks + (bool(data) and data[-1:] not in b"\r\n")


def fimi_line(text: str) -> list[str] | None:
    """A FIMI line's terms (an empty line is an empty record); None for a comment."""
    tokens = text.split()
    return None if tokens and tokens[0][0] in "#%" else tokens


def _read_spmf(lines: _Lines) -> _Parsed:
    ids: list[str] = []
    raw_records: list[list[str]] = []
    names: dict[str, tuple[str, int]] = {}  # item id -> (name, line that named it)
    for number, text in lines:
        text = text.strip()
        try:
            if text.startswith("@ITEM="):
                spmf_item_name(text, number, names)
            elif spmf_is_sequence(text):
                raw_records.append(spmf_sequence(text))
                ids.append(str(number))
        except MalformedLine as e:
            lines.bad(number, str(e))
    # names apply to the whole file, wherever their @ITEM line stands
    records = RecordsBuilder()
    duplicates = sum(len(raw) - records.add(names[t][0] if t in names else t for t in raw)
                     for raw in raw_records)
    return ids, records.build(), duplicates


def spmf_item_name(text: str, number: int, names: dict[str, tuple[str, int]]) -> None:
    parts = text.split("=", 2)
    if len(parts) != 3 or not parts[1].strip() or not parts[2].strip():
        raise MalformedLine(f"expected '@ITEM=<id>=<name>', got {text!r}")
    item, name = parts[1].strip(), parts[2].strip()
    if item in names and names[item][0] != name:
        raise MalformedLine(f"item {item!r} already named {names[item][0]!r} "
                            f"on line {names[item][1]}")
    names[item] = (name, number)


def spmf_is_sequence(text: str) -> bool:
    """Whether a stripped SPMF line is a sequence (not blank, a comment or metadata)."""
    return bool(text) and text[0] not in "@#%"


def spmf_sequence(text: str) -> list[str]:
    tokens = text.split()
    if tokens[-1] != "-2":
        raise MalformedLine("an SPMF sequence must end with -2")
    items = []
    for token in tokens[:-1]:
        if token == "-2":
            raise MalformedLine("tokens after the end-of-sequence marker -2")
        if token != "-1":
            if _NEGATIVE_NUMBER.fullmatch(token):
                raise MalformedLine(f"unexpected negative token {token!r} "
                                 "(only -1 and -2 are markers)")
            items.append(token)
    return items


@dataclass(frozen=True)
class CsvLayout:
    """Where a CSV file's fields are, as its first non-blank row says (:func:`_csv_layout`)."""

    delimiter: str = ","
    columns: str = ",".join(_CSV_HEADER)  # the fields a row has, as the header names them
    width: int = 2
    id_at: int = 0
    term_at: int = 1
    header_line: int | None = None   # the header's line (skipped), if the first row is one
    suspect: bool = False            # the first row is data, unless it looks like a header


def _csv_layout(fields: list[str] | None, number: int, options: InputOptions) -> CsvLayout:
    """The layout of a CSV file whose first non-blank row (on line ``number``) holds
    ``fields`` (None: unreadable).  It is a header if ``options.header`` says so, if the
    options name columns, or, by default, if it is ``record_id,term``; a header names the
    columns.  Raises MalformedLine for a header without the named columns."""
    header = options.header
    if header is None:
        header = options.named or (fields is not None
                                   and [f.lower() for f in fields] == _CSV_HEADER)
    if not header:
        return CsvLayout(options.delimiter, suspect=options.header is None and fields is not None)
    if fields is None:
        raise MalformedLine("the header row is not CSV")
    id_at = _column_at(fields, options.id_column, ID_COLUMNS, None)
    term_at = _column_at(fields, options.terms_column, TERMS_COLUMNS, id_at)
    if len(fields) == 2:  # the other of two
        id_at = 1 - term_at if id_at is None and term_at is not None else id_at
        term_at = 1 - id_at if term_at is None and id_at is not None else term_at
        id_at, term_at = (0, 1) if id_at is None else (id_at, term_at)
    if id_at is None or term_at is None:
        raise MalformedLine(f"which columns of the header {','.join(fields)!r} hold the record "
                            "id and the term? Name them (--id-column, --terms-column)")
    return CsvLayout(options.delimiter, options.delimiter.join(fields), len(fields), id_at,
                     term_at, header_line=number)


def _column_at(fields: list[str], given: str | None, known: tuple[str, ...],
               taken: int | None) -> int | None:
    """Where ``given`` stands among a header's fields (MalformedLine if it does not), else
    the first of the ``known`` names (in any case), else None; never at ``taken``."""
    if given is not None:
        if given not in fields:
            raise MalformedLine(f"no column {given!r} in the header {','.join(fields)!r}")
        return fields.index(given)
    lowered = [field.lower() for field in fields]
    found = [lowered.index(name) for name in known if name in lowered]
    return next((at for at in found if at != taken), None)


def _read_csv(lines: _Lines, options: InputOptions) -> _Parsed:
    terms_of: dict[str, set[str]] = {}  # insertion order = order of first appearance
    duplicates = 0
    layout, first = None, None
    others = HeaderCheck()
    for number, text in lines:
        if not text.strip():
            continue
        if layout is None:
            layout = first_csv_layout(text, number, options, lines.source)
            if layout.header_line:
                continue
        try:
            record_id, term = csv_row(csv_fields(text, options.delimiter), layout)
        except MalformedLine as e:
            lines.bad(number, str(e), _delimiter_hint(text, options.delimiter))
            continue
        if layout.suspect:
            if first is None:
                first = (number, text, record_id, term)
            else:
                others.add(record_id, term)
        terms = terms_of.setdefault(record_id, set())
        if term:
            if term in terms:
                duplicates += 1
            terms.add(term)
    if first:
        others.check(lines.source, *first)
    return list(terms_of), Records.build(terms_of.values()), duplicates


def _delimiter_hint(text: str, delimiter: str) -> str:
    """What to do about a row the delimiter does not split, when another would."""
    for other in ";\t|":
        if other != delimiter and other in text and delimiter not in text:
            shown = "\\t" if other == "\t" else other
            return f"; the file looks separated by {other!r}: give --delimiter '{shown}'"
    return ""


def first_csv_layout(text: str | None, number: int, options: InputOptions,
                     source: str) -> CsvLayout:
    """:func:`_csv_layout` of a file whose first non-blank line, on line ``number``, is
    ``text`` (None: not text); a header it cannot read stops the load."""
    try:
        fields = None if text is None else csv_fields(text, options.delimiter)
    except MalformedLine:
        fields = None  # the line's own parse reports it
    try:
        return _csv_layout(fields, number, options)
    except MalformedLine as e:
        raise InputError(f"{source}:{number}: {e}") from None


@dataclass
class HeaderCheck:
    """Whether every row after the first has a number for an id (and for a term, where it
    has one): then a first row that has not looks like a header, not data."""

    rows: int = 0
    ids: bool = True
    terms: bool = True

    @staticmethod
    def of(record_id: str, term: str) -> HeaderCheck:
        """One row's check."""
        return HeaderCheck(1, bool(_NUMBER.fullmatch(record_id)),
                           not term or bool(_NUMBER.fullmatch(term)))

    def add(self, record_id: str, term: str) -> None:
        """One more row, in place (the loader's per-row step: no object a row, and no match
        once a column has shown a non-number)."""
        self.rows += 1
        self.ids = self.ids and bool(_NUMBER.fullmatch(record_id))
        self.terms = self.terms and (not term or bool(_NUMBER.fullmatch(term)))

    def merged(self, other: HeaderCheck) -> HeaderCheck:
        return HeaderCheck(self.rows + other.rows, self.ids and other.ids,
                           self.terms and other.terms)

    def check(self, source: str, number: int, text: str, record_id: str, term: str) -> None:
        """Refuse the first row (``text`` on line ``number``) if it looks like a header."""
        named = (record_id.lower() in ID_COLUMNS and term.lower() in TERMS_COLUMNS)
        odd = [f"its {what} {value!r} is not a number and every other row's is"
               for what, value, numbers in (("id", record_id, self.ids),
                                            ("term", term, self.terms))
               if self.rows and numbers and value and not _NUMBER.fullmatch(value)]
        if named or odd:
            why = "it names columns" if named else odd[0]
            raise InputError(f"{source}:{number}: the first row {text.strip()!r} looks like a "
                             f"header ({why}); say which it is: --header skips it, --no-header "
                             "reads it as a record")


def csv_fields(text: str, delimiter: str = ",") -> list[str]:
    """A non-blank CSV line's fields, stripped."""
    try:
        row = next(csv.reader([text], delimiter=delimiter, strict=True, skipinitialspace=True))
    except csv.Error as e:
        raise MalformedLine(f"malformed CSV ({e})") from None
    return [f.strip() for f in row]


def csv_row(fields: list[str], layout: CsvLayout) -> tuple[str, str]:
    """A CSV row's (record id, term; empty for a record without terms)."""
    if len(fields) != layout.width:
        plural = "" if len(fields) == 1 else "s"
        raise MalformedLine(f"expected {layout.columns!r}, got {len(fields)} field{plural}")
    if not fields[layout.id_at]:
        raise MalformedLine("empty record id")
    return fields[layout.id_at], fields[layout.term_at]


def _read_jsonl(lines: _Lines) -> _Parsed:
    first_line: dict[str, int] = {}  # record id -> line it first appeared on
    records = RecordsBuilder()
    duplicates = 0
    for number, text in lines:
        if not text.strip():
            continue
        try:
            record_id, terms = json_record(text)
            if record_id in first_line:
                raise MalformedLine(duplicate_id(record_id, first_line[record_id]))
        except MalformedLine as e:
            lines.bad(number, str(e))
            continue
        first_line[record_id] = number
        duplicates += len(terms) - records.add(terms)
    return list(first_line), records.build(), duplicates


def duplicate_id(record_id: str, first: int, unit: str = "line") -> str:
    return f"duplicate record id {record_id!r} (first on {unit} {first})"


def _is_str_or_int(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _json_type(value: object) -> str:
    # bool before int: bool is a subclass of int
    for kind, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
                       (list, "array"), (dict, "object")):
        if isinstance(value, kind):
            return name
    return "null"


def json_record(text: str) -> tuple[str, list[str]]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise MalformedLine(f"invalid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(obj, dict):
        raise MalformedLine(f"expected a JSON object, got {_json_type(obj)}")
    for key in ("id", "terms"):
        if key not in obj:
            raise MalformedLine(f"missing {key!r}")
    if not _is_str_or_int(obj["id"]):
        raise MalformedLine(f"'id' must be a string or an integer, got {_json_type(obj['id'])}")
    record_id = str(obj["id"]).strip()
    if not record_id:
        raise MalformedLine("empty record id")
    if not isinstance(obj["terms"], list):
        raise MalformedLine(f"'terms' must be a list, got {_json_type(obj['terms'])}")
    terms = []
    for term in obj["terms"]:
        if not _is_str_or_int(term):
            raise MalformedLine(f"a term must be a string or an integer, got {_json_type(term)}")
        term = str(term).strip()
        if not term:
            raise MalformedLine("empty term")
        terms.append(term)
    return record_id, terms


def parse_line(data_format: str, text: str, number: int, names: dict | None = None,
               layout: CsvLayout = CsvLayout()) -> tuple | None:
    """One line read on its own (the Spark engine's reader): (record id, terms), for CSV
    (record id, term), or None for a line that holds no record.  ``names`` are SPMF's @ITEM
    names; ``layout`` is CSV's (its header line is skipped).  Raises MalformedLine."""
    if data_format == "fimi":
        terms = fimi_line(text)
        return None if terms is None else (str(number), terms)
    text = text.strip()
    if data_format == "spmf":
        if not spmf_is_sequence(text):
            return None
        names = names or {}
        return str(number), [names[t][0] if t in names else t for t in spmf_sequence(text)]
    if not text:
        return None
    if data_format == "csv":
        if number == layout.header_line:
            return None
        return csv_row(csv_fields(text, layout.delimiter), layout)
    return json_record(text)


_READERS = {"fimi": _read_fimi, "spmf": _read_spmf, "csv": _read_csv, "jsonl": _read_jsonl}


# -- tables: Parquet and DataFrames, through pyarrow -------------------------------------------

def from_frame(frame, id_column: str | None = None, terms_column: str | None = None, *,
               skip_bad_lines: bool = False, source: str = "DataFrame") -> Dataset:
    """The records of a table in memory: a pandas or polars DataFrame, an Arrow table (or
    anything with the Arrow stream interface), or a Spark DataFrame (collected here).

    Either shape: a row per (record id, term) pair (the records in the order their ids first
    appear; an empty term gives a record without terms), or a row per record with a list
    column of terms and, optionally, a column of ids (without one, a record's id is its row
    number, from 1, as a FIMI record's is its line's).  ``id_column`` and ``terms_column``
    name the columns; by default the terms are the one list column, else ``terms`` or
    ``term``, the ids ``record_id`` or ``id``, and of two columns the first holds the ids.
    Ids and terms are strings or integers, stripped of surrounding whitespace.  A bad row
    (a null, an empty id or term, a record id met twice in list form) stops the load with
    ``source: row N: what is wrong`` (rows numbered from 1), or, with ``skip_bad_lines``, is
    skipped and counted in ``skipped_lines``."""
    return _released(_table_dataset(_arrow_table(frame, source, skip_bad_lines), id_column,
                                    terms_column, source, "dataframe", skip_bad_lines))


def _pyarrow():
    """pyarrow (the ``[parquet]`` extra).  Its compute functions stay unloaded on the way from
    a Parquet file: their registry alone holds some 40 MB."""
    return require("pyarrow")


def _released(dataset: Dataset) -> Dataset:
    """``dataset``, once the table it was read from is dropped (by the caller): Arrow's
    allocator keeps what it frees for itself, the table's worth, unless told to give it
    back."""
    _pyarrow().default_memory_pool().release_unused()
    return dataset


def _read_parquet(source: str, skip_bad_lines: bool, options: InputOptions) -> Dataset:
    """A Parquet file, or a directory of them (as Spark writes one), read with the two
    columns it needs only."""
    return _released(_table_dataset(*_parquet_table(source, options), source, "parquet",
                                    skip_bad_lines))


def _parquet_table(source: str, options: InputOptions) -> tuple:
    """(the table, its ids' column or None, its terms' column), strings read as dictionaries
    (a term's string once, its occurrences as numbers)."""
    pa = _pyarrow()
    parquet = require("pyarrow.parquet")
    with reading(source):
        try:
            if os.path.isdir(source):
                schema = require("pyarrow.dataset").dataset(source, format="parquet").schema
                id_name, terms_name = _table_columns(schema, source, options.id_column,
                                                    options.terms_column)
                names = [name for name in (id_name, terms_name) if name]
                table = parquet.read_table(source, columns=names, read_dictionary=[
                    f"{name}.list.{schema.field(name).type.value_field.name}"
                    if _is_list(schema.field(name).type) else name for name in names])
            else:  # the file's own reader: read_table's leaves 60 MB more behind
                file = parquet.ParquetFile(source)
                id_name, terms_name = _table_columns(file.schema_arrow, source,
                                                    options.id_column, options.terms_column)
                names = [name for name in (id_name, terms_name) if name]
                leaves = [file.schema.column(i).path for i in range(len(file.schema))]
                file = parquet.ParquetFile(source, read_dictionary=[
                    leaf for leaf in leaves if leaf.partition(".")[0] in names])
                table = file.read(columns=names)
        except pa.ArrowInvalid as e:
            raise InputError(f"{source}: not a Parquet file ({e})") from None
    pa.default_memory_pool().release_unused()  # the reader's scratch
    return table, id_name, terms_name


def _arrow_table(frame, source: str, skip_bad_lines: bool = False):
    """``frame`` as an Arrow table, by what it is like."""
    pa = _pyarrow()
    if isinstance(frame, pa.Table):
        return frame
    if hasattr(frame, "rdd") and hasattr(frame, "toPandas"):  # a Spark DataFrame
        return frame.toArrow() if hasattr(frame, "toArrow") else _pandas_table(
            frame.toPandas(), source, skip_bad_lines)  # pyspark 3.5 has no toArrow
    if type(frame).__module__.partition(".")[0] == "pandas":
        return _pandas_table(frame, source, skip_bad_lines)
    try:
        return pa.table(frame)  # polars, and anything with the Arrow stream interface
    except (TypeError, ValueError):
        raise TypeError(f"expected a DataFrame (pandas, polars, Spark) or an Arrow table, "
                        f"got {type(frame).__name__}") from None


def _pandas_table(frame, source: str, skip_bad_lines: bool):
    """A pandas DataFrame as an Arrow table, without its index.  A column of Python objects
    that Arrow cannot type (strings beside integers, as JSON Lines takes them) is read value
    by value."""
    pa = _pyarrow()
    columns = {}
    for name in frame.columns:
        try:
            columns[str(name)] = pa.array(frame[name], from_pandas=True)
        except (pa.ArrowTypeError, pa.ArrowInvalid):
            columns[str(name)] = pa.array(_as_strings(frame[name], str(name), source,
                                                      skip_bad_lines))
    return pa.table(columns)


def _as_strings(values: Iterable, column: str, source: str, skip_bad_lines: bool) -> list:
    """Each value (a list of them, in list form) as a string, a missing one as None; an
    InputError names the first row that holds neither a string nor an integer (or, with
    ``skip_bad_lines``, that value is missing: its row is skipped)."""
    def text(value, row: int) -> str | None:
        if value is None or value != value or type(value).__name__ == "NAType":  # NaN, pd.NA
            return None
        if isinstance(value, (str, np.integer)) or _is_str_or_int(value):
            return str(value)
        if skip_bad_lines:
            return None
        raise InputError(f"{source}: row {row}: column {column!r} holds {value!r} "
                         f"({type(value).__name__}), not a string or an integer")

    return [[text(item, row) for item in value]
            if isinstance(value, (list, tuple, np.ndarray)) else text(value, row)
            for row, value in enumerate(values, 1)]


def _is_list(kind) -> bool:
    pa = _pyarrow()
    return any(test(kind) for test in (pa.types.is_list, pa.types.is_large_list,
                                       pa.types.is_fixed_size_list, pa.types.is_list_view,
                                       pa.types.is_large_list_view))


def _table_columns(schema, source: str, id_column: str | None,
                  terms_column: str | None) -> tuple[str | None, str]:
    """(the ids' column or None, the terms' column) of a table: those named, else the one
    list column or a column named ``terms``/``term`` for the terms, ``record_id``/``id`` for
    the ids, and of two columns the other one (the first holds the ids); in list form
    without another column, none for the ids."""
    names = list(schema.names)
    listed = ", ".join(map(repr, names))
    for given in (id_column, terms_column):
        if given is not None and given not in names:
            raise InputError(f"{source}: no column {given!r} (its columns: {listed})")
    others = [name for name in names if name != id_column]
    if terms_column is None:
        lists = [name for name in others if _is_list(schema.field(name).type)]
        named = [name for name in TERMS_COLUMNS if name in others]
        two = others[-1:] if len(names) == 2 else []
        terms_column = next(iter(lists if len(lists) == 1 else named or two), None)
        if terms_column is None or len(lists) > 1:
            raise InputError(f"{source}: which column holds the terms? Name it "
                             f"(--terms-column); its columns: {listed}")
    if id_column is None:
        others = [name for name in names if name != terms_column]
        named = [name for name in ID_COLUMNS if name in others]
        id_column = next(iter(named or (others if len(others) == 1 else [])), None)
        listed_only = not others and _is_list(schema.field(terms_column).type)
        if id_column is None and not listed_only:
            raise InputError(f"{source}: which column holds the record ids? Name it "
                             f"(--id-column); its columns: {listed}")
    return id_column, terms_column


class _BadRows:
    """A table's bad rows, and the first of them with what is wrong with it."""

    def __init__(self, rows: int) -> None:
        self.bad = np.zeros(rows, dtype=bool)
        self.first: tuple[int, str] | None = None

    def add(self, mask: np.ndarray, message: str | Callable[[int], str]) -> None:
        """The rows where ``mask`` holds are bad; ``message`` says why (given the row)."""
        found = np.flatnonzero(mask & ~self.bad)
        self.bad |= mask
        if len(found) and (self.first is None or found[0] < self.first[0]):
            row = int(found[0])
            self.first = (row, message if isinstance(message, str) else message(row))

    def kept(self, source: str, skip: bool) -> np.ndarray | None:
        """The rows to read on (None: all of them); the first bad row stops the load unless
        ``skip``."""
        if self.first is None:
            return None
        if not skip:
            row, message = self.first
            raise InputError(f"{source}: row {row + 1}: {message}")
        return ~self.bad


def _arrays(column) -> list:
    """The Arrow arrays of a column (a chunked one's chunks)."""
    return column.chunks if hasattr(column, "chunks") else [column]


def _null_mask(array) -> np.ndarray:
    """Where an Arrow array is null, from its validity bits."""
    if array.null_count == len(array):
        return np.ones(len(array), dtype=bool)
    if not array.null_count:
        return np.zeros(len(array), dtype=bool)
    bits = np.unpackbits(np.frombuffer(array.buffers()[0], dtype=np.uint8), bitorder="little")
    return bits[array.offset:array.offset + len(array)] == 0


def _values(array) -> np.ndarray:
    """An Arrow array of integers as numpy's, its buffer as it is (a null's value is
    whatever the buffer holds there)."""
    data = np.frombuffer(array.buffers()[1], dtype=array.type.to_pandas_dtype())
    return data[array.offset:array.offset + len(array)]


class _Coder:
    """A column's values coded by their distinct values as strings (stripped of surrounding
    whitespace, as CSV's and JSON Lines' are): ``codes``, each value's position in
    ``distinct``, -1 for a null.  Only the distinct values become Python strings (a
    dictionary's, or the distinct integers), so a column of a million repeated terms is
    coded, not copied.  InputError for a column of anything but strings or integers."""

    def __init__(self, arrays: list, what: str, source: str) -> None:
        pa = _pyarrow()
        # a DataFrame's strings (Parquet's are read as dictionaries)
        arrays = [array.cast(pa.large_string()).dictionary_encode()
                  if _is_text(array.type) else array for array in arrays]
        kind = arrays[0].type if arrays else pa.null()
        if pa.types.is_dictionary(kind) and (_is_text(kind.value_type)
                                             or pa.types.is_integer(kind.value_type)):
            arrays = pa.chunked_array(arrays, type=kind).unify_dictionaries().chunks
            words = arrays[0].dictionary.to_pylist()
            arrays = [array.indices for array in arrays]  # nulls and all
            positions = np.concatenate([_values(array) for array in arrays] or [[]])
            if any(array.null_count for array in arrays):  # a null's slot holds no index
                positions[np.concatenate([_null_mask(array) for array in arrays])] = 0
            merge = not _is_text(kind.value_type) or None in words
            if not merge:
                stripped = list(map(str.strip, words))
                merge = stripped != words  # then some words are alike once stripped, maybe
                words = stripped
        elif pa.types.is_integer(kind):
            (words, positions), merge = self._numbered(arrays), False
        elif pa.types.is_null(kind):
            words, merge = [], False
            positions = np.zeros(sum(map(len, arrays)), dtype=np.int32)
        else:
            kind = kind.value_type if pa.types.is_dictionary(kind) else kind
            hint = (" (pandas stores integers beside a missing value as floats)"
                    if pa.types.is_floating(kind) and any(a.null_count for a in arrays) else "")
            raise InputError(f"{source}: {what} must be strings or integers, not {kind}{hint}")
        self.distinct = words
        codes = positions.astype(np.int32, copy=False)
        if merge:  # words alike once stripped, null words, a dictionary of integers
            codes = self._merged()[codes]
        if any(array.null_count for array in arrays):
            codes[np.concatenate([_null_mask(array) for array in arrays])] = -1
        self.codes = codes
        self.empty = self._index("")

    @staticmethod
    def _numbered(arrays: list) -> tuple[list[str], np.ndarray]:
        """Integers: the distinct ones, and each value's position among them (found a slice
        at a time: np.unique's inverse costs 24 bytes a value)."""
        values = [_values(array) for array in arrays]
        values = values[0] if len(values) == 1 else np.concatenate(values)
        if any(array.null_count for array in arrays):  # what a null's slot holds is no value
            nulls = np.concatenate([_null_mask(array) for array in arrays])
            values = np.where(nulls, values[~nulls][:1] if not nulls.all() else 0, values)
        numbers = np.sort(values)  # np.unique: 6 times the time (numpy 2.4)
        numbers = numbers[np.concatenate(([True], numbers[1:] != numbers[:-1]))]
        positions = np.empty(len(values), dtype=np.int32)
        for start in range(0, len(values), TABLE_PAIRS):
            positions[start:start + TABLE_PAIRS] = np.searchsorted(
                numbers, values[start:start + TABLE_PAIRS])
        return list(map(str, numbers.tolist())), positions

    def _merged(self) -> np.ndarray:
        """Each distinct value's code once equal values (after stripping) are one, and null
        ones -1 (a last -1 maps a -1 to itself)."""
        index: dict[str, int] = {}
        merged = [-1 if word is None else index.setdefault(str(word), len(index))
                  for word in self.distinct]
        self.distinct = list(index)
        return np.array([*merged, -1], dtype=np.int32)

    def _index(self, word: str) -> int:
        """The code of ``word`` (-2: none; -1 is a null's)."""
        try:
            return self.distinct.index(word)
        except ValueError:
            return -2


def _is_text(kind) -> bool:
    pa = _pyarrow()
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or \
        pa.types.is_string_view(kind)


def _sorted_names(distinct: list[str], but: int = -2) -> tuple[tuple[str, ...], np.ndarray]:
    """The distinct terms sorted, but the one at ``but`` (long form's "", which no record
    holds), and each one's rank there."""
    order = sorted((i for i in range(len(distinct)) if i != but), key=distinct.__getitem__)
    rank = np.full(len(distinct), -1, dtype=np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    return tuple(distinct[i] for i in order), rank


TABLE_PAIRS = 1 << 20  # (record, term) pairs coded and sorted at a time: a slice's scratch


def _slices(lengths: np.ndarray) -> list[tuple[int, int]]:
    """Rows cut into (start, stop) slices of about TABLE_PAIRS values each."""
    ends = np.cumsum(lengths)
    cuts = np.searchsorted(ends, np.arange(TABLE_PAIRS, ends[-1] if len(ends) else 0,
                                           TABLE_PAIRS), side="right")
    cuts = np.unique(np.concatenate(([0], cuts, [len(lengths)]))).tolist()
    return list(zip(cuts, cuts[1:]))


def _table_dataset(table, id_column: str | None, terms_column: str | None, source: str,
                   format: str, skip_bad_lines: bool) -> Dataset:
    id_name, terms_name = _table_columns(table.schema, source, id_column, terms_column)
    read = _list_records if _is_list(table.schema.field(terms_name).type) else _long_records
    ids, records, duplicates, bad = read(table[id_name] if id_name else None,
                                         table[terms_name], id_name, terms_name, source,
                                         skip_bad_lines)
    if not records:
        skipped = f"; every row skipped: {skipped_text(bad, (), 'row')}" if bad else ""
        raise InputError(f"{source}: no records (no rows){skipped}")
    return Dataset(ids=tuple(ids), records=records, source=source, format=format,
                   skipped_lines=bad, duplicate_terms=duplicates, numbered=id_name is None)


_Read = tuple[list[str], Records, int, int]  # ids, records, duplicate terms, bad rows skipped


def _checked_ids(ids, name: str, source: str, bad: _BadRows) -> tuple[np.ndarray, list[str]]:
    """The ids' codes and distinct values (:class:`_Coder`), nulls and empty ones marked
    bad."""
    coder = _Coder(_arrays(ids), f"record ids (column {name!r})", source)
    codes = coder.codes
    bad.add(codes == -1, "null record id")
    bad.add(codes == coder.empty, "empty record id")
    return codes, coder.distinct


def _long_records(ids, terms, id_name: str, terms_name: str, source: str,
                  skip: bool) -> _Read:
    """A row per (record id, term) pair, grouped by id in order of first appearance, as CSV
    rows are; an empty term gives a record without terms."""
    bad = _BadRows(len(terms))
    record, distinct_ids = _checked_ids(ids, id_name, source, bad)
    coder = _Coder(_arrays(terms), f"terms (column {terms_name!r})", source)
    term, distinct, empty = coder.codes, coder.distinct, coder.empty
    del coder  # each array of a (record, term) pair per row, once at a time
    bad.add(term == -1, "null term")
    kept = bad.kept(source, skip)
    if kept is not None:
        record, term = record[kept], term[kept]
    order = _first_seen(record, len(distinct_ids))  # an id only bad rows hold is no record's
    number = np.empty(len(distinct_ids), dtype=np.int32)
    number[order] = np.arange(len(order), dtype=np.int32)
    record = number[record]
    if empty >= 0:  # "": a row that gives its record no term
        held = term != empty
        record, term = record[held], term[held]
    names, rank = _sorted_names(distinct, but=empty)
    records, duplicates = Records.of_pairs(names, record, rank[term], len(order))
    return [distinct_ids[i] for i in order.tolist()], records, duplicates, int(bad.bad.sum())


def _first_seen(codes: np.ndarray, count: int) -> np.ndarray:
    """The codes (of ``count``) that occur, in order of their first occurrence."""
    highest = np.maximum.accumulate(codes)
    if len(codes) and codes[0] == 0 and not (np.diff(highest) > 1).any():
        return np.arange(highest[-1] + 1)  # each code first met as the next one: in order
    first = np.full(count, len(codes), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(codes), dtype=np.int32))
    return np.argsort(first, kind="stable")[:np.count_nonzero(first < len(codes))]


def _list_records(ids, terms, id_name: str | None, terms_name: str, source: str,
                  skip: bool) -> _Read:
    """A row per record, its terms in a list; without ids, a record's id is its row number.
    Sorted a slice of rows at a time (a slice's scratch, not the table's)."""
    pa = _pyarrow()
    if not (pa.types.is_list(terms.type) or pa.types.is_large_list(terms.type)):
        terms = terms.cast(pa.large_list(terms.type.value_type))  # views, fixed sizes
    bad = _BadRows(len(terms))
    id_codes = None
    if ids is not None:
        id_codes, distinct_ids = _checked_ids(ids, id_name, source, bad)
    lists = _arrays(terms)
    bad.add(np.concatenate([_null_mask(array) for array in lists]), "null list of terms")
    offsets = [_offsets(array) for array in lists]
    lengths = np.concatenate([np.diff(at) for at in offsets]).astype(np.int64)
    coder = _Coder([array.values.slice(at[0], at[-1] - at[0])
                    for array, at in zip(lists, offsets)],
                   f"terms (column {terms_name!r})", source)
    codes, starts = coder.codes, np.concatenate(([0], np.cumsum(lengths)))
    for problem, message in ((codes == -1, "null term"), (codes == coder.empty, "empty term")):
        if problem.any():
            rows = np.zeros(len(terms), dtype=bool)
            rows[np.searchsorted(starts, np.flatnonzero(problem), side="right") - 1] = True
            bad.add(rows, message)
    if id_codes is not None:
        _duplicate_ids(id_codes, distinct_ids, bad)
    kept = bad.kept(source, skip)
    names, rank = _sorted_names(coder.distinct)
    parts, repeated = [Records(names, np.zeros(1, np.int64), np.zeros(0, np.int32))], 0
    for start, stop in _slices(lengths):
        ids_here, counts = rank[codes[starts[start]:starts[stop]]], lengths[start:stop]
        if kept is not None:  # a bad row's terms go (a null's code, -1, read a rank at random)
            ids_here = ids_here[np.repeat(kept[start:stop], counts)]
            counts = counts[kept[start:stop]]
        rows = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
        part, again = Records.of_pairs(names, rows, ids_here, len(counts))
        parts.append(part)
        repeated += again
    numbers = range(1, len(terms) + 1)
    if kept is not None:
        numbers = compress(numbers, kept.tolist())
    record_ids = (list(map(str, numbers)) if id_codes is None else
                  [distinct_ids[code] for code in
                   (id_codes if kept is None else id_codes[kept]).tolist()])
    return record_ids, Records.joined(parts), repeated, int(bad.bad.sum())


def _offsets(array) -> np.ndarray:
    """A list array's offsets into its values (its own slice of them)."""
    pa = _pyarrow()
    kind = np.int64 if pa.types.is_large_list(array.type) else np.int32
    if not len(array):
        return np.zeros(1, dtype=kind)
    return np.frombuffer(array.buffers()[1], dtype=kind)[array.offset:array.offset
                                                          + len(array) + 1]


def _duplicate_ids(codes: np.ndarray, distinct: list[str], bad: _BadRows) -> None:
    """A record id met again (in a row not bad already) is bad, naming its first row."""
    good = np.flatnonzero(~bad.bad)
    _, first = np.unique(codes[good], return_index=True)
    first_row = np.full(len(distinct), -1)
    first_row[codes[good[first]]] = good[first]  # of each id
    again = np.zeros(len(bad.bad), dtype=bool)
    again[good] = first_row[codes[good]] != good
    bad.add(again, lambda row: duplicate_id(distinct[codes[row]],
                                            int(first_row[codes[row]]) + 1, "row"))


def write_fimi(records: Iterable[Iterable[str]], path: PathLike) -> None:
    """Write records as FIMI, terms sorted; refuses terms FIMI cannot hold (nothing is written)."""
    lines = []
    for number, record in enumerate(records, 1):
        terms = sorted(set(record))
        for term in terms:
            if term.split() != [term]:
                raise InputError(f"{path}: record {number}: term {term!r} is empty or contains "
                                 "whitespace, which FIMI cannot hold")
            # such a term sorts before most others and would turn its line into a comment
            if term[0] in "#%":
                raise InputError(f"{path}: record {number}: term {term!r} starts with {term[0]!r}, "
                                 "which FIMI reads as a comment")
        lines.append(" ".join(terms) + "\n")
    Path(path).write_text("".join(lines), encoding="utf-8")


def write_parquet(records: Iterable[Iterable[str]], path: PathLike) -> None:
    """Write records as Parquet, a row per record with its terms sorted in a list column
    ``terms`` and no id column: a record's id is its row number, as in FIMI."""
    pa = _pyarrow()
    parquet = require("pyarrow.parquet")
    terms = pa.array([sorted(set(record)) for record in records], type=pa.list_(pa.string()))
    parquet.write_table(pa.table({"terms": terms}), path)
