"""Budgets: charged before release, reused answers free, durable, and safe under concurrency."""

from __future__ import annotations

import json
import multiprocessing

import pytest

from cocktail.dp.ledger import BudgetExhausted, Forbidden, Ledger, LedgerError, Unauthorized


def release_counter(calls: list):
    def release(alpha: float) -> dict:
        calls.append(alpha)
        return {"answers": [len(calls) + 0.5]}
    return release


def test_charges_reuse_and_limits(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=0.5, budget=1.0)
    alice = ledger.authenticate(ledger.add_user("alice", "analyst"))
    calls: list = []
    first = ledger.answer(alice, "v1", "count(a)", release_counter(calls))
    assert first["charged"] == 0.5 and not first["reused"] and first["budget"]["remaining"] == 0.5
    again = ledger.answer(alice, "v1", "count(a)", release_counter(calls))
    assert again["reused"] and again["charged"] == 0 and again["answers"] == first["answers"]
    # Another user of the same role gets the same noisy answer, free: no averaging it away.
    bob = ledger.authenticate(ledger.add_user("bob", "analyst"))
    assert ledger.answer(bob, "v1", "count(a)", release_counter(calls))["reused"]
    ledger.answer(alice, "v1", "count(b)", release_counter(calls))
    with pytest.raises(BudgetExhausted, match="0 of 1 left"):
        ledger.answer(alice, "v1", "count(c)", release_counter(calls))
    assert calls == [0.5, 0.5]  # nothing released for the refused query
    # A new publication version is new data: the same text costs again.
    assert ledger.answer(bob, "v2", "count(a)", release_counter(calls))["charged"] == 0.5


def test_dataset_budget_caps_everyone(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=1.0, budget=10.0)
    ledger.set_dataset_budget(2.0)
    users = [ledger.authenticate(ledger.add_user(f"u{i}", "analyst")) for i in range(3)]
    ledger.answer(users[0], "v1", "count(a)", release_counter([]))
    ledger.answer(users[1], "v1", "count(b)", release_counter([]))
    with pytest.raises(BudgetExhausted, match="dataset-wide"):
        ledger.answer(users[2], "v1", "count(c)", release_counter([]))


def test_tokens_and_disabled_users(tmp_path):
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
    assert token not in (tmp_path / "ledger.sqlite").read_bytes().decode("latin-1")


def test_restart_forgets_nothing(tmp_path):
    path = tmp_path / "ledger.sqlite"
    ledger = Ledger(path)
    ledger.add_role("analyst", alpha=0.25, budget=1.0)
    user = ledger.authenticate(ledger.add_user("alice", "analyst"))
    ledger.answer(user, "v1", "count(a)", release_counter([]))
    reopened = Ledger(path)
    assert reopened.budget_status(user)["spent"] == 0.25
    assert reopened.answer(user, "v1", "count(a)", release_counter([]))["reused"]


def _ask(args):
    path, token, number = args
    ledger = Ledger(path)
    try:
        ledger.answer(ledger.authenticate(token), "v1", f"count(t{number})",
                      lambda alpha: {"answers": [float(number)]})
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
    assert len(json.dumps(Ledger(path).users())) > 0
