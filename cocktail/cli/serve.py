"""``cocktail serve``: the analysts' HTTP API."""

from __future__ import annotations

import os

import click

from ..daemon import detach as detached
from ..daemon import listen
from ..dp.deadline import DEFAULT_DEADLINES, Deadlines
from ..extras import require
from ..private_config import require_set_up
from ..query import BACKENDS
from ..query.backends import check_backend
from ..store import open_store
from .contract import confirm
from .options import OWNER, json_option, store_option

DETACHED_LOG = "cocktail-serve.log"


@click.command("serve", help="Serve the analysts' HTTP API: token auth, JSON, noisy answers "
               f"only; OpenAPI docs at /docs. With --json, one object on stdout once it "
               f"listens (its url), logs on stderr. {OWNER}")
@store_option
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535),
              help="0: any free port (--json says which).")
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
@click.option("--deadline-search-ms", type=click.FloatRange(min=0, min_open=True),
              default=Deadlines.search_ms, show_default=True,
              help="When, after arrival, a batch's strategy search must be done; its fresh "
                   "answer leaves this plus base plus a count per cell of its terms.")
@click.option("--rank-slots", type=click.IntRange(1, 1000), default=Deadlines.rank_slots,
              show_default=True, help="POST /v1/rank: rankings booked per rank deadline on each "
                                      "lane (one per role and length), each for 1/SLOTS of it; "
                                      "the deadline must cover SLOTS worst cases.")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False),
              help="Serve HTTPS with this certificate chain (PEM); needs --tls-key. Without "
                   "it, tokens cross the network in the clear.")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False),
              help="The certificate's private key (PEM; readable by its owner only, else "
                   "refused: chmod 600).")
@click.option("--tls-key-password-file", type=click.Path(exists=True, dir_okay=False),
              help="A file (the owner's only) whose first line is the passphrase of an "
                   "encrypted --tls-key; serve never asks for it on the terminal.")
@click.option("--access-log", is_flag=True, help="Log every request.")
@click.option("--detach", is_flag=True,
              help="Return once the service answers, leaving it running in the background "
                   "(its pid in the confirmation; `kill PID` stops it); a service that cannot "
                   "start fails here, with its exit status.")
@click.option("--log-file", type=click.Path(dir_okay=False),
              help=f"With --detach: where its logs are appended once it answers (until then "
                   f"they show here); default ./{DETACHED_LOG}.")
@json_option
def serve_cmd(store_spec: str, host: str, port: int, runner: str,
              deadline_base_ms: float | None, deadline_count_ms: float | None,
              deadline_rank_ms: float, deadline_search_ms: float, rank_slots: int,
              tls_cert: str | None, tls_key: str | None, tls_key_password_file: str | None,
              access_log: bool, detach: bool, log_file: str | None, as_json: bool) -> None:
    if (tls_cert is None) != (tls_key is None):
        raise click.UsageError("--tls-cert and --tls-key go together")
    if tls_key_password_file and not tls_key:
        raise click.UsageError("--tls-key-password-file is the passphrase of --tls-key")
    if log_file and not detach:
        raise click.UsageError("--log-file is where a --detach'ed service logs: give --detach")
    log_file = log_file or DETACHED_LOG
    ready = detached(log_file) if detach else lambda: None  # the caller exits in detached()
    tls = None
    if tls_cert:  # refused before anything listens (docs/dp.md, "TLS")
        from ..service import Tls  # names the [serve] extra if it is missing

        tls = Tls.load(tls_cert, tls_key, tls_key_password_file)
    default = DEFAULT_DEADLINES[runner]
    deadlines = Deadlines(deadline_base_ms or default.base_ms,
                          default.count_ms if deadline_count_ms is None else deadline_count_ms,
                          deadline_rank_ms, deadline_search_ms, rank_slots)
    store = open_store(store_spec)
    require_set_up(store, can_create=False)  # a mistyped --store would answer 503 forever
    check_backend(runner, store)
    # Listening before the server's libraries load and it warms the publication (seconds): a
    # client that comes meanwhile is queued and answered once it runs, not refused.
    listening = listen(host, port)
    require("uvicorn")
    from ..service import Server  # names the [serve] extra if it is missing

    server = Server.start(store, runner, deadlines, listening, tls)
    confirm(as_json, {"url": server.url, "store": store.url, "runner": runner,
                      "pid": os.getpid()}, f"serving {store.url} at {server.url} " +
            (f"(pid {os.getpid()}, logs in {log_file}; kill {os.getpid()} stops it)"
             if detach else "(Ctrl-C stops)"))
    ready()
    server.run(access_log)
