"""``cocktail serve``: the analysts' HTTP API."""

from __future__ import annotations

import logging
import sys

import click

from ..dp.deadline import DEFAULT_DEADLINES, Deadlines
from ..dp.ledger import Ledger
from ..private_config import ledger_location
from ..query import BACKENDS
from ..store import open_store
from .contract import OWNER, fail_cleanly, store_option


@click.command("serve", help="Serve the analysts' HTTP API: token auth, JSON, noisy answers "
                            f"only; OpenAPI docs at /docs. {OWNER}")
@store_option
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535))
@click.option("--runner", type=click.Choice(list(BACKENDS)), default="fast", show_default=True)
@click.option("--deadline-base-ms", type=click.FloatRange(min=0, min_open=True),
              help="Reply time of refusals and reused answers, and the base of fresh ones "
                   "(default per runner; fast: 30).")
@click.option("--deadline-count-ms", type=click.FloatRange(min=0),
              help="Added to a fresh answer's reply time per conjunctive count it needs, "
                   "counts rounded up to a power of two (default per runner; fast: 1).")
@click.option("--deadline-rank-ms", type=click.FloatRange(min=0, min_open=True),
              default=Deadlines.rank_ms, show_default=True,
              help="Reply time of every POST /v1/rank (top-k over a ranking).")
@click.option("--rank-per-second", type=click.FloatRange(min=1), default=10,
              show_default=True, help="POST /v1/rank requests a second per token, spaced "
                                      "(no bursts); more are refused with 429.")
@click.option("--access-log", is_flag=True, help="Log every request.")
@fail_cleanly
def serve_cmd(store_spec: str, host: str, port: int, runner: str,
              deadline_base_ms: float | None, deadline_count_ms: float | None,
              deadline_rank_ms: float, rank_per_second: float, access_log: bool) -> None:
    import uvicorn

    from ..rank.service import Rankings
    from ..service import CurrentPublication, create_app

    default = DEFAULT_DEADLINES[runner]
    deadlines = Deadlines(deadline_base_ms or default.base_ms,
                          default.count_ms if deadline_count_ms is None else deadline_count_ms,
                          deadline_rank_ms)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    store = open_store(store_spec)
    rankings = Rankings(store)
    logging.getLogger("cocktail.serve").info("rankings open: %s",
                                             ", ".join(rankings.warm()) or "none")
    app = create_app(CurrentPublication(store, runner), Ledger(ledger_location(store)), deadlines,
                     rankings, store, rank_per_second=rank_per_second)
    sys.setswitchinterval(0.001)  # many short requests: hand the GIL over often (tail latency)
    uvicorn.run(app, host=host, port=port, log_level="info", access_log=access_log)
