"""Counts as one MapReduce job over the planned map tasks, through mrjob.

``inline``, ``local``, ``spark`` and ``hadoop`` run the mappers/ and reducers/ streaming
scripts (:mod:`.streaming`).  Each query's plan names the map tasks; all of a batch's tasks
run as one job; the private cloud resolves the matched pseudonyms and intersects them per
cluster (:mod:`cocktail.overlay.combine`).  On YARN there is one job per side, run side by
side, so that private work lands on the private nodes only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from concurrent.futures import ThreadPoolExecutor

from ...overlay.combine import count_matches, resolve
from ...overlay.planner import MapTask, plan_conjunction
from ...querylang import CountQuery
from ..view import Publication
from .streaming import PLACED, OnYarn, run_job


class MapReduce:
    READS = "plans"  # what the private cloud reads ahead (Publication.warm): plans and maps

    def __init__(self, runner: str) -> None:
        self.runner = runner

    def counts(self, publication: Publication, queries: Sequence[CountQuery],
               log: Callable[[str], None] | None = None) -> list[int]:
        """Exact answers; ``CountQuery(())`` counts every record."""
        plans = {q: plan_conjunction(q.terms, publication) for q in queries if q.terms}
        tasks = list(dict.fromkeys(task for plan in plans.values() for task in plan.tasks))
        matched = self.run_tasks(publication, tasks, log)
        return [count_matches(plans[q], matched, publication.cluster_members) if q.terms
                else publication.live_records for q in queries]

    def run_tasks(self, publication: Publication, tasks: Sequence[MapTask],
                  log: Callable[[str], None] | None = None) -> Mapping[MapTask, Set[int]]:
        """Record positions matched by each task."""
        if self.runner not in PLACED:
            return resolve(self._job(publication, tasks, None, log), publication.record_positions)
        sides = [(private, [task for task in tasks if task.private == private])
                 for private in (False, True)]
        with ThreadPoolExecutor(2) as pool:
            jobs = [pool.submit(self._job, publication, group, OnYarn(publication.store, private),
                                log) for private, group in sides if group]
            matched = {task: found for job in jobs for task, found in job.result().items()}
        return resolve(matched, publication.record_positions)

    def _job(self, publication: Publication, tasks: Sequence[MapTask],
             on_yarn: OnYarn | None, log: Callable[[str], None] | None
             ) -> dict[MapTask, list[str]]:
        inputs = sorted({publication.index_location(task.chunk) for task in tasks})
        return run_job(tasks, inputs, self.runner, on_yarn, log)
