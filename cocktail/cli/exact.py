"""The owner's exact answers, over the owner's engine: ``cocktail plan``, and ``cocktail query
--exact`` (:mod:`.query` loads this module only then)."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.table import Table

from ..query import Engine, Publication, describe, plan_summary
from ..query.backends.streaming import tasks_json
from ..query.engine import answer_from_matches
from ..querylang import Workload, parse_batch, parse_count
from ..store import open_store
from .contract import emit, err, out
from .options import OWNER, json_option, store_option


def answers(text: str, source: str, batch: bool, store_spec: str, runner: str, verbose: bool,
            as_json: bool) -> None:
    """``query --exact``: one counting query, or a ``batch`` (``text`` read from ``source``)."""
    started = time.perf_counter()
    query = None if batch else parse_count(text)
    workload = parse_batch(text, source) if batch else None
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
    exact = engine.exact(workload)
    payload = exact.as_dict() | {"seconds": round(time.perf_counter() - started, 4)}
    emit(as_json, payload, lambda: [out.print(f"{q} = {a:g}", highlight=False, markup=False)
                                     for q, a in zip(exact.queries, exact.answers)])


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
