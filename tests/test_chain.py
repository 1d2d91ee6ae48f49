"""Chains of Cocktail publications: `cocktail republish` derives a stricter view from a public
view alone, `cocktail audit --chain` checks every hop and that each is nested in the one
before; non-nested hops compose (the {a,c|b} then {a,b|c} fixture of docs/papers.md, attacked by
brute force)."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from click.testing import CliRunner

from cocktail.attacks.joint_view import ChunkView, attack
from cocktail.audit import audit, km_violations, public_view
from cocktail.cli import main
from cocktail.publish.chain_plan import STRATEGIES, Cluster, Planner
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


# The cluster of docs/papers.md, D = {a}, {a}, {b}, {c}, {b,c} at k = m = 2.
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


# -- cocktail chain plan: the owner plans every hop ---------------------------------------------

def set_partitions(items: list[str]):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in set_partitions(rest):
        yield [[first], *part]
        for i in range(len(part)):
            yield [*part[:i], [first, *part[i]], *part[i + 1:]]


def km_ok(records, chunk, k: int, m: int) -> bool:
    """The independent verifier on the chunk's subrecords."""
    return not km_violations([sorted(r & chunk) for r in records if r & chunk], k, m, 10**9)[1]


def frequent(records, k: int) -> set[str]:
    return {t for t in set().union(*records) if sum(t in r for r in records) >= k}


def optimum(records, levels) -> int:
    """ΣU over every nested chain of partitions of each level's frequent terms, by brute force."""
    cluster = Cluster(records)
    options = [[[frozenset(b) for b in p] for p in set_partitions(sorted(frequent(records, k)))
                if all(km_ok(records, frozenset(b), k, m) for b in p)] for k, m in levels]
    best = 0

    def walk(hop, before, total):
        nonlocal best
        if hop == len(levels):
            best = max(best, total)
            return
        for chunking in options[hop]:
            if before is None or all(any(c <= b for b in before) for c in chunking):
                walk(hop + 1, chunking, total + cluster.utility(chunking))
    walk(0, None, 0)
    return best


def sums(records, levels) -> dict[str, int]:
    cluster, planner = Cluster(records), Planner()
    return {s: cluster.chain_utility(planner.plan(cluster, levels, s)) for s in STRATEGIES}


def baskets(*texts: str) -> list[frozenset[str]]:
    return [frozenset(t) for t in texts]


def test_lookahead_reaches_the_optimum_where_greedy_and_backward_fall_short():
    records = baskets("de", "abde", "abd", "bcd", "ab", "abcde", "bde", "bde")
    levels = [(2, 2), (3, 2), (4, 3)]
    assert sums(records, levels) == {"greedy": 24, "backward": 42, "lookahead": 54}
    assert optimum(records, levels) == 54


def test_lookahead_can_stay_below_the_optimum():
    records = baskets("cd", "abc", "acd", "a", "bcd", "acd")
    levels = [(2, 2), (3, 2)]
    assert sums(records, levels) == {"greedy": 4, "backward": 12, "lookahead": 12}
    assert optimum(records, levels) == 13  # a heuristic: the gap is 1 pair


def test_every_plan_is_nested_anonymous_and_lookahead_never_loses():
    rnd = random.Random(5)  # test data, not privacy code
    for _ in range(300):
        terms = "abcde"[:rnd.randint(3, 5)]
        records = [r for r in (frozenset(t for t in terms if rnd.random() < 0.5)
                               for _ in range(rnd.randint(5, 9))) if r]
        levels = rnd.choice([[(2, 2), (3, 2)], [(2, 1), (2, 2), (3, 2)], [(2, 2), (3, 2), (4, 3)]])
        cluster, planner = Cluster(records), Planner()
        for strategy in STRATEGIES:
            chain = planner.plan(cluster, levels, strategy)
            for hop, ((k, m), chunking) in enumerate(zip(levels, chain)):
                shown = [t for c in chunking for t in c]
                assert sorted(shown) == sorted(frequent(records, k))  # each once, none withheld
                assert all(km_ok(records, c, k, m) for c in chunking)
                if hop:
                    assert all(any(c <= b for b in chain[hop - 1]) for c in chunking)
        found = sums(records, levels)
        assert max(found["greedy"], found["backward"]) <= found["lookahead"]
        assert found["lookahead"] <= optimum(records, levels)


def test_a_planned_chain_is_written_audited_and_reported_truly(source):
    code, plan = cli("chain", "plan", "--store", str(source / "s1"), "--k", "5,10,20",
                     "--m", "2,2,3", "--strategy", "lookahead", "--out", str(source / "plan"))
    assert code == 0 and [(h["k"], h["m"]) for h in plan["hops"]] == [(5, 2), (10, 2), (20, 3)]
    hops = [source / "plan" / f"hop{i}" for i in (1, 2, 3)]
    code, chain = cli("audit", "--chain", *map(str, hops))
    assert code == 0 and chain["ok"]
    for hop, store in zip(plan["hops"], hops):
        _, _, chunks = public_view(LocalStore(store))
        subrecords = [sub for _, _, rows in chunks for _, sub in rows]
        assert hop["public_chunks"] == len(chunks)
        assert hop["public_occurrences"] == sum(map(len, subrecords))
        assert hop["utility"] == sum(len(s) * (len(s) - 1) // 2 for s in subrecords)
        assert LocalStore(store).list("private", hop["version"]) == ["derived.json"]
    utilities = [h["utility"] for h in plan["hops"]]
    assert plan["total_utility"] == sum(utilities) and utilities == sorted(utilities, reverse=True)
    greedy = cli("chain", "plan", "--store", str(source / "s1"), "--k", "5,10,20", "--m",
                 "2,2,3", "--strategy", "greedy")[1]
    assert greedy["total_utility"] <= plan["total_utility"]
    assert greedy["associations"] == plan["associations"] > plan["hops"][0]["utility"]


@pytest.mark.parametrize("ks, ms, message", [
    ("5,10", "2,2,3", "one (k, m) per hop"),
    ("10,5", "2,2", "laxer than hop 1"),
    ("5,10", "3,2", "laxer than hop 1"),
    ("5,x", "2,2", "not a comma-separated list"),
])
def test_a_bad_plan_is_refused_and_nothing_written(source, ks, ms, message):
    result = RUN.invoke(main, ["chain", "plan", "--store", str(source / "s1"), "--k", ks,
                               "--m", ms, "--out", str(source / "bad")])
    assert result.exit_code == 2 and message in result.output
    assert not (source / "bad").exists()


def test_a_plan_keeps_sensitive_terms_apart(tmp_path):
    data, sensitive = tmp_path / "d.dat", tmp_path / "sensitive.txt"
    data.write_text("".join(f"{i % 7} {i % 5 + 10} {i % 3 + 20}\n" for i in range(600)))
    sensitive.write_text("10\n11\n20\n")
    assert cli("publish", str(data), "--store", str(tmp_path / "s"), "--k", "5", "--m", "2",
               "--sensitive-terms", str(sensitive))[0] == 0
    assert cli("chain", "plan", "--store", str(tmp_path / "s"), "--k", "5,10", "--m", "2,2",
               "--out", str(tmp_path / "plan"))[0] == 0
    for hop in ("hop1", "hop2"):
        for _, terms, _ in public_view(LocalStore(tmp_path / "plan" / hop))[2]:
            assert not terms & {"10", "11", "20"} or terms <= {"10", "11", "20"}
