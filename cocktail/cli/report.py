"""``cocktail report``: the owner's HTML report of a store."""

from __future__ import annotations

from pathlib import Path

import click

from ..private_config import require_set_up
from ..report import write_report
from ..store import open_store
from .contract import confirm
from .options import json_option, store_option


@click.command("report")
@store_option
@click.option("--out", "out_path", type=click.Path(dir_okay=False, writable=True,
                                                  path_type=Path),
              default=Path("report.html"), show_default=True,
              help="The HTML file to write (self-contained: it opens with no network).")
@json_option
def report_cmd(store_spec: str, out_path: Path, as_json: bool) -> None:
    """The owner's report of a store: coverage against the floor, the publication's shape,
    the audit, the releases, the privacy budget and the tables, as charts with their numbers
    (owner command: it reads the private zone and the ledger)."""
    store = open_store(store_spec)
    require_set_up(store, can_create=False)
    numbers = write_report(store, out_path)
    confirm(as_json, numbers | {"out": str(out_path)},
            f"wrote {out_path} ({out_path.stat().st_size / 1e6:.1f} MB); open it with: "
            f"xdg-open {out_path}")
