"""``cocktail query`` (exact for the owner, noisy through the service for analysts) and ``cocktail
plan``."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.table import Table

from ..client import LEVEL, Client, Result
from ..dp.noise import PURE, SYMBOL, ZCDP
from ..dp.strategies import OBJECTIVES, PER_QUERY
from ..query import BACKENDS, Engine, Publication, describe, plan_summary
from ..query.engine import answer_from_matches
from ..query.backends.streaming import tasks_json
from ..querylang import Workload, parse_batch, parse_count
from ..store import open_store
from .contract import emit, err, out
from .options import (OWNER, json_option, need_service, read_token, store_option, token_options,
                      url_option)


@click.command("query")
@click.argument("expression", required=False)
@click.option("--batch", "batch_file", type=click.File("r"),
              help="A file of linear queries, one per line (or ';'-separated): one release.")
@url_option
@token_options
@click.option("--objective", type=click.Choice(OBJECTIVES), default=PER_QUERY,
              show_default=True,
              help="Analysts: 'per-query' answers no query less accurately than the best fixed "
              "strategy; 'total' takes the lowest total error, which may answer some queries "
              "less accurately (the reply says which). Each objective is its own charge.")
@click.option("--alpha", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Analysts: the α this query spends, up to the role's α per query (the "
              "default) and down to a published share of it: less budget, more noise. Each α "
              "is its own charge.")
@click.option("--rho", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Analysts of a role under zCDP: the ρ this query spends, as --alpha.")
@click.option("--allow-unlisted", is_flag=True,
              help="Analysts: answer, and charge, a query naming a term that occurs in no "
              "public chunk (the service's GET /v1/terms lists those that do); without it "
              "such a query is refused, free (exit 2): docs/dp.md, \"Unlisted terms\".")
@click.option("--exact", is_flag=True,
              help="Owner command: exact answers read from the store's private zone, without "
              "noise (one query, or a --batch in one job). They must not be given to analysts.")
@store_option
@click.option("--runner", type=click.Choice(list(BACKENDS)), default="fast", show_default=True,
              help="With --exact: where counts run: in-process over the term index (fast), "
              "an mrjob job of map tasks over the chunks (inline, local, spark, hadoop), or "
              "one over the term index's parts, a map task each (index-*: docs/engines.md).")
@click.option("-v", "--verbose", is_flag=True, help="With --exact: show the plan and the tasks.")
@json_option
def query_cmd(expression: str | None, batch_file, url: str | None, token: str | None,
              token_file, objective: str, alpha: float | None, rho: float | None,
              allow_unlisted: bool, exact: bool, store_spec: str, runner: str, verbose: bool,
              as_json: bool) -> None:
    """Answer a query: 'count(a & b)', '2*count(a) - count(b)', or a --batch file.

    \b
    Analysts: noisy answers from the overlay service, charged to their budget:
      cocktail query 'count(a & b)' --url http://overlay:8080 --token-file TOKEN_FILE
    Owner: exact answers straight from the store (no token):
      cocktail query --exact 'count(a & b)' --store STORE

    Exit status as in `cocktail --help`: 1 when the service is unreachable, 2 for a
    malformed query, a limit exceeded, a term in no public chunk (without --allow-unlisted)
    or a missing --url or token, 3 for a refused token, 4 when the budget is spent.
    """
    if (expression is None) == (batch_file is None):
        raise click.UsageError("give one EXPRESSION or --batch FILE")
    token = read_token(token, token_file)
    text = batch_file.read() if batch_file is not None else expression
    source = getattr(batch_file, "name", "query")
    if not exact:
        url = need_service(url, token, "exact answers are the owner's (--exact)")
        with Client(url, token) as service:
            answered = service.query(text, alpha, rho, objective,
                                     allow_unlisted=allow_unlisted)
        emit(as_json, answered.reply, lambda: _print_noisy(answered))
        return
    if alpha is not None or rho is not None or allow_unlisted:
        raise click.UsageError("--alpha, --rho and --allow-unlisted are the analyst's; "
                               "--exact answers have no noise and no charge")
    if token:
        raise click.UsageError("--exact is an owner command that reads the store's private "
                               "zone; it takes no token (unset COCKTAIL_TOKEN)")
    started = time.perf_counter()
    query = parse_count(expression) if batch_file is None else None
    workload = None if query else parse_batch(text, source)
    log = (lambda line: err.print(f"[dim]{line}[/]", highlight=False)) if verbose else None
    engine = Engine(Publication.open(open_store(store_spec)), runner, log)
    if workload is not None:
        _exact_batch(engine, workload, started, as_json)
        return
    answer = engine.count(query)
    emit(as_json, {"query": str(query), "answer": answer, "exact": True, "runner": runner,
                    "version": engine.version,
                    "seconds": round(time.perf_counter() - started, 4)},
          lambda: out.print(f"{query} = {answer}  (exact, {engine.version})",
                            highlight=False, markup=False))


def _exact_batch(engine: Engine, workload: Workload, started: float, as_json: bool) -> None:
    """Owner-only exact answers to a batch: one job (per side) for all its counting queries."""
    answers = [int(a) if float(a).is_integer() else a for a in engine.answers(workload)]
    payload = {"queries": [str(q) for q in workload.queries], "answers": answers, "exact": True,
               "runner": engine.backend_name, "version": engine.version,
               "seconds": round(time.perf_counter() - started, 4)}
    emit(as_json, payload, lambda: [out.print(f"{q} = {a:g}", highlight=False, markup=False)
                                     for q, a in zip(payload["queries"], answers)])


def _print_noisy(answered: Result) -> None:
    result = answered.reply
    above = result.get("above_fixed") or [False] * len(answered)  # older answers
    for row, worse in zip(answered, above):
        note = ", above the best fixed strategy's" if worse else ""
        out.print(f"{row['query']} ≈ {row['answer']:.1f}  (± {row['rms_error']:.1f} RMS "
                  f"expected{note}; {LEVEL:.0%} in [{row['ci_low']:.1f}, {row['ci_high']:.1f}])",
                  highlight=False, markup=False)
    budget = result["budget"]
    symbol = SYMBOL[ZCDP if "rho" in result else PURE]
    note = "reused, no charge" if result["reused"] else f"charged {symbol}={result['charged']:g}"
    out.print(f"[dim]{result['strategy']}; {note}; {budget['remaining']:g} of "
              f"{budget['budget']:g} left[/]", highlight=False)


@click.command("plan", help="Show the map tasks a counting query becomes. " + OWNER +
              " (A plan reveals the tree.)")
@click.argument("expression")
@store_option
@click.option("--tasks-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the tasks as the streaming scripts' TASKS.json, for a "
              "hand-run `hadoop jar hadoop-streaming.jar` (docs/overlay.md); with "
              "--matches, the TASKS.json the job ran with (checked against this plan).")
@click.option("--matches", "matches", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The hand-run job's output (`task TAB pseudonym` lines; repeat for several "
                   "files): print the exact answer, the private cloud's final intersection.")
@json_option
def plan_cmd(expression: str, store_spec: str, tasks_file: Path | None,
             matches: tuple[Path, ...], as_json: bool) -> None:
    query = parse_count(expression)
    publication = Publication.open(open_store(store_spec))
    if matches:
        if tasks_file is None:
            raise click.UsageError("--matches needs the --tasks-file the job ran with")
        lines = [line for path in matches for line in path.read_text().splitlines()]
        answer = answer_from_matches(publication, query, tasks_file.read_text(), lines)
        emit(as_json, {"query": str(query), "version": publication.version, "answer": answer},
             lambda: out.print(f"{query} = {answer}", highlight=False))
        return
    plan = Engine(publication).plan(query)
    if tasks_file:
        tasks_file.write_text(tasks_json(plan.tasks))
    payload = {"query": str(query), **plan_summary(plan, publication)}

    def human() -> None:
        out.print(describe(plan), highlight=False)
        table = Table()
        for column in ("chunk", "zone", "terms", "clusters"):
            table.add_column(column)
        for task in payload["tasks"]:
            table.add_row(task["chunk"], task["zone"], " & ".join(task["terms"]),
                          ", ".join(map(str, task["clusters"])))
        out.print(table)

    emit(as_json, payload, human)
