"""The query engine: exact answers over a read view of one publication, on a named backend.

It owns the whole path plan → run → combine.  The planner (:mod:`cocktail.overlay.planner`)
turns a conjunction into map tasks, a backend runs them (or, the fast path, needs none), the
final intersection happens in the private cloud.  Exact answers are the owner's; analysts get
them only through the DP layer, which is handed :meth:`Engine.counts` and nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..overlay.combine import count_matches, resolve
from ..overlay.planner import Plan, plan_conjunction
from ..querylang import CountQuery, Workload
from .backends import BACKENDS, check_backend
from .backends.streaming import tasks_json
from .view import Publication


class Engine:
    def __init__(self, publication: Publication, backend: str = "fast",
                 log: Callable[[str], None] | None = None) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown runner {backend!r}; choose one of {', '.join(BACKENDS)}")
        check_backend(backend, publication.store)
        self.publication, self.backend_name, self.log = publication, backend, log
        self._backend = BACKENDS[backend]

    @property
    def version(self) -> str:
        return self.publication.version

    def plan(self, query: CountQuery) -> Plan:
        return plan_conjunction(query.terms, self.publication)

    def counts(self, queries: Sequence[CountQuery]) -> list[int]:
        """Exact answers, all of a batch in one go; ``CountQuery(())`` counts every record."""
        if self.log:
            for query in queries:
                if query.terms:
                    self.log(f"{query}: {describe(self.plan(query))}")
        return self._backend.counts(self.publication, queries, self.log)

    def count(self, query: CountQuery) -> int:
        return self.counts([query])[0]

    def answers(self, workload: Workload) -> list[float]:
        """Σ w·count for every linear query of a batch, from one batch of counts."""
        counts = dict(zip(workload.counts, self.counts(workload.counts)))
        return [sum(weight * counts[q] for weight, q in linear.parts)
                for linear in workload.queries]

    def exact(self, workload: Workload) -> ExactAnswers:
        """The owner's exact answers to a batch, in one job for all its counting queries."""
        started = time.perf_counter()
        answers = [int(a) if float(a).is_integer() else a for a in self.answers(workload)]
        return ExactAnswers([str(q) for q in workload.queries], answers, self.version,
                            self.backend_name, round(time.perf_counter() - started, 4))


@dataclass(frozen=True)
class ExactAnswers:
    """Exact answers to a batch of linear queries, from one version: the owner's only, never
    to be given to analysts (they get noisy ones, through the service)."""

    queries: list[str]
    answers: list[int | float]
    version: str
    runner: str
    seconds: float

    def as_dict(self) -> dict:
        return {"queries": self.queries, "answers": self.answers, "exact": True,
                "runner": self.runner, "version": self.version, "seconds": self.seconds}

    def to_pandas(self):
        """A row per query (query, answer), in the batch's order."""
        from ..frames import to_frame

        return to_frame(({"query": q, "answer": a} for q, a in zip(self.queries, self.answers)),
                        ["query", "answer"])


def describe(plan: Plan) -> str:
    private = sum(t.private for t in plan.tasks)
    return (f"plan: {plan.nodes_visited} tree nodes visited, {plan.branches_pruned} branches "
            f"pruned, {len(plan.clusters)} clusters, {len(plan.tasks)} map tasks "
            f"({private} over private chunks)")


def plan_summary(plan: Plan, publication: Publication) -> dict:
    """A plan as the owner reads it (`cocktail plan --json`): the tree walk, the index files
    read, and each map task with its chunk's zone, its terms and the clusters it serves."""
    return {"nodes_visited": plan.nodes_visited,
            "index_files": sorted({publication.index_location(t.chunk) for t in plan.tasks}),
            "branches_pruned": plan.branches_pruned, "clusters": len(plan.clusters),
            "clusters_pruned": plan.clusters_pruned,
            "tasks": [{"chunk": t.chunk, "zone": "private" if t.private else "public",
                       "terms": list(t.terms),
                       "clusters": sorted(c for c, ts in plan.clusters.items() if t in ts)}
                      for t in plan.tasks]}


def answer_from_matches(publication: Publication, query: CountQuery, tasks_text: str,
                        lines: Sequence[str]) -> int:
    """The exact answer of a hand-run streaming job (docs/overlay.md): its output lines
    (``task TAB pseudonym``) resolved and intersected per cluster in the private cloud, as the
    mrjob runners do.  ``tasks_text`` is the TASKS.json the job ran with; it must be this
    query's plan on this version, or the task numbers would name other tasks."""
    if not query.terms:
        return publication.live_records
    plan = plan_conjunction(query.terms, publication)
    if tasks_text.strip() != tasks_json(plan.tasks):
        raise ValueError("the tasks file is not this query's plan on the current version (the "
                         "store moved, or another query's file): plan and run the job again")
    matched: dict = {task: [] for task in plan.tasks}
    for number, line in enumerate(lines, 1):
        fields = line.rstrip("\r\n").split("\t")
        if line.strip() == "":
            continue
        if len(fields) < 2 or not fields[0].isdigit() or int(fields[0]) >= len(plan.tasks):
            raise ValueError(f"matches line {number}: not `task TAB pseudonym` of this plan")
        matched[plan.tasks[int(fields[0])]].append(fields[1])
    return count_matches(plan, resolve(matched, publication.record_positions),
                         publication.cluster_members)
