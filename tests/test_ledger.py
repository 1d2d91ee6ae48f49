"""Budgets: charged before any work, reused answers free, durable, and safe under concurrency."""

from __future__ import annotations

import json
import os
import multiprocessing
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from cocktail.dp.ledger import BudgetExhausted, Forbidden, Ledger, LedgerError, Unauthorized


def ask(ledger: Ledger, user, version: str, workload: str, value: float = 1.5) -> dict:
    """Reserve, then fulfil with ``value`` unless the role has an answer already."""
    ticket = ledger.reserve(user, version, workload)
    if ticket.state == "answered":
        return ledger.result(ticket)
    assert ticket.state == "reserved"
    return ledger.fulfil(ticket, {"answers": [value]})


def test_charges_reuse_and_limits(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=0.5, budget=1.0)
    alice = ledger.authenticate(ledger.add_user("alice", "analyst"))
    first = ask(ledger, alice, "v1", "count(a)", 7.25)
    assert first["charged"] == 0.5 and not first["reused"] and first["budget"]["remaining"] == 0.5
    again = ask(ledger, alice, "v1", "count(a)", 99.0)
    assert again["reused"] and again["charged"] == 0 and again["answers"] == [7.25]
    # Another user of the same role gets the same noisy answer, free: no averaging it away.
    bob = ledger.authenticate(ledger.add_user("bob", "analyst"))
    assert ask(ledger, bob, "v1", "count(a)")["answers"] == [7.25]
    ask(ledger, alice, "v1", "count(b)")
    with pytest.raises(BudgetExhausted, match="0 of 1 left"):
        ledger.reserve(alice, "v1", "count(c)")
    assert ledger.budget_status(alice)["spent"] == 1.0  # the refusal charged nothing
    # A new publication version is new data: the same text costs again.
    assert ask(ledger, bob, "v2", "count(a)")["charged"] == 0.5


def test_budget_arithmetic_has_no_float_dust(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=0.1, budget=1.0)
    user = ledger.authenticate(ledger.add_user("ann", "analyst"))
    for n in range(10):  # 0.1 added ten times is 0.9999999999999999 in floats
        ask(ledger, user, "v1", f"count(t{n})")
    status = ledger.budget_status(user)
    assert status["spent"] == 1.0 and status["remaining"] == 0.0
    with pytest.raises(BudgetExhausted, match="has 0 of 1 left"):
        ledger.reserve(user, "v1", "count(t10)")


def test_dataset_budget_caps_everyone(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=1.0, budget=10.0)
    users = [ledger.authenticate(ledger.add_user(f"u{i}", "analyst")) for i in range(3)]
    ledger.set_dataset_budget(0.0)  # the owner stops every fresh answer
    with pytest.raises(BudgetExhausted, match="dataset-wide"):
        ledger.reserve(users[0], "v1", "count(a)")
    ledger.set_dataset_budget(2.0)
    ask(ledger, users[0], "v1", "count(a)")
    ask(ledger, users[1], "v1", "count(b)")
    with pytest.raises(BudgetExhausted, match="dataset-wide"):
        ledger.reserve(users[2], "v1", "count(c)")
    assert ledger.budget_status()["dataset_spent"] == 2.0


def test_a_pending_answer_is_shared_and_an_abandoned_one_taken_over_without_a_new_charge(
        tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=0.25, budget=1.0)
    alice = ledger.authenticate(ledger.add_user("alice", "analyst"))
    bob = ledger.authenticate(ledger.add_user("bob", "analyst"))
    first = ledger.reserve(alice, "v1", "count(a)")
    assert first.state == "reserved" and first.charged == 0.25
    waiting = ledger.reserve(bob, "v1", "count(a)")
    assert waiting.state == "pending" and waiting.charged == 0
    assert ledger.wait(waiting, until=0.0) is None  # not stored yet
    ledger.abandon(first)  # the counts failed: nothing was released
    retry = ledger.reserve(bob, "v1", "count(a)")
    assert retry.state == "reserved" and retry.charged == 0
    stored = ledger.fulfil(retry, {"answers": [3.0]})
    late = ledger.fulfil(first, {"answers": [4.0]})  # first writer wins
    assert stored["answers"] == late["answers"] == [3.0]
    assert ledger.wait(waiting, until=None)["answers"] == [3.0]
    assert ledger.budget_status(alice)["spent"] == 0.25 and ledger.budget_status(bob)["spent"] == 0


def test_a_stale_reservation_is_taken_over(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=0.5, budget=1.0)
    user = ledger.authenticate(ledger.add_user("alice", "analyst"))
    ledger.reserve(user, "v1", "count(a)")  # the process then dies
    assert ledger.reserve(user, "v1", "count(a)").state == "pending"
    taken = ledger.reserve(user, "v1", "count(a)", stale_after=0.0)
    assert taken.state == "reserved" and taken.charged == 0
    assert ledger.budget_status(user)["spent"] == 0.5


RESERVE_AND_EXIT = """
import sys
from cocktail.dp.ledger import Ledger
ledger = Ledger(sys.argv[1])
assert ledger.reserve(ledger.authenticate(sys.argv[2]), "v1", "count(a)").state == "reserved"
"""


def test_a_reservation_whose_process_exited_unreaped_is_taken_over_at_once(tmp_path):
    """The reserving process exited before storing an answer, and its parent has not reaped
    it yet (a zombie: a server's worker whose supervisor is busy).  It is dead: the next
    request takes its reservation over now, with no second charge, instead of being told
    "pending" until the reservation goes stale (600 s)."""
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=0.5, budget=1.0)
    token = ledger.add_user("alice", "analyst")
    child = subprocess.Popen([sys.executable, "-c", RESERVE_AND_EXIT, str(ledger.path), token])
    try:
        exited = os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # left unreaped
        assert exited.si_status == 0
        user = ledger.authenticate(token)
        taken = ledger.reserve(user, "v1", "count(a)")
        assert taken.state == "reserved" and taken.charged == 0
        assert ledger.budget_status(user)["spent"] == 0.5
    finally:
        child.wait()


def test_a_dp_ranking_under_zcdp_spends_no_more_than_the_rho_it_is_charged(tmp_path):
    """A dp ranking is a pure-DP mechanism: under a zCDP role it runs at the α whose α²/2 is
    the role's ρ a query (an α-DP release is α²/2-zCDP); under a pure role at its α."""
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("gauss", alpha=0.18, budget=1.0, definition="zcdp")
    ledger.add_role("laplace", alpha=0.3, budget=1.0)
    gauss = ledger.authenticate(ledger.add_user("gil", "gauss"))
    assert gauss.pure_alpha ** 2 / 2 == pytest.approx(0.18)
    assert ledger.authenticate(ledger.add_user("lea", "laplace")).pure_alpha == 0.3


def test_tokens_names_and_disabled_users(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=0.1, budget=1.0)
    token = ledger.add_user("alice", "analyst")
    with pytest.raises(Unauthorized):
        ledger.authenticate(None)
    with pytest.raises(Unauthorized):
        ledger.authenticate(token + "x")
    ledger.set_active("alice", False)
    with pytest.raises(Forbidden):
        ledger.authenticate(token)
    with pytest.raises(LedgerError, match="no role"):
        ledger.add_user("bob", "nobody")
    for bad in ("eve\nroot", "\x1b[31mred", "", "a" * 65, "[bold]x", " lead"):
        with pytest.raises(LedgerError, match="name is 1-64"):
            ledger.add_user(bad, "analyst")
        with pytest.raises(LedgerError, match="name is 1-64"):
            ledger.add_role(bad, alpha=1, budget=1)
    with pytest.raises(LedgerError, match="finite"):
        ledger.add_role("huge", alpha=float("inf"), budget=1)
    assert token not in (tmp_path / "ledger.sqlite").read_bytes().decode("latin-1")


def test_a_rotated_token_refuses_the_old_one_and_a_removed_user_is_refused(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=0.5, budget=1.0)
    old = ledger.add_user("alice", "analyst")
    ask(ledger, ledger.authenticate(old), "v1", "count(a)")
    new = ledger.rotate_token("alice")
    assert new != old
    with pytest.raises(Unauthorized, match="unknown token"):
        ledger.authenticate(old)
    user = ledger.authenticate(new)
    assert user.name == "alice" and ledger.budget_status(user)["spent"] == 0.5  # kept
    ledger.remove_user("alice")
    with pytest.raises(Unauthorized):
        ledger.authenticate(new)
    assert ledger.users() == [] and ledger.budget_status()["dataset_spent"] == 0.5
    for change in (ledger.rotate_token, ledger.remove_user):
        with pytest.raises(LedgerError, match="no user 'alice'"):
            change("alice")


def test_only_the_latest_owner_credential_is_the_owners(tmp_path):
    """`owner-token` shows a fresh credential once: it passes the owner's check, the one
    before it stops working, and an analyst's token or none is refused."""
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=0.1, budget=1.0)
    analyst = ledger.add_user("ann", "analyst")
    with pytest.raises(Forbidden):  # no owner credential issued yet
        ledger.check_owner(analyst)
    first = ledger.new_owner_token()
    ledger.check_owner(first)
    second = ledger.new_owner_token()
    assert len({first, second, analyst}) == 3
    ledger.check_owner(second)
    for other in (first, analyst, second + "x"):
        with pytest.raises(Forbidden):
            ledger.check_owner(other)
    with pytest.raises(Unauthorized):
        ledger.check_owner(None)


def test_the_ledger_is_owner_only_and_stores_a_workload_once(tmp_path):
    """The ledger's new directory and files are the owner's alone, even under a umask of 0
    (a directory others may enter or list exposes whatever file in it is not locked down)."""
    path = tmp_path / "state" / "ledger.sqlite"
    previous = os.umask(0)
    try:
        ledger = Ledger(path)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    ledger.add_role("analyst", alpha=0.1, budget=1.0)
    user = ledger.authenticate(ledger.add_user("alice", "analyst"))
    big = "count(" + "x" * 5000 + ")"
    ask(ledger, user, "v1", big)
    for name in ("ledger.sqlite", "ledger.sqlite-wal", "ledger.sqlite-shm"):
        if (path.parent / name).exists():
            assert stat.S_IMODE((path.parent / name).stat().st_mode) == 0o600, name
    with sqlite3.connect(path) as db:
        charges = db.execute("SELECT * FROM charges").fetchall()
        assert all("x" * 100 not in str(row) for row in charges)  # a hash, not the text
        assert db.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 1


def test_restart_forgets_nothing(tmp_path):
    path = tmp_path / "ledger.sqlite"
    ledger = Ledger(path)
    ledger.add_role("analyst", alpha=0.25, budget=1.0)
    user = ledger.authenticate(ledger.add_user("alice", "analyst"))
    ask(ledger, user, "v1", "count(a)")
    reopened = Ledger(path)
    assert reopened.budget_status(user)["spent"] == 0.25
    assert reopened.reserve(user, "v1", "count(a)").state == "answered"


V1 = """
CREATE TABLE roles (name TEXT PRIMARY KEY, alpha REAL NOT NULL CHECK (alpha > 0),
                    budget REAL NOT NULL CHECK (budget >= 0));
CREATE TABLE users (name TEXT PRIMARY KEY, role TEXT NOT NULL REFERENCES roles(name),
                    token_hash TEXT NOT NULL UNIQUE, active INTEGER NOT NULL DEFAULT 1);
CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE charges (id INTEGER PRIMARY KEY, user TEXT NOT NULL, role TEXT NOT NULL,
                      version TEXT NOT NULL, workload TEXT NOT NULL, alpha REAL NOT NULL,
                      at REAL NOT NULL);
CREATE TABLE answers (role TEXT NOT NULL, version TEXT NOT NULL, workload TEXT NOT NULL,
                      answer TEXT NOT NULL, PRIMARY KEY (role, version, workload));
INSERT INTO roles VALUES ('analyst', 0.25, 1.0);
INSERT INTO users VALUES ('alice', 'analyst',
    '2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae', 1);
INSERT INTO charges VALUES (1, 'alice', 'analyst', 'v000001', 'count(a)', 0.25, 0);
INSERT INTO charges VALUES (2, 'alice', 'analyst', 'v000001', 'count(b)', 0.25, 0);
INSERT INTO answers VALUES ('analyst', 'v000001', 'count(a)', '{"answers": [12.5]}');
INSERT INTO answers VALUES ('analyst', 'v000001', 'count(b)', '{"answers": [3.5]}');
"""


def test_a_version_1_ledger_is_migrated_with_nothing_lost(tmp_path):
    path = tmp_path / "ledger.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(V1)  # the token of that hash is "foo"
    ledger = Ledger(path)
    alice = ledger.authenticate("foo")
    assert ledger.budget_status(alice)["spent"] == 0.5
    assert ledger.budget_status()["dataset_spent"] == 0.5
    reused = ledger.reserve(alice, "v000001", "count(a)")
    assert reused.state == "answered" and reused.answer == {"answers": [12.5]}
    ask(ledger, alice, "v000001", "count(c)")
    ask(ledger, alice, "v000001", "count(d)")
    with pytest.raises(BudgetExhausted):
        ledger.reserve(alice, "v000001", "count(e)")
    assert Ledger(path).budget_status(alice)["spent"] == 1.0  # reopening migrates nothing again


def test_a_users_history_is_read_through_its_index_once_migrated(tmp_path):
    """The analyst's page reads one user's newest charges through `charges_by_user`, and a
    version-7 ledger (no index) gets it when opened: without it, every page read and sorted
    everyone's charges (72 ms at a million)."""
    from cocktail.dp.ledger.answers import HISTORY

    path = tmp_path / "ledger.sqlite"
    ledger = Ledger(path)
    ledger.add_role("analyst", alpha=0.5, budget=10)
    ann = ledger.authenticate(ledger.add_user("ann", "analyst"))
    for number in range(3):
        ask(ledger, ann, "v1", f"count(t{number})")
    with sqlite3.connect(path) as db:
        db.execute("DROP INDEX charges_by_user")
        db.execute("PRAGMA user_version = 7")
    ledger = Ledger(path)
    assert [h["alpha"] for h in ledger.history(ann, 2)] == [0.5, 0.5]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 8
        plan = " | ".join(row[-1] for row in db.execute("EXPLAIN QUERY PLAN " + HISTORY,
                                                        ("ann", 2)))
    assert "USING INDEX charges_by_user" in plan and "TEMP B-TREE" not in plan, plan


def _ask(args):
    path, token, number = args
    ledger = Ledger(path)
    try:
        ask(ledger, ledger.authenticate(token), "v1", f"count(t{number})", float(number))
        return "answered"
    except BudgetExhausted:
        return "refused"


def test_parallel_queries_never_overspend(tmp_path):
    """N processes ask distinct queries at once against a budget that admits M < N."""
    path = tmp_path / "ledger.sqlite"
    ledger = Ledger(path)
    ledger.add_role("analyst", alpha=0.1, budget=0.7)  # admits 7 queries
    token = ledger.add_user("alice", "analyst")
    with multiprocessing.get_context("spawn").Pool(8) as pool:
        outcomes = pool.map(_ask, [(str(path), token, n) for n in range(24)])
    assert outcomes.count("answered") == 7 and outcomes.count("refused") == 17
    assert Ledger(path).budget_status(ledger.authenticate(token))["spent"] == pytest.approx(0.7)
    assert json.loads(json.dumps(Ledger(path).users()))[0]["spent"] == pytest.approx(0.7)


def test_one_ledger_serves_several_stores_with_one_budget(tmp_path):
    """Two owners' stores of overlapping people share one ledger (`cocktail ledger path` on
    both): an analyst's queries on either draw on one budget, so averaging answers across the
    releases cannot beat the noise — the 11th query at α 0.1 of 1.0 is refused — and a
    workload asked on both is two charges and two answers, each from its own store."""
    from cocktail.dp.session import Source, ask as ask_source
    from cocktail.private_config import (ledger_location, set_ledger_location,
                                         store_identity)
    from cocktail.publish import PublishParams, publish
    from cocktail.dataset import load
    from cocktail.query import Engine, Publication
    from cocktail.store import LocalStore

    shared = tmp_path / "shared-ledger.sqlite"
    sources = []
    for name, shift in (("a", 0), ("b", 3)):
        data = tmp_path / f"{name}.dat"
        data.write_text("".join(f"{(i + shift) % 6} {i % 4 + 10}\n" for i in range(300)))
        store = LocalStore(tmp_path / name)
        publish(load(data), store, PublishParams(k=2, m=2))
        set_ledger_location(store, shared)
        assert ledger_location(store) == shared.resolve()
        engine = Engine(Publication.open(store))
        sources.append(Source(engine.version, engine.counts, store_identity(store)))
    assert sources[0].version == sources[1].version  # both v000001: the store tells them apart
    ledger = Ledger(shared)
    ledger.add_role("analyst", alpha=0.1, budget=1.0)
    token = ledger.add_user("ann", "analyst")
    same = ask_source(ledger, sources[0], token, "count(1)").body
    other = ask_source(ledger, sources[1], token, "count(1)").body
    assert same["charged"] == other["charged"] == 0.1 and not other["reused"]
    for i in range(8):
        ask_source(ledger, sources[i % 2], token, f"count({10 + i % 4}) + {i}*count(1)")
    assert ledger.budget_status(ledger.authenticate(token))["remaining"] == 0
    with pytest.raises(BudgetExhausted):
        ask_source(ledger, sources[1], token, "count(2)")


def test_refusals_are_counted_not_listed(tmp_path):
    """30,000 refused requests once made 30,000 rows, and the owner's page 4× larger; now one
    row per user, status and reason holds how many and when the first and last came."""
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=1.0, budget=1.0)
    alice = ledger.authenticate(ledger.add_user("alice", "analyst"))
    ask(ledger, alice, "v1", "count(a)")
    for n in range(3):
        with pytest.raises(BudgetExhausted):
            ledger.reserve(alice, "v1", f"count(b{n})")
    before = ledger.overview()
    size = len(json.dumps(before))
    for n in range(1000):
        with pytest.raises(BudgetExhausted):
            ledger.reserve(alice, "v1", f"count(c{n})")
    after = ledger.overview()
    assert len(json.dumps(after)) < size + 32  # the count's digits, a later time
    [row] = after["refusals"]
    assert row["user"] == "alice" and row["status"] == 429 and row["count"] == 1003
    assert row["first_at"] == before["refusals"][0]["first_at"] < row["last_at"]



def test_the_pages_views_of_the_ledger_are_its_last_rows(tmp_path):
    """What the dashboard pages read is bounded: the last charges (each with the user's total
    after it, counted from the first) and the last answers, however long the ledger."""
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=0.25, budget=10.0)
    alice = ledger.authenticate(ledger.add_user("alice", "analyst"))
    bob = ledger.authenticate(ledger.add_user("bob", "analyst"))
    for n in range(5):
        ask(ledger, alice if n != 2 else bob, "v1", f"count(a{n})", float(n))
    view = ledger.overview(last=2)
    assert view["charge_count"] == 5 and [c["spent"] for c in view["charges"]] == [0.75, 1.0]
    assert [c["spent"] for c in ledger.overview()["charges"]] == [0.25, 0.5, 0.25, 0.75, 1.0]
    assert [h["answer"]["answers"] for h in ledger.history(alice, last=2)] == [[3.0], [4.0]]
    assert len(ledger.history(alice)) == 4

V4_REFUSALS = """
CREATE TABLE refusals (id INTEGER PRIMARY KEY, user TEXT NOT NULL, status INTEGER NOT NULL,
                       reason TEXT NOT NULL, at REAL NOT NULL);
INSERT INTO refusals VALUES (1, 'alice', 429, 'privacy budget exhausted', 10.0);
INSERT INTO refusals VALUES (2, 'alice', 429, 'privacy budget exhausted', 30.0);
INSERT INTO refusals VALUES (3, 'alice', 403, 'user ''alice'' is disabled', 20.0);
INSERT INTO refusals VALUES (4, 'alice', 429, 'privacy budget exhausted', 40.0);
PRAGMA user_version = 4;
"""


def test_a_version_4_ledger_keeps_its_refusals_counted(tmp_path):
    path = tmp_path / "ledger.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(V1 + V4_REFUSALS)
    ledger = Ledger(path)
    assert [(r["status"], r["count"], r["first_at"], r["last_at"])
            for r in ledger.overview()["refusals"]] == [(403, 1, 20.0, 20.0), (429, 3, 10.0, 40.0)]
    ledger.refused("alice", BudgetExhausted("privacy budget exhausted"))
    assert [r["count"] for r in Ledger(path).overview()["refusals"]] == [1, 4]


def test_answers_keyed_by_a_stores_path_are_keyed_by_its_identity(tmp_path):
    """Stored answers were keyed by the store's path (and analysts saw it in `answer_id`);
    renamed to the store's identity they are still reused and re-shared, at no new charge."""
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=0.5, budget=1.0)
    alice = ledger.authenticate(ledger.add_user("alice", "analyst"))
    first = ask(ledger, alice, "/srv/owner/store#v000001", "count(a)", 7.0)
    ledger.store_reshare(2, "analyst", first["answer_id"].split("~")[2],
                         "/srv/owner/store#v000001", 0.25, {"answers": [8.0]})
    ask(ledger, alice, "/srv/other#v000001", "count(a)", 9.0)
    ledger.rename_store("/srv/owner/store", "5eed")
    again = ask(ledger, alice, "5eed#v000001", "count(a)", 99.0)
    assert again["reused"] and again["answers"] == [7.0]
    assert again["answer_id"].endswith("~5eed#v000001")
    assert ledger.answer_at(2, "analyst", again["answer_id"].split("~")[2],
                            "5eed#v000001") == {"answers": [8.0]}
    assert [h["version"] for h in ledger.history(alice)] == ["5eed#v000001",
                                                             "/srv/other#v000001"]
    assert ledger.budget_status(alice)["spent"] == 1.0


def test_one_ledger_keeps_two_stores_dp_rankings_apart(tmp_path):
    """Two stores' dp rankings of one name and version, on one ledger: the same query on the
    second is its own charge and its own draw, never the first store's stored top k."""
    from cocktail.private_config import set_ledger_location, store_identity
    from cocktail.rank.release import load_ranking
    from cocktail.rank.service import answer_rank
    from cocktail.store import LocalStore
    from .test_rank import BUILD, HEADER, cli, people, table_file

    shared = tmp_path / "shared-ledger.sqlite"
    ledger = Ledger(shared)
    ledger.add_role("analyst", alpha=0.5, budget=1.0)
    token = ledger.add_user("ann", "analyst")
    bodies = []
    for name, start in (("a", 0), ("b", 100)):
        data = table_file(tmp_path, HEADER, people(40, start), f"{name}.csv")
        assert cli("rank", "build", str(data), *BUILD, "--defense", "dp", "--store",
                   str(tmp_path / name))[0] == 0
        store = LocalStore(tmp_path / name)
        set_ledger_location(store, shared)
        version, index, _ = load_ranking(store, "ranking")
        bodies.append(answer_rank(index, version, "ranking", "city=a,religion=x", 3, ledger,
                                  token, store=store_identity(store)))
    assert [b["version"] for b in bodies] == ["v000001", "v000001"]
    assert [(b["charged"], b["reused"]) for b in bodies] == [(0.5, False), (0.5, False)]
    assert {r["id"] for r in bodies[1]["results"]} <= {f"p{i}" for i in range(100, 140)}


def spend(ledger: Ledger, token: str, times: int, tag: str) -> None:
    for n in range(times):
        ticket = ledger.reserve(ledger.authenticate(token), "s#v1", f"count({tag}{n})")
        ledger.fulfil(ticket, {"answers": [n]})


@pytest.fixture(scope="module")
def key() -> Ed25519PrivateKey:
    """A store's signing key, which tags its ledger's backups."""
    return Ed25519PrivateKey.generate()


def test_a_backup_is_a_consistent_private_copy_and_restores_onto_a_lost_ledger(tmp_path, key):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.add_role("analyst", alpha=0.1, budget=1.0)
    token = ledger.add_user("ann", "analyst")
    spend(ledger, token, 3, "a")
    summary = ledger.backup(tmp_path / "b" / "backup.sqlite", key)
    assert summary["users"] == {"ann": pytest.approx(0.3)} and summary["charges"] == 3
    # the backup and its tag, private, and nothing else: no SQLite journal, no scratch left
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["backup.sqlite",
                                                                  "backup.sqlite.sig"]
    assert {stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "b").iterdir()} == {0o600}
    assert stat.S_IMODE((tmp_path / "b").stat().st_mode) == 0o700  # made by the backup
    with pytest.raises(LedgerError, match="never overwrites"):
        ledger.backup(tmp_path / "b" / "backup.sqlite", key)
    # the ledger is lost: restored, ann has spent what she had, and her token still works
    lost = tmp_path / "new" / "l.sqlite"
    restored = Ledger.restore(tmp_path / "b" / "backup.sqlite", lost, key.public_key())
    assert restored["users"] == summary["users"] and restored["charges"] == 3
    assert restored["grants"] == []
    again = Ledger(lost)
    assert again.budget_status(again.authenticate(token))["remaining"] == pytest.approx(0.7)
    assert again.reserve(again.authenticate(token), "s#v1", "count(a0)").state == "answered"


def test_restoring_an_older_backup_cannot_hand_budget_back(tmp_path, key):
    """The attack: an analyst with the owner's ear (or a careless owner) restores last week's
    backup over today's ledger, and the budget spent since is there to spend again."""
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.add_role("analyst", alpha=0.1, budget=1.0)
    token = ledger.add_user("ann", "analyst")
    spend(ledger, token, 2, "a")
    old = ledger.backup(tmp_path / "old.sqlite", key)
    spend(ledger, token, 5, "b")
    with pytest.raises(Forbidden, match="hand budget back"):
        Ledger.restore(tmp_path / "old.sqlite", tmp_path / "l.sqlite", key.public_key())
    assert Ledger(tmp_path / "l.sqlite").users()[0]["spent"] == pytest.approx(0.7)
    newer = ledger.backup(tmp_path / "new.sqlite", key)  # as much spent: restoring it is allowed
    assert Ledger.restore(tmp_path / "new.sqlite", tmp_path / "l.sqlite",
                          key.public_key())["users"] == newer["users"] != old["users"]
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(Forbidden, match="junk.sqlite.sig is missing"):
        Ledger.restore(tmp_path / "junk.sqlite", tmp_path / "l.sqlite", key.public_key())


def test_the_cli_backs_up_and_restores_with_the_exit_table(tmp_path):
    from click.testing import CliRunner

    from cocktail.cli import main

    run = CliRunner()
    store = tmp_path / "s"
    assert run.invoke(main, ["roles", "add", "analyst", "--alpha", "0.1", "--budget", "1",
                             "--store", str(store), "--create"]).exit_code == 0
    token = json.loads(run.invoke(main, ["users", "add", "ann", "--role", "analyst", "--store",
                                         str(store), "--json"]).stdout)["token"]
    ledger = Ledger(store / "private" / "ledger.sqlite")
    backed = run.invoke(main, ["ledger", "backup", str(tmp_path / "b.sqlite"), "--store",
                               str(store), "--json"])
    assert backed.exit_code == 0 and json.loads(backed.stdout)["users"] == {"ann": 0.0}
    spend(ledger, token, 1, "a")
    refused = run.invoke(main, ["ledger", "restore", str(tmp_path / "b.sqlite"), "--store",
                                str(store), "--json"])
    assert refused.exit_code == 3 and "hand budget back" in json.loads(refused.stdout)["error"]


def owner_cli(store: Path):
    """`cocktail ... --store STORE --json`: its exit status, its one JSON object, its stderr."""
    from click.testing import CliRunner

    from cocktail.cli import main

    def run(*args: str) -> tuple[int, dict, str]:
        result = CliRunner().invoke(main, [*args, "--store", str(store), "--json"])
        return result.exit_code, json.loads(result.stdout), result.stderr
    return run


def backed_up_store(tmp_path: Path):
    """A store whose ledger has a role (budget 2.5 per user), ann, and a dataset cap of 10,
    backed up (tagged) to tmp_path/b.sqlite; its CLI, and what its ledger holds."""
    run = owner_cli(tmp_path / "s")
    assert run("roles", "add", "analyst", "--alpha", "0.1", "--budget", "2.5",
               "--create")[0] == 0
    assert run("users", "add", "ann", "--role", "analyst")[0] == 0
    assert run("budget", "--set", "10")[0] == 0
    assert run("ledger", "backup", str(tmp_path / "b.sqlite"))[0] == 0
    return run, holdings(tmp_path / "s")


def holdings(store: Path) -> dict[str, list]:
    """The store's ledger's roles, users (their tokens' hashes too) and settings (the caps)."""
    with sqlite3.connect(store / "private" / "ledger.sqlite") as db:
        return {table: sorted(db.execute(f"SELECT * FROM {table}"))
                for table in ("roles", "users", "settings")}


MINTED = "a-token-of-the-attackers-choosing"


def test_an_edited_backup_cannot_mint_budget(tmp_path):
    """The attack (issue 63): whoever holds the backups (kept off the overlay host, somewhere
    less trusted) raises the dataset cap, adds a role with a budget of 1e9 and a user with a
    token of their choosing.  `ledger restore` applied it with exit 0 and the running server
    honoured it at once; now the tag no longer matches, and nothing is applied."""
    import hashlib

    run, before = backed_up_store(tmp_path)
    with sqlite3.connect(tmp_path / "b.sqlite") as db:
        db.execute("UPDATE settings SET value = '1e9' WHERE key = 'dataset_budget'")
        db.execute("INSERT INTO roles VALUES ('mint', 1.0, 1e9, 'pure')")
        db.execute("INSERT INTO users (name, role, token_hash) VALUES ('mallory', 'mint', ?)",
                   (hashlib.sha256(MINTED.encode()).hexdigest(),))
    for extra in ([], ["--allow-grants"]):
        status, reply, _ = run("ledger", "restore", str(tmp_path / "b.sqlite"), *extra)
        assert status == 3 and reply["type"] == "refused", reply
        assert "altered after it was tagged" in reply["error"]
    assert holdings(tmp_path / "s") == before
    with pytest.raises(Unauthorized):
        Ledger(tmp_path / "s" / "private" / "ledger.sqlite").authenticate(MINTED)
    # onto a lost ledger, where nothing is there to compare with, the tag alone refuses it
    (tmp_path / "s" / "private" / "ledger.sqlite").rename(tmp_path / "aside.sqlite")
    assert run("ledger", "restore", str(tmp_path / "b.sqlite"))[0] == 3
    assert not (tmp_path / "s" / "private" / "ledger.sqlite").exists()


def test_one_flipped_byte_of_a_backup_is_refused(tmp_path):
    """One byte of the role's budget, 2.5, made 163840 (0x40 -> 0x41 in its exponent): the
    file is still a sound SQLite ledger, and restored it was."""
    import struct

    run, before = backed_up_store(tmp_path)
    data = bytearray((tmp_path / "b.sqlite").read_bytes())
    assert data.count(struct.pack(">d", 2.5)) == 1
    data[data.index(struct.pack(">d", 2.5))] ^= 0x01
    (tmp_path / "b.sqlite").write_bytes(bytes(data))
    status, reply, _ = run("ledger", "restore", str(tmp_path / "b.sqlite"))
    assert status == 3 and "altered after it was tagged" in reply["error"], reply
    assert holdings(tmp_path / "s") == before


def test_a_backup_without_its_tag_or_with_another_stores_is_refused(tmp_path):
    run, before = backed_up_store(tmp_path)
    # Another store's ledger, tagged by that store's key, is not this owner's backup.
    other = owner_cli(tmp_path / "other")
    assert other("signing-key", "--create")[0] == 0
    status, reply, _ = other("ledger", "restore", str(tmp_path / "b.sqlite"))
    assert status == 3 and "not signed by this store's key" in reply["error"], reply
    assert not (tmp_path / "other" / "private" / "ledger.sqlite").exists()
    keyless = owner_cli(tmp_path / "keyless")  # nothing there to check any tag with
    status, reply, _ = keyless("ledger", "restore", str(tmp_path / "b.sqlite"), "--create")
    assert status == 3 and "no signing key" in reply["error"], reply
    (tmp_path / "b.sqlite.sig").unlink(missing_ok=True)
    status, reply, _ = run("ledger", "restore", str(tmp_path / "b.sqlite"))
    assert status == 3 and "b.sqlite.sig is missing" in reply["error"], reply
    assert holdings(tmp_path / "s") == before


def test_a_backup_never_writes_where_a_link_points(tmp_path):
    """The attack: a dangling symbolic link where the owner will back up.  `ledger backup`
    checked that the name did not exist (following the link), then made the backup, and
    SQLite its -wal and -shm, at the link's target."""
    run, _ = backed_up_store(tmp_path)
    planted = tmp_path / "elsewhere" / "planted.sqlite"
    planted.parent.mkdir()
    for name, link in (("x.sqlite", "x.sqlite"), ("y.sqlite", "y.sqlite.sig")):
        (tmp_path / "backups").mkdir(exist_ok=True)
        (tmp_path / "backups" / link).symlink_to(planted)
        status, reply, _ = run("ledger", "backup", str(tmp_path / "backups" / name))
        assert status == 2 and "never overwrites" in reply["error"], reply
        assert list(planted.parent.iterdir()) == []  # nor -wal, -shm or -journal
        assert sorted(p.name for p in (tmp_path / "backups").iterdir()) == sorted(
            p.name for p in (tmp_path / "backups").iterdir() if p.is_symlink())
        assert (tmp_path / "backups" / link).is_symlink()


def test_a_restore_grants_nothing_the_ledger_did_not_unless_told(tmp_path, key):
    """An owner's own, tagged backup may still grant what the ledger since took away (a
    budget lowered, a user disabled, a cap lowered) or never had (a role, a user, a token):
    refused, naming each, unless --allow-grants, which says on stderr what it granted."""
    run, backed = backed_up_store(tmp_path)
    assert run("roles", "add", "analyst", "--alpha", "0.05", "--budget", "1")[0] == 0
    assert run("users", "add", "eve", "--role", "analyst")[0] == 0
    assert run("users", "disable", "ann")[0] == 0
    assert run("budget", "--set", "4")[0] == 0
    assert run("ledger", "backup", str(tmp_path / "lowered.sqlite"))[0] == 0
    before = holdings(tmp_path / "s")
    status, reply, _ = run("ledger", "restore", str(tmp_path / "b.sqlite"))
    assert status == 3 and reply["type"] == "refused", reply
    for grown in ("role 'analyst' α per query 0.05 -> 0.1", "role 'analyst' budget 1 -> 2.5",
                  "user 'ann' enabled", "dataset α cap 4 -> 10"):
        assert grown in reply["error"]
    assert holdings(tmp_path / "s") == before
    status, reply, stderr = run("ledger", "restore", str(tmp_path / "b.sqlite"),
                                "--allow-grants")
    assert status == 0 and len(reply["grants"]) == 4, reply
    assert all(f"the restore granted: {grant}" in stderr for grant in reply["grants"])
    assert holdings(tmp_path / "s") == backed
    # new roles, users and credentials, in a tagged backup of another ledger of the owner's
    current, richer = Ledger(tmp_path / "l.sqlite"), Ledger(tmp_path / "richer.sqlite")
    for ledger in (current, richer):
        ledger.add_role("analyst", alpha=0.1, budget=1.0)
    ann = current.add_user("ann", "analyst")
    richer.add_user("ann", "analyst")  # another token
    richer.add_role("mint", alpha=1.0, budget=1e9)
    minted = richer.add_user("mallory", "mint")
    richer.new_owner_token()
    richer.backup(tmp_path / "richer-backup.sqlite", key)
    with pytest.raises(Forbidden) as refused:
        Ledger.restore(tmp_path / "richer-backup.sqlite", tmp_path / "l.sqlite",
                       key.public_key())
    for grown in ("new role 'mint' (α=1 per query, budget 1e+09)",
                  "new user 'mallory' (role 'mint')",
                  "user 'ann' with a token the ledger did not issue",
                  "an owner credential the ledger did not issue"):
        assert grown in str(refused.value)
    with pytest.raises(Unauthorized):
        current.authenticate(minted)
    assert current.authenticate(ann).name == "ann"


def test_a_ledger_root_makes_belongs_to_the_service_that_writes_it(tmp_path, key):
    """On the overlay's host the owner runs commands as root, the service as its own user: a
    ledger root makes or restores onto a lost one goes to the owner of its directory, and
    SQLite's own -wal and -shm files follow the ledger."""
    if os.geteuid() != 0:
        pytest.skip("needs root: only root can make a file another user owns")
    service = tmp_path / "data"
    service.mkdir()
    os.chown(service, 65534, 65534)  # nobody, as the service's user
    ledger = Ledger(service / "ledger.sqlite")
    ledger.add_role("analyst", 1.0, 10.0)
    owners = {p.name: (p.stat().st_uid, p.stat().st_gid) for p in service.iterdir()}
    assert owners and set(owners.values()) == {(65534, 65534)}, owners
    backup = tmp_path / "backup.sqlite"
    ledger.backup(backup, key)
    assert backup.stat().st_uid == 0  # a backup stays the owner's
    for part in service.iterdir():
        part.unlink()
    Ledger.restore(backup, service / "ledger.sqlite", key.public_key())
    assert (service / "ledger.sqlite").stat().st_uid == 65534


def test_a_ledger_of_a_newer_schema_is_refused_not_used(tmp_path):
    """A ledger a later cocktail migrated was opened, and charged, by an older one as if it
    were its own; now every command refuses it in one line (exit status 2), and the backup
    taken before the upgrade restores onto the ledger's place once it is moved aside."""
    from click.testing import CliRunner

    from cocktail.cli import main
    from cocktail.dp.ledger.schema import SCHEMA_VERSION

    run = CliRunner()
    store = tmp_path / "s"
    assert run.invoke(main, ["roles", "add", "analyst", "--alpha", "0.1", "--budget", "1",
                             "--store", str(store), "--create"]).exit_code == 0
    assert run.invoke(main, ["ledger", "backup", str(tmp_path / "before.sqlite"), "--store",
                             str(store)]).exit_code == 0
    path = store / "private" / "ledger.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    newer = f"ledger schema {SCHEMA_VERSION + 1}, newer than this cocktail reads"
    with pytest.raises(LedgerError, match=newer):
        Ledger(path)
    for command in (["roles", "list"], ["budget"], ["ledger", "backup", str(tmp_path / "b2")]):
        result = run.invoke(main, [*command, "--store", str(store), "--json"])
        assert result.exit_code == 2, (command, result.output)
        error = json.loads(result.stdout)["error"]
        assert newer in error and "upgrade cocktail" in error and "\n" not in error
    path.rename(tmp_path / "newer.sqlite")
    restored = run.invoke(main, ["ledger", "restore", str(tmp_path / "before.sqlite"),
                                 "--store", str(store), "--create"])
    assert restored.exit_code == 0, restored.output
    assert Ledger(path).roles() == [{"name": "analyst", "alpha": 0.1, "budget": 1.0,
                                     "definition": "pure"}]


@pytest.mark.parametrize("schema", [0, 1, 4, 8])
def test_a_ledgers_summary_reads_every_schema_from_the_first_and_refuses_a_bare_database(
        tmp_path, schema):
    """What a backup or restore checks a ledger file by: any ledger schema from 1 on (an old
    backup restores, brought up to date), but a SQLite file of schema 0 is no ledger."""
    from cocktail.dp.ledger.backup import ledger_summary
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.add_role("analyst", alpha=0.1, budget=1.0)
    spend(ledger, ledger.add_user("ann", "analyst"), 2, "a")
    with sqlite3.connect(ledger.path) as db:
        db.execute(f"PRAGMA user_version = {schema}")
    if schema == 0:
        with pytest.raises(LedgerError, match="not a ledger this version reads"):
            ledger_summary(ledger.path)
    else:
        summary = ledger_summary(ledger.path)
        assert summary["users"] == {"ann": pytest.approx(0.2)} and summary["charges"] == 2
