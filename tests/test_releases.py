"""Successive releases: the composition counterexample, the refusal to re-partition, the log."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest
from click.testing import CliRunner

from cocktail import anonymity
from cocktail import chunkformat as fmt
from cocktail.anonymity import Partition
from cocktail.attacks.joint_view import ChunkView, TooLarge, attack
from cocktail.audit import audit, audit_releases
from cocktail.cli import main
from cocktail.dataset import Dataset, load
from cocktail.publish import PublishParams, publish
from cocktail.publish.append import append
from cocktail.query import Engine, Publication
from cocktail.querylang import CountQuery
from cocktail.releases import (RebaseRefused, committed_versions, current_version, prune,
                               read_log)
from cocktail.store import LocalStore, StoreError
from cocktail.synthetic import random_conjunctions

from .conftest import dataset_path

f = frozenset
# The propagation paper's analysis: each chunking 2^2-anonymous, together they pin supp{b,c}.
CLUSTER = [f("a"), f("a"), f("b"), f("c"), f("bc")]
COUNTEREXAMPLE = Dataset(tuple(f"r{i}" for i in range(5)), tuple(CLUSTER), "memory", "jsonl")


def view(chunks: list[str]) -> list[ChunkView]:
    return [ChunkView(f(t), Counter(r & f(t) for r in CLUSTER if r & f(t))) for t in chunks]


def test_the_joint_view_attacker_pins_the_counterexample_and_nothing_else():
    independent = attack([view(["ac", "b"]), view(["ab", "c"])], records=5, k=2, m=2)
    assert independent.composition == {("b", "c"): 1}
    assert independent.pinned_alone == {}  # each chunking alone is safe
    assert independent.datasets == 1       # the pair fixes the whole cluster
    derived = attack([view(["ac", "b"]), view(["a", "c", "b"])], records=5, k=2, m=2)
    assert derived.composition == {} and derived.datasets == 2
    with pytest.raises(TooLarge):
        attack([view(["ac", "b"])], records=40, k=2, m=2)


@pytest.fixture
def fixed_chunkings(monkeypatch):
    """Two partitioners that return the counterexample's two chunkings."""
    monkeypatch.setitem(anonymity.METHODS, "ac|b", lambda r, k, m: Partition((f("ac"), f("b")),
                                                                              f()))
    monkeypatch.setitem(anonymity.METHODS, "ab|c", lambda r, k, m: Partition((f("ab"), f("c")),
                                                                              f()))


def test_a_fresh_re_partition_is_refused_and_a_rebase_is_caught(tmp_path, fixed_chunkings):
    store = LocalStore(tmp_path / "s")
    publish(COUNTEREXAMPLE, store, PublishParams(k=2, m=2, method="ac|b"))
    alone = CliRunner().invoke(main, ["audit", "--releases", "--store", str(store.root)])
    assert alone.exit_code == 0 and "0 cluster" not in alone.stdout
    assert "no cluster's public view changed between releases" in alone.stdout
    with pytest.raises(RebaseRefused, match="compose.*--rebase"):
        publish(COUNTEREXAMPLE, store, PublishParams(k=2, m=2, method="ab|c"))
    assert current_version(store) == "v000001" and [e["kind"] for e in read_log(store)] == \
        ["fresh"]
    publish(COUNTEREXAMPLE, store, PublishParams(k=2, m=2, method="ab|c"), rebase=True)
    assert audit(store).ok  # each release alone passes
    human = CliRunner().invoke(main, ["audit", "--releases", "--store", str(store.root)])
    assert "joint-view attacker joined the views of 1 cluster shown differently" in human.stdout
    result = CliRunner().invoke(main, ["audit", "--releases", "--store", str(store.root),
                                       "--json"])
    report = json.loads(result.stdout)
    assert result.exit_code == 1
    assert report["pinned"] == [{"releases": ["v000001", "v000002"], "records": 5,
                                 "itemset": ["b", "c"], "support": 1}]
    kinds = Counter(v["kind"] for v in report["violations"])
    assert kinds == {"release-invariant": 3, "composition": 1}
    missing = [v["where"] for v in report["violations"] if "missing" in v["detail"]]
    assert len(missing) == 2 and all(w.startswith("v000001→v000002 cluster 0 chunk ") for w in
                                     missing)


def test_one_release_has_nothing_to_pair_or_attack(tmp_path):
    """The release audit's counts say what it did: one release has no pair to check and no
    cluster seen twice to attack; each chunk file the log lists is checked."""
    store = LocalStore(tmp_path / "s")
    publish(COUNTEREXAMPLE, store, PublishParams(k=2, m=2))
    history = audit_releases(store)
    assert history.ok and len(history.releases) == 1
    assert (history.pairs_checked, history.clusters_attacked, history.clusters_too_large) == \
        (0, 0, 0)
    assert history.files_checked == len(read_log(store)[0]["chunks"]) > 0


def test_the_cli_refuses_a_second_publish_without_rebase(tmp_path):
    data, store = tmp_path / "d.dat", tmp_path / "s"
    data.write_text("a b\na b\na c\nb c\na\nb\n" * 3)
    assert CliRunner().invoke(main, ["publish", str(data), "--store", str(store), "--k", "2",
                                     "--m", "2"]).exit_code == 0
    again = CliRunner().invoke(main, ["publish", str(data), "--store", str(store), "--k", "2"])
    assert again.exit_code == 3 and "--rebase" in again.output and "compose" in again.output
    rebased = CliRunner().invoke(main, ["publish", str(data), "--store", str(store), "--k", "2",
                                        "--rebase", "--keep", "1", "--json"])
    assert rebased.exit_code == 0, rebased.output
    # Pruning frees space, but the log keeps the pruned release for the auditor.
    assert [e["version"] for e in read_log(LocalStore(store))] == ["v000001", "v000002"]
    assert not LocalStore(store).exists("public", "v000001")
    history = audit_releases(LocalStore(store))
    assert history.files_checked == len(read_log(LocalStore(store))[1]["chunks"])
    assert any("re-partitioned" in v.detail for v in history.violations)


def test_a_store_from_before_the_log_starts_its_history_with_an_imported_release(tmp_path):
    store = LocalStore(tmp_path / "s")
    publish(COUNTEREXAMPLE, store, PublishParams(k=2, m=2))
    store.remove("private", "releases")  # as a store published before release logging
    store.write("private", "releases/v000009.json", b"{}", pri_label=True)  # never current
    publish(COUNTEREXAMPLE, store, PublishParams(k=2, m=2), rebase=True)
    log = read_log(store)
    assert [(e["version"], e["kind"]) for e in log] == [("v000001", "imported"),
                                                        ("v000002", "rebase")]
    assert log[0]["chunks"] and all(c["added"] for c in log[0]["chunks"].values())
    assert audit_releases(store).pairs_checked == 1


# -- appending ----------------------------------------------------------------------------

def dataset(records, ids, fmt="jsonl") -> Dataset:
    return Dataset(tuple(ids), tuple(f(r) for r in records), "memory", fmt)


def test_an_appended_pair_of_the_counterexample_composes_to_nothing(tmp_path, fixed_chunkings):
    store = LocalStore(tmp_path / "s")
    publish(COUNTEREXAMPLE, store, PublishParams(k=2, m=2, method="ac|b"))
    more = dataset(["a", "a", "b", "c", "bc"], [f"n{i}" for i in range(5)])
    report = append(more, store)
    assert report.extended_records == 5 and report.buffered_records == 0
    assert audit(store).ok
    history = audit_releases(store)
    assert history.ok and history.pinned == [] and history.pairs_checked == 1
    # The later release shows the earlier one's chunks, old lines unchanged, new ones added.
    first, second = read_log(store)
    assert set(first["chunks"]) == set(second["chunks"])
    assert all(second["chunks"][c]["carried_sha256"] == first["chunks"][c]["sha256"]
               for c in first["chunks"])


@pytest.mark.parametrize("origin,told", [("0", "added again to"), ("1", "moved into")])
def test_an_earlier_record_listed_among_an_appends_additions_is_caught(tmp_path, origin, told):
    """A release log whose append lists one record of the first release among what cluster 0
    gained: a record of cluster 0 itself (added again), or of cluster 1 (moved).  Either alone
    breaks the release invariant, and `audit --releases` says which."""
    records = ["ab", "ab", "ac", "bc", "a", "b", "c", "abc"] * 4
    store = LocalStore(tmp_path / "s")
    publish(dataset(records, [f"r{i}" for i in range(32)]), store,
            PublishParams(k=2, m=2, cluster_size=8))
    append(dataset(records, [f"n{i}" for i in range(32)]), store)
    first, second = (json.loads(store.read("private", f"releases/{v}.json"))
                     for v in ("v000001", "v000002"))
    assert {"0", "1"} <= set(first["units"]) and audit_releases(store).ok
    second["units"]["0"]["added_members"].append(first["units"][origin]["added_members"][0])
    store.write("private", "releases/v000002.json", json.dumps(second).encode(), pri_label=True)
    result = CliRunner().invoke(main, ["audit", "--releases", "--store", str(store.root),
                                       "--json"])
    assert result.exit_code == 1
    assert [(v["kind"], v["where"], v["detail"]) for v in json.loads(result.stdout)["violations"]
            ] == [("release-invariant", "v000001→v000002 cluster 0",
                   f"1 record(s) of earlier releases {told} this cluster")]


def slices(data: Dataset, parts: int) -> list[Dataset]:
    cuts = [len(data) * i // parts for i in range(parts + 1)]
    return [Dataset(data.ids[a:b], data.records[a:b], data.source, "jsonl")
            for a, b in zip(cuts, cuts[1:])]


def test_bms_webview_1_in_five_batches(tmp_path):
    """Publish the first fifth, append the other four: every release audits clean, together
    too; exact answers equal brute force on everything; public coverage within 1 point of
    one fresh publish of the whole file."""
    whole = load(dataset_path("bms-webview-1.dat"))
    store = LocalStore(tmp_path / "s")
    first, *rest = slices(whole, 5)
    publish(first, store, PublishParams(k=5, m=3))
    reports = [append(batch, store) for batch in rest]
    assert [r.version for r in reports] == ["v000002", "v000003", "v000004", "v000005"]
    assert all(r.extended_records > 0 and r.new_clusters > 0 for r in reports)
    assert audit(store).ok
    history = audit_releases(store)
    assert history.ok and history.pairs_checked == 4, history.violations[:3]
    publication = Publication.open(store)
    queries = [CountQuery(q) for q in random_conjunctions(whole.records, 300, seed=3)]
    assert Engine(publication).counts(queries) == [whole.count_containing(q.terms)
                                                  for q in queries]
    fresh = publish(whole, LocalStore(tmp_path / "fresh"), PublishParams(k=5, m=3))
    assert reports[-1].public_coverage >= (1 - fresh.private_term_share) - 0.01


def test_small_appends_wait_in_the_buffer_and_are_counted(tmp_path):
    whole = load(dataset_path("bms-webview-1.dat")).head(6000)
    store = LocalStore(tmp_path / "s")
    base, small, large = whole.head(4000), slices(whole, 30)[20], slices(whole, 6)[5]
    publish(Dataset(base.ids, base.records, "memory", "jsonl"), store, PublishParams(k=5, m=3))
    waiting = append(small, store, min_new=1000)
    assert waiting.buffered_records > 0 and waiting.new_clusters == 0
    so_far = Dataset(base.ids + small.ids, base.records + small.records, "memory", "jsonl")
    publication = Publication.open(store)
    queries = [CountQuery(q) for q in random_conjunctions(so_far.records, 100, seed=5)]
    assert Engine(publication).counts(queries) == [so_far.count_containing(q.terms)
                                                  for q in queries]
    placed = append(large, store, min_new=10)
    assert placed.buffered_records == 0 and placed.new_cluster_records >= waiting.buffered_records
    everything = Dataset(so_far.ids + large.ids, so_far.records + large.records, "memory",
                         "jsonl")
    publication = Publication.open(store)
    assert Engine(publication).counts(queries) == [everything.count_containing(q.terms)
                                                  for q in queries]
    assert audit(store).ok and audit_releases(store).ok


def test_bad_appends_are_refused(tmp_path):
    store = LocalStore(tmp_path / "s")
    with pytest.raises(StoreError, match="no publication yet: publish one first"):
        append(COUNTEREXAMPLE, store)
    publish(COUNTEREXAMPLE, store, PublishParams(k=2, m=2))
    with pytest.raises(ValueError, match="record id 'r3' is already published"):
        append(dataset(["a", "b"], ["new-1", "r3"]), store)
    fimi = dataset(["a", "b"], ["1", "2"], fmt="fimi")  # line numbers are not ids: renamed
    assert append(fimi, store).appended_records == 2
    cli = CliRunner().invoke(main, ["publish", "x.dat", "--append", "--k", "3", "--store",
                                    str(store.root)])
    assert cli.exit_code == 2 and "drop --k" in cli.output


CRASHING_APPEND = """
import sys
from cocktail.dataset import Dataset, load
from cocktail.publish.append import append
from cocktail.store import LocalStore
whole = load(sys.argv[1])
half = len(whole) // 2
append(Dataset(whole.ids[half:], whole.records[half:], "memory", "jsonl"), LocalStore(sys.argv[2]))
"""


def test_a_killed_append_leaves_the_previous_release_current(tmp_path):
    data = dataset_path("bms-webview-1.dat")
    whole = load(data)
    half = len(whole) // 2
    store = LocalStore(tmp_path / "s")
    publish(Dataset(whole.ids[:half], whole.records[:half], "memory", "jsonl"), store,
            PublishParams(k=5, m=3))
    staging = tmp_path / "s" / "public" / ".staging-v000002" / "chunks"
    process = subprocess.Popen([sys.executable, "-c", CRASHING_APPEND, str(data),
                                str(store.root)])
    deadline = time.monotonic() + 120
    while not (staging.exists() and len(os.listdir(staging)) > 50):
        assert process.poll() is None, "the append ended before it could be interrupted"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert current_version(store) == "v000001"
    assert [e["version"] for e in read_log(store, "v000001")] == ["v000001"]
    assert audit(store).ok and audit_releases(store).ok
    retried = append(Dataset(whole.ids[half:], whole.records[half:], "memory", "jsonl"), store)
    assert retried.version == "v000002" and audit_releases(store).ok


def test_the_append_workflow_on_the_command_line(tmp_path):
    first, second, store = tmp_path / "day1.dat", tmp_path / "day2.dat", tmp_path / "s"
    CliRunner().invoke(main, ["generate", str(first), "--records", "3000", "--seed", "1"])
    CliRunner().invoke(main, ["generate", str(second), "--records", "1500", "--seed", "2"])
    assert CliRunner().invoke(main, ["publish", str(first), "--store", str(store), "--k", "4",
                                     "--m", "2"]).exit_code == 0
    result = CliRunner().invoke(main, ["publish", str(second), "--store", str(store),
                                       "--append", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert {"appended_records", "extended_clusters", "new_clusters", "buffered_records",
            "public_chunks", "public_coverage", "seconds"} <= set(report)
    assert report["appended_records"] == 1500 and report["version"] == "v000002"
    history = CliRunner().invoke(main, ["audit", "--releases", "--store", str(store), "--json"])
    assert history.exit_code == 0 and json.loads(history.stdout)["pairs_checked"] == 1
    assert CliRunner().invoke(main, ["publish", str(second), "--store", str(store),
                                     "--min-new", "5"]).exit_code == 2


def test_terms_holding_line_separators_round_trip(tmp_path):
    """One data subject's U+2028 must not make every file holding it unreadable."""
    base = load(dataset_path("bms-webview-1.dat")).head(3000)
    store = LocalStore(tmp_path / "s")
    publish(Dataset(base.ids, base.records, "memory", "jsonl"), store, PublishParams(k=5, m=3))
    odd = ["a\u2028b", "c\u0085d", "e\u2029f", "g\x1ch", "i\rj"]
    extra = [{"id": f"odd-{i}", "terms": odd[:i % 5 + 1] + sorted(base.records[i])[:1]}
             for i in range(40)]
    lines = tmp_path / "odd.jsonl"
    lines.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in extra))
    appended = CliRunner().invoke(main, ["publish", str(lines), "--append", "--min-new", "1",
                                         "--store", str(store.root)])
    assert appended.exit_code == 0, appended.output
    whole = base.records + tuple(f(r["terms"]) for r in extra)
    queries = [CountQuery((t,)) for t in odd] + [CountQuery(tuple(odd[:2]))]
    assert Engine(Publication.open(store)).counts(queries) == [
        sum(1 for r in whole if set(q.terms) <= r) for q in queries]
    cli = CliRunner().invoke(main, ["query", "--exact", str(queries[0]), "--store",
                                    str(store.root), "--json"])
    assert cli.exit_code == 0 and json.loads(cli.stdout)["answer"] == 40, cli.output
    assert audit(store).ok


def test_an_append_leaves_no_access_time_on_what_it_read(tmp_path):
    whole = load(dataset_path("bms-webview-1.dat")).head(4000)
    store = LocalStore(tmp_path / "s")
    publish(whole.head(3000), store, PublishParams(k=5, m=3))
    old = {p: p.stat().st_ino for p in (tmp_path / "s" / "public" / "v000001").rglob("*")
           if p.is_file()}
    for path in old:  # an atime before the mtime: any read moves it, even under relatime
        os.utime(path, (1000, path.stat().st_mtime))
    # the records that extend no cluster wait in the buffer: what is written is what changed
    extended = append(Dataset(whole.ids[3000:], whole.records[3000:], "memory", "jsonl"), store,
                      min_new=len(whole))
    assert extended.extended_clusters > 0 and extended.new_clusters == 0
    assert all(p.stat().st_ino == inode for p, inode in old.items())
    read = [p for p in old if p.stat().st_atime != 1000]
    assert read == []
    # Unchanged chunks are carried by reference: the new version holds only what it rewrote.
    written = [p for p in (tmp_path / "s" / "public" / "v000002").rglob("*") if p.is_file()]
    assert 1 < len(written) < len(old) // 2


def test_pruning_keeps_exactly_what_later_versions_reference(tmp_path):
    """With --keep 1, each append prunes the version before it: only the files the current
    version still references survive in older directories, which are no longer versions."""
    whole = load(dataset_path("bms-webview-1.dat")).head(5000)
    store = LocalStore(tmp_path / "s")
    first, *rest = slices(whole, 4)
    publish(first, store, PublishParams(k=5, m=3, keep=1))
    for batch in rest:
        append(batch, store)
        assert committed_versions(store) == [current_version(store)]
    publication = Publication.open(store)
    referenced = {("public" if not c.private else "private", fmt.chunk_path(c.home, c.id))
                  for c in publication.chunks.values()}
    for zone in ("public", "private"):
        for path in (tmp_path / "s" / zone).rglob("*.tsv"):
            relative = path.relative_to(tmp_path / "s" / zone).as_posix()
            if "/chunks/" in relative and not relative.startswith(publication.version):
                assert (zone, relative) in referenced, relative
    assert audit(store).ok and audit_releases(store).ok
    queries = [CountQuery(q) for q in random_conjunctions(whole.records, 100, seed=9)]
    assert Engine(publication).counts(queries) == [whole.count_containing(q.terms)
                                                  for q in queries]
    publish(whole, store, PublishParams(k=5, m=3, keep=1), rebase=True)  # references nothing
    assert sorted(os.listdir(tmp_path / "s" / "public")) == ["CURRENT", "v000005"]


def test_ids_are_checked_against_every_segment_and_the_audit_checks_the_segments(tmp_path):
    store = LocalStore(tmp_path / "s")
    publish(COUNTEREXAMPLE, store, PublishParams(k=2, m=2))
    append(dataset(["a", "b", "ab"], ["n1", "n2", "n3"]), store, min_new=1)
    for taken in ("r2", "n3"):  # in the first segment (keys made now), in the appended one
        with pytest.raises(ValueError, match=f"record id '{taken}' is already published"):
            append(dataset(["a"], [taken]), store)
    segments = Publication.open(store).record_segments
    assert [(s["start"], s["stop"]) for s in segments] == [(0, 5), (5, 8)]
    assert all("keys" in s for s in segments)
    assert audit_releases(store).ok
    keys = tmp_path / "s" / "private" / segments[1]["keys"] / fmt.record_keys_name(5)
    keys.write_bytes(fmt.encode_record_keys(np.array([1, 2, 3], dtype=np.uint64)))
    records = tmp_path / "s" / "private" / segments[1]["home"] / fmt.records_name(5)
    records.write_bytes(records.read_bytes().split(b"\n", 1)[1])
    details = [v.detail for v in audit_releases(store).violations]
    assert any("exactly the keys" in d for d in details)
    assert any("the manifest says 3" in d for d in details)


def test_a_prune_never_removes_a_kept_versions_file_whatever_a_listing_names(tmp_path):
    """The files a version superseded are removed by the listing it keeps in the private
    zone; a listing that also names a file of a kept version (damaged, or written by another
    build) removes only the older ones: the kept version stays whole."""
    store = LocalStore(tmp_path / "s")
    publish(COUNTEREXAMPLE, store, PublishParams(k=2, m=2))
    append(dataset(["a", "b", "ab"], ["n1", "n2", "n3"]), store, min_new=1)
    kept = sorted(p.relative_to(tmp_path / "s" / "public").as_posix()
                  for p in (tmp_path / "s" / "public" / "v000002").rglob("*.tsv"))
    assert kept
    listing = f"v000002/{fmt.SUPERSEDED}"
    listed = json.loads(store.read("private", listing)) if store.exists("private", listing) \
        else {}
    listed.setdefault("public", []).append(kept[0])
    store.write("private", listing, fmt.encode_json(listed), pri_label=True)
    prune(store, "v000002", 1)
    assert committed_versions(store) == ["v000002"]
    assert (tmp_path / "s" / "public" / kept[0]).exists()
    assert audit(store).ok


@pytest.mark.parametrize("size", [0, 1, 2, (1 << 20) + 1, 3 << 20])
def test_a_staged_files_digest_covers_every_byte(tmp_path, size):
    """What a version's signature covers is the digest of each staged file read back in
    1 MiB pieces: every byte of it, a last piece of one byte included, and a file staged
    after it does not leak in."""
    from cocktail.releases.commit import Release
    release = Release(LocalStore(tmp_path / "s"), None)
    data = bytes(range(256)) * (size // 256) + b"\x07" * (size % 256)
    release.put("public", "manifest.json", [data[:5], data[5:]])
    release.put("public", "next.json", b"after")
    assert release.staged_sha256("public", "manifest.json") == hashlib.sha256(data).hexdigest()
    assert release.staged_sha256("public", "next.json") == hashlib.sha256(b"after").hexdigest()


def test_a_prune_cut_short_is_finished_by_the_next_one(tmp_path, monkeypatch):
    whole = load(dataset_path("bms-webview-1.dat")).head(4000)
    store = LocalStore(tmp_path / "s")
    first, second, third = slices(whole, 3)
    publish(first, store, PublishParams(k=5, m=3, keep=1))
    append(second, store)  # the first release's own files are pruned: half of them, say
    real_remove, calls = LocalStore.remove, []

    def failing(self, zone, path):
        calls.append(path)
        if len(calls) == 3:
            raise StoreError("the machine went down")
        real_remove(self, zone, path)

    monkeypatch.setattr(LocalStore, "remove", failing)
    with pytest.raises(StoreError, match="went down"):
        append(third, store)
    monkeypatch.setattr(LocalStore, "remove", real_remove)
    assert current_version(store) == "v000003" and committed_versions(store) == ["v000003"]
    queries = [CountQuery(q) for q in random_conjunctions(whole.records, 50, seed=4)]
    assert Engine(Publication.open(store)).counts(queries) == [whole.count_containing(q.terms)
                                                              for q in queries]
    # The superseded files not deleted yet are named, as files no manifest lists.
    stray = [v for v in audit(store).violations]
    assert stray and all(v.where.startswith(("v000001/", "v000002/")) and
                         "no manifest" in v.detail for v in stray)

    def older() -> list[str]:
        return sorted(p.as_posix() for p in (tmp_path / "s").rglob("*")
                      if p.is_file() and ("/v000001/" in p.as_posix() or "/v000002/" in
                                          p.as_posix()))

    leftover = older()
    prune(store, "v000003", 1)  # what the next commit runs: it finishes the cut-short one
    finished = older()
    assert len(finished) < len(leftover)
    assert not any(p.endswith("manifest.json") for p in finished)
    assert audit(store).ok and audit_releases(store).ok


def test_an_emptied_buffer_leaves_no_reference_to_dangle_and_the_audit_finds_one(tmp_path):
    """Issue 66, item 28: the map of a buffer an append emptied was superseded (so pruning
    deleted it) while later manifests still named it, and both audits passed. Through five
    releases, a buffer filled and emptied and versions pruned: every file a version names is
    there and `audit --releases` passes; then a file the current version names is removed
    and the release audit names it."""
    whole = load(dataset_path("bms-webview-1.dat"))
    cuts = [0, 3000, 3030, 8000, 12000, 16000]
    parts = [Dataset(whole.ids[a:b], whole.records[a:b], "memory", "jsonl")
             for a, b in zip(cuts, cuts[1:])]
    store = LocalStore(tmp_path / "s")
    publish(parts[0], store, PublishParams(k=5, m=2))
    # pools under 500 records wait: the 30 records of the first append fill the buffer
    added = [append(part, store, min_new=500) for part in parts[1:]]
    assert added[0].buffered_records and added[2].buffered_records == 0  # filled, emptied
    assert committed_versions(store)[0] != "v000001"  # pruned since
    report = audit_releases(store)
    assert report.ok, report.violations
    publication = Publication(store, current_version(store))
    buffer = next(u for u in publication.units if u["kind"] == "buffer" and not u["members"])
    path = fmt.pseudonym_map_path(publication.map_home(buffer["id"]), buffer["id"])
    assert store.exists("private", path)
    (tmp_path / "s" / "private" / path).unlink()
    dangling = [v for v in audit_releases(store).violations if v.where == f"private/{path}"]
    assert dangling and "dangling" in dangling[0].detail
