"""The operator's path of docs/operations.md, run as written on five emulated hosts.

scripts/testbed makes five empty hosts (network namespaces on a bridge of their own, each with
its own hostname and file system); this test then runs every block of docs/operations.md marked
`<!-- rehearsal STEP: ... -->`, in order, on its hosts, and checks what the comments say, then
drills datanode failures. Selected with `-m testbed`; skipped only where `ip netns` is not
permitted. With COCKTAIL_REHEARSAL_REPORT set, the phases' wall times are written there as JSON
(benchmarks/rehearsal.py reads them).
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from cocktail.cluster.spec import PORTS
from cocktail.dataset import load
from cocktail.synthetic import random_conjunctions

from .conftest import REPO
from .hadoop_cluster import label_expression, require_toolchain
from .test_docs import fenced_blocks

pytestmark = [pytest.mark.testbed, pytest.mark.xdist_group("testbed")]
TESTBED = REPO / "scripts" / "testbed"
OPERATIONS = REPO / "docs" / "operations.md"
NAMENODE, PRIVATE_2, PUBLIC_1 = "ck-private-1", "ck-private-2", "ck-public-1"
HOSTS = ("ck-private-1", "ck-private-2", "ck-public-1", "ck-public-2", "ck-public-3")
SWITCH = "cocktail-sw"
USER = "cocktail"
QUERY = "count(12 & 40)"  # the query of the doc's blocks
RM_REST = f"http://{NAMENODE}:{PORTS['resourcemanager_http']}/ws/v1/cluster"


@dataclass(frozen=True)
class Step:
    """A block of docs/operations.md the rehearsal runs: on which hosts, and how."""
    name: str
    hosts: tuple[str, ...]
    online: bool
    given: tuple[str, ...]  # files handed over from `giver`'s home first
    giver: str | None
    script: str
    where: str


def rehearsal_steps() -> list[Step]:
    steps = []
    for block in fenced_blocks(OPERATIONS):
        if block.rehearsal is None:
            continue
        parts = [part.strip() for part in block.rehearsal["how"].split(",")]
        hosts = HOSTS if parts[0] == "every host" else (parts[0],)
        assert set(hosts) <= set(HOSTS), (block.where, parts[0])
        given = next((re.fullmatch(r"given (.+) by (\S+)", p) for p in parts
                      if p.startswith("given ")), None)
        assert set(parts[1:]) <= {"online"} | ({given.group(0)} if given else set()), block.where
        steps.append(Step(block.rehearsal["step"], hosts, "online" in parts,
                          tuple(given.group(1).split()) if given else (),
                          given.group(2) if given else None, block.text, block.where))
    return steps


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
            f"testbed {' '.join(args)}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
        return done.stdout

    def on(self, host: str, script: str, timeout: float = 900, online: bool = False) -> str:
        """A shell snippet on `host` as a login there runs it (host.env in scope)."""
        return self.run("shell", *(["--online"] if online else []), host, script,
                        timeout=timeout)

    def json_on(self, host: str, script: str) -> dict:
        return json.loads(self.on(host, script).strip().splitlines()[-1])

    def home(self, host: str) -> Path:
        return self.state / "hosts" / host / "home"

    def step(self, step: Step) -> dict[str, str]:
        """Run a block of the doc as written on each of its hosts: host -> output.  The first
        host (the namenode's, which the doc says to start first) before the others, and those
        at once, as an operator with a shell on each machine would."""
        for name in step.given:
            shutil.copy(self.home(step.giver) / name, self.home(step.hosts[0]) / name)
        started = time.monotonic()
        first, *others = step.hosts
        out = {first: self.on(first, step.script, online=step.online)}
        with ThreadPoolExecutor(max(1, len(others))) as pool:
            out |= dict(zip(others, pool.map(
                lambda host: self.on(host, step.script, online=step.online), others)))
        self.timed(f"{step.name} ({step.where})", started)
        return out

    def timed(self, phase: str, started: float) -> None:
        self.phases[phase] = round(time.monotonic() - started, 1)

    def log(self, host: str, role: str) -> str:
        return (self.state / "hosts" / host / "data" / "logs" / f"{role}.log").read_text()

    def ran_on(self, app: str) -> set[str]:
        """The hosts whose nodemanager ran a container of application `app`."""
        return {host for host in HOSTS
                if (self.state / "hosts" / host / "data" / "yarn" / "logs" / app).exists()}


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


def test_the_doc_names_the_steps_this_test_checks():
    """Runs anywhere: a block added to, or dropped from, the rehearsal is noticed here."""
    assert [step.name for step in rehearsal_steps()] == list(CHECKS)


@pytest.mark.timeout(1800)  # ~6 minutes alone, most of ten in a run; each step may take 900 s
def test_the_rehearsal(testbed):
    """Five empty hosts; every rehearsal block of docs/operations.md as written, each checked;
    YARN queries against brute force; datanode failures; down, leaving nothing behind."""
    user_was_there = user_exists()
    started = time.monotonic()
    testbed.run("up", "--bare")
    testbed.timed("up --bare", started)
    check_isolation()
    for step in rehearsal_steps():
        CHECKS[step.name](testbed, testbed.step(step))
    queries_and_failures(testbed)
    started = time.monotonic()
    testbed.run("down")
    testbed.timed("down", started)
    check_nothing_left(testbed, user_was_there)


def user_exists() -> bool:
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return False
    return True


def check_isolation() -> None:
    assert set(HOSTS) | {SWITCH} <= namespaces()
    for host in HOSTS:
        routes = subprocess.run(["ip", "-n", host, "route", "show"], capture_output=True,
                                text=True, check=True).stdout.splitlines()
        assert routes and all(r.startswith("198.51.100.0/24 ") for r in routes), (host, routes)
    switch = subprocess.run(["ip", "-n", SWITCH, "-o", "-4", "addr", "show"],
                            capture_output=True, text=True, check=True).stdout
    assert switch.split() == [] or "inet 127.0.0.1" in switch and switch.count("inet ") == 1


AUDIT = "cocktail audit --json"


def provisioned(testbed: Rehearsal, out: dict[str, str]) -> None:
    assert all("==> done" in out[host] for host in HOSTS), out
    assert user_exists()
    cert = testbed.state / "hosts" / NAMENODE / "data" / "tls" / "overlay.crt"
    assert cert.exists() and "self-signed" in out[NAMENODE]


def started(testbed: Rehearsal, out: dict[str, str]) -> None:
    assert "formatting HDFS" in out[NAMENODE] and "overlay started" in out[NAMENODE]
    wait_datanodes(testbed, "live", len(HOSTS))
    wait_nodemanagers(testbed, 4)
    status = testbed.run("status")
    assert status.count(" running ") == 13 and "stopped" not in status


def checked(testbed: Rehearsal, out: dict[str, str]) -> None:
    lines = out[NAMENODE].splitlines()
    assert f"Live datanodes ({len(HOSTS)}):" in lines
    assert any("<private:exclusivity=true>" in line for line in lines)
    assert lines[-2:] == ["1", USER], lines
    # Every daemon of every host, the overlay's Python too, runs as the cluster user.
    for host in HOSTS:
        run = testbed.state / "hosts" / host / "data" / "run"
        for pidfile in run.glob("*.pid"):
            owner = subprocess.run(["ps", "-o", "user=", "-p", pidfile.read_text().strip()],
                                   capture_output=True, text=True).stdout.strip()
            assert owner == USER, (host, pidfile.name, owner)


def published(testbed: Rehearsal, out: dict[str, str]) -> None:
    assert "audit PASS" in out[NAMENODE] and "0 outside /private/* racks" in out[NAMENODE]
    audit = testbed.json_on(NAMENODE, AUDIT)
    assert audit["ok"], audit["violations"][:3]
    assert audit["placement"]["replicas_outside_private_racks"] == 0


def spark_published(testbed: Rehearsal, out: dict[str, str]) -> None:
    """The application master and every executor on the private host only, the audit clean."""
    assert "audit PASS" in out[NAMENODE]
    assert testbed.json_on(NAMENODE, AUDIT)["placement"]["replicas_outside_private_racks"] == 0
    app = last_application(testbed, "SPARK")
    status = testbed.on(NAMENODE, f"yarn application -status {app}")
    assert re.search(r"AM container Node Label Expression\s*:\s*private", status), status
    assert testbed.ran_on(app) == {PRIVATE_2}  # the only NodeManager labelled private


def answers(text: str) -> list[int]:
    return [int(n) for n in re.findall(rf"^{re.escape(QUERY)} = (\d+)", text, re.MULTILINE)]


def truth(testbed: Rehearsal) -> int:
    data = load(testbed.home(NAMENODE) / "baskets.dat")
    return data.count_containing(["12", "40"])


def streamed(testbed: Rehearsal, out: dict[str, str]) -> None:
    assert answers(out[NAMENODE]) == [truth(testbed)] * 2, out


def by_hand(testbed: Rehearsal, out: dict[str, str]) -> None:
    """The hand-run job: the same number, run on the private host only, nothing left."""
    assert answers(out[NAMENODE]) == [truth(testbed)], out
    app = last_application(testbed, "MAPREDUCE")
    assert testbed.ran_on(app) == {PRIVATE_2}, app
    left = testbed.on(NAMENODE, 'hdfs dfs -ls -R "$COCKTAIL_PRIVATE_ROOT/jobs" || true')
    assert "by-hand" not in left, left


def owner_set_up(testbed: Rehearsal, out: dict[str, str]) -> None:
    assert (testbed.home(NAMENODE) / "ann.token").read_text().strip()


def analyst_answered(testbed: Rehearsal, out: dict[str, str]) -> None:
    """Both clients got the noisy answer over TLS (the second reused, free); plain HTTP gets
    none."""
    replies = [json.loads(line) for line in out[PUBLIC_1].splitlines() if line.startswith("{")]
    assert len(replies) == 2 and all(len(r["answers"]) == 1 for r in replies), out
    assert [r["charged"] for r in replies] == [1.0, 0.0] and replies[1]["reused"]
    plain = testbed.run("exec", PUBLIC_1, "bash", "-c",
                        "curl -s -m 10 http://ck-private-1:8080/health || echo refused")
    assert "refused" in plain and '"status"' not in plain


def monitored(testbed: Rehearsal, out: dict[str, str]) -> None:
    assert out[NAMENODE].count(" running ") == 5 and '"status":"ok"' in out[NAMENODE]


def restored(testbed: Rehearsal, out: dict[str, str]) -> None:
    """The same budget after the restore, and the restarted service can charge again."""
    # One charge: the second client's same query reused the first answer, for free.
    assert spent_by_ann(testbed) == 1.0
    reply = testbed.json_on(PUBLIC_1, "SSL_CERT_FILE=overlay.crt cocktail query 'count(12)' "
                                      '--url "$COCKTAIL_OVERLAY_URL" --token-file ann.token '
                                      "--json")
    assert reply["charged"] == 1.0 and spent_by_ann(testbed) == 2.0, reply


def spent_by_ann(testbed: Rehearsal) -> float:
    users = testbed.json_on(NAMENODE, "cocktail users list --json")["users"]
    return next(u["spent"] for u in users if u["name"] == "ann")


def reported(testbed: Rehearsal, out: dict[str, str]) -> None:
    report = testbed.home(NAMENODE) / "report.html"
    assert report.stat().st_size > 10_000 and "audit" in report.read_text().lower()
    assert (testbed.home(NAMENODE) / "owner.token").read_text().strip()


# Each step of docs/operations.md, in the doc's order, and what the test checks after it.
CHECKS = {"provision": provisioned, "daemons": started, "check": checked, "publish": published,
          "spark": spark_published, "streaming": streamed, "by-hand": by_hand,
          "owner": owner_set_up, "analyst": analyst_answered, "monitor": monitored,
          "backup": restored, "report": reported}


def last_application(testbed: Rehearsal, kind: str) -> str:
    listing = testbed.on(NAMENODE, f"yarn application -list -appStates ALL -appTypes {kind}")
    return sorted(re.findall(r"application_\d+_\d+", listing))[-1]


def succeeded_labels(testbed: Rehearsal) -> list[str]:
    """The node label expression of every SUCCEEDED application, from the resourcemanager's
    REST API (one curl, where `yarn application -status` is a JVM start an application); the
    newest one's is also asked as an operator does (tests/hadoop_cluster.py), and agrees."""
    reply = json.loads(testbed.on(NAMENODE, f"curl -s '{RM_REST}/apps?states=FINISHED'"))
    apps = sorted((app for app in (reply["apps"] or {}).get("app", [])
                   if app["finalStatus"] == "SUCCEEDED"), key=lambda app: app["id"])
    labels = [app.get("appNodeLabelExpression") or "<Not set>" for app in apps]
    operator = label_expression(
        lambda *args: testbed.on(NAMENODE, " ".join(("yarn", "application", *args))),
        apps[-1]["id"])
    assert operator == labels[-1], (operator, labels)
    return labels


def queries_and_failures(testbed: Rehearsal) -> None:
    """The labels of every application so far; datanode failures, then 20 random queries on
    YARN against brute force."""
    data = load(testbed.home(NAMENODE) / "baskets.dat")
    queries = random_conjunctions(data.records, 20, seed=10)
    expected = [data.count_containing(q) for q in queries]
    (testbed.home(NAMENODE) / "queries.txt").write_text(
        "".join(f"count({' & '.join(q)})\n" for q in queries))
    on_yarn = "scripts/streaming-query --batch queries.txt --json"
    exact = "cocktail query --exact --batch queries.txt --json"
    labels = succeeded_labels(testbed)
    assert "private" in labels and "<Not set>" in labels, labels
    private_datanode_dies(testbed, exact, expected)
    started = time.monotonic()
    testbed.on(PUBLIC_1, "scripts/daemons stop datanode")
    # At once, while the namenode still names it (for a few of the jobs' reads, first on its
    # rack): a task's HDFS client is refused by it and reads another replica.
    assert testbed.json_on(NAMENODE, on_yarn)["answers"] == expected
    wait_datanodes(testbed, "dead", 1)
    testbed.timed("public datanode stopped, 20 queries on YARN", started)
    assert testbed.json_on(NAMENODE, AUDIT)["ok"]


def private_datanode_dies(testbed: Rehearsal, exact: str, expected: list[int]) -> None:
    """Reads go on while the namenode still names it; its blocks may only be re-replicated
    onto private datanodes: the one left holds them already, so the namenode finds no target
    and the shim refuses every public one."""
    started = time.monotonic()
    testbed.on(PRIVATE_2, "scripts/daemons kill datanode")
    # Until its heartbeats expire (20 s here) the namenode still names the dead datanode for
    # its replicas, first for a reader on its rack: the store must exclude it and ask again.
    assert testbed.json_on(NAMENODE, AUDIT)["ok"]
    wait_datanodes(testbed, "dead", 1)
    time.sleep(5)  # a few redundancy-monitor rounds, each looking for targets
    audit = testbed.json_on(NAMENODE, AUDIT)
    assert audit["ok"] and audit["placement"]["replicas_outside_private_racks"] == 0
    assert re.search(r"No private datanode .* could take the replica",
                     testbed.log(NAMENODE, "namenode")), "the shim never refused a public target"
    assert testbed.json_on(NAMENODE, exact)["answers"] == expected
    testbed.on(PRIVATE_2, "scripts/daemons start datanode")
    wait_datanodes(testbed, "live", len(HOSTS))
    testbed.timed("private datanode killed and back", started)


def check_nothing_left(testbed: Rehearsal, user_was_there: bool) -> None:
    assert not (set(HOSTS) | {SWITCH}) & namespaces()
    left = subprocess.run(["pgrep", "-u", USER], capture_output=True, text=True)
    assert left.stdout.strip() == "", f"processes left: {left.stdout}"
    assert not any(Path("/etc/netns", host).exists() for host in HOSTS)
    assert user_exists() == user_was_there
    status = subprocess.run([str(TESTBED), "status"], env=testbed.env, capture_output=True,
                            text=True)
    assert status.returncode == 1 and "testbed down" in status.stdout


def wait_datanodes(testbed: Rehearsal, state: str, count: int) -> None:
    """Until `hdfs dfsadmin -report -STATE` (live or dead) says "STATE datanodes (COUNT)":
    polled on the namenode's JMX (a curl, where the command is a JVM start a poll), then said
    once by the command itself."""
    field = f"Num{state.title()}DataNodes"
    jmx = (f"curl -s 'http://{NAMENODE}:{PORTS['namenode_http']}/jmx?"
           "qry=Hadoop:service=NameNode,name=FSNamesystemState'")
    said = f"{state.title()} datanodes ({count})"
    poll(testbed, jmx, lambda reply: reply["beans"][0][field] == count, said)
    assert said in testbed.on(NAMENODE, f"hdfs dfsadmin -report -{state}")


def wait_nodemanagers(testbed: Rehearsal, count: int) -> None:
    """Until `yarn node -list` counts `count` running NodeManagers: polled on the
    resourcemanager's REST API, then said once by the command itself."""
    metrics = f"curl -s {RM_REST}/metrics"
    poll(testbed, metrics, lambda reply: reply["clusterMetrics"]["activeNodes"] == count,
         f"{count} active nodes")
    nodes = testbed.on(NAMENODE, "yarn node -list -states RUNNING")
    assert f"Total Nodes:{count}" in nodes, nodes


def poll(testbed: Rehearsal, command: str, done, what: str, timeout: float = 120) -> None:
    """Until the JSON that `command` prints on the namenode's host is `done`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reply = testbed.on(NAMENODE, f"{command} || true").strip()
        if reply.startswith("{") and done(json.loads(reply)):
            return
        time.sleep(1)
    raise AssertionError(f"{command!r} never said {what} in {timeout} s")
