"""What the owner's front door publishes and appends, made one :class:`~cocktail.dataset.Dataset`:
a path (read by :func:`cocktail.dataset.load`), a ``Dataset``, records held in memory, or a
DataFrame, with the text formats' checks (the bad record named, nothing published).

In memory:

* an iterable of term collections: record ids ``1``, ``2``, ... as a FIMI file's line numbers
  give them, so the same records publish the same from a file or from memory;
* a mapping of record id to terms: records that carry their own ids, as CSV and JSON Lines do;
* a pandas or polars DataFrame or an Arrow table, read by
  :func:`cocktail.dataset.from_frame` (the Parquet reader's checks and shapes).

A term is a string or an integer (as in JSON Lines), stripped, never empty; a term repeated in
a record is kept once, and an empty record is a record.
"""

from __future__ import annotations

import numbers
import os
import sys
from collections.abc import Iterable, Mapping
from itertools import count

from .dataset import Dataset, InputError, Progress, RecordsBuilder, from_frame, load

MEMORY = "memory"          # Dataset.format of records from memory, numbered 1, 2, ...
MEMORY_IDS = "memory-ids"  # ... and of records from memory with their own ids


def as_dataset(data, format: str | None = None, *, skip_bad_lines: bool = False,
               progress: Progress | None = None) -> Dataset:
    """``data`` as a Dataset: a path is read (``format``, ``skip_bad_lines`` and ``progress``
    as :func:`~cocktail.dataset.load` takes them), anything else is taken from memory."""
    if isinstance(data, (str, os.PathLike)):
        return load(data, format, skip_bad_lines=skip_bad_lines, progress=progress)
    if format is not None or skip_bad_lines:
        raise ValueError("format and skip_bad_lines are for a file; records in memory have "
                         "neither")
    if isinstance(data, Dataset):
        return data
    if _is_frame(data):
        return from_frame(data)
    if isinstance(data, Mapping):
        return records_dataset(data.items(), "records in memory", MEMORY_IDS)
    if isinstance(data, Iterable) and not isinstance(data, bytes):
        return records_dataset(zip(count(1), data), "records in memory", MEMORY)
    raise InputError(f"cannot publish a {type(data).__name__}: give a path, a Dataset, an "
                     "iterable of term collections, a mapping of id to terms or a pandas "
                     "DataFrame")


def records_dataset(records: Iterable[tuple[object, object]], source: str, format: str,
                    unit: str = "record") -> Dataset:
    """A Dataset of ``(record id, terms)`` pairs, each checked: the first bad one is named by
    its place (``unit`` and its number from 1)."""
    ids: list[str] = []
    first: dict[str, int] = {}
    builder, duplicates = RecordsBuilder(), 0
    for number, (record_id, terms) in enumerate(records, 1):
        where = f"{source}: {unit} {number}"
        record_id = _text(record_id, where, "record id")
        if record_id in first:
            raise InputError(f"{where}: duplicate record id {record_id!r} (first at {unit} "
                             f"{first[record_id]})")
        first[record_id] = number
        terms = _terms(terms, where)
        duplicates += len(terms) - builder.add(terms)
        ids.append(record_id)
    if not ids:
        raise InputError(f"{source}: no records")
    return Dataset(tuple(ids), builder.build(), source, format, duplicate_terms=duplicates,
                   numbered=format == MEMORY)  # 1, 2, ...: no ids of the owner's


def _terms(terms: object, where: str) -> list[str]:
    if isinstance(terms, (str, bytes)) or not isinstance(terms, Iterable):
        raise InputError(f"{where}: expected a collection of terms, got "
                         f"{type(terms).__name__} {terms!r:.40}")
    return [_text(term, where, "term") for term in terms]


def _text(value: object, where: str, what: str) -> str:
    """A term or record id: a string or an integer, stripped, not empty."""
    if isinstance(value, bool) or not isinstance(value, (str, numbers.Integral)):
        raise InputError(f"{where}: a {what} must be a string or an integer, got "
                         f"{type(value).__name__} {value!r:.40}")
    text = str(value).strip()
    if not text:
        raise InputError(f"{where}: empty {what}")
    return text


def _is_frame(data) -> bool:
    """A pandas or polars DataFrame or an Arrow table, told by the modules already imported:
    one not imported cannot have made ``data``."""
    for module, name in (("pandas", "DataFrame"), ("polars", "DataFrame"), ("pyarrow", "Table")):
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(data, getattr(loaded, name)):
            return True
    return False
