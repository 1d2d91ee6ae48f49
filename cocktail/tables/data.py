"""Tables read from CSV: quasi-identifier columns and one numeric sensitive column.

A tuple is ``(id, QI values, S)``; ids number the tuples in the order the owner gave them,
across appends, and never leave the private zone.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..dataset import InputError


@dataclass(frozen=True)
class Row:
    id: int
    qi: tuple[str, ...]
    s: float | str  # a number, or a category for the models whose sensitive value is one


@dataclass
class Table:
    qi: tuple[str, ...]
    sensitive: str
    rows: list[Row]
    persons: dict[int, str] = field(default_factory=dict)  # tuple id -> person id, if given

    def values(self) -> dict[int, float]:
        return {row.id: row.s for row in self.rows}

    def by_id(self) -> dict[int, Row]:
        return {row.id: row for row in self.rows}


def names(spec: str | Sequence[str]) -> tuple[str, ...]:
    """A comma-separated list (or a sequence) of column names, blanks dropped."""
    parts = spec.split(",") if isinstance(spec, str) else list(spec)
    return tuple(name.strip() for name in parts if name.strip())


def columns(spec: str | Sequence[str]) -> tuple[str, ...]:
    found = names(spec)
    if not found:
        raise InputError("give at least one quasi-identifier column")
    return found


def csv_records(path: str | Path, wanted: Sequence[str]) -> Iterator[tuple[int, dict[str, str]]]:
    """Each non-blank row of a CSV file with a header, as its line number and the ``wanted``
    columns' stripped values; an unreadable file, a repeated or missing column, a ragged row or
    no row at all is an :class:`InputError` naming the file (and the line).  A byte order mark
    (spreadsheets write one) is not part of the first column's name."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not valid UTF-8 (byte {exc.start})") from None
    reader = csv.reader(io.StringIO(text))
    header = [name.strip() for name in next(reader, None) or []]
    if not header:
        raise InputError(f"{path}: empty file (expected a header line)")
    repeated = next((name for i, name in enumerate(header) if name in header[:i]), None)
    if repeated is not None:
        raise InputError(f"{path}: column {repeated!r} appears twice in the header")
    missing = [name for name in wanted if name not in header]
    if missing:
        raise InputError(f"{path}: no column {', '.join(map(repr, missing))} (the header has "
                         f"{', '.join(header)})")
    at = {name: header.index(name) for name in wanted}
    count = 0
    for line, fields in enumerate(reader, start=2):
        if not fields or not any(f.strip() for f in fields):
            continue
        if len(fields) != len(header):
            raise InputError(f"{path}:{line}: {len(fields)} fields, the header has "
                             f"{len(header)}")
        count += 1
        yield line, {name: fields[i].strip() for name, i in at.items()}
    if not count:
        raise InputError(f"{path}: no rows after the header")


def read_table(path: str | Path, qi: Sequence[str], sensitive: str, first_id: int = 0,
               numeric: bool = True, person: str | None = None,
               numeric_qi: str | None = None) -> Table:
    """The table's tuples; any problem is an :class:`InputError` naming the file, the row (line
    number) and the column.  ``numeric``: the sensitive value must be a number (else it is a
    category, which must not be empty); ``person``: a column naming the individual (kept
    private, for measuring attacks across publishers); ``numeric_qi``: why every QI must be a
    finite number, if it must."""
    path = Path(path)
    if sensitive in qi:
        raise InputError(f"{sensitive!r} is both a quasi-identifier and the sensitive column")
    if person is not None:
        person_column(person, qi, sensitive)
    rows, persons, seen = [], {}, {}
    for line, record in csv_records(path, (*qi, sensitive, *([person] if person else []))):
        text = record[sensitive]
        value = sensitive_value(text, path, line, sensitive) if numeric \
            else category(text, path, line, sensitive)
        if person:
            persons[first_id + len(rows)] = individual(record[person], seen, path, line, person)
        for name in qi if numeric_qi else ():
            finite(record[name], f"{path}:{line}", name, numeric_qi)
        rows.append(Row(first_id + len(rows), tuple(record[name] for name in qi), value))
    return Table(tuple(qi), sensitive, rows, persons)


def person_column(person: str, qi: Sequence[str], sensitive: str) -> None:
    """The column naming individuals is kept private: it cannot be one that is published."""
    if not person.strip():
        raise InputError("--id needs a column name")
    if person in (*qi, sensitive):
        kind = "the sensitive column" if person == sensitive else "a quasi-identifier"
        raise InputError(f"--id {person!r} is {kind}, which is published; name a column that "
                         f"identifies each individual")


def individual(text: str, seen: dict[str, int], path: Path, line: int, column: str) -> str:
    """Each individual once: a repeated or empty id would make two tuples one person (with
    two true values) for the composition attack."""
    if not text:
        raise InputError(f"{path}:{line}: column {column!r} is empty (each individual needs "
                         f"an id)")
    if text in seen:
        raise InputError(f"{path}:{line}: column {column!r} is {text!r} again (line "
                         f"{seen[text]}); each individual must appear once")
    seen[text] = line
    return text


def sensitive_value(text: str, path: Path, line: int, column: str) -> float:
    return finite(text, f"{path}:{line}", column, "the sensitive attribute must be numeric")


def finite(text: str, where: str, column: str, why: str) -> float:
    """``text`` as a finite number: float() also reads 'nan' and 'inf', which would poison
    every sum, mean and range they enter."""
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{where}: column {column!r} is {text.strip()!r}, not a number "
                         f"({why})") from None
    if not math.isfinite(value):
        raise InputError(f"{where}: column {column!r} is {text.strip()!r}, not a finite "
                         f"number ({why})")
    return value


def category(text: str, path: Path, line: int, column: str) -> str:
    if not text.strip():
        raise InputError(f"{path}:{line}: column {column!r} is empty")
    return text.strip()


def number(value: float) -> int | float:
    """An S value as written back: integral values without a trailing '.0'."""
    return int(value) if value.is_integer() else value


def encode_csv(header: Sequence[str], rows: Iterable[Sequence[object]]) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")


def decode_csv(data: bytes) -> tuple[list[str], list[list[str]]]:
    reader = csv.reader(io.StringIO(data.decode("utf-8")))
    header = next(reader)
    return header, list(reader)
