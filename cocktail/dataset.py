"""Reading set-valued data (FIMI, SPMF, CSV, JSON Lines) into records, with line-precise errors.

Every reader turns a file into record ids and records (sets of string terms).  A malformed line
stops the load with ``file:line: what is wrong``, or, with ``skip_bad_lines``, is skipped and
counted.  Lines are decoded one by one so that a stray non-UTF-8 byte is reported at its line.
Duplicate terms in a record collapse; empty records are kept (they are records of the dataset).
Records are held compactly (:class:`Records`): a term id per (record, term) pair, not a set of
strings per record, so a million records take tens of megabytes, not a gigabyte.
"""

from __future__ import annotations

import codecs
import csv
import json
import os
import re
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import compress
from pathlib import Path
from typing import BinaryIO

import numpy as np

FORMATS = ("fimi", "spmf", "csv", "jsonl")
_EXTENSIONS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}
_CSV_HEADER = ["record_id", "term"]
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
        width = max(1, len(vocabulary))
        dtype = key_type(len(lengths) * width)
        ids = np.fromiter(map(vocabulary.__getitem__, tokens), dtype, len(tokens))
        rows = np.repeat(np.arange(len(lengths), dtype=dtype), lengths)
        keys = np.sort(rows * width + ids)  # by record, then term
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if len(keys) else keys
        self._ids.frombytes((keys % width).astype(np.int32).tobytes())
        self._lengths.frombytes(np.bincount(keys // width, minlength=len(lengths))
                                .astype(np.int64).tobytes())
        return len(keys)

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
    """Records in input order with their unique ids."""

    ids: tuple[str, ...]
    records: Records
    source: str
    format: str
    skipped_lines: int = 0
    duplicate_terms: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.records, Records):
            object.__setattr__(self, "records", Records.build(self.records))
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

    def head(self, n: int) -> Dataset:
        """The first ``n`` records with their ids (a subsample for tests and experiments)."""
        return Dataset(self.ids[:n], self.records[:n], self.source, self.format)


class MalformedLine(ValueError):
    """A bad line, raised by the per-line parsers; the message says what is wrong (the reader
    adds the file and line)."""


class _Lines:
    """The numbered, decoded lines of a file; bad lines either raise or are counted."""

    def __init__(self, source: str, data: bytes, skip_bad_lines: bool) -> None:
        self.source = source
        self._data = data
        self._skip = skip_bad_lines
        self.skipped = 0
        self.first_bad: tuple[int, str] | None = None  # (line number, message), if skipped

    def __iter__(self) -> Iterator[tuple[int, str]]:
        # bytes.splitlines breaks only at \n, \r and \r\n, unlike str.splitlines (\x1c, \u2028, ...)
        for number, raw in enumerate(self._data.splitlines(), 1):
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as e:
                self.bad(number, f"not valid UTF-8 (byte 0x{raw[e.start]:02x} "
                                 f"at column {e.start + 1})")

    @property
    def data(self) -> bytes:
        return self._data

    def bad(self, number: int, message: str) -> None:
        if not self._skip:
            raise InputError(f"{self.source}:{number}: {message}")
        self.skipped += 1
        self.first_bad = self.first_bad or (number, message)


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
    """The format of a file: from its extension, else from its content (SPMF or FIMI)."""
    by_name = format_by_name(path)
    if by_name:
        return by_name
    with reading(path), open(path, encoding="utf-8-sig", errors="replace", newline="") as f:
        return sniff_format(f)


def load(path: PathLike, format: str | None = None, *, skip_bad_lines: bool = False) -> Dataset:
    """Read a dataset; ``format`` defaults to :func:`detect_format`'s answer."""
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")
    source = str(path)
    data = _read_bytes(path)
    if format is None:
        # sniff the bytes already read rather than opening the file twice
        format = format_by_name(path) or sniff_format(
            raw.decode("utf-8", "replace") for raw in data.splitlines())
    lines = _Lines(source, data, skip_bad_lines)
    ids, records, duplicates = _READERS[format](lines)
    if not records:
        skipped = f"; {lines.skipped} malformed line(s) skipped" if lines.skipped else ""
        raise InputError(f"{source}: no records (empty file){skipped}")
    return Dataset(ids=tuple(ids), records=records, source=source, format=format,
                   skipped_lines=lines.skipped, duplicate_terms=duplicates)


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


def _read_csv(lines: _Lines) -> _Parsed:
    terms_of: dict[str, set[str]] = {}  # insertion order = order of first appearance
    duplicates = 0
    first_row = True
    for number, text in lines:
        if not text.strip():
            continue
        is_first, first_row = first_row, False
        try:
            row = csv_row(text, may_be_header=is_first)
        except MalformedLine as e:
            lines.bad(number, str(e))
            continue
        if row is None:
            continue
        record_id, term = row
        terms = terms_of.setdefault(record_id, set())
        if term:
            if term in terms:
                duplicates += 1
            terms.add(term)
    return list(terms_of), Records.build(terms_of.values()), duplicates


def csv_row(text: str, may_be_header: bool) -> tuple[str, str] | None:
    """A non-blank CSV line's (record id, term; empty for a record without terms); None for
    the header, allowed on the first non-blank line."""
    try:
        row = next(csv.reader([text], strict=True, skipinitialspace=True))
    except csv.Error as e:
        raise MalformedLine(f"malformed CSV ({e})") from None
    fields = [f.strip() for f in row]
    if may_be_header and [f.lower() for f in fields] == _CSV_HEADER:
        return None
    if len(fields) != 2:
        plural = "" if len(fields) == 1 else "s"
        raise MalformedLine(f"expected 'record_id,term', got {len(fields)} field{plural}")
    if not fields[0]:
        raise MalformedLine("empty record id")
    return fields[0], fields[1]


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


def duplicate_id(record_id: str, first: int) -> str:
    return f"duplicate record id {record_id!r} (first on line {first})"


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
               header_line: int = 1) -> tuple | None:
    """One line read on its own (the Spark engine's reader): (record id, terms), for CSV
    (record id, term), or None for a line that holds no record.  ``names`` are SPMF's @ITEM
    names; ``header_line`` is CSV's first non-blank line.  Raises MalformedLine."""
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
        return csv_row(text, may_be_header=number == header_line)
    return json_record(text)


_READERS = {"fimi": _read_fimi, "spmf": _read_spmf, "csv": _read_csv, "jsonl": _read_jsonl}


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
