"""``cocktail query``: noisy answers through the service for analysts, exact ones for the owner
(:mod:`.exact`, loaded only for them).  This module imports nothing an analyst's client install
lacks (docs/install.md)."""

from __future__ import annotations

import click

from ..client import LEVEL, Client, Result
from ..dp.noise import PURE, SYMBOL, ZCDP
from ..dp.objectives import DEFAULT_OBJECTIVE, OBJECTIVES
from ..extras import require
from ..query.names import BACKEND_NAMES
from ..querylang import parse_batch
from .contract import emit, out
from .options import json_option, need_service, read_token, store_option, token_options, url_option


@click.command("query")
@click.argument("expression", required=False)
@click.option("--batch", "batch_file", type=click.File("r"),
              help="A file of linear queries, one per line (or ';'-separated): one release.")
@url_option
@token_options
@click.option("--objective", type=click.Choice(OBJECTIVES), default=DEFAULT_OBJECTIVE,
              show_default=True,
              help="Analysts: 'total' takes the lowest total error, which may answer some "
              "queries less accurately than the best fixed strategy (the reply says which); "
              "'per-query' answers none less accurately. Each objective is its own charge.")
@click.option("--alpha", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Analysts: the α this query spends, up to the role's α per query (the "
              "default) and down to a published share of it: less budget, more noise. Each α "
              "is its own charge.")
@click.option("--rho", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Analysts of a role under zCDP: the ρ this query spends, as --alpha.")
@click.option("--level", type=click.FloatRange(0, 1, min_open=True, max_open=True),
              default=LEVEL, show_default=True,
              help="Analysts: the confidence level of each answer's interval (free: the same "
              "answer at any level).")
@click.option("--allow-unlisted", is_flag=True,
              help="Analysts: answer, and charge, a query naming a term that occurs in no "
              "public chunk (the service's GET /v1/terms lists those that do); without it "
              "such a query is refused, free (exit 2): docs/dp.md, \"Unlisted terms\".")
@click.option("--preview", is_flag=True,
              help="Analysts: show what answering would do — the strategy, each query's "
              "expected error and interval, and the charge — without spending or reading "
              "any data (the service admits a few a minute).")
@click.option("--exact", is_flag=True,
              help="Owner command: exact answers read from the store's private zone, without "
              "noise (one query, or a --batch in one job). They must not be given to analysts.")
@store_option
@click.option("--runner", type=click.Choice(BACKEND_NAMES), default="fast", show_default=True,
              help="With --exact: where counts run: in-process over the term index (fast), "
              "an mrjob job of map tasks over the chunks (inline, local, spark, hadoop), or "
              "one over the term index's parts, a map task each (index-*: docs/engines.md).")
@click.option("-v", "--verbose", is_flag=True, help="With --exact: show the plan and the tasks.")
@json_option
def query_cmd(expression: str | None, batch_file, url: str | None, token: str | None,
              token_file, objective: str, alpha: float | None, rho: float | None,
              level: float, allow_unlisted: bool, preview: bool, exact: bool, store_spec: str,
              runner: str, verbose: bool, as_json: bool) -> None:
    """Answer a query: 'count(a & b)', '2*count(a) - count(b)', or a --batch file.

    \b
    Analysts: noisy answers from the overlay service, charged to their budget:
      cocktail query 'count(a & b)' --url http://overlay:8080 --token-file TOKEN_FILE
    Owner: exact answers straight from the store (no token):
      cocktail query --exact 'count(a & b)' --store STORE

    Exit status as in `cocktail --help`: 1 when the service is unreachable, 2 for a
    malformed query, a limit exceeded, a term in no public chunk (without --allow-unlisted)
    or a missing --url or token, 3 for a refused token, 4 when the budget is spent, 5 when
    the service or the store fails.
    """
    if (expression is None) == (batch_file is None):
        raise click.UsageError("give one EXPRESSION or --batch FILE")
    token = read_token(token, token_file)
    text = batch_file.read() if batch_file is not None else expression
    source = getattr(batch_file, "name", "query")
    if not exact:
        url = need_service(url, token, "exact answers are the owner's (--exact)")
        with Client(url, token) as service:
            if preview:
                shown = service.preview(text, alpha, rho, objective, level, allow_unlisted)
                emit(as_json, shown.reply, lambda: _print_preview(shown, level))
                return
            answered = service.query(text, alpha, rho, objective, level,
                                     allow_unlisted=allow_unlisted)
        emit(as_json, answered.reply, lambda: _print_noisy(answered, level))
        return
    if preview:
        raise click.UsageError("--preview is the analyst's: it asks the service, not --exact")
    if alpha is not None or rho is not None or allow_unlisted:
        raise click.UsageError("--alpha, --rho and --allow-unlisted are the analyst's; "
                               "--exact answers have no noise and no charge")
    if token:
        raise click.UsageError("--exact is an owner command that reads the store's private "
                               "zone; it takes no token (unset COCKTAIL_TOKEN)")
    require(f"{__package__}.exact").answers(text, source, batch_file is not None, store_spec,
                                            runner, verbose, as_json)


def _print_noisy(answered: Result, level: float) -> None:
    result = answered.reply
    above = result.get("above_fixed") or [False] * len(answered)  # older answers
    queries = parse_batch(result["workload"]).queries
    for row, worse, query in zip(answered, above, queries):
        note = ", above the best fixed strategy's" if worse else ""
        # a count is never negative: a noisy one may be, and says why
        noise = ("; below 0 from the noise alone" if row["answer"] < 0
                 and all(weight > 0 for weight, _ in query.parts) else "")
        out.print(f"{row['query']} ≈ {row['answer']:.1f}  (± {row['rms_error']:.1f} RMS "
                  f"expected{note}; {level * 100:g}% in [{row['ci_low']:.1f}, "
                  f"{row['ci_high']:.1f}]{noise})", highlight=False, markup=False)
    budget = result["budget"]
    symbol = SYMBOL[ZCDP if "rho" in result else PURE]
    note = "reused, no charge" if result["reused"] else f"charged {symbol}={result['charged']:g}"
    out.print(f"[dim]{result['strategy']}; {note}; {budget['remaining']:g} of "
              f"{budget['budget']:g} left[/]", highlight=False)



def _print_preview(shown: Result, level: float) -> None:
    for row in shown:
        note = ", above the best fixed strategy's" if row["above_fixed"] else ""
        out.print(f"{row['query']}  ± {row['rms_error']:.1f} RMS expected{note}; "
                  f"{level * 100:g}% interval ± {row['ci_half_width']:.1f}",
                  highlight=False, markup=False)
    reply = shown.reply
    symbol = SYMBOL[reply["definition"]]
    out.print(f"[dim]{reply['strategy']}; would charge {symbol}={reply['charge']:g} (nothing "
              f"charged now); {reply['budget']['remaining']:g} of "
              f"{reply['budget']['budget']:g} left[/]", highlight=False)
