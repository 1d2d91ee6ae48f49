"""Mondrian with distinct ℓ-diversity: the baseline anonymizer of the composition-attack runs.

Strict multidimensional Mondrian (LeFevre, DeWitt and Ramakrishnan, ICDE 2006, "Mondrian
multidimensional k-anonymity") whose split-allowability condition is *distinct ℓ-diversity*
(Machanavajjhala et al., ICDE 2006): a cut is allowed only when both halves hold at least ℓ
distinct sensitive values (hence at least ℓ tuples).  A partition is cut recursively:

* its quasi-identifier dimensions are ranked by normalized width, widest first — numeric
  ``(max − min) / (global max − global min)`` (0 when the column is constant), categorical
  ``distinct values in the partition / distinct values in the table``; equal widths go to
  the lower column index;
* on a dimension, the *median tuple* is the one at position ``(n − 1) // 2`` once the
  partition is sorted on it; tuples ≤ its value go left, the others right.  Numbers compare
  as floats (the low median gives the same cut as ``np.median``, which averages the middle
  pair: no value lies strictly between them).  Categories are ordered **lexicographically**
  (Python string order), not by frequency: the order is then fixed by the value domain
  alone, the same in every partition and for every publisher; the median tuple's category
  and all categories before it go left;
* the first dimension in that ranking with an allowable cut is cut; a partition no dimension
  can cut is an equivalence class (EC), so every EC is maximal for this cut rule.

Nothing is random: the result depends only on the rows' values and ids (not their order).

Why not a library: PyPI's Mondrian ℓ-diversity packages are pandas data-frame tools (anonypy
0.2.1, its fork anonypyx, umbra-k; project-lighthouse-anonymize also pins numpy < 2 and
pulls numba, fastparquet, ucimlrepo).  anonypy/anonypyx cut numeric columns at ``< median``
/ ``≥ median`` and categorical ones in order of first appearance (input-order dependent),
umbra-k has k-anonymity only, and all return data frames rather than tuple ids — a wrong
fit for ~100 lines of numpy over :class:`~cocktail.tables.data.Row` lists.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .data import Row, number


def mondrian(rows: list[Row], numeric: Sequence[bool], l: int) -> list[list[int]]:
    """The ECs of ``rows`` as lists of tuple ids (ascending, ECs ordered by their first id);
    each holds at least ``l`` distinct sensitive values.  ``numeric[i]``: QI column i holds
    numbers.  Raises :class:`ValueError` when ``l < 1`` or the table as a whole has fewer
    than ``l`` distinct sensitive values (then no ℓ-diverse partitioning exists)."""
    if isinstance(l, bool) or not isinstance(l, int | np.integer) or l < 1:
        raise ValueError(f"l must be an integer of at least 1 (got {l!r})")
    rows = sorted(rows, key=lambda row: row.id)
    X, S = _encode(rows, numeric)
    distinct = len(np.unique(S))
    if distinct < l:
        raise ValueError(f"the table has only {distinct} distinct sensitive value"
                         f"{'' if distinct == 1 else 's'}, fewer than l = {l}: no "
                         f"{l}-diverse equivalence class exists")
    numeric = [bool(flag) for flag in numeric]
    lo, hi = X.min(axis=0), X.max(axis=0)
    domain = [len(np.unique(X[:, d])) for d in range(X.shape[1])]
    ids = np.array([row.id for row in rows], dtype=np.int64)
    done: list[np.ndarray] = []
    todo = [np.arange(len(rows))]
    while todo:
        part = todo.pop()
        values = X[part]
        widths = [len(np.unique(values[:, d])) / domain[d] if not numeric[d]
                  else (values[:, d].max() - values[:, d].min()) / (hi[d] - lo[d])
                  if hi[d] > lo[d] else 0.0 for d in range(X.shape[1])]
        for d in sorted(range(X.shape[1]), key=lambda d: (-widths[d], d)):
            halves = _cut(values[:, d], S[part], l)
            if halves is not None:
                todo.extend((part[halves], part[~halves]))
                break
        else:
            done.append(part)
    return sorted(([int(i) for i in ids[part]] for part in done), key=lambda ec: ec[0])


def _cut(column: np.ndarray, s: np.ndarray, l: int) -> np.ndarray | None:
    """The left-half mask of the median cut of one partition on one dimension, or None when
    the cut is not allowed (a half with fewer than ``l`` distinct sensitive values)."""
    n = len(column)
    if n < 2 * l:
        return None
    middle = (n - 1) // 2
    left = column <= np.partition(column, middle)[middle]
    if not l <= left.sum() <= n - l:
        return None
    if len(np.unique(s[left])) < l or len(np.unique(s[~left])) < l:
        return None
    return left


def _encode(rows: list[Row], numeric: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    """The QI columns as floats (numbers, or a category's rank in the sorted domain) and the
    sensitive values as integer codes."""
    if not rows:
        return np.zeros((0, len(numeric))), np.zeros(0, dtype=np.int64)
    width = len(numeric)
    seen: set[int] = set()
    for row in rows:
        if len(row.qi) != width:
            raise ValueError(f"tuple {row.id} has {len(row.qi)} QI values, numeric= names "
                             f"{width} columns")
        if row.id in seen:
            raise ValueError(f"tuple id {row.id} occurs twice")
        seen.add(row.id)
    X = np.empty((len(rows), width))
    for d, is_number in enumerate(numeric):
        texts = [row.qi[d] for row in rows]
        if is_number:
            X[:, d] = [_float(text, row.id, d) for text, row in zip(texts, rows, strict=True)]
        else:
            domain = sorted(set(texts))
            rank = {value: r for r, value in enumerate(domain)}
            X[:, d] = [rank[text] for text in texts]
    codes: dict[object, int] = {}
    S = np.array([codes.setdefault(row.s, len(codes)) for row in rows], dtype=np.int64)
    return X, S


def _float(text: str, tuple_id: int, column: int) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"tuple {tuple_id}: QI column {column} is {text!r}, not a number "
                         f"(it is declared numeric)") from None
    if not math.isfinite(value):
        raise ValueError(f"tuple {tuple_id}: QI column {column} is {text!r}, not finite")
    return value


def generalize(rows: list[Row], numeric: Sequence[bool]) -> tuple[str, ...]:
    """One EC's published QI values: a numeric column as ``'lo-hi'`` (``'v'`` when all equal;
    integral values without ``.0``), a categorical one as its sorted distinct values joined
    by ``'|'``."""
    if not rows:
        raise ValueError("cannot generalize an empty equivalence class")
    out = []
    for d, is_number in enumerate(numeric):
        texts = [row.qi[d] for row in rows]
        if is_number:
            values = [_float(text, row.id, d) for text, row in zip(texts, rows, strict=True)]
            low, high = str(number(min(values))), str(number(max(values)))
            out.append(low if low == high else f"{low}-{high}")
        else:
            out.append("|".join(sorted(set(texts))))
    return tuple(out)
