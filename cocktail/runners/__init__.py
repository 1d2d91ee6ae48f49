"""Where map tasks run, chosen by name.

``fast`` reads the indexes in-process (the default for the local store); ``inline``, ``local``,
``spark`` and ``hadoop`` run the mappers/ and reducers/ streaming scripts as one MapReduce job
through mrjob.  Every runner returns the same pseudonyms, so answers are identical.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from concurrent.futures import ThreadPoolExecutor

from ..overlay.combine import count_matches, resolve
from ..overlay.planner import MapTask, Plan, plan_conjunction
from ..publication import Publication
from ..querylang import CountQuery
from . import fastpath
from .mapreduce import PLACED, hadoop_args, run_job

RUNNERS = ("fast", "inline", "local", "spark", "hadoop")
SCRATCH = "jobs"  # the hadoop runner's job files and outputs, in the private zone


def run_tasks(publication: Publication, tasks: Sequence[MapTask], runner: str,
              log: Callable[[str], None] | None = None) -> Mapping[MapTask, Set[int]]:
    """Record positions matched by each task, as one MapReduce job (one per side on YARN)."""
    if runner not in PLACED:
        return resolve(_job(publication, tasks, runner, (), log), publication.record_positions)
    scratch = publication.store.location("private", SCRATCH)
    sides = [(private, [task for task in tasks if task.private == private])
             for private in (False, True)]
    # One job per side, so private work runs on private nodes; the two run side by side.
    with ThreadPoolExecutor(2) as pool:
        jobs = [pool.submit(_job, publication, group, runner, hadoop_args(scratch, private), log)
                for private, group in sides if group]
        matched = {task: found for job in jobs for task, found in job.result().items()}
    return resolve(matched, publication.record_positions)


def _job(publication: Publication, tasks: Sequence[MapTask], runner: str,
         extra_args: Sequence[str], log: Callable[[str], None] | None) -> dict[MapTask, list[str]]:
    inputs = sorted({publication.index_location(task.chunk) for task in tasks})
    return run_job(tasks, inputs, runner, extra_args, log)


def exact_counts(publication: Publication, queries: Sequence[CountQuery], runner: str = "fast",
                 log: Callable[[str], None] | None = None) -> list[int]:
    """Exact answers to a batch of queries: the map tasks of all of them run as one job.

    Owner only: exact answers never leave the private cloud otherwise."""
    planned = log is not None or runner != "fast"  # the fast path needs no plan
    plans = [plan_conjunction(query.terms, publication) for query in queries] if planned else []
    for query, plan in zip(queries, plans if log else []):
        log(f"{query}: {describe(plan)}")
    if runner == "fast":
        return fastpath.counts(publication, queries)
    tasks = list(dict.fromkeys(task for plan in plans for task in plan.tasks))
    matched = run_tasks(publication, tasks, runner, log)
    return [count_matches(plan, matched, publication.cluster_members) for plan in plans]


def counter(publication: Publication, runner: str = "fast"
            ) -> Callable[[Sequence[CountQuery]], list[int]]:
    """The exact-count function the DP layer asks: ``CountQuery(())`` counts every record."""
    def counts(queries: Sequence[CountQuery]) -> list[int]:
        if runner == "fast":
            return fastpath.counts(publication, queries)
        conjunctive = [q for q in queries if q.terms]
        found = iter(exact_counts(publication, conjunctive, runner) if conjunctive else [])
        return [next(found) if q.terms else len(publication.record_ids) for q in queries]
    return counts


def exact_count(publication: Publication, query: CountQuery, runner: str = "fast",
                log: Callable[[str], None] | None = None) -> int:
    return exact_counts(publication, [query], runner, log)[0]


def describe(plan: Plan) -> str:
    private = sum(t.private for t in plan.tasks)
    return (f"plan: {plan.nodes_visited} tree nodes visited, {plan.branches_pruned} branches "
            f"pruned, {len(plan.clusters)} clusters, {len(plan.tasks)} map tasks "
            f"({private} over private chunks)")
