"""The owner's report: every number of a store (:mod:`.numbers`) and the page that draws them
(:mod:`.page`), for `cocktail report` and the dashboard of `cocktail serve`."""

from __future__ import annotations

from pathlib import Path


def write_report(store, out: Path) -> dict:
    """Write the store's report to ``out`` (readable by its owner only: it holds every
    analyst's spending) and return its numbers."""
    from ..dp.ledger import private_file
    from .numbers import gather, owner_ledger
    from .page import render  # plotly: only for the page

    numbers = gather(store, owner_ledger(store))
    private_file(out)
    out.write_text(render(numbers), encoding="utf-8")
    return numbers
