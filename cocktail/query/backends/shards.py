"""Counts as one MapReduce job over the term index's parts, for a version too large for one
machine's memory: a map task per part (per shard of an index written before parts) counts
every query of the batch over the part's records, the reducer sums (:mod:`.mr_shards`).  The
index is private, so on YARN the job runs on the private nodes alone; the driver reads only the
list of parts (``terms/parts.json``; an old index's first shard)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from ...querylang import CountQuery
from ..view import Publication
from .streaming import PLACED, OnYarn, check_runner, execute, require_runner


class IndexShards:
    READS = "count"  # what the driver reads ahead (Publication.warm): the job reads the rest

    def __init__(self, runner: str) -> None:
        check_runner(runner)
        self.runner = runner

    def counts(self, publication: Publication, queries: Sequence[CountQuery],
               log: Callable[[str], None] | None = None) -> list[int]:
        """Exact answers; ``CountQuery(())`` counts every record."""
        asked = [q for q in dict.fromkeys(queries) if q.terms]
        layout = publication.index_layout
        if layout is None:
            raise ValueError(f"version {publication.version} has no term index (written before "
                             "there was one): use a runner over the chunks")
        files = [path for part in layout.parts for path in part.paths()]
        found = self._job(publication, asked, files, log) if asked else {}
        return [found.get(q, 0) if q.terms else publication.live_records for q in queries]

    def _job(self, publication: Publication, asked: list[CountQuery], files: list[str],
             log: Callable[[str], None] | None) -> dict[CountQuery, int]:
        on_yarn = OnYarn(publication.store, private=True) if self.runner in PLACED else None
        with tempfile.TemporaryDirectory(prefix="cocktail-shards-") as tmp:
            queries = Path(tmp) / "queries.json"
            queries.write_text(json.dumps([list(q.terms) for q in asked]))
            inputs = []
            for number, path in enumerate(files):  # an input each: one map task per file
                inputs.append(Path(tmp) / f"part-{number}.txt")
                inputs[-1].write_text(path + "\n")
            if log:
                log(f"{self.runner} job: {len(asked)} queries over {len(files)} index file(s)")
            require_runner(self.runner)
            from .mr_shards import ShardCountJob  # mrjob loads only when a job runs

            output = execute(ShardCountJob, self.runner,
                             ["--store", publication.store.spec, "--queries", str(queries)],
                             [str(i) for i in inputs], log, on_yarn)
        counts = dict(line.split("\t") for line in output)
        return {query: int(counts[str(n)]) for n, query in enumerate(asked)}
