"""Publishing to the local store: layout, secrecy, reconstruction, versions, exact counts."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cocktail import chunkformat as fmt
from cocktail.audit import audit
from cocktail.cli import main
from cocktail.dataset import Dataset, load
from cocktail.overlay.planner import plan_conjunction
from cocktail.publish import PublishParams, publish
from cocktail.query import Engine, Publication
from cocktail.querylang import CountQuery
from cocktail.releases import current_version
from cocktail.store import LocalStore, PrivacyViolation, StoreError
from cocktail.synthetic import SyntheticSpec, generate, random_conjunctions

from .conftest import REPO, dataset_path
from .metadata import assert_no_grouping


def make_dataset(records, ids=None) -> Dataset:
    ids = ids or [f"user-{i:04d}" for i in range(len(records))]
    return Dataset(ids=tuple(ids), records=tuple(frozenset(r) for r in records),
                   source="memory", format="jsonl")


SMALL = make_dataset(
    [set("abc"), set("abd"), set("ab"), set("ace"), set(), set("bc"), set("abcf"), set("a"),
     set("bd"), set("abc"), set("cde"), set("ab"), {"rare-1", "a"}, set("abc")] * 3
    + [{"rare-2", "b"}, set()])


def reconstruct(publication: Publication) -> dict[str, frozenset[str]]:
    """Join every chunk back through the private pseudonym map."""
    records = {rid: set() for rid in publication.record_ids}
    for chunk_id in publication.chunks:
        positions = publication.record_positions(chunk_id)
        for pseudonym, terms in publication.subrecords(chunk_id):
            records[publication.record_ids[positions[pseudonym]]] |= set(terms)
    return {rid: frozenset(terms) for rid, terms in records.items()}


@pytest.mark.parametrize("method", ["basic", "testing"])
def test_reconstruction_gives_back_the_input(tmp_path, method):
    bms = load(dataset_path("bms-webview-2.dat")).head(5000)
    for number, dataset in enumerate((SMALL, bms)):
        store = LocalStore(tmp_path / str(number))
        publish(dataset, store, PublishParams(k=3, m=2, method=method, cluster_size=1200))
        publication = Publication.open(store)
        assert reconstruct(publication) == dict(zip(dataset.ids, dataset.records))
        assert publication.record_ids == list(dataset.ids)


def test_public_zone_reveals_no_record_ids_and_no_shared_pseudonyms(tmp_path):
    store = LocalStore(tmp_path / "s")
    report = publish(SMALL, store, PublishParams(k=3, m=2, cluster_size=16))
    assert report.private_chunks > 0 and report.public_chunks > 0
    public_bytes = b"".join(p.read_bytes() for p in (tmp_path / "s" / "public").rglob("*")
                            if p.is_file())
    assert b"user-" not in public_bytes
    assert b"rare-2" not in public_bytes  # global support 1 < k: private whatever happens
    # rare-1 has support 3 = k overall but less in any fixed-size cluster: the overlay tree or
    # aggregation publishes it, a plain fixed split does not.
    assert b"rare-1" in public_bytes
    unaggregated = LocalStore(tmp_path / "flat")
    publish(SMALL, unaggregated, PublishParams(k=3, m=2, cluster_size=16, overlay=False,
                                               aggregate=False))
    assert b"rare-1" not in b"".join(p.read_bytes() for p in (tmp_path / "flat/public").rglob("*")
                                     if p.is_file())
    publication = Publication.open(store)
    seen = {}
    for chunk_id in publication.chunks:
        names = [p for p, _ in publication.subrecords(chunk_id)]
        assert names == sorted(names), "subrecords are ordered by pseudonym"
        for name in names:
            assert name not in seen, "a pseudonym may not occur in two chunks"
            seen[name] = chunk_id
    # Private files exist only in the private zone.
    private_manifest = json.loads((tmp_path / "s/private" / report.version / "manifest.json")
                                  .read_text())
    for chunk_id, chunk in private_manifest["chunks"].items():
        zone = "private" if chunk["priLabel"] else "public"
        other = "public" if chunk["priLabel"] else "private"
        assert (tmp_path / "s" / zone / fmt.chunk_path(report.version, chunk_id)).exists()
        assert not (tmp_path / "s" / other / fmt.chunk_path(report.version, chunk_id)).exists()
    assert oct((tmp_path / "s/private").stat().st_mode & 0o777) == "0o700"


def test_store_refuses_private_data_in_public_zone(tmp_path):
    store = LocalStore(tmp_path / "s")
    with pytest.raises(PrivacyViolation):
        store.write("public", "x/chunk.tsv", b"secret", pri_label=True)
    assert not (tmp_path / "s/public/x").exists()


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077, 0o277])
def test_every_file_gets_its_zones_mode_whatever_the_umask(tmp_path, umask):
    """New files and files written over (whose old mode open keeps) alike: a file is
    chmod-ed only where its mode would otherwise be wrong."""
    previous = os.umask(umask)
    try:
        store = LocalStore(tmp_path / "s")
        for zone, label, mode, stale in (("public", False, 0o644, 0o600),
                                         ("private", True, 0o600, 0o666)):
            store.write(zone, "v/new.tsv", b"a", pri_label=label)
            store.write(zone, "v/old.tsv", b"a", pri_label=label)
            (tmp_path / "s" / zone / "v/old.tsv").chmod(stale)
            store.write(zone, "v/old.tsv", b"b", pri_label=label)
            for name in ("new.tsv", "old.tsv"):
                path = tmp_path / "s" / zone / "v" / name
                assert path.stat().st_mode & 0o777 == mode, (zone, name, oct(umask))
            assert store.read(zone, "v/old.tsv") == b"b"
    finally:
        os.umask(previous)


def test_versions_switch_and_old_ones_are_pruned(tmp_path):
    store = LocalStore(tmp_path / "s")
    versions = [publish(SMALL, store, PublishParams(k=2, m=2, keep=2), rebase=True).version
                for _ in range(3)]
    assert versions == ["v000001", "v000002", "v000003"]
    assert current_version(store) == "v000003"
    assert store.list("public") == ["CURRENT", "v000002", "v000003"]
    assert [n for n in store.list("private") if n.startswith("v")] == ["v000002", "v000003"]


def test_stale_staging_is_swept(tmp_path):
    store = LocalStore(tmp_path / "s")
    publish(SMALL, store, PublishParams(k=2, m=2))
    store.write("public", ".staging-v000002/chunks/x.tsv", b"half", pri_label=False)
    store.write("private", "v000009/manifest.json", b"{}", pri_label=True)  # never made current
    publish(SMALL, store, PublishParams(k=2, m=2), rebase=True)
    assert current_version(store) == "v000002"
    assert not store.exists("public", ".staging-v000002")
    assert not store.exists("private", "v000009")


def test_exact_counts_on_small_data(tmp_path):
    store = LocalStore(tmp_path / "s")
    for method in ("basic", "testing", "improved", "improved-paper"):
        publish(SMALL, store, PublishParams(k=3, m=2, method=method, cluster_size=20),
                rebase=True)
        publication = Publication.open(store)
        vocabulary = sorted(set().union(*SMALL.records)) + ["absent"]
        for a in vocabulary:
            for b in vocabulary:
                query = CountQuery(tuple(dict.fromkeys((a, b))))
                assert Engine(publication).count(query) == SMALL.count_containing(query.terms)


def test_planner_walks_the_tree_and_prunes(tmp_path):
    records = generate(SyntheticSpec(records=3000, items=200, seed=4))
    dataset = make_dataset(records)
    store = LocalStore(tmp_path / "s")
    publish(dataset, store, PublishParams(k=3, m=2, cluster_size=300))
    publication = Publication.open(store)
    root = publication.tree.nodes[0]
    assert root.split, "3000 records over clusters of 300 need a split"
    term = root.split[0]
    plan = plan_conjunction((term,), publication)
    assert plan.branches_pruned >= 1  # every root child whose pattern says "no term" is pruned
    for task in plan.tasks:
        assert set(task.terms) <= publication.chunks[task.chunk].terms
    # Only clusters with a record holding the term are planned, and all of those are.
    holders = {publication.cluster_of[p] for p, r in enumerate(records) if term in r}
    assert set(plan.clusters) == holders
    assert Engine(publication).count(CountQuery((term,))) == dataset.count_containing([term])
    empty = plan_conjunction(("absent", term), publication)
    assert empty.tasks == [] and empty.clusters == {}


@pytest.mark.parametrize("name", ["bms-webview-1.dat", "bms-webview-2.dat"])
@pytest.mark.parametrize("method", ["basic", "testing", "improved"])
@pytest.mark.parametrize("k,m", [(2, 2), (5, 3), (10, 2)])
def test_bms_subsample_exact_counts(tmp_path, name, method, k, m):
    sample = load(dataset_path(name)).head(6000)
    store = LocalStore(tmp_path / "s")
    publish(sample, store, PublishParams(k=k, m=m, method=method, cluster_size=1500))
    checked = audit(store)
    assert checked.ok and checked.chunks > 0, checked.violations[:3]
    publication = Publication.open(store)
    for terms in random_conjunctions(sample.records, 200, seed=k * 10 + m):
        assert Engine(publication).count(CountQuery(terms)) == sample.count_containing(terms), terms


CRASHING_PUBLISH = """
import sys
from cocktail.dataset import load
from cocktail.publish import PublishParams, publish
from cocktail.store import LocalStore
publish(load(sys.argv[1]), LocalStore(sys.argv[2]), PublishParams(k=2, m=2, cluster_size=50),
        rebase=True)
"""


def test_killed_publish_leaves_previous_version_current(tmp_path):
    """SIGKILL the publisher once it has written part of a new version."""
    data = dataset_path("bms-webview-1.dat")
    store = LocalStore(tmp_path / "s")
    first = publish(load(data), store, PublishParams(k=5, m=2, cluster_size=20000))
    staging = tmp_path / "s" / "public" / (fmt.STAGING_PREFIX + "v000002") / "chunks"
    proc = subprocess.Popen([sys.executable, "-c", CRASHING_PUBLISH, str(data), str(store.root)])
    deadline = time.monotonic() + 120
    while not (staging.exists() and len(os.listdir(staging)) > 50):
        assert proc.poll() is None, "the publish ended before it could be interrupted"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert current_version(store) == first.version
    assert audit(store).ok
    publication = Publication.open(store)
    assert Engine(publication).count(CountQuery(("10312",))) == load(data).count_containing(
        ("10312",))
    # The next publish sweeps the debris and commits normally.
    second = publish(load(data), store, PublishParams(k=5, m=2), rebase=True)
    assert second.version == "v000002" and current_version(store) == "v000002"
    assert not any(n.startswith(fmt.STAGING_PREFIX) for n in store.list("public"))


@pytest.mark.parametrize("name", ["bms-webview-1.dat", "bms-webview-2.dat"])
def test_theorem_5_after_aggregation(tmp_path, name):
    """Every term with global support >= k has at most k-1 private subrecords."""
    dataset = load(dataset_path(name))
    k = 5
    store = LocalStore(tmp_path / "s")
    report = publish(dataset, store, PublishParams(k=k, m=2, method="improved"))
    assert audit(store).ok
    publication = Publication.open(store)
    private_count: dict[str, int] = {}
    for chunk in publication.chunks.values():
        if chunk.private:
            for _, terms in publication.subrecords(chunk.id):
                for term in terms:
                    private_count[term] = private_count.get(term, 0) + 1
    support: dict[str, int] = {}
    for record in dataset.records:
        for term in record:
            support[term] = support.get(term, 0) + 1
    over = {t: c for t, c in private_count.items() if support[t] >= k and c > k - 1}
    assert over == {}
    before = report.private_before_aggregation
    assert report.private_subrecords < before["private_subrecords"]
    assert report.aggregated_clusters >= 1


def test_file_metadata_reveals_no_clusters(tmp_path):
    """Sort the public chunk and index files by inode, modification time or change time: the
    order must not group them by cluster (written cluster by cluster, it did: 48 changes for
    49 clusters of 874 chunks, against 850 for a random order)."""
    store = LocalStore(tmp_path / "s")
    publish(load(dataset_path("bms-webview-1.dat")), store, PublishParams(k=5, m=3))
    assert_metadata_reveals_no_clusters(tmp_path / "s")


def assert_metadata_reveals_no_clusters(root: Path) -> None:
    publication = Publication.open(LocalStore(root))
    public = root / "public" / publication.version
    for kind in (fmt.CHUNK_DIR, fmt.INDEX_DIR):
        files = [(path, path.stat()) for path in (public / kind).iterdir()]
        assert len({st.st_mtime_ns for _, st in files}) == 1  # one common time per version
        cluster = {path: publication.chunk_unit(path.stem) for path, _ in files}
        orders = {key: [cluster[p] for p, _ in sorted(files, key=lambda f, key=key: (
            getattr(f[1], key), f[0].name))] for key in ("st_ino", "st_mtime_ns", "st_ctime_ns")}
        assert len(set(cluster.values())) > 40
        assert_no_grouping(orders)
    for path in (root / "private").rglob("*"):
        if path.is_file():
            assert path.stat().st_mode & 0o077 == 0, path  # the owner's alone


def test_bad_parameters_and_a_busy_store_are_refused_before_any_work(tmp_path, monkeypatch):
    import cocktail.publish as publish_module

    store = LocalStore(tmp_path / "s")
    monkeypatch.setattr(publish_module, "build_layout",
                        lambda *args, **kwargs: pytest.fail("partitioned before refusing"))
    with pytest.raises(ValueError, match="k must be at least 2"):
        publish(SMALL, store, PublishParams(k=1, m=2))
    with pytest.raises(ValueError, match="exceeds the 44 records"):
        publish(SMALL, store, PublishParams(k=45, m=2))
    with store.publish_lock():
        with pytest.raises(StoreError, match="another publish holds the lock"):
            publish(SMALL, store, PublishParams(k=2, m=2))


@pytest.mark.parametrize("command", [["publish", "--append"], ["table", "publish", "--append"]])
def test_a_refused_append_leaves_no_trace(tmp_path, command):
    data = tmp_path / ("t.csv" if "table" in command else "t.dat")
    data.write_text("q,s\na,1\n" if "table" in command else "a b\n")
    store = tmp_path / "missing"
    refused = CliRunner().invoke(main, [*command, str(data), "--store", str(store)])
    assert refused.exit_code != 0 and "publish" in refused.output
    assert not store.exists()


FUTURE = "cocktail-publication/3"


def _future_format(root: Path, version: str) -> dict[Path, bytes]:
    """Make ``version``'s manifests claim a format this version does not know, as a later
    cocktail's would; the files as they then are."""
    written = {}
    for zone in ("public", "private"):
        path = root / zone / version / fmt.MANIFEST
        path.write_bytes(path.read_bytes().replace(fmt.FORMAT.encode(), FUTURE.encode(), 1))
        written[path] = path.read_bytes()
    return written


@pytest.mark.parametrize("command", [["audit"], ["audit", "--releases"], ["plan", "count(a)"],
                                     ["publish", "--append", "more.dat"]],
                         ids=["audit", "audit-releases", "plan", "append"])
def test_a_store_of_a_newer_format_is_refused_in_one_line_and_left_alone(tmp_path, command):
    """An older cocktail once read a newer manifest by the first format's rules, and appended
    a version of its own format on top of it; now every reader of the manifests refuses it,
    exit status 2, naming the format and what to do, and writes nothing."""
    store = LocalStore(tmp_path / "s")
    publish(SMALL, store, PublishParams(k=2, m=2))
    files = _future_format(tmp_path / "s", "v000001")
    (tmp_path / "more.dat").write_text("a b\na c\n")
    args = [tmp_path / a if a.endswith(".dat") else a for a in command]
    result = CliRunner().invoke(main, [*map(str, args), "--store", str(tmp_path / "s"),
                                       "--json"])
    assert result.exit_code == 2, result.output
    error = json.loads(result.stdout)
    assert error["code"] == 2 and error["type"] == "usage-error"
    assert f"format '{FUTURE}', which this cocktail does not read" in error["error"]
    assert "upgrade cocktail" in error["error"] and "\n" not in error["error"]
    assert "Traceback" not in result.output
    assert {path: path.read_bytes() for path in files} == files
    assert sorted(os.listdir(tmp_path / "s" / "public")) == ["CURRENT", "v000001"]


def test_the_first_format_is_still_read_and_newer_index_files_are_refused(tmp_path):
    """A `/1` manifest (one indented document) reads as the same manifest; a term index file
    of a newer format is refused by name, whatever reads it."""
    store = LocalStore(tmp_path / "s")
    publish(SMALL, store, PublishParams(k=2, m=2))
    before = Publication.open(store).manifest
    path = tmp_path / "s" / "private" / "v000001" / fmt.MANIFEST
    path.write_bytes(fmt.encode_json(before | {"format": "cocktail-publication/1"}))
    assert Publication.open(store).manifest == before | {"format": "cocktail-publication/1"}
    exact = ["query", "--exact", "count(a & b)", "--store", str(tmp_path / "s")]
    assert CliRunner().invoke(main, exact).exit_code == 0
    for part in (tmp_path / "s" / "private" / "v000001" / fmt.TERM_PART_DIR).glob("*.roaring"):
        part.write_bytes(part.read_bytes().replace(b"cocktail-terms/1", b"cocktail-terms/2", 1))
    refused = CliRunner().invoke(main, [*exact, "--json"])
    assert refused.exit_code == 2
    assert "format 'cocktail-terms/2', which this cocktail does not read" in \
        json.loads(refused.stdout)["error"]


def test_the_worker_pool_partitions_as_this_process_does(monkeypatch):
    """Large inputs partition in worker processes, fed each cluster as arrays: every cluster's
    partition must be the one the publishing process computes itself, and the one its records
    given as sets get."""
    from cocktail.anonymity import partition
    from cocktail.overlay.layout import cluster_records, cut_clusters
    from cocktail.overlay.tree import grow_tree
    from cocktail.publish import writer

    records = load(dataset_path("bms-webview-1.dat")).head(8000).records
    clusters = [cluster_records(records, positions) for leaf in grow_tree(records, 500).leaves()
                for positions in cut_clusters(leaf.positions, 500)]
    params = PublishParams(k=5, m=3)
    monkeypatch.setattr(writer, "PARALLEL_FROM_RECORDS", 0)
    pooled = [split for split, _ in writer.partitions(clusters, params, 2, len(records))]
    alone = [split for split, _ in writer.partitions(clusters, params, 1, len(records))]
    assert len(pooled) == len(clusters) > 10 and pooled == alone
    assert alone == [partition("improved", list(cluster), 5, 3) for cluster in clusters]


SCRIPT_HEAD = """
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from cocktail.dataset import load
from cocktail.publish import PublishParams, publish, writer
from cocktail.store import open_store
writer.PARALLEL_FROM_RECORDS = 0  # the partitioning workers, whatever the input's size

def release(store):
    records = load({data!r}).head(3000)
    return publish(records, open_store(store), PublishParams(k=5, m=3, workers=2)).version
"""


def _script(tmp_path: Path, body: str, run_as: str = "path") -> subprocess.CompletedProcess:
    """Run ``body`` after SCRIPT_HEAD as a script given by its path, or by module (-m)."""
    script = tmp_path / "script.py"
    data = str(dataset_path("bms-webview-1.dat"))
    script.write_text(SCRIPT_HEAD.format(data=data) + body.format(store=str(tmp_path / "s")))
    command = [str(script)] if run_as == "path" else ["-m", "script"]
    return subprocess.run([sys.executable, *command], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)


@pytest.mark.parametrize("run_as", ["path", "module"])
def test_a_script_publishing_without_the_main_guard_is_told_why_it_failed(tmp_path, run_as):
    """Each partitioning worker runs the main script again before its first job: unguarded,
    the script's publish ran in every worker, was refused by the lock, and the pool broke
    with nothing said of why.  Now each worker says so, the pool's error names the guard, and
    nothing is released."""
    done = _script(tmp_path, "print(release({store!r}))\n", run_as)
    assert done.returncode == 1
    assert "ImportedByWorker: a worker process is importing the main script, and it writes a " \
           "release: put the script's work under `if __name__ == \"__main__\":`" in done.stderr
    assert "BrokenProcessPool: a partitioning worker process ended abruptly" in done.stderr
    assert "another publish holds the lock" not in done.stderr
    assert current_version(LocalStore(tmp_path / "s")) is None


def test_a_release_from_a_worker_of_a_guarded_script_goes_through(tmp_path):
    """The refusal above is for the script's import only: a worker of the user's own pool
    (its main module is the script too) publishes, with partitioning workers of its own."""
    done = _script(tmp_path, """
if __name__ == "__main__":
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        print(pool.submit(release, {store!r}).result())
""")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["v000001"]
    assert audit(LocalStore(tmp_path / "s")).ok


def _partitioning(tmp_path, monkeypatch) -> tuple[subprocess.Popen, list[int], list[int]]:
    """A CLI publish of 300k records (over PARALLEL_FROM_RECORDS) on two workers, its pipes
    read by this process, once both workers run: the process, its tree (itself first) and
    the workers."""
    from cocktail.dataset import write_fimi

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    from measure import descendants, parent_of  # the benchmarks' walk of a process tree

    source = tmp_path / "300k.dat"
    write_fimi(generate(SyntheticSpec(records=300_000, seed=1)), source)
    publishing = subprocess.Popen(
        [sys.executable, "-m", "cocktail.cli", "publish", str(source), "--store",
         str(tmp_path / "s"), "--workers", "2", "--json"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    deadline, tree, workers = time.monotonic() + 120, [], []
    while len(workers) < 2 and time.monotonic() < deadline and publishing.poll() is None:
        tree = descendants(publishing.pid)
        # the workers are the fork server's children, so a process two levels down
        workers = [pid for pid in tree[1:] if parent_of(pid) in tree[1:]]
        time.sleep(0.05)
    return publishing, tree, workers


def test_a_partitioning_worker_killed_is_a_system_failure_and_releases_nothing(tmp_path,
                                                                                monkeypatch):
    """As the out-of-memory killer would: a worker of a CLI publish SIGKILLed mid-partition.
    The publish stops with the system-failure status (5, not the 70 of a bug), one JSON
    object naming the dead worker, and no version."""
    publishing, _, workers = _partitioning(tmp_path, monkeypatch)
    if workers:
        os.kill(workers[0], signal.SIGKILL)
    out, err = publishing.communicate(timeout=120)
    assert workers, err[-2000:]
    failure = json.loads(out)
    assert publishing.returncode == 5 == failure["code"] and failure["type"] == "failed"
    assert "a partitioning worker process ended abruptly" in failure["error"]
    assert current_version(LocalStore(tmp_path / "s")) is None


def _started(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot, /proc/PID/stat), or None when
    there is none or only its zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else int(fields[19])


def _alive(started: dict[int, int | None]) -> list[int]:
    """Which of the processes that ``started`` (pid: start time) are still there."""
    return [pid for pid, at in started.items() if at is not None and _started(pid) == at]


def _read_to_end(pipes, deadline: float) -> bool:
    """Read ``pipes`` until each ends or ``deadline`` (time.monotonic) passes; whether each
    ended."""
    with selectors.DefaultSelector() as selector:
        for pipe in pipes:
            selector.register(pipe.fileno(), selectors.EVENT_READ)
        while selector.get_map() and (left := deadline - time.monotonic()) > 0:
            for key, _ in selector.select(left):
                if not os.read(key.fd, 65536):
                    selector.unregister(key.fd)
        return not selector.get_map()


def test_a_killed_publish_leaves_no_process_behind_nor_its_callers_pipes_open(tmp_path,
                                                                             monkeypatch):
    """A CLI publish SIGKILLed mid-partition.  Its two workers, their fork server and
    multiprocessing's resource tracker stayed up for minutes (the workers blocked on their
    job queue, the others kept up by them), each holding the caller's stdout and stderr: a
    caller reading them waited as long.  Within 5 s of the kill, every process of the tree
    is gone (a pid counts only with the start time it had) and both pipes end."""
    publishing, tree, workers = _partitioning(tmp_path, monkeypatch)
    started = {pid: _started(pid) for pid in tree[1:]}
    killed = time.monotonic()
    publishing.kill()
    try:
        ended = _read_to_end([publishing.stdout, publishing.stderr], killed + 5)
        while _alive(started) and time.monotonic() < killed + 5:
            time.sleep(0.05)
        assert len(workers) == 2 and len(tree) == 5  # and a fork server, a resource tracker
        assert _alive(started) == [] and ended
    finally:
        for pid in _alive(started):  # left running by a failure of this test
            os.kill(pid, signal.SIGKILL)
        publishing.wait()


def test_partition_workers_hold_no_descriptor_of_the_locked_store(tmp_path, monkeypatch):
    """A worker that held the publishing process's descriptors (a forked one does) would keep
    the store's publish lock, a flock on the store directory, past a SIGKILL of the publisher:
    every later publish refused until the worker died.  Each worker and the process it was
    forked from is searched for a descriptor of the store directory while the lock is held."""
    from cocktail.overlay.layout import cluster_records
    from cocktail.publish import writer

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    from measure import descendants  # the benchmarks' walk of a process tree

    records = load(dataset_path("bms-webview-1.dat")).head(4000).records
    clusters = [cluster_records(records, list(range(s, s + 500))) for s in range(0, 4000, 500)]
    monkeypatch.setattr(writer, "PARALLEL_FROM_RECORDS", 0)
    store = LocalStore(tmp_path / "s")
    with store.publish_lock():
        results = writer.partitions(clusters, PublishParams(k=5, m=3), 2, len(records))
        next(results)  # the pool is running
        processes = descendants(os.getpid())[1:]  # not this process
        holders = [pid for pid in processes for fd in Path(f"/proc/{pid}/fd").iterdir()
                   if os.path.realpath(fd) == str(store.root.resolve())]
        assert len(list(results)) == len(clusters) - 1
    assert len(processes) >= 2 and holders == []


def test_a_store_read_by_the_format_doc_alone(tmp_path):
    """Issue 66, items 24-26 and 28: a second reader written from docs/publication-format.md
    once found the doc out of step with the files. This one reads a store (a release, then an
    append that buffers records) by the doc's rules alone, with hashlib, cryptography,
    pyroaring and json: the owner key, the record segments and their keys, the units of
    records.jsonl, every pseudonym recomputed, and the term index's parts. The doc states each
    rule used here."""
    doc = " ".join((REPO / "docs" / "publication-format.md").read_text().split())
    for rule in ("`records` is an object", "`[record id, unit]`", "read **big-endian**",
                 "8 bytes **little-endian**", "(hex-decoded)", "its 16 ASCII characters",
                 "its first 10 bytes, written as 20 lower-case hex digits",
                 "`terms/<a>-<b>.roaring`", "`terms/<a>-<b>.order`", "`terms/parts.json`",
                 "the record at index position `i` is `order[i - a]`"):
        assert rule in doc, rule
    import hashlib
    import struct

    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from pyroaring import BitMap

    from cocktail.publish.append import append

    whole = load(dataset_path("bms-webview-1.dat"))
    records = list(whole.records[:3030])
    store = LocalStore(tmp_path / "s")
    publish(Dataset(whole.ids[:3000], whole.records[:3000], "memory", "jsonl"), store,
            PublishParams(k=5, m=2))
    assert append(Dataset(whole.ids[3000:3030], whole.records[3000:3030], "memory", "jsonl"),
                  store, min_new=500).buffered_records  # pools under 500 records wait
    private = tmp_path / "s" / "private"
    version = (tmp_path / "s" / "public" / "CURRENT").read_text().strip()
    manifest = json.loads((private / version / "manifest.json").read_text())

    # the owner key: 64 hex digits and a newline, the 32 bytes they encode
    text = (private / "owner.key").read_text()
    assert len(text) == 65 and text.endswith("\n")
    owner_key = bytes.fromhex(text)

    # records: an object, count and segments; records.jsonl: [record id, unit]
    assert set(manifest["records"]) == {"count", "segments"}
    ids, units = [], {u["id"]: u for u in manifest["units"]}
    for segment in manifest["records"]["segments"]:
        name = "records.jsonl" if segment["start"] == 0 else f"records.{segment['start']}.jsonl"
        rows = [json.loads(line) for line in
                (private / segment["home"] / name).read_text().splitlines()]
        assert len(rows) == segment["stop"] - segment["start"]
        ids += [rid for rid, _ in rows]
        kinds = {units[unit]["kind"] for _, unit in rows}
        assert kinds <= {"leaf", "new", "buffer"}, kinds
        if segment["start"] == 3000:
            assert "buffer" in kinds  # a buffered record names the buffer's unit
        if "keys" in segment:  # big-endian numbers of 8 digest bytes, stored little-endian
            data = (private / segment["keys"] / f"records.{segment['start']}.keys").read_bytes()
            magic = b"cocktail-record-keys/1\n"
            assert data.startswith(magic)
            body = data[len(magic):]
            stored = list(struct.unpack(f"<{len(body) // 8}Q", body))
            assert stored == sorted(int.from_bytes(hashlib.sha256(rid.encode()).digest()[:8],
                                                   "big") for rid, _ in rows)
    assert len(ids) == manifest["records"]["count"] == 3030
    assert ids == list(whole.ids[:3030])

    # every pseudonym, from the owner key, the chunk id's ASCII and the id's SHA-256
    checked = 0
    for unit in manifest["units"]:
        home = unit.get("map", version)
        for row in (private / home / "pseudonyms" / f"{unit['id']}.tsv").read_text().splitlines():
            chunk_id, pseudonym, position = row.split("\t")[:3]
            chunk_key = hashlib.blake2b(chunk_id.encode("ascii"), key=owner_key,
                                        digest_size=16, person=b"chunk key").digest()
            block = hashlib.sha256(ids[int(position)].encode("utf-8")).digest()[:16]
            encryptor = Cipher(algorithms.AES(chunk_key), modes.ECB()).encryptor()
            assert (encryptor.update(block) + encryptor.finalize())[:10].hex() == pseudonym
            checked += 1
    assert checked == sum(chunk["subrecords"] for chunk in manifest["chunks"].values())

    # the term index: parts.json is the manifest's term_index; the parts tile the records
    listed = json.loads((private / version / "terms" / "parts.json").read_text())
    assert listed == manifest["term_index"] and listed["records"] == 3030
    assert {part["home"] for part in listed["parts"]} == {"v000001", version}  # by reference
    at = 0
    for part in listed["parts"]:
        a, b = part["start"], part["stop"]
        assert a == at and part["files"] == [f"terms/{a}-{b}.roaring"]
        assert part["order"] == f"terms/{a}-{b}.order"
        home = private / part["home"]
        data, order = (home / part["files"][0]).read_bytes(), (home / part["order"]).read_bytes()
        assert [hashlib.sha256(data).hexdigest()] == part["sha256"]
        assert hashlib.sha256(order).hexdigest() == part["order_sha256"]
        assert order.startswith(b"cocktail-terms-order/1\n")
        body = order[len(b"cocktail-terms-order/1\n"):]
        numbering = struct.unpack(f"<{b - a}I", body)
        assert sorted(numbering) == list(range(a, b))
        magic, header_line, rest = data.split(b"\n", 2)
        assert magic == b"cocktail-terms/1"
        header = json.loads(header_line)
        assert (header["start"], header["stop"]) == (a, b)
        assert [t for t, _ in header["terms"]] == sorted(t for t, _ in header["terms"])
        offset = 0
        for term, size in header["terms"]:
            index_positions = BitMap.deserialize(rest[offset:offset + size])
            offset += size
            held = {numbering[i - a] for i in index_positions}
            assert held == {p for p in range(a, b) if term in records[p]}, term
        assert offset == len(rest)
        at = b
    assert at == listed["records"]
