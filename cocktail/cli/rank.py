"""`cocktail rank`: build a ranking over a table with public and private attributes, and ask
it for the top k.  This module holds what an analyst's client install runs (``rank query
--url``); the owner's commands and answers are in :mod:`.rank_owner`, loaded when used."""

from __future__ import annotations

import click
from rich.table import Table

from ..client import Client
from ..dp.noise import PURE, SYMBOL
from ..extras import require
from .contract import Lazy, emit, out
from .options import (json_option, need_service, read_token, renamed, store_option,
                      token_options, url_option)

name_option = click.option("--name", default="ranking", show_default=True,
                           help="Which ranking of the store.")


@click.group("rank", cls=Lazy, lazy={"generate": "rank_owner:generate_cmd",
                                     "build": "rank_owner:build_cmd", "query": "rank:query_cmd"},
             help="Top-k search over public and private attributes that does not reveal the "
             "private ones (ESVT, ESTT or differential privacy).")
def rank_group() -> None:
    pass


@renamed({"--k": "--top"})
@click.command("query")
@click.argument("query")
@click.option("--top", type=click.IntRange(1), default=10, show_default=True,
              help="How many results: the top k.")
@url_option
@token_options
@click.option("--name", help="Which ranking: needed only when there are several (their names "
              "are listed then).")
@store_option
@json_option
def query_cmd(query: str, top: int, url: str | None, token: str | None, token_file,
              name: str | None, store_spec: str, as_json: bool) -> None:
    """The top results for QUERY ('col=value,...'): ids and public attributes only.

    \b
    Analysts: from the overlay service, a dp ranking charged to their budget:
      cocktail rank query 'city=a,religion=x' --url http://overlay:8080 --token-file FILE
    Owner: straight from the store (--store); a dp ranking answers analysts only, with a
    token (the owner has no budget to charge)."""
    token = read_token(token, token_file)
    if url:
        with Client(need_service(url, token, "the owner reads the store (--store)"),
                    token) as service:
            name = name or only_ranking([r["name"] for r in service.rankings().rows])
            body = service.rank(name, query, top).reply
        emit(as_json, body, lambda: _print_results(body))
        return
    body = require(f"{__package__}.rank_owner").answer(store_spec, name, query, top, token)
    emit(as_json, body, lambda: _print_results(body))


def only_ranking(names: list[str]) -> str:
    """The ranking a query without --name means: the only one there is."""
    if len(names) == 1:
        return names[0]
    if not names:
        raise click.UsageError("there is no ranking to ask: the owner builds one with "
                               "`cocktail rank build`")
    raise click.UsageError(f"there are {len(names)} rankings: give --name, one of "
                           + ", ".join(sorted(names)))


def _print_results(body: dict) -> None:
    rows = body["results"]
    table = Table(title=f"top {len(rows)} for {body['query']} ({body['defense']}, "
                  f"{body['version']})")
    for column in rows[0] if rows else ["id"]:
        table.add_column(column)
    for row in rows:
        table.add_row(*row.values())
    out.print(table)
    if "charged" in body:
        symbol = SYMBOL[body["budget"].get("definition", PURE)]  # a zCDP role charges ρ
        out.print(f"charged {symbol}={body['charged']:g}; {body['budget']['remaining']:g} left",
                  highlight=False)

