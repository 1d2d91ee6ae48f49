"""``cocktail query`` (exact for the owner, noisy through the service for analysts) and ``cocktail
plan``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
from rich.table import Table

from ..dp.strategies import OBJECTIVES, PER_QUERY
from ..query import BACKENDS, Engine, Publication, describe
from ..query.backends.streaming import tasks_json
from ..querylang import Workload, parse_batch, parse_count
from ..store import open_store
from .contract import OWNER, emit, err, fail_cleanly, failure, json_option, out, store_option


@click.command("query")
@click.argument("expression", required=False)
@click.option("--batch", "batch_file", type=click.File("r"),
              help="A file of linear queries, one per line (or ';'-separated): one release.")
@click.option("--url", envvar="COCKTAIL_URL",
              help="Analysts: the overlay service (`cocktail serve`) that answers ($COCKTAIL_URL).")
@click.option("--token", envvar="COCKTAIL_TOKEN", help="Analysts: your token ($COCKTAIL_TOKEN).")
@click.option("--objective", type=click.Choice(OBJECTIVES), default=PER_QUERY,
              show_default=True,
              help="Analysts: 'per-query' answers no query less accurately than the best fixed "
              "strategy; 'total' takes the lowest total error, which may answer some queries "
              "less accurately (the reply says which). Each objective is its own charge.")
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
@fail_cleanly
def query_cmd(expression: str | None, batch_file, url: str | None, token: str | None,
              objective: str, exact: bool, store_spec: str, runner: str, verbose: bool,
              as_json: bool) -> None:
    """Answer a query: 'count(a & b)', '2*count(a) - count(b)', or a --batch file.

    \b
    Analysts: noisy answers from the overlay service, charged to their budget:
      cocktail query 'count(a & b)' --url http://overlay:8080 --token TOKEN
    Owner: exact answers straight from the store (no token):
      cocktail query --exact 'count(a & b)' --store STORE

    \b
    Exit status: 0 answered; 1 service unreachable; 2 malformed query, a limit exceeded or
    bad usage; 3 token refused (unknown, missing, disabled); 4 budget exhausted; 5 the
    service or the store failed.
    """
    if (expression is None) == (batch_file is None):
        raise click.UsageError("give one EXPRESSION or --batch FILE")
    text = batch_file.read() if batch_file is not None else expression
    source = getattr(batch_file, "name", "query")
    if not exact:
        if not url or not token:
            raise click.UsageError(
                "noisy answers come from the overlay service: give --url URL (or $COCKTAIL_URL) "
                "and --token TOKEN (or $COCKTAIL_TOKEN); exact answers are the owner's (--exact)")
        _ask_service(url, token, text, source, objective, as_json)
        return
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


ANALYST_EXIT = {400: 2, 413: 2, 422: 2, 401: 3, 403: 3, 429: 4}  # else 5


def _ask_service(url: str, token: str, text: str, source: str, objective: str,
                 as_json: bool) -> None:
    """POST the queries to `cocktail serve` and print its answer; the exit status says why
    it was refused."""
    import httpx

    try:
        response = httpx.post(url.rstrip("/") + "/v1/query",
                              json={"query": text, "objective": objective},
                              headers={"Authorization": f"Bearer {token}"}, timeout=900)
    except httpx.HTTPError as exc:
        failure(1, f"cannot reach the overlay service at {url}: {exc}", as_json)
    try:
        body = response.json()
    except ValueError:
        body = {"detail": response.text[:200]}
    if response.status_code != 200:
        detail = body.get("detail", body)
        failure(ANALYST_EXIT.get(response.status_code, 5),
                 detail if isinstance(detail, str) else json.dumps(detail), as_json,
                 http_status=response.status_code)
    emit(as_json, body, lambda: _print_noisy(parse_batch(text, source), body))


def _exact_batch(engine: Engine, workload: Workload, started: float, as_json: bool) -> None:
    """Owner-only exact answers to a batch: one job (per side) for all its counting queries."""
    answers = [int(a) if float(a).is_integer() else a for a in engine.answers(workload)]
    payload = {"queries": [str(q) for q in workload.queries], "answers": answers, "exact": True,
               "runner": engine.backend_name, "version": engine.version,
               "seconds": round(time.perf_counter() - started, 4)}
    emit(as_json, payload, lambda: [out.print(f"{q} = {a:g}", highlight=False, markup=False)
                                     for q, a in zip(payload["queries"], answers)])


def _print_noisy(workload: Workload, result: dict) -> None:
    above = result.get("above_fixed") or [False] * len(result["answers"])  # older answers
    for query, answer, error, worse in zip(workload.queries, result["answers"],
                                           result["expected_rms_error"], above):
        note = ", above the best fixed strategy's" if worse else ""
        out.print(f"{query} ≈ {answer:.1f}  (± {error:.1f} RMS expected{note})",
                  highlight=False, markup=False)
    budget = result["budget"]
    note = "reused, no charge" if result["reused"] else f"charged α={result['charged']:g}"
    out.print(f"[dim]{result['strategy']}; {note}; {budget['remaining']:g} of "
              f"{budget['budget']:g} left[/]", highlight=False)


@click.command("plan", help="Show the map tasks a counting query becomes. " + OWNER +
              " (A plan reveals the tree.)")
@click.argument("expression")
@store_option
@click.option("--tasks-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the tasks as the streaming scripts' TASKS.json, for a "
              "hand-run `hadoop jar hadoop-streaming.jar` (docs/overlay.md).")
@json_option
@fail_cleanly
def plan_cmd(expression: str, store_spec: str, tasks_file: Path | None, as_json: bool) -> None:
    query = parse_count(expression)
    publication = Publication.open(open_store(store_spec))
    plan = Engine(publication).plan(query)
    if tasks_file:
        tasks_file.write_text(tasks_json(plan.tasks))
    payload = {"query": str(query), "nodes_visited": plan.nodes_visited,
               "index_files": sorted({publication.index_location(t.chunk) for t in plan.tasks}),
               "branches_pruned": plan.branches_pruned, "clusters": len(plan.clusters),
               "clusters_pruned": plan.clusters_pruned,
               "tasks": [{"chunk": t.chunk, "zone": "private" if t.private else "public",
                          "terms": list(t.terms),
                          "clusters": sorted(c for c, ts in plan.clusters.items() if t in ts)}
                         for t in plan.tasks]}

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
