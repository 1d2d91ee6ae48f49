"""The mrjob job that runs the streaming scripts of mappers/ and reducers/ on any mrjob runner.

The job's steps call the very functions the Hadoop Streaming scripts run (loaded from their
files), so `inline`, `local`, `spark` and `hadoop` execute one piece of code.  It is run as a
script by mrjob's runners, hence absolute imports only.
"""

from __future__ import annotations

import importlib.util
import sysconfig
from pathlib import Path

from mrjob.job import MRJob
from mrjob.protocol import RawValueProtocol

import cocktail

SCRIPTS = {"mapper": "match_index.py", "reducer": "complete_matches.py"}


def script_path(name: str) -> Path:
    """A streaming script: in the task's working directory when a cluster shipped it there,
    else in the checkout the package runs from (an editable install; Spark ships this module
    alone), else where a regular install put it (setup.cfg's data_files)."""
    shipped = Path.cwd() / SCRIPTS[name]
    if shipped.exists():
        return shipped
    where = "mappers" if name == "mapper" else "reducers"
    checkout = Path(cocktail.__file__).resolve().parents[1] / where / SCRIPTS[name]
    if checkout.exists():
        return checkout
    return Path(sysconfig.get_path("data")) / "share" / "cocktail" / where / SCRIPTS[name]


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(f"cocktail_streaming_{name}", script_path(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class MatchJob(MRJob):
    """Input: index lines.  Output: ``task TAB pseudonym`` for every complete match."""

    INPUT_PROTOCOL = RawValueProtocol
    OUTPUT_PROTOCOL = RawValueProtocol
    FILES = [str(script_path("mapper")), str(script_path("reducer"))]

    def hadoop_input_format(self):
        # One map per file would mean one YARN container per chunk index: combine them.
        if self.options.runner == "hadoop":
            return "org.apache.hadoop.mapred.lib.CombineTextInputFormat"
        return None

    def configure_args(self):
        super().configure_args()
        self.add_file_arg("--tasks", help="JSON list of {chunk, terms} map tasks")

    def mapper_init(self):
        self.match = load_script("mapper").match
        self.by_chunk = load_script("mapper").load_tasks(self.options.tasks)

    def mapper(self, _, line):
        for number, pseudonym, term in self.match(line, self.by_chunk):
            yield (number, pseudonym), term

    def reducer_init(self):
        reducer = load_script("reducer")
        self.complete, self.sizes = reducer.complete, reducer.load_sizes(self.options.tasks)

    def reducer(self, key, terms):
        number, pseudonym = key
        rows = ((number, pseudonym, term) for term in terms)
        for done, name in self.complete(rows, self.sizes):
            yield None, f"{done}\t{name}"


if __name__ == "__main__":
    MatchJob.run()
