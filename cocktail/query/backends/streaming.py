"""Run a plan's map tasks as one MapReduce job through mrjob (inline, local, spark, hadoop)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ...extras import require
from ...jvm import spark_java_options
from ...overlay.planner import MapTask
from ...store import Store
from ..names import RUNNERS
# Runners that start a task per input file, on this machine (mrjob's Spark runner: local[*]).
BUNDLED = ("inline", "local", "spark")
PLACED = ("hadoop",)  # runners whose tasks land on cluster nodes: private work on private ones
PRIVATE_LABEL = "private"  # the exclusive YARN node label of the private datanodes' hosts
SCRATCH = "jobs"  # the hadoop runner's job files and outputs, in the private zone
FILES_PER_BUNDLE = 256


def bundle(inputs: Sequence[str], directory: Path) -> list[str]:
    """Concatenate index files into a few inputs for the embedded runners.

    mrjob's inline and local runners start one map task (the local one: a process) per input
    file, and its Spark runner one Spark task, which for a batch of queries means hundreds.
    Index lines carry their chunk id, so the mapper reads a bundle exactly as it reads the
    files; cluster runners, and a store's files named by URI, keep the real files.
    """
    bundles = []
    for start in range(0, len(inputs), FILES_PER_BUNDLE):
        path = directory / f"bundle-{start // FILES_PER_BUNDLE}.tsv"
        with path.open("wb") as out:
            for name in inputs[start:start + FILES_PER_BUNDLE]:
                out.write(Path(name).read_bytes())
        bundles.append(str(path))
    return bundles


def tasks_json(tasks: Sequence[MapTask]) -> str:
    """The TASKS.json the streaming scripts read: task number = position in the list."""
    return json.dumps([{"chunk": t.chunk, "terms": list(t.terms)} for t in tasks])


def write_tasks(tasks: Sequence[MapTask], directory: Path) -> Path:
    path = directory / "tasks.json"
    path.write_text(tasks_json(tasks))
    return path


@dataclass(frozen=True)
class OnYarn:
    """Where a hadoop-runner job runs: its job files and outputs in ``store``'s private zone
    (matched pseudonyms are private-cloud data), its containers on the exclusive ``private``
    node label if ``private``."""
    store: Store
    private: bool

    def args(self) -> list[str]:
        """mrjob options.  The `hadoop` command and the streaming jar come from
        $COCKTAIL_HADOOP_BIN and $COCKTAIL_HADOOP_STREAMING_JAR where set, else mrjob's own
        search ($HADOOP_HOME, PATH)."""
        args = ["--hadoop-tmp-dir", self.store.location("private", SCRATCH),
                "--no-check-input-paths",  # the plan named them; a `hadoop fs -ls` JVM each
                "-D", f"mapreduce.input.fileinputformat.split.maxsize={128 << 20}",
                "-D", "stream.map.input.ignoreKey=true",  # as with TextInputFormat: lines only
                "-D", "mapreduce.job.ubertask.enable=true"]
        for variable, option in (("COCKTAIL_HADOOP_BIN", "--hadoop-bin"),
                                 ("COCKTAIL_HADOOP_STREAMING_JAR", "--hadoop-streaming-jar")):
            if os.environ.get(variable):
                args += [option, os.environ[variable]]
        if self.private:
            args += ["-D", f"mapreduce.job.node-label-expression={PRIVATE_LABEL}"]
        return args


def run_job(tasks: Sequence[MapTask], inputs: Sequence[str], runner: str,
            on_yarn: OnYarn | None = None,
            log: Callable[[str], None] | None = None) -> dict[MapTask, list[str]]:
    """Pseudonyms matched per task; ``inputs`` are the index files of the tasks' chunks."""
    check_runner(runner)
    results: dict[MapTask, list[str]] = {task: [] for task in tasks}
    if not tasks:
        return results
    require_runner(runner)
    from .mr_match import MatchJob  # mrjob loads only when a job actually runs

    with tempfile.TemporaryDirectory(prefix="cocktail-job-") as tmp:
        tasks_file = write_tasks(tasks, Path(tmp))
        if log:
            log(f"{runner} job: {len(tasks)} map task(s) over {len(inputs)} index file(s)")
        if runner in BUNDLED and not any("://" in name for name in inputs):
            inputs = bundle(inputs, Path(tmp))
        for value in execute(MatchJob, runner, ["--tasks", str(tasks_file)], inputs, log,
                             on_yarn):
            number, pseudonym = value.split("\t")
            results[tasks[int(number)]].append(pseudonym)
    return results


def check_runner(runner: str) -> None:
    if runner not in RUNNERS:
        raise ValueError(f"unknown runner {runner!r}; choose one of {', '.join(RUNNERS)}")


def require_runner(runner: str) -> None:
    """What a job on ``runner`` imports, or :class:`~cocktail.extras.MissingExtra`."""
    if runner == "spark":
        require("pyspark")  # mrjob's Spark runner submits with pyspark's spark-submit
    require("mrjob", "spark" if runner == "spark" else "hadoop")


def check_ready(runner: str, store: Store, name: str) -> None:
    """Refuse up front what a job would otherwise fail at deep inside (a Java trace, an mrjob
    traceback): the hadoop runner needs an HDFS store and a `hadoop` command, spark pyspark."""
    if runner in PLACED:
        missing = [what for what, ok in (
            ("a webhdfs:// store", store.url.startswith("webhdfs://")),
            ("a hadoop command", hadoop_bin() is not None)) if not ok]
        if missing:
            raise ValueError(f"--runner {name} needs a webhdfs:// store and COCKTAIL_HADOOP_BIN "
                             f"(or hadoop on PATH); missing here: {' and '.join(missing)}")
    if runner == "spark" and not os.environ.get("SPARK_HOME"):
        require("pyspark")  # mrjob's spark runner finds spark-submit there


def hadoop_bin() -> str | None:
    """The `hadoop` command a hadoop job would run, as mrjob looks for it."""
    if os.environ.get("COCKTAIL_HADOOP_BIN"):
        return os.environ["COCKTAIL_HADOOP_BIN"]
    homes = [os.environ.get(v) for v in ("HADOOP_PREFIX", "HADOOP_HOME", "HADOOP_INSTALL")]
    found = [str(Path(h) / "bin" / "hadoop") for h in homes if h]
    return next((f for f in found if Path(f).exists()), None) or shutil.which("hadoop")


def execute(job_class, runner: str, options: Sequence[str], inputs: Sequence[str],
            log: Callable[[str], None] | None, on_yarn: OnYarn | None = None) -> list[str]:
    """Run an mrjob job on ``runner`` (``on_yarn`` says where, given for a PLACED runner only):
    the output's values, one per line."""
    # Tasks and the Spark driver must run this very interpreter (it has cocktail installed),
    # not whatever `python3` is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    python = [] if runner == "inline" else ["--python-bin", sys.executable]  # inline: in here
    placed = on_yarn.args() if on_yarn else []
    spark = [arg for setting in spark_java_options().items()
             for arg in ("--jobconf", "=".join(setting))] if runner == "spark" else []
    job = job_class(args=["-r", runner, "--no-conf", *python, *options, *placed, *spark,
                          *inputs])
    with _mrjob_quiet(log is None), job.make_runner() as mr:
        if on_yarn:
            from .scratch import scratch_first
            scratch_first(mr, on_yarn.store, SCRATCH)
        mr.run()
        return [value.rstrip("\r\n") for _, value in job.parse_output(mr.cat_output())]


@contextmanager
def _mrjob_quiet(quiet: bool) -> Iterator[None]:
    """mrjob's own warnings ("No configs specified ...") only when the user asked for -v."""
    logger = logging.getLogger("mrjob")
    level = logger.level
    if quiet:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
