"""The 5-node deployment rehearsed on this machine: scripts/testbed, real Hadoop daemons.

Five network namespaces on a bridge of their own, each host running the daemons of its roles
with the configuration `cocktail cluster render` gives it. Selected with `-m testbed`; skipped
only where `ip netns` is not permitted. With COCKTAIL_REHEARSAL_REPORT set, the phases' wall
times are written there as JSON (benchmarks/rehearsal.py reads them).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cocktail.dataset import load, write_fimi
from cocktail.synthetic import random_conjunctions

from .conftest import REPO, dataset_path
from .hadoop_cluster import require_toolchain, succeeded_label_expressions

pytestmark = [pytest.mark.testbed, pytest.mark.xdist_group("testbed")]
TESTBED = REPO / "scripts" / "testbed"
NAMENODE, PRIVATE_2, PUBLIC_1 = "ck-private-1", "ck-private-2", "ck-public-1"
HOSTS = ("ck-private-1", "ck-private-2", "ck-public-1", "ck-public-2", "ck-public-3")
SWITCH = "cocktail-sw"


def netns_permitted() -> str | None:
    if os.geteuid() != 0:
        return "not root: network namespaces need root"
    probe = f"cocktail-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns is not permitted here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], check=True)
    return None


def namespaces() -> set[str]:
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in listing.splitlines() if line.strip()}


def live_processes() -> int:
    pids = (subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout
            for name in namespaces() & (set(HOSTS) | {SWITCH}))
    return sum(len(out.split()) for out in pids)


class Rehearsal:
    def __init__(self, state: Path) -> None:
        self.state = state
        self.env = {**os.environ, "COCKTAIL_TESTBED": str(state),
                    "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        self.phases: dict[str, float] = {}

    def run(self, *args: str, timeout: float = 900) -> str:
        done = subprocess.run([str(TESTBED), *args], capture_output=True, text=True,
                              env=self.env, timeout=timeout)
        assert done.returncode == 0, \
            f"testbed {' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
        return done.stdout

    def on(self, host: str, script: str, timeout: float = 900) -> str:
        """A shell snippet on `host`, with its host.env (COCKTAIL_STORE, ...) in scope."""
        return self.run("exec", host, "bash", "-c", script, timeout=timeout)

    def json_on(self, host: str, script: str) -> dict:
        return json.loads(self.on(host, script).strip().splitlines()[-1])

    def timed(self, phase: str, started: float) -> None:
        self.phases[phase] = round(time.monotonic() - started, 1)

    def log(self, host: str, role: str) -> str:
        return (self.state / "hosts" / host / "data" / "logs" / f"{role}.log").read_text()


@pytest.fixture
def testbed(tmp_path):
    """A rehearsal whose test brings it up and takes it down; down again here if it failed."""
    reason = netns_permitted()
    if reason:
        pytest.skip(reason)
    require_toolchain()
    bed = Rehearsal(tmp_path / "testbed")
    if SWITCH in namespaces():
        running = live_processes()
        if running:
            pytest.skip(f"another testbed runs on this machine ({running} processes in its "
                        "namespaces): namespaces are machine-wide, one rehearsal at a time")
        bed.run("down")  # a killed run's namespaces, nothing left in them
    try:
        yield bed
    finally:
        if SWITCH in namespaces():
            subprocess.run([str(TESTBED), "down"], env=bed.env, capture_output=True, timeout=300)
        report = os.environ.get("COCKTAIL_REHEARSAL_REPORT")
        if report:
            Path(report).write_text(json.dumps(bed.phases))


@pytest.fixture
def sample(tmp_path):
    data = load(dataset_path("bms-webview-1.dat")).head(3000)
    path = tmp_path / "wv1-3000.dat"
    write_fimi(data.records, path)
    return data, path


def batch_file(tmp: Path, queries) -> Path:
    path = tmp / "queries.txt"
    path.write_text("".join(f"count({' & '.join(q)})\n" for q in queries))
    return path


def test_the_rehearsal(testbed, sample, tmp_path):
    """Up, isolated; publish, audit with placement, YARN queries, the analysts' wrapper,
    datanode failures; down, leaving nothing behind."""
    started = time.monotonic()
    testbed.run("up")
    testbed.timed("up", started)
    check_isolation(testbed)
    deploy_and_fail(testbed, sample, tmp_path)
    started = time.monotonic()
    testbed.run("down")
    testbed.timed("down", started)
    check_nothing_left(testbed)


def check_isolation(testbed: Rehearsal) -> None:
    assert set(HOSTS) | {SWITCH} <= namespaces()
    for host in HOSTS:
        routes = subprocess.run(["ip", "-n", host, "route", "show"], capture_output=True,
                                text=True, check=True).stdout.splitlines()
        assert routes and all(r.startswith("198.51.100.0/24 ") for r in routes), (host, routes)
    switch = subprocess.run(["ip", "-n", SWITCH, "-o", "-4", "addr", "show"],
                            capture_output=True, text=True, check=True).stdout
    assert switch.split() == [] or "inet 127.0.0.1" in switch and switch.count("inet ") == 1
    status = testbed.run("status")
    assert status.count(" running ") == 13 and "stopped" not in status


AUDIT = 'cocktail audit --store "$COCKTAIL_STORE" --json'


def deploy_and_fail(testbed: Rehearsal, sample, tmp_path: Path) -> None:
    data, path = sample
    queries = random_conjunctions(data.records, 20, seed=10)
    truth = [data.count_containing(q) for q in queries]
    batch = batch_file(tmp_path, queries)
    exact = f'cocktail query --exact --batch {batch} --store "$COCKTAIL_STORE" --json'
    on_yarn = f"{REPO}/scripts/streaming-query --batch {batch} --json"
    publish_and_audit(testbed, path)
    started = time.monotonic()
    assert testbed.json_on(NAMENODE, on_yarn)["answers"] == truth
    testbed.timed("20 queries on YARN", started)
    spark_publish_on_yarn(testbed, path, on_yarn, truth)
    labels = succeeded_label_expressions(
        lambda *args: testbed.on(NAMENODE, " ".join(("hadoop", "application", *args))))
    assert "private" in labels and "<Not set>" in labels, labels
    ask_through_the_wrapper(testbed, queries[0])
    private_datanode_dies(testbed, exact, truth)
    started = time.monotonic()
    testbed.on(PUBLIC_1, f"{REPO}/scripts/daemons stop datanode")
    wait_report(testbed, "-dead", "Dead datanodes (1)")
    assert testbed.json_on(NAMENODE, on_yarn)["answers"] == truth
    testbed.timed("public datanode stopped, 20 queries on YARN", started)
    assert testbed.json_on(NAMENODE, AUDIT)["ok"]


def spark_publish_on_yarn(testbed: Rehearsal, path: Path, on_yarn: str,
                          truth: list[int]) -> None:
    """The Spark engine on YARN republishes the sample from HDFS (--rebase): the application
    master and every executor on the private host only, the audit clean, answers exact."""
    started = time.monotonic()
    published = testbed.on(NAMENODE, f"{REPO}/scripts/spark-publish {path} --rebase --json")
    testbed.timed("spark publish on YARN (scripts/spark-publish, with its audit)", started)
    report = json.loads(published.splitlines()[0])
    assert report["engine"] == "spark" and report["records"] == 3000
    assert "audit PASS" in published
    audit = testbed.json_on(NAMENODE, AUDIT)
    assert audit["ok"] and audit["placement"]["replicas_outside_private_racks"] == 0
    assert testbed.json_on(NAMENODE, on_yarn)["answers"] == truth
    listing = testbed.on(NAMENODE, "hadoop application -list -appStates ALL -appTypes SPARK")
    app = re.findall(r"application_\d+_\d+", listing)[-1]
    status = testbed.on(NAMENODE, f"hadoop application -status {app}")
    assert re.search(r"AM container Node Label Expression\s*:\s*private", status), status
    ran_on = {host for host in HOSTS
              if (testbed.state / "hosts" / host / "data" / "yarn" / "logs" / app).exists()}
    assert ran_on == {PRIVATE_2}, ran_on  # the only NodeManager labelled private


def publish_and_audit(testbed: Rehearsal, path: Path) -> None:
    started = time.monotonic()
    published = testbed.on(NAMENODE, f"{REPO}/scripts/publish {path} --json")
    testbed.timed("publish (scripts/publish, with its audit)", started)
    report = json.loads(published.splitlines()[0])
    assert "audit PASS" in published
    assert report["records"] == 3000 and report["private_chunks"] > 0
    started = time.monotonic()
    audit = testbed.json_on(NAMENODE, AUDIT)
    testbed.timed("audit", started)
    assert audit["ok"], audit["violations"][:3]
    assert audit["placement"]["replicas_outside_private_racks"] == 0
    assert audit["placement"]["private_files"] >= report["private_chunks"]


def ask_through_the_wrapper(testbed: Rehearsal, query) -> None:
    """An analyst on a public host asks the overlay service, with scripts/cocktail-query."""
    token = analyst_token(testbed)
    started = time.monotonic()
    answer = testbed.json_on(PUBLIC_1, f"{REPO}/scripts/cocktail-query --url "
                                       f'"$COCKTAIL_OVERLAY_URL" --token {token} '
                                       f'"count({" & ".join(query)})"')
    testbed.timed("cocktail-query", started)
    assert len(answer["answers"]) == 1 and answer["expected_rms_error"][0] > 0


def private_datanode_dies(testbed: Rehearsal, exact: str, truth: list[int]) -> None:
    """Reads go on while the namenode still names it; its blocks may only be re-replicated
    onto private datanodes: the one left holds them already, so the namenode finds no target
    and the shim refuses every public one."""
    started = time.monotonic()
    testbed.on(PRIVATE_2, f"{REPO}/scripts/daemons kill datanode")
    # Until its heartbeats expire (20 s here) the namenode still names the dead datanode for
    # its replicas, first for a reader on its rack: the store must exclude it and ask again.
    assert testbed.json_on(NAMENODE, AUDIT)["ok"]
    wait_report(testbed, "-dead", "Dead datanodes (1)")
    time.sleep(5)  # a few redundancy-monitor rounds, each looking for targets
    audit = testbed.json_on(NAMENODE, AUDIT)
    assert audit["ok"] and audit["placement"]["replicas_outside_private_racks"] == 0
    assert re.search(r"No private datanode .* could take the replica",
                     testbed.log(NAMENODE, "namenode")), "the shim never refused a public target"
    assert testbed.json_on(NAMENODE, exact)["answers"] == truth
    testbed.on(PRIVATE_2, f"{REPO}/scripts/daemons start datanode")
    wait_report(testbed, "-live", f"Live datanodes ({len(HOSTS)})")
    testbed.timed("private datanode killed and back", started)


def check_nothing_left(testbed: Rehearsal) -> None:
    assert not (set(HOSTS) | {SWITCH}) & namespaces()
    left = subprocess.run(["pgrep", "-f", str(testbed.state)], capture_output=True, text=True)
    assert left.stdout.strip() == "", f"processes left: {left.stdout}"
    assert not any(Path("/etc/netns", host).exists() for host in HOSTS)
    status = subprocess.run([str(TESTBED), "status"], env=testbed.env, capture_output=True,
                            text=True)
    assert status.returncode == 1 and "testbed down" in status.stdout


def wait_report(testbed: Rehearsal, which: str, expected: str, timeout: float = 120) -> None:
    """Until `hadoop dfsadmin -report -live|-dead` says `expected`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if expected in testbed.on(NAMENODE, f"hadoop dfsadmin -report {which}"):
            return
        time.sleep(2)
    raise AssertionError(f"the namenode never reported {expected!r} in {timeout} s")


def analyst_token(testbed: Rehearsal) -> str:
    ledger = '--store "$COCKTAIL_STORE"'
    testbed.on(NAMENODE, f"cocktail roles add analyst --alpha 1 --budget 10 {ledger}")
    return testbed.json_on(NAMENODE, f"cocktail users add ann --role analyst {ledger} --json")[
        "token"]
