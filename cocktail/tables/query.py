"""Aggregate queries on a permutation-based release, answered as intervals.

The QIs are published unchanged, so which tuples a QI predicate selects — and how many in each
partition — is exact; only which of its partition's S values each selected tuple holds is
hidden.  A partition with n values of which c are selected contributes, to SUM, between the
sum of its c smallest and of its c largest values; MIN and MAX follow the same order
statistics; AVG is SUM over the exact count.  These are the tightest bounds the release
allows (Zhang et al., ICDE 2007).  ``exact`` answers from the private zone, for the owner.
"""

from __future__ import annotations

import operator
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal

from ..querylang import QuerySyntaxError
from ..store import Store
from .data import decode_csv, number
from .release import MANIFEST, PUBLIC_TABLE, STATE, read_json, log_entry, read_tuples, \
    require_current

AGGREGATES = ("count", "sum", "avg", "min", "max")
OPERATORS = {"<=": operator.le, ">=": operator.ge, "!=": operator.ne, "=": operator.eq,
             "<": operator.lt, ">": operator.gt}
_CONDITION = re.compile(r"^\s*([^<>=!]+?)\s*(<=|>=|!=|=|<|>)\s*(.*?)\s*$")


@dataclass(frozen=True)
class Condition:
    column: str
    op: str
    value: str

    def test(self, cell: str) -> bool:
        compare = OPERATORS[self.op]
        try:
            return compare(float(cell), float(self.value))
        except ValueError:  # not both numbers: compare the text
            return compare(cell, self.value)


def parse_where(text: str, qi: Sequence[str]) -> list[Condition]:
    """``col=value,col>=value,...`` over quasi-identifier columns (all must hold)."""
    conditions = []
    for part in filter(str.strip, (text or "").split(",")):
        found = _CONDITION.match(part)
        if not found:
            raise QuerySyntaxError(f"{part.strip()!r} is not COLUMN OP VALUE "
                                   f"(OP one of {', '.join(OPERATORS)})")
        column, op, value = found.groups()
        if column not in qi:
            raise QuerySyntaxError(f"{column!r} is not a quasi-identifier of this table "
                                   f"({', '.join(qi)}); only those can select tuples")
        conditions.append(Condition(column, op, value))
    return conditions


@dataclass
class TableAnswer:
    version: str
    aggregate: str
    where: str
    selected: int                 # tuples the predicate selects (exact)
    low: float | None
    high: float | None
    midpoint: float | None
    exact: float | None = None
    relative_error: float | None = None  # |midpoint − exact| / |exact|

    def as_dict(self) -> dict:
        return asdict(self)


def answer(tstore: Store, aggregate: str, where: str, exact: bool = False) -> TableAnswer:
    if aggregate not in AGGREGATES:
        raise QuerySyntaxError(f"unknown aggregate {aggregate!r}; use {', '.join(AGGREGATES)}")
    version = require_current(tstore)
    manifest = read_json(tstore, "public", version, MANIFEST)
    if manifest["model"] != "ke":
        raise ValueError(f"interval queries are for ke tables; this one is "
                         f"{manifest['model']}")
    qi = manifest["qi"]
    conditions = parse_where(where, qi)
    header, rows = decode_csv(tstore.read("public", f"{version}/{PUBLIC_TABLE}"))
    partitions: dict[str, list[float]] = defaultdict(list)
    chosen: dict[str, int] = defaultdict(int)
    for row in rows:
        partitions[row[0]].append(float(row[-1]))
        chosen[row[0]] += _selects(conditions, qi, row[1:-1])
    bounds = interval(aggregate, [(sorted(partitions[p]), c) for p, c in chosen.items() if c])
    selected = sum(chosen.values())
    low, high = bounds if bounds else (None, None)
    result = TableAnswer(version, aggregate, where or "", selected,
                         _out(low, ROUND_FLOOR), _out(high, ROUND_CEILING),
                         _out((low + high) / 2) if bounds else None)
    if exact:
        truth = exact_answer(tstore, version, aggregate, conditions)
        result.exact = _out(truth)
        if truth not in (None, 0) and result.midpoint is not None:
            result.relative_error = round(abs(result.midpoint - truth) / abs(truth), 6)
    return result


def _selects(conditions: list[Condition], qi: Sequence[str], cells: Sequence[str]) -> bool:
    return all(c.test(cells[qi.index(c.column)]) for c in conditions)


def interval(aggregate: str, groups: list[tuple[list[float], int]]) -> tuple[float, float] | None:
    """Bounds of the aggregate over ``groups``: (a partition's sorted values, how many of its
    tuples are selected), each with at least one selected.  None when nothing is selected,
    except COUNT, which is then 0."""
    if aggregate == "count":
        total = float(sum(c for _, c in groups))
        return total, total
    if not groups:
        return None
    if aggregate in ("sum", "avg"):
        low = sum(sum(values[:c]) for values, c in groups)
        high = sum(sum(values[-c:]) for values, c in groups)
        if aggregate == "avg":
            count = sum(c for _, c in groups)
            return low / count, high / count
        return low, high
    if aggregate == "min":
        return min(v[0] for v, _ in groups), min(v[len(v) - c] for v, c in groups)
    return max(v[c - 1] for v, c in groups), max(v[-1] for v, _ in groups)


def exact_answer(tstore: Store, version: str, aggregate: str,
                 conditions: list[Condition]) -> float | None:
    """The true answer over the release's tuples, from the private zone."""
    state = read_json(tstore, "private", version, STATE)
    published = {t for p in log_entry(tstore, version)["partitions"] for t in p}
    table = read_tuples(tstore, version, state)
    values = [row.s for row in table.rows
              if row.id in published and _selects(conditions, table.qi, row.qi)]
    if not values and aggregate != "count":
        return None
    reducers: dict[str, Callable[[list[float]], float]] = {
        "count": lambda v: float(len(v)), "sum": sum, "avg": lambda v: sum(v) / len(v),
        "min": min, "max": max}
    return reducers[aggregate](values)


def _out(value: float | None, rounding: str = ROUND_HALF_EVEN) -> int | float | None:
    """To the millionth: a bound rounds outwards (floor, ceiling), so the interval printed
    still holds the answer; exact in decimal, and the float of it never crosses ``value``."""
    if value is None:
        return None
    return number(float(Decimal(value).quantize(Decimal("1e-6"), rounding=rounding)))
