"""Results as pandas DataFrames: every ``to_pandas()`` of the library's results goes through
:func:`to_frame`, which imports pandas (the ``frames`` extra) only when a table is asked for."""

from __future__ import annotations

from collections.abc import Iterable

from .extras import require


def to_frame(rows: Iterable[dict], columns: list[str]):
    """``rows`` (dicts) as a DataFrame of ``columns``, in that order: an empty result still
    has its columns."""
    pandas = require("pandas")
    return pandas.DataFrame([[row.get(c) for c in columns] for row in rows], columns=columns)
