"""The mrjob job that counts conjunctions over a version's term-index parts.

One map task per part's file (its input file holds the path in the private zone, in the part's
home version): it reads the file from the store, deserializes the terms the batch names and
counts each query over the part's records; the reducer sums a query's counts over the parts,
which are disjoint ranges of record (and index) positions.  Run as a script by mrjob's runners, hence absolute imports.
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
    """Input: lines naming a part's file.  Output: ``query number TAB count``."""

    INPUT_PROTOCOL = RawValueProtocol
    INTERNAL_PROTOCOL = JSONProtocol
    OUTPUT_PROTOCOL = RawValueProtocol

    def configure_args(self):
        super().configure_args()
        self.add_passthru_arg("--store", help="the store holding the parts (its --store)")
        self.add_file_arg("--queries", help="JSON list of the queries' term lists")

    def mapper_init(self):
        self.store = open_store(self.options.store)
        with open(self.options.queries, encoding="utf-8") as handle:
            self.queries = json.load(handle)

    def mapper(self, _, path):
        path = path.strip()
        part = fmt.decode_term_index(self.store.read("private", path), f"private/{path}")
        named = {t for terms in self.queries for t in terms}
        bitmaps = {t: FrozenBitMap.deserialize(part.bitmaps[t]) for t in named
                   if t in part.bitmaps}
        for number, terms in enumerate(self.queries):
            yield number, count_conjunction(bitmaps, terms)

    def reducer(self, number, counts):
        yield None, f"{number}\t{sum(counts)}"


if __name__ == "__main__":
    ShardCountJob.run()
