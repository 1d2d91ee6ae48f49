"""Re-shared noisy answers along a chain: α₁ charged once, no hop laxer than the one before,
one stored answer per hop (the averaging attacker gains nothing), and the noise adding up."""

from __future__ import annotations

import json
from statistics import mean, pvariance

import pytest
from click.testing import CliRunner

from cocktail.cli import main
from cocktail.dp.ledger import Ledger, LedgerError
from cocktail.dp.reshare import reshare
from cocktail.dp.session import Source, ask
from cocktail.private_config import ledger_location
from cocktail.store import LocalStore

TRUE_COUNT = 100


@pytest.fixture
def ledger(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=1.0, budget=10_000.0)
    return ledger


def first_hop(ledger: Ledger, token: str, term: str = "a", calls: list | None = None) -> dict:
    def counts(queries):
        if calls is not None:
            calls.append(len(queries))
        return [TRUE_COUNT] * len(queries)
    return ask(ledger, Source("v1", counts), token, f"count({term})").body


def test_a_three_hop_chain_costs_alpha_one_once(ledger):
    token = ledger.add_user("ann", "analyst")
    calls: list = []
    hop1 = first_hop(ledger, token, calls=calls)
    spent = ledger.budget_status()["dataset_spent"]
    assert spent == 1.0 and hop1["answer_id"].startswith("1~analyst~")
    hop2 = reshare(ledger, hop1["answer_id"], 0.5)
    hop3 = reshare(ledger, hop2["answer_id"], 0.25)
    assert (hop2["hop"], hop3["hop"]) == (2, 3) and hop3["source"] == hop2["answer_id"]
    assert hop2["charged"] == hop3["charged"] == 0.0
    assert ledger.budget_status()["dataset_spent"] == spent  # α₁, once
    assert calls == [1]  # the data was read once, for hop 1; re-shares read the stored answer
    assert hop3["expected_squared_error"][0] == pytest.approx(2 + 8 + 32)


def test_a_hop_may_not_ask_for_less_noise_than_the_hop_before(ledger):
    hop1 = first_hop(ledger, ledger.add_user("ann", "analyst"))
    with pytest.raises(LedgerError, match="more than hop 1's"):
        reshare(ledger, hop1["answer_id"], 2.0)
    hop2 = reshare(ledger, hop1["answer_id"], 0.5)
    with pytest.raises(LedgerError, match="more than hop 2's"):
        reshare(ledger, hop2["answer_id"], 0.6)
    assert ledger.answer_at(3, *hop2["answer_id"].split("~", 3)[1:]) is None  # nothing stored


def test_the_averaging_attacker_gains_nothing(ledger):
    """Asking hop 2's re-share again and again returns the stored one: averaging fresh draws
    would converge to hop 1's answer, which hop 2 must not see."""
    hop1 = first_hop(ledger, ledger.add_user("ann", "analyst"))
    answers = {reshare(ledger, hop1["answer_id"], 0.1)["answers"][0] for _ in range(20)}
    assert len(answers) == 1
    with pytest.raises(LedgerError, match="shared at α = 0.1"):
        reshare(ledger, hop1["answer_id"], 0.05)  # nor a second answer at another level


def test_hop_two_variance_is_the_sum_of_both_hops(ledger):
    """Var(hop 2) = 2/α₁² + 2/α₂² = 2 + 8 at α₁ = 1, α₂ = 0.5.  With 6,000 chains the sample
    variance's relative standard error is about √(3.6/6000) ≈ 2.4%, so 10% is four of them."""
    token = ledger.add_user("ann", "analyst")
    values = []
    for n in range(6_000):
        hop1 = first_hop(ledger, token, term=f"t{n}")
        values.append(reshare(ledger, hop1["answer_id"], 0.5)["answers"][0])
    assert mean(values) == pytest.approx(TRUE_COUNT, abs=4 * (10 / 6_000) ** 0.5)
    assert pvariance(values) == pytest.approx(10, rel=0.10)


def test_bad_ids(ledger):
    with pytest.raises(LedgerError, match="not an answer id"):
        reshare(ledger, "no-such-thing", 0.5)
    with pytest.raises(LedgerError, match="no answer"):
        reshare(ledger, "1~analyst~" + "0" * 64 + "~v1", 0.5)


def test_the_command(tmp_path):
    runner = CliRunner()
    data, store = tmp_path / "d.dat", tmp_path / "store"
    assert runner.invoke(main, ["generate", str(data), "--records", "300", "--seed", "1"]
                         ).exit_code == 0
    assert runner.invoke(main, ["publish", str(data), "--store", str(store)]).exit_code == 0
    ledger_args = ["--store", str(store)]
    runner.invoke(main, ["roles", "add", "analyst", "--alpha", "1", "--budget", "5",
                         *ledger_args])
    token = json.loads(runner.invoke(main, ["users", "add", "ann", "--role", "analyst",
                                            *ledger_args, "--json"]).output)["token"]
    ledger = Ledger(ledger_location(LocalStore(store)))
    hop1 = first_hop(ledger, token)
    budget = json.loads(runner.invoke(main, ["budget", *ledger_args, "--json"]).output)
    shared = runner.invoke(main, ["reshare", hop1["answer_id"], "--alpha", "0.5", *ledger_args,
                                  "--json"])
    assert shared.exit_code == 0, shared.output
    body = json.loads(shared.output)
    assert body["hop"] == 2 and body["charged"] == 0 and not body["reused"]
    again = json.loads(runner.invoke(main, ["reshare", hop1["answer_id"], "--alpha", "0.5",
                                            *ledger_args, "--json"]).output)
    assert again["answers"] == body["answers"] and again["reused"]
    assert json.loads(runner.invoke(main, ["budget", *ledger_args, "--json"]).output) == budget
    laxer = runner.invoke(main, ["reshare", body["answer_id"], "--alpha", "0.9", *ledger_args,
                                 "--json"])
    assert laxer.exit_code == 2 and "only add noise" in json.loads(laxer.output)["error"]
