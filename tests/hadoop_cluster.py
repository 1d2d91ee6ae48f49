"""Hadoop's own NameNode, DataNodes, YARN and MapReduce, in one JVM: hdfs_ext's Launcher.

The Maven build (with the shim's JUnit tests) runs once per test session; each cluster is a
Launcher process that writes a JSON description of itself, takes commands on stdin (one JSON
line answers each) and shuts down when its stdin closes.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import pytest

from cocktail.jvm import JAVA17_OPENS, SHORT_LIVED

from .conftest import REPO

HDFS_EXT = REPO / "hdfs_ext"
TARGET = HDFS_EXT / "target"
# A test cluster lives minutes beside others on two cores: C1 alone and one GC thread cut the
# Hadoop tests' CPU by a quarter (and the JUnit suite's, pom.xml; Maven's own, .mvn/jvm.config).
JVM_FLAGS = ["-Xmx3g", *SHORT_LIVED, "-XX:+IgnoreUnrecognizedVMOptions", *JAVA17_OPENS]
START_TIMEOUT = 240


def require_toolchain() -> None:
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not found: the Hadoop tests need Java 17 and Maven "
                    "(they build hdfs_ext and run Hadoop 3.4.2 in-process)")


def build() -> Path:
    """`mvn verify`: compile, run the shim's JUnit tests on MiniDFSCluster, package.

    Called once per session by a fixture; the lock keeps two pytest workers from building
    into one target/ at the same time, and the second worker of a run reuses the first's
    build (the run's id, stamped after a build that passed)."""
    require_toolchain()
    TARGET.mkdir(exist_ok=True)
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # the same in every worker of a run
    stamp = TARGET / ".built-by-run"
    with open(TARGET / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if run and stamp.exists() and stamp.read_text() == run:
            return TARGET
        stamp.unlink(missing_ok=True)
        log = TARGET / "maven.log"
        with open(log, "w") as out:
            done = subprocess.run(["mvn", "-B", "verify"], cwd=HDFS_EXT, stdout=out,
                                  stderr=subprocess.STDOUT)
        if done.returncode != 0:
            pytest.fail(f"mvn verify failed in hdfs_ext (log {log}):\n{log.read_text()[-4000:]}")
        if run:
            stamp.write_text(run)
    return TARGET


def classpath() -> str:
    return ":".join([str(TARGET / "classes"), str(TARGET / "test-classes"),
                     (TARGET / "classpath.txt").read_text().strip()])


@dataclass
class Cluster:
    process: subprocess.Popen
    info: dict
    base: Path

    def command(self, line: str, timeout: float = 180) -> dict:
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answer = self.process.stdout.readline()
            if not answer:
                raise RuntimeError(f"launcher exited during {line!r}: see {self.base}")
            if answer.startswith("{"):
                reply = json.loads(answer)
                assert reply.get("ok"), f"{line}: {reply}"
                return reply
        raise TimeoutError(line)

    def store_url(self, root: str = "/cocktail", **options: str) -> str:
        """A webhdfs store URL on this cluster (job inputs read through its RPC address)."""
        settings = {"fs": self.info["namenode"], "datanode_host": "127.0.0.1", **options}
        address = self.info["webhdfs"].removeprefix("http://")
        return f"webhdfs://{address}{root}?{urlencode(settings)}"

    @property
    def private_datanodes(self) -> list[int]:
        return [d["index"] for d in self.info["datanodes"] if d["private"]]

    def hadoop_env(self) -> dict[str, str]:
        """What the hadoop runner needs to submit to this cluster's YARN."""
        return {"HADOOP_CONF_DIR": self.info["conf_dir"],
                "COCKTAIL_HADOOP_BIN": str(HDFS_EXT / "bin" / "hadoop"),
                "COCKTAIL_HADOOP_STREAMING_JAR": str(TARGET / "hadoop-streaming.jar")}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(90)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start(base: Path, route: str, yarn: bool, *options: str) -> Cluster:
    """A cluster from hdfs_ext's Launcher, given ``options`` beside its route and --yarn."""
    base.mkdir(parents=True, exist_ok=True)
    description = base / "cluster.json"
    args = ["java", *JVM_FLAGS, "-cp", classpath(), "org.cocktail.hdfs.Launcher",
            "--json", str(description), "--base-dir", str(base), "--route", route, *options]
    process = subprocess.Popen(args + (["--yarn"] if yarn else []), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=open(base / "launcher.err", "w"),
                               text=True, cwd=base)
    deadline = time.monotonic() + START_TIMEOUT
    while not description.exists():
        if process.poll() is not None:
            pytest.fail(f"the launcher exited with {process.returncode}: "
                        f"{_launchers_reason(base / 'launcher.err')}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the launcher did not come up in {START_TIMEOUT} s")
        time.sleep(0.5)
    return Cluster(process, json.loads(description.read_text()), base)


def _launchers_reason(log: Path) -> str:
    """What the launcher said of its failure (its own lines, whole: a NodeManager's health
    report runs to kilobytes), else the end of what it printed."""
    text = log.read_text()
    said = [line for line in text.splitlines() if line.startswith("launcher:")]
    return "\n".join(said) if said else text[-3000:]


def succeeded_applications(application: Callable[..., str]) -> list[str]:
    """Every finished, SUCCEEDED YARN application, as an operator lists them.

    ``application(*args)`` runs `yarn application ARGS` and returns its output."""
    listing = application("-list", "-appStates", "FINISHED")
    return re.findall(r"^(application_\d+_\d+)\s.*SUCCEEDED", listing, re.MULTILINE)


def label_expression(application: Callable[..., str], app: str) -> str:
    """The node label expression of application ``app``, as `yarn application -status` says."""
    return re.search(r"Application Node Label Expression : (.*)",
                     application("-status", app)).group(1).strip()


def succeeded_label_expressions(application: Callable[..., str]) -> list[str]:
    """The label expression of every SUCCEEDED application: a JVM start for each."""
    return [label_expression(application, app) for app in succeeded_applications(application)]
