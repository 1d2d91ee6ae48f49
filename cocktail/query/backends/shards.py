"""Counts as one MapReduce job over the term index's shards, for a version too large for one
machine's memory: a map task per shard counts every query of the batch over the shard's
records, the reducer sums (:mod:`.mr_shards`).  The index is private, so on YARN the job runs
on the private nodes alone; the driver reads only the first shard's header."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from ... import chunkformat as fmt
from ...querylang import CountQuery
from ..view import Publication
from .mapreduce import SCRATCH
from .streaming import PLACED, check_runner, execute, hadoop_args


class IndexShards:
    READS = "count"  # what the driver reads ahead (Publication.warm): the job reads the rest

    def __init__(self, runner: str) -> None:
        check_runner(runner)
        self.runner = runner

    def counts(self, publication: Publication, queries: Sequence[CountQuery],
               log: Callable[[str], None] | None = None) -> list[int]:
        """Exact answers; ``CountQuery(())`` counts every record."""
        asked = [q for q in dict.fromkeys(queries) if q.terms]
        first = publication.first_index_shard
        if first is None:
            raise ValueError(f"version {publication.version} has no term index (written before "
                             "there was one): use a runner over the chunks")
        shards = [fmt.term_index_path(publication.version, n) for n in range(first.shards)]
        found = self._job(publication, asked, shards, log) if asked else {}
        return [found.get(q, 0) if q.terms else publication.record_count for q in queries]

    def _job(self, publication: Publication, asked: list[CountQuery], shards: list[str],
             log: Callable[[str], None] | None) -> dict[CountQuery, int]:
        extra = []
        if self.runner in PLACED:
            extra = hadoop_args(publication.store.location("private", SCRATCH), private=True)
        with tempfile.TemporaryDirectory(prefix="cocktail-shards-") as tmp:
            queries = Path(tmp) / "queries.json"
            queries.write_text(json.dumps([list(q.terms) for q in asked]))
            inputs = []
            for number, path in enumerate(shards):  # a file each: one map task per shard
                inputs.append(Path(tmp) / f"shard-{number}.txt")
                inputs[-1].write_text(path + "\n")
            if log:
                log(f"{self.runner} job: {len(asked)} queries over {len(shards)} index shard(s)")
            from .mr_shards import ShardCountJob  # mrjob loads only when a job runs

            output = execute(ShardCountJob, self.runner,
                             ["--store", publication.store.url, "--queries", str(queries),
                              *extra], [str(i) for i in inputs], log)
        counts = dict(line.split("\t") for line in output)
        return {query: int(counts[str(n)]) for n, query in enumerate(asked)}
