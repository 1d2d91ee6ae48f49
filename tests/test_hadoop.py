"""Cocktail on Hadoop's own code: the placement shim, the webhdfs store, streaming jobs on YARN.

All of it runs in-process (hdfs_ext's Launcher: MiniDFSCluster with 2 private + 3 public
datanodes, MiniMRYarnCluster with an exclusive `private` node label), in one pytest worker.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import replace
from functools import partial

import pytest
from click.testing import CliRunner

from cocktail import chunkformat as fmt
from cocktail.audit import audit, audit_releases
from cocktail.cli import main
from cocktail.dataset import Dataset, load
from cocktail.publish import PublishParams, publish
from cocktail.publish.append import append
from cocktail.query import Engine, Publication
from cocktail.querylang import CountQuery
from cocktail.releases import current_version
from cocktail.report.numbers import store_numbers
from cocktail.report.page import render
from cocktail.store import PrivacyViolation, StoreError, open_store
from cocktail.synthetic import random_conjunctions

from .conftest import dataset_path
from .hadoop_cluster import (HDFS_EXT, TARGET, build, label_expression, start,
                             succeeded_applications, succeeded_label_expressions)
from .metadata import assert_no_grouping

# The first test of a session builds hdfs_ext (`mvn verify`, its JUnit suite); each cluster
# takes up to 240 s to start (tests/hadoop_cluster.py).
pytestmark = [pytest.mark.xdist_group("hadoop"), pytest.mark.timeout(1800)]
PARAMS = PublishParams(k=5, m=3, workers=1)


@pytest.fixture(scope="session")
def built():
    return build()


@pytest.fixture(scope="module")
def cluster(built, tmp_path_factory):
    running = start(tmp_path_factory.mktemp("hadoop"), "shim", yarn=True)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def sample():
    return load(dataset_path("bms-webview-1.dat")).head(6000)


@pytest.fixture(scope="module")
def published(cluster, sample):
    """The sample's first release, its term index in parts of 2,500 records (three: the
    index-hadoop job runs a map task per part's file)."""
    store = open_store(cluster.store_url())
    report = publish(sample, store, replace(PARAMS, index_shard=2500))
    return store, report


def test_the_shims_junit_suite_ran_and_passed(built):
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for report in (TARGET / "surefire-reports").glob("TEST-*.xml"):
        suite = ET.parse(report).getroot()
        for key in totals:
            totals[key] += int(suite.get(key, 0))
    assert totals["tests"] >= 5 and totals["failures"] == totals["errors"] == 0, totals
    assert totals["skipped"] == 0, totals


def test_publish_passes_the_audit_including_block_placement(published):
    store, report = published
    assert report.private_chunks > 0, "the sample must exercise private chunks"
    checked = audit(store)
    assert checked.ok, checked.violations[:5]
    placement = checked.placement
    assert placement["replicas_outside_private_racks"] == 0
    assert placement["private_files"] >= report.private_chunks and placement["replicas"] > 0
    assert store.zone_storage_policy("private") == "COLD"


def test_the_report_shows_the_audits_placement(published):
    """On HDFS the report carries the audit's placement of private blocks, and draws it."""
    store, report = published
    numbers = store_numbers(store)
    assert numbers["publication"]["public_chunks"] == report.public_chunks
    placement = numbers["audit"]["placement"]
    assert placement == audit(store).placement and placement["replicas"] > 0
    page = render(numbers | {"ledger": None})
    assert all(f"<td>placement: {key}</td>" in page for key in placement)
    assert "<td>placement: replicas_outside_private_racks</td><td>0</td>" in page


def test_every_file_carries_its_pri_label(published):
    store, _ = published
    publication = Publication.open(store)
    public = next(c for c in publication.chunks.values() if not c.private)
    private = next(c for c in publication.chunks.values() if c.private)
    chunk = f"{publication.version}/chunks/{{}}.tsv"
    assert store.pri_label("public", chunk.format(public.id)) == "false"
    assert store.pri_label("private", chunk.format(private.id)) == "true"
    with pytest.raises(PrivacyViolation):
        store.write("public", "leak.tsv", b"x\n", pri_label=True)
    assert not store.exists("public", "leak.tsv")


def test_streaming_jobs_on_yarn_equal_brute_force(cluster, published, sample, monkeypatch):
    store, _ = published
    publication = Publication.open(store)
    queries = [CountQuery(q) for q in random_conjunctions(sample.records, 50, seed=9)]
    for name, value in cluster.hadoop_env().items():
        monkeypatch.setenv(name, value)
    answers = Engine(publication, "hadoop").counts(queries)
    assert answers == [sample.count_containing(q.terms) for q in queries]
    assert Engine(publication).counts(queries) == answers  # the fast path, over WebHDFS
    labels = succeeded_label_expressions(lambda *args: yarn_application(cluster, *args))
    assert labels.count("private") >= 1 and labels.count("<Not set>") >= 1, labels
    # The job files went up, and their outputs came back, through the store; none is left.
    assert list(store.walk("private", "jobs")) == []


def test_a_job_over_the_index_shards_runs_on_private_nodes_only(cluster, published, sample,
                                                                monkeypatch):
    """`index-hadoop`: a map task per part of the private term index, each reading its part
    through WebHDFS, every container on the exclusive private label."""
    store, _ = published
    assert len(Publication.open(store).index_layout.parts) == 3
    queries = [CountQuery(q) for q in random_conjunctions(sample.records, 40, seed=8)]
    for name, value in cluster.hadoop_env().items():
        monkeypatch.setenv(name, value)
    application = partial(yarn_application, cluster)
    before = succeeded_applications(application)
    answers = Engine(Publication.open(store), "index-hadoop").counts(queries)
    assert answers == [sample.count_containing(q.terms) for q in queries]
    new = [app for app in succeeded_applications(application) if app not in before]
    assert len(new) == 1, new  # one job for the batch...
    assert label_expression(application, new[0]) == "private"  # ...on private nodes


def test_append_on_hdfs_keeps_every_release_safe(published, sample):
    """Before any test below re-partitions the store: an append carries the unchanged files
    over (copied through WebHDFS), and the releases audit clean together."""
    store, _ = published
    more = load(dataset_path("bms-webview-1.dat")).head(7000)
    batch = Dataset(more.ids[6000:], more.records[6000:], "memory", "jsonl")
    report = append(batch, store)
    assert report.version == "v000002" and report.appended_records == 1000
    assert audit(store).ok
    assert audit(store).placement["replicas_outside_private_racks"] == 0
    history = audit_releases(store)
    assert history.ok and history.pairs_checked == 1, history.violations[:3]
    queries = [CountQuery(q) for q in random_conjunctions(more.records, 40, seed=4)]
    assert Engine(Publication.open(store)).counts(queries) == [more.count_containing(q.terms)
                                                              for q in queries]


def yarn_application(cluster, *args: str) -> str:
    """`yarn application ARGS` against the cluster's resourcemanager, as an operator runs it."""
    done = subprocess.run([str(HDFS_EXT / "bin" / "hadoop"), "--config", cluster.info["conf_dir"],
                           "application", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_refused_writes_leave_the_current_version(cluster, published, sample):
    store, _ = published
    before = current_version(store)
    for index in cluster.private_datanodes:
        cluster.command(f"stop-datanode {index}")
    try:
        with pytest.raises(StoreError, match="no datanode allowed to store it|cannot write"):
            publish(sample.head(500), store, PARAMS, rebase=True)
    finally:
        for index in cluster.private_datanodes:
            cluster.command(f"restart-datanode {index}")
        cluster.command("wait-active")
    assert current_version(store) == before
    assert audit(store).ok


def test_permission_denied_is_named(cluster, published, sample):
    store = open_store(cluster.store_url(user="mallory"))
    with pytest.raises(StoreError, match="permission denied"):
        publish(sample.head(500), store, PARAMS)


def test_namenode_down_is_a_clear_error(cluster, published, sample):
    store, _ = published
    before = current_version(store)
    cluster.command("shutdown-namenode")
    try:
        with pytest.raises(StoreError, match="cannot reach the namenode"):
            publish(sample.head(500), store, PARAMS, rebase=True)
    finally:
        cluster.command("restart-namenode")
        cluster.command("wait-active")
    assert current_version(store) == before


def test_datanode_killed_during_publish(cluster, published, sample):
    store, _ = published
    before = current_version(store)
    outcome: dict = {}

    def run():
        try:
            outcome["report"] = publish(sample.head(3000), store, PARAMS, rebase=True)
        except StoreError as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    watcher = open_store(cluster.store_url())  # its own HTTP session, off the worker's
    while worker.is_alive() and not any(name.startswith(fmt.STAGING_PREFIX)
                                        for name in watcher.list("private")):
        time.sleep(0.05)
    victim = cluster.private_datanodes[-1]
    cluster.command(f"stop-datanode {victim}")  # while the version's files are being written
    worker.join(300)
    cluster.command(f"restart-datanode {victim}")
    cluster.command("wait-active")
    assert not worker.is_alive()
    if "report" in outcome:
        assert current_version(store) == outcome["report"].version != before
    else:
        assert current_version(store) == before
    assert audit(store).ok


@pytest.fixture(scope="module", params=["cold", "none"])
def bare_cluster(request, built, tmp_path_factory):
    running = start(tmp_path_factory.mktemp(f"hdfs-{request.param}"), request.param, yarn=False)
    yield running
    running.stop()


@pytest.mark.xdist_group("bare")  # clusters of its own: beside the YARN cluster's tests
def test_placement_audit_fails_without_shim_and_policy(bare_cluster, sample):
    """The config-only route (COLD + ARCHIVE on private datanodes) passes; with neither it and
    the shim, private replicas land on public datanodes and the audit says so."""
    route = bare_cluster.info["route"]
    url = bare_cluster.store_url(storage_policy="COLD" if route == "cold" else "none")
    publish(sample.head(3000), open_store(url), PARAMS)
    result = CliRunner().invoke(main, ["audit", "--store", url, "--json"])
    report = json.loads(result.stdout)
    outside = report["placement"]["replicas_outside_private_racks"]
    if route == "cold":
        assert result.exit_code == 0 and outside == 0, report["violations"][:3]
    else:
        assert result.exit_code == 1 and outside > 0
        assert {v["kind"] for v in report["violations"]} == {"placement"}


@pytest.mark.xdist_group("bare")
def test_a_yarn_cluster_with_an_unhealthy_node_refuses_to_start(built, tmp_path):
    """A NodeManager whose disk is over YARN's limit is UNHEALTHY and takes no container: a
    cluster that started anyway left every job ACCEPTED for ever (a full disk once hung this
    suite).  The launcher stops instead, with the NodeManagers' own health reports."""
    with pytest.raises(pytest.fail.Exception) as failed:
        start(tmp_path, "none", True, "--yarn-max-disk-percent", "0").stop()
    message = str(failed.value)
    assert "UNHEALTHY, no job could run" in message
    assert "used space above threshold of 0.0%" in message, message[-1500:]


def test_file_ids_and_times_on_hdfs_reveal_no_clusters(published):
    """HDFS numbers files (and blocks) in creation order: sorted by file id, the public chunks
    must not come out grouped by cluster, and they share one modification time."""
    store, _ = published
    publication = Publication.open(store)
    client, folder = store._full("public", f"{publication.version}/{fmt.CHUNK_DIR}")
    listed = client.list(folder, status=True)
    assert len({status["modificationTime"] for _, status in listed}) == 1
    by_id = sorted(listed, key=lambda entry: entry[1]["fileId"])
    clusters = [publication.chunk_unit(name.removesuffix(".tsv")) for name, _ in by_id]
    assert len(set(clusters)) >= 3
    assert_no_grouping({"fileId": clusters})
