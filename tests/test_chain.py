"""Chains of Cocktail publications: `cocktail republish` derives a stricter view from a public
view alone, `cocktail audit --chain` checks every hop and that each is nested in the one
before; non-nested hops compose (the notes' {a,c|b} then {a,b|c} fixture, attacked by brute
force)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from click.testing import CliRunner

from cocktail.attacks.joint_view import ChunkView, attack
from cocktail.audit import audit, public_view
from cocktail.cli import main
from cocktail.publish.republish import write_view
from cocktail.store import LocalStore

RUN = CliRunner()


def cli(*args: str) -> tuple[int, dict]:
    result = RUN.invoke(main, [*args, "--json"])
    return result.exit_code, json.loads(result.output)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("chain")
    data = root / "d.dat"
    assert RUN.invoke(main, ["generate", str(data), "--records", "3000", "--seed", "1"]
                      ).exit_code == 0
    assert cli("publish", str(data), "--store", str(root / "s1"), "--k", "5", "--m", "2")[0] == 0
    return root


def content(store) -> Counter:
    """A view's canonical content: each chunk's subrecord multiset."""
    _, _, chunks = public_view(LocalStore(store))
    return Counter(frozenset(Counter(frozenset(s) for _, s in rows).items())
                   for _, _, rows in chunks)


def test_a_republished_chain_is_stricter_audited_and_nested(source):
    s1, s2, s3 = source / "s1", source / "a2", source / "a3"
    code, hop2 = cli("republish", "--from", str(s1), "--to", str(s2), "--k", "10", "--m", "2")
    assert code == 0 and hop2["public_occurrences"] <= hop2["source_occurrences"]
    assert cli("republish", "--from", str(s2), "--to", str(s3), "--k", "20", "--m", "3")[0] == 0
    for store, k, m in ((s2, 10, 2), (s3, 20, 3)):
        report = audit(LocalStore(store))  # the independent verifier, at the hop's own level
        assert report.ok and (report.k, report.m) == (k, m)
    code, chain = cli("audit", "--chain", str(s1), str(s2), str(s3))
    assert code == 0 and chain["ok"] and chain["violations"] == []
    assert LocalStore(s3).list("private", "v000001") == ["derived.json"]  # no owner data


def test_a_laxer_hop_is_refused_and_nothing_written(source):
    code, body = cli("republish", "--from", str(source / "s1"), "--to", str(source / "lax"),
                     "--k", "4", "--m", "2")
    assert code == 2 and "laxer" in body["error"]
    assert not (source / "lax" / "public" / "CURRENT").exists()


def test_two_runs_share_content_and_no_pseudonym(source):
    runs = [source / "r1", source / "r2"]
    for run in runs:
        cli("republish", "--from", str(source / "s1"), "--to", str(run), "--k", "10", "--m", "2")
    assert content(runs[0]) == content(runs[1])
    names = [{n for _, _, rows in public_view(LocalStore(r))[2] for n, _ in rows} for r in runs]
    assert names[0] and not names[0] & names[1]
    for _, _, rows in public_view(LocalStore(runs[0]))[2]:
        assert [n for n, _ in rows] == sorted(n for n, _ in rows)


# The notes' cluster D = {a}, {a}, {b}, {c}, {b,c} at k = m = 2.
D = [{"a"}, {"a"}, {"b"}, {"c"}, {"b", "c"}]


def chunking(*parts: set[str]) -> list[list[tuple[str, list[str]]]]:
    return [[(f"r{i}", sorted(part & r)) for i, r in enumerate(D) if part & r] for part in parts]


def views(*stores) -> list[list[ChunkView]]:
    return [[ChunkView(terms, Counter(frozenset(s) for _, s in rows))
             for _, terms, rows in public_view(LocalStore(store))[2]] for store in stores]


def test_non_nested_hops_compose_and_are_refused(tmp_path):
    first, second = tmp_path / "ac_b", tmp_path / "ab_c"
    write_view(LocalStore(first), chunking({"a", "c"}, {"b"}), 2, 2, {})
    write_view(LocalStore(second), chunking({"a", "b"}, {"c"}), 2, 2, {})
    for store in (first, second):
        assert audit(LocalStore(store)).ok  # each alone is 2^2-anonymous
    found = attack(views(first, second), records=len(D), k=2, m=2)
    assert found.composition == {("b", "c"): 1}  # pinned only by the pair
    code, chain = cli("audit", "--chain", str(first), str(second))
    assert code == 1 and not chain["ok"]
    assert any("is not a projection" in v for v in chain["violations"])


def test_a_republished_hop_adds_nothing_to_the_joint_view(tmp_path):
    first, derived = tmp_path / "ac_b", tmp_path / "derived"
    write_view(LocalStore(first), chunking({"a", "c"}, {"b"}), 2, 2, {})
    assert cli("republish", "--from", str(first), "--to", str(derived), "--k", "2",
               "--m", "2")[0] == 0
    assert attack(views(first, derived), records=len(D), k=2, m=2).composition == {}
    assert cli("audit", "--chain", str(first), str(derived))[1]["ok"]
