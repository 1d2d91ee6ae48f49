"""Every runner gives the fast path's answers, and those equal brute force on the raw data."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cocktail.dataset import load
from cocktail.overlay.combine import count_matches, resolve
from cocktail.overlay.planner import plan_conjunction
from cocktail.publish import PublishParams, publish
from cocktail.query import Engine, Publication
from cocktail.query.backends.streaming import write_tasks
from cocktail.querylang import CountQuery
from cocktail.store import LocalStore
from cocktail.synthetic import random_conjunctions

from .conftest import REPO, dataset_path


@pytest.fixture(scope="module", params=["bms-webview-1.dat", "bms-webview-2.dat"])
def published(request, tmp_path_factory):
    dataset = load(dataset_path(request.param))
    store = LocalStore(tmp_path_factory.mktemp("store"))
    publish(dataset, store, PublishParams(k=5, m=3))
    return dataset, Publication.open(store)


@pytest.mark.parametrize("runner", ["fast", "inline", "local", "index-inline"])
def test_200_queries_equal_brute_force(published, runner):
    dataset, publication = published
    queries = [CountQuery(q) for q in random_conjunctions(dataset.records, 200, seed=11)]
    answers = Engine(publication, runner).counts(queries)
    expected = [dataset.count_containing(q.terms) for q in queries]
    assert answers == expected
    assert sum(a > 0 for a in answers) > 100  # the workload is not trivially zero


def test_spark_runner(tmp_path):
    if shutil.which("java") is None:
        pytest.skip("the spark runner needs a Java runtime (java is not on PATH)")
    pytest.importorskip("pyspark", reason="pyspark is installed by the test extra")
    dataset = load(dataset_path("bms-webview-1.dat")).head(8000)
    store = LocalStore(tmp_path / "s")
    publish(dataset, store, PublishParams(k=5, m=3, cluster_size=1000))
    queries = [CountQuery(q) for q in random_conjunctions(dataset.records, 40, seed=5)]
    expected = [dataset.count_containing(q.terms) for q in queries]
    assert Engine(Publication.open(store), "spark").counts(queries) == expected
    sharded = LocalStore(tmp_path / "sharded")
    publish(dataset, sharded, PublishParams(k=5, m=3, cluster_size=1000, index_shard=3000))
    assert Engine(Publication.open(sharded), "index-spark").counts(queries) == expected


def test_streaming_scripts_as_hadoop_runs_them(tmp_path):
    """The mapper and reducer run as plain scripts (python -I -S: no site-packages, so standard
    library only), piped through `sort` on the two key fields as Hadoop Streaming would."""
    dataset = load(dataset_path("bms-webview-2.dat")).head(5000)
    store = LocalStore(tmp_path / "s")
    publish(dataset, store, PublishParams(k=5, m=2, cluster_size=1000))
    publication = Publication.open(store)
    queries = [CountQuery(q) for q in random_conjunctions(dataset.records, 30, seed=2)]
    plans = [plan_conjunction(q.terms, publication) for q in queries]
    tasks = list(dict.fromkeys(t for p in plans for t in p.tasks))
    tasks_file = write_tasks(tasks, tmp_path)
    index_lines = b"".join(open(publication.index_location(c), "rb").read()
                           for c in sorted({t.chunk for t in tasks}))
    python = [sys.executable, "-I", "-S"]
    mapped = subprocess.run([*python, REPO / "mappers/match_index.py", tasks_file],
                            input=index_lines, capture_output=True, check=True).stdout
    shuffled = subprocess.run(["sort", "-t", "\t", "-k1,1", "-k2,2"], input=mapped,
                              capture_output=True, check=True, env={"LC_ALL": "C"}).stdout
    reduced = subprocess.run([*python, REPO / "reducers/complete_matches.py", tasks_file],
                             input=shuffled, capture_output=True, check=True).stdout
    pseudonyms: dict = {task: [] for task in tasks}
    for line in reduced.decode().splitlines():
        number, name = line.split("\t")
        pseudonyms[tasks[int(number)]].append(name)
    matched = resolve(pseudonyms, publication.record_positions)
    answers = [count_matches(p, matched, publication.cluster_members) for p in plans]
    assert answers == [dataset.count_containing(q.terms) for q in queries]
    assert json.loads(tasks_file.read_text())[0]["chunk"] == tasks[0].chunk


def test_a_hand_run_job_is_finished_by_plan_matches(tmp_path):
    """The recipe of docs/overlay.md by hand, query by query: `cocktail plan --tasks-file`, the
    two scripts in a pipe, `cocktail plan --matches` for the answer, which equals brute force;
    the tasks file of another query, or of a version the store moved on from, is refused."""
    from click.testing import CliRunner

    from cocktail.cli import main

    dataset = load(dataset_path("bms-webview-2.dat")).head(5000)
    store = tmp_path / "s"
    publish(dataset, LocalStore(store), PublishParams(k=5, m=2, cluster_size=1000))
    run, python = CliRunner(), [sys.executable, "-I", "-S"]
    texts = [f"count({' & '.join(q)})" for q in random_conjunctions(dataset.records, 8, seed=3)]
    for n, text in enumerate(texts):
        tasks = tmp_path / f"tasks{n}.json"
        plan = json.loads(run.invoke(main, ["plan", text, "--store", str(store), "--tasks-file",
                                            str(tasks), "--json"]).stdout)
        lines = b"".join(Path(f).read_bytes() for f in plan["index_files"])
        mapped = subprocess.run([*python, REPO / "mappers/match_index.py", tasks], input=lines,
                                capture_output=True, check=True).stdout
        shuffled = subprocess.run(["sort"], input=mapped, capture_output=True, check=True,
                                  env={"LC_ALL": "C"}).stdout
        matches = tmp_path / f"matches{n}.tsv"
        matches.write_bytes(subprocess.run([*python, REPO / "reducers/complete_matches.py",
                                            tasks], input=shuffled, capture_output=True,
                                           check=True).stdout)
        finished = run.invoke(main, ["plan", text, "--store", str(store), "--tasks-file",
                                     str(tasks), "--matches", str(matches), "--json"])
        terms = text[len("count("):-1].split(" & ")
        assert json.loads(finished.stdout)["answer"] == dataset.count_containing(terms)
    other = run.invoke(main, ["plan", texts[1], "--store", str(store), "--tasks-file",
                              str(tmp_path / "tasks0.json"), "--matches",
                              str(tmp_path / "matches0.tsv"), "--json"])
    assert other.exit_code == 2 and "not this query's plan" in json.loads(other.stdout)["error"]


def test_a_jobs_files_stay_in_its_directory(tmp_path):
    """The hadoop runner's filesystem for the private zone (query.backends.scratch) reads,
    writes and removes in the job directory only: the owner's key and a version, elsewhere in
    the private zone, can be neither listed, read, overwritten nor removed through it."""
    from cocktail.publish.writer import KEY_FILE, owner_key
    from cocktail.query.backends.scratch import ScratchFilesystem
    from cocktail.query.backends.streaming import SCRATCH

    store = LocalStore(tmp_path / "s")
    key = owner_key(store)
    store.write("private", "v000001/manifest.json", b"{}", pri_label=True)
    fs = ScratchFilesystem(store, SCRATCH)
    root = store.location("private", "").rstrip("/")
    source = tmp_path / "part"
    source.write_bytes(b"a line\n")
    job_file = f"{root}/{SCRATCH}/job-1/files/part"
    fs.put(str(source), job_file)
    assert list(fs.ls(f"{root}/{SCRATCH}/job-1")) == [job_file]
    assert b"".join(fs.cat(job_file)) == b"a line\n"
    fs.rm(f"{root}/{SCRATCH}/job-1")
    assert not fs.exists(job_file)
    assert not fs.can_handle_path(f"{root}/{SCRATCH}/job-1/output/part-*")  # `hadoop fs`'s
    for path in (f"{root}/{KEY_FILE}", f"{root}/v000001", f"{root}/", f"{root}/{SCRATCH}x/a",
                 f"{root}/*", f"{root}/v*/manifest.json"):
        assert fs.can_handle_path(path)  # claimed, so never handed on to `hadoop fs`
        for attempt in (lambda: fs.rm(path), lambda: fs.put(str(source), path),
                        lambda: list(fs.ls(path)), lambda: list(fs.cat(path)),
                        lambda: fs.exists(path), lambda: fs.touchz(path)):
            with pytest.raises(PermissionError):
                attempt()
    assert owner_key(store) == key and store.read("private", "v000001/manifest.json") == b"{}"
