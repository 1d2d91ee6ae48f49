"""The mrjob job that counts conjunctions over a version's term-index shards.

One map task per shard (its input file holds the shard's path in the private zone): it reads
the shard from the store, deserializes the terms the batch names and counts each query over
the shard's records; the reducer sums a query's counts over the shards, which are disjoint
ranges of record positions.  Run as a script by mrjob's runners, hence absolute imports.
"""

from __future__ import annotations

import json

from mrjob.job import MRJob
from mrjob.protocol import JSONProtocol, RawValueProtocol
from pyroaring import FrozenBitMap

from cocktail import chunkformat as fmt
from cocktail.query.termindex import count_conjunction
from cocktail.store import open_store


class ShardCountJob(MRJob):
    """Input: lines naming a shard's path.  Output: ``query number TAB count``."""

    INPUT_PROTOCOL = RawValueProtocol
    INTERNAL_PROTOCOL = JSONProtocol
    OUTPUT_PROTOCOL = RawValueProtocol

    def configure_args(self):
        super().configure_args()
        self.add_passthru_arg("--store", help="the store holding the shards (its --store)")
        self.add_file_arg("--queries", help="JSON list of the queries' term lists")

    def mapper_init(self):
        self.store = open_store(self.options.store)
        with open(self.options.queries, encoding="utf-8") as handle:
            self.queries = json.load(handle)

    def mapper(self, _, path):
        path = path.strip()
        shard = fmt.decode_term_index(self.store.read("private", path), f"private/{path}")
        named = {t for terms in self.queries for t in terms}
        bitmaps = {t: FrozenBitMap.deserialize(shard.bitmaps[t]) for t in named
                   if t in shard.bitmaps}
        for number, terms in enumerate(self.queries):
            yield number, count_conjunction(bitmaps, terms)

    def reducer(self, number, counts):
        yield None, f"{number}\t{sum(counts)}"


if __name__ == "__main__":
    ShardCountJob.run()
