"""The ranked-retrieval model: a table with public and private attributes, the paper's linear
score (Eq. 1) and queries.

s(t|q) = Σ_i wA_i·ρ(q[A_i], t[A_i]) + Σ_j wB_j·ρ(q[B_j], t[B_j]), with ρ = 1 for equal
categories and 1 − |x − y|/range for numeric columns (the paper's |x − y| rewards a mismatch);
ρ = 0 when either value is missing.  Columns are encoded as small integer codes (categories)
or floats (numbers) so that scoring a query is a handful of numpy operations over all tuples.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..dataset import InputError
from ..tables.data import csv_records
from ..querylang import characters

MISSING = -1  # the code of a missing (suppressed, or not asked) categorical value
MAX_K = 1000  # the most results one query may ask for
# A score is at most Σw (every ρ ≤ 1), and so is the sensitivity Δ of a dp query; OpenDP's
# noisy top-k map at unit scale is k·Δ (2k·Δ when not monotonic).  Σw ≤ float max / (2·MAX_K)
# keeps every one of them a finite number.  The noise scale k·Δ/α also depends on the caller's
# α: it is checked when a dp answer is prepared, before any charge (index.noisy_sampler).
MAX_WEIGHT_SUM = sys.float_info.max / (2 * MAX_K)


@dataclass(frozen=True)
class Schema:
    public: tuple[str, ...]
    private: tuple[str, ...]
    weights: dict[str, float]
    numeric: dict[str, tuple[float, float]]  # numeric column -> (min, max) of the table
    domains: dict[str, tuple[str, ...]] = field(default_factory=dict)  # category -> values

    def weight(self, column: str) -> float:
        return self.weights.get(column, 1.0)

    def check_weights(self) -> None:
        check_weights((*self.public, *self.private), self.weights)

    def as_dict(self) -> dict:
        return {"public": list(self.public), "private": list(self.private),
                "weights": self.weights, "numeric": {c: list(r) for c, r in self.numeric.items()},
                "domains": {c: list(v) for c, v in self.domains.items()}}

    @classmethod
    def from_dict(cls, d: Mapping) -> Schema:
        return cls(tuple(d["public"]), tuple(d["private"]), dict(d["weights"]),
                   {c: (r[0], r[1]) for c, r in d["numeric"].items()},
                   {c: tuple(v) for c, v in d["domains"].items()})

    def encode(self, column: str, text: str) -> float:
        """A value as stored: a float for numeric columns, a category's code otherwise
        (MISSING for a category the table has never seen: it matches nothing)."""
        if column in self.numeric:
            try:
                value = float(text)
            except ValueError:
                raise InputError(f"column {column!r} is numeric; {text!r} is not a number") \
                    from None
            if not math.isfinite(value):
                raise InputError(f"column {column!r}: {text!r} is not a finite number")
            return value
        values = self.domains[column]
        try:
            return float(values.index(text))
        except ValueError:
            return float(MISSING)

    def decode(self, column: str, value: float) -> str:
        if column in self.numeric:
            return _number(value)
        return "" if value == MISSING else self.domains[column][int(value)]


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def similarity(schema: Schema, column: str, asked: float, values: np.ndarray) -> np.ndarray:
    """ρ(q[c], t[c]) for every tuple: 1 on an equal category, 1 − |x − y|/range on numbers."""
    if column in schema.numeric:
        low, high = schema.numeric[column]
        spread = (high - low) or 1.0
        found = np.clip(1.0 - np.abs(values - asked) / spread, 0.0, 1.0)
        return np.where(np.isnan(values), 0.0, found)
    if asked == MISSING:
        return np.zeros(values.shape)
    return (values == asked).astype(float)


@dataclass
class RankTable:
    schema: Schema
    ids: list[str]
    public: np.ndarray   # (n, public columns), encoded
    private: np.ndarray  # (n, private columns), encoded


def read_rank_table(path: str | Path, public: Sequence[str], private: Sequence[str],
                    id_column: str | None = None, numeric: Sequence[str] = (),
                    weights: Mapping[str, float] | None = None,
                    known: Mapping[str, Sequence[str]] | None = None) -> RankTable:
    """Read and check the table; every problem is an :class:`InputError` naming the file,
    the line and the column, found before anything is written.  ``known``: categories an
    earlier build had (kept in the domains, so stored sets keep their meaning)."""
    path = Path(path)
    public, private, numeric = tuple(public), tuple(private), tuple(numeric)
    weights = dict(weights or {})
    _check_columns(public, private, numeric, weights, id_column)
    wanted = (*public, *private, *([id_column] if id_column else []))
    rows, lines = [], []
    for line, record in csv_records(path, wanted):
        rows.append(record)
        lines.append(line)
    return _encode(path, rows, lines, public, private, id_column, numeric, weights, known or {})


def _check_columns(public, private, numeric, weights, id_column) -> None:
    if not public or not private:
        raise InputError("give at least one public (--public) and one private (--private) "
                         "column")
    both = sorted(set(public) & set(private))
    if both:
        raise InputError(f"column(s) {', '.join(map(repr, both))} listed as both public and "
                         "private")
    for names, what in ((public, "public"), (private, "private")):
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise InputError(f"{what} column(s) {', '.join(map(repr, twice))} listed twice")
    unknown = sorted((set(numeric) | set(weights)) - set(public) - set(private))
    if unknown:
        raise InputError(f"--numeric/--weights name column(s) {', '.join(map(repr, unknown))}, "
                         "which are neither public nor private")
    check_weights((*public, *private), weights)
    if id_column and id_column in (*public, *private):
        raise InputError(f"the id column {id_column!r} cannot also be an attribute")


def check_weights(columns: Sequence[str], weights: Mapping[str, float]) -> None:
    """Every weight a positive number, and all of them (1 where not given) adding up to at
    most MAX_WEIGHT_SUM."""
    bad = {c: w for c, w in weights.items() if not (math.isfinite(w) and w > 0)}
    if bad:
        raise InputError(f"weights must be positive numbers: {bad}")
    total = sum(weights.get(c, 1.0) for c in columns)
    if total > MAX_WEIGHT_SUM:
        raise InputError(f"the weights add up to {total:g}; at most {MAX_WEIGHT_SUM:g} keeps "
                         f"every score and the noise of a top {MAX_K} finite")


def _encode(path, rows, lines, public, private, id_column, numeric, weights,
            known) -> RankTable:
    columns = (*public, *private)
    for column in numeric:
        for row, line in zip(rows, lines):
            try:
                if not math.isfinite(float(row[column])):
                    raise ValueError
            except ValueError:
                raise InputError(f"{path}:{line}: column {column!r} is {row[column]!r}, not a "
                                 "finite number (it is listed in --numeric)") from None
    for column in columns:
        if column not in numeric:
            empty = next((line for row, line in zip(rows, lines) if not row[column]), None)
            if empty is not None:
                raise InputError(f"{path}:{empty}: column {column!r} is empty")
    domains = {c: tuple(sorted({row[c] for row in rows} | set(known.get(c, ()))))
               for c in columns if c not in numeric}
    ranges = {c: (min(float(r[c]) for r in rows), max(float(r[c]) for r in rows))
              for c in numeric}
    schema = Schema(public, private, {c: float(w) for c, w in weights.items()}, ranges, domains)
    table = [tuple(schema.encode(c, row[c]) for c in columns) for row in rows]
    ids = [row[id_column] for row in rows] if id_column else [str(line - 1) for line in lines]
    if id_column:
        first: dict[str, int] = {}
        for rid, line in zip(ids, lines):
            if rid in first:
                raise InputError(f"{path}:{line}: id {rid!r} already used on line {first[rid]}")
            first[rid] = line
    array = np.array(table, dtype=float).reshape(len(rows), len(columns))
    return RankTable(schema, ids, array[:, :len(public)], array[:, len(public):])


@dataclass(frozen=True)
class Query:
    public: dict[str, float]   # column -> encoded value asked
    private: dict[str, float]
    text: str

    def canonical(self) -> str:
        return self.text


def parse_query(schema: Schema, text: str) -> Query:
    """'col=value,col=value': any public or private columns, each at most once.  The ranking's
    weights are checked too (a ranking stored before the check may hold any)."""
    schema.check_weights()
    public, private, parts = {}, {}, []
    for part in (p.strip() for p in characters(text).split(",")):
        if not part:
            continue
        name, sep, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise InputError(f"{part!r}: write column=value")
        if name in public or name in private:
            raise InputError(f"column {name!r} is asked twice")
        if name not in schema.public and name not in schema.private:
            raise InputError(f"unknown column {name!r}; columns: "
                             f"{', '.join((*schema.public, *schema.private))}")
        (public if name in schema.public else private)[name] = schema.encode(name, value)
        parts.append(f"{name}={value}")
    if not parts:
        raise InputError("an empty query: give column=value pairs")
    return Query(public, private, ",".join(sorted(parts)))
