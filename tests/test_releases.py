"""Successive releases: the composition counterexample, the refusal to re-partition, the log."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from click.testing import CliRunner

from cocktail import anonymity
from cocktail.anonymity import Partition
from cocktail.attacks.joint_view import ChunkView, TooLarge, attack
from cocktail.audit import audit, audit_releases
from cocktail.cli import main
from cocktail.dataset import Dataset
from cocktail.publication import PublishParams, current_version, publish
from cocktail.releases import RebaseRefused, read_log
from cocktail.store import LocalStore

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
    with pytest.raises(RebaseRefused, match="compose.*--rebase"):
        publish(COUNTEREXAMPLE, store, PublishParams(k=2, m=2, method="ab|c"))
    assert current_version(store) == "v000001" and [e["kind"] for e in read_log(store)] == \
        ["fresh"]
    publish(COUNTEREXAMPLE, store, PublishParams(k=2, m=2, method="ab|c"), rebase=True)
    assert audit(store).ok  # each release alone passes
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


def test_the_cli_refuses_a_second_publish_without_rebase(tmp_path):
    data, store = tmp_path / "d.dat", tmp_path / "s"
    data.write_text("a b\na b\na c\nb c\na\nb\n" * 3)
    assert CliRunner().invoke(main, ["publish", str(data), "--store", str(store), "--k", "2",
                                     "--m", "2"]).exit_code == 0
    again = CliRunner().invoke(main, ["publish", str(data), "--store", str(store), "--k", "2"])
    assert again.exit_code == 2 and "--rebase" in again.output and "compose" in again.output
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
