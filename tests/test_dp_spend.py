"""An analyst's chosen spend: a request names its α, up to its role's and down to the published
floor; the ledger charges what was spent, the noise is scaled to it, another α is another
release, and no choice of α overspends a budget or buys work for free."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from cocktail.dp.ledger import BudgetExhausted, Ledger
from cocktail.dp.limits import LIMITS, LimitExceeded
from cocktail.dp.session import Source, answer_key, ask


@pytest.fixture
def ledger(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=1.0, budget=2.0)
    return ledger


def counting(calls: list) -> Source:
    return Source("v1", lambda queries: calls.append(len(queries)) or [100] * len(queries))


def spent(ledger: Ledger, name: str) -> float:
    return next(u["spent"] for u in ledger.users() if u["name"] == name)


def test_a_chosen_alpha_is_what_is_charged_and_what_scales_the_noise(ledger):
    token = ledger.add_user("ann", "analyst")
    calls: list = []
    full = ask(ledger, counting(calls), token, "count(a) + count(b)").body
    half = ask(ledger, counting(calls), token, "count(a) + count(b)", alpha=0.5).body
    assert (full["charged"], half["charged"]) == (1.0, 0.5)
    assert (full["alpha"], half["alpha"]) == (1.0, 0.5)
    assert spent(ledger, "ann") == pytest.approx(1.5)
    # the variance is 2 (Δ/α)²: half the α, four times the variance
    assert np.divide(half["expected_squared_error"], full["expected_squared_error"]) == \
        pytest.approx([4.0])
    assert len(calls) == 2  # two releases, each computed


@pytest.mark.parametrize("alpha", [1.5, LIMITS.alpha_floor / 2, 0.0])
def test_an_alpha_outside_the_roles_range_is_refused_before_any_charge_or_count(ledger, alpha):
    token = ledger.add_user("ann", "analyst")
    calls: list = []
    with pytest.raises(LimitExceeded) as refused:
        ask(ledger, counting(calls), token, "count(a)", alpha=alpha)
    assert refused.value.limit == "alpha" and "at most 1" in str(refused.value)
    assert calls == [] and spent(ledger, "ann") == 0.0


def test_another_alpha_is_another_release_and_the_roles_own_is_the_default(ledger):
    """The same α again is reused for free; another α is charged anew (keyed by the text
    alone, the second α's fresh answer would come for the first's charge); naming the role's
    own α is the default request."""
    ann, bob = ledger.add_user("ann", "analyst"), ledger.add_user("bob", "analyst")
    calls: list = []
    first = ask(ledger, counting(calls), ann, "count(a)", alpha=0.25).body
    again = ask(ledger, counting(calls), bob, "count(a)", alpha=0.25).body
    other = ask(ledger, counting(calls), ann, "count(a)", alpha=0.5).body
    default = ask(ledger, counting(calls), bob, "count(a)").body
    named = ask(ledger, counting(calls), ann, "count(a)", alpha=1.0).body
    assert again["reused"] and again["answers"] == first["answers"] and again["charged"] == 0
    assert not other["reused"] and other["charged"] == 0.5
    assert named["reused"] and named["answers"] == default["answers"]
    assert len(calls) == 3 and spent(ledger, "ann") == pytest.approx(0.75)
    assert answer_key_of(1.0) == "count(a)" and answer_key_of(0.25) != answer_key_of(0.5)


def answer_key_of(alpha: float | None) -> str:
    from cocktail.querylang import parse_batch
    return answer_key(parse_batch("count(a)"), "per-query", None if alpha == 1.0 else alpha)


def test_concurrent_chosen_spends_never_overspend_the_budget(ledger):
    """24 requests of 0.3 at once against a budget of 2: six are paid (1.8), the rest refused
    with nothing charged; the ledger's sum is the users' spend."""
    token = ledger.add_user("ann", "analyst")
    source = counting([])

    def one(n: int) -> str:
        try:
            return str(ask(ledger, source, token, f"count(t{n})", alpha=0.3).body["charged"])
        except BudgetExhausted:
            return "refused"

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(one, range(24)))
    assert outcomes.count("0.3") == 6 and outcomes.count("refused") == 18
    assert spent(ledger, "ann") == pytest.approx(1.8)
    assert sum(c["alpha"] for c in ledger.overview()["charges"]) == pytest.approx(1.8)


def test_the_floor_bounds_the_fresh_answers_a_budget_buys(ledger):
    """At the floor, one α of budget buys 1 / alpha_floor fresh answers, no more."""
    token = ledger.add_user("ann", "analyst")
    calls: list = []
    floor = LIMITS.alpha_floor
    answered = 0
    with pytest.raises(BudgetExhausted):
        for n in range(10_000):
            ask(ledger, counting(calls), token, f"count(t{n})", alpha=floor)
            answered += 1
    assert answered == round(2.0 / floor) and len(calls) == answered
