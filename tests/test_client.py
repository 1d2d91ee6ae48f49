"""The analyst's client (cocktail.client.Client) against a real `cocktail serve`, the routes it
discovers with, the refusal of unlisted terms, and the intervals it reports."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest
from click.testing import CliRunner
from scipy.optimize import brentq

from cocktail.cli import main
from cocktail.cli.contract import classify
from cocktail.client import Client, ServiceRefused, ServiceUnreachable
from cocktail.dp.answer import prepare
from cocktail.dp.intervals import LADDER, interval, laplace_sum_ladder
from cocktail.dp.ledger import Ledger
from cocktail.dp.noise import PURE, ZCDP, gaussian, laplace
from cocktail.errors import ExitCode
from cocktail.extras import install_command
from cocktail.private_config import ledger_location
from cocktail.query import Publication
from cocktail.querylang import parse_batch
from cocktail.store import LocalStore

from .served import auth, free_port, serve
from .test_fuzz import fuzz_store

BASE_MS = 200  # when a refusal leaves, after arrival
COUNT_MS = 300  # and a fresh answer, this much more per count


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """fuzz_store's publication (1,500 records, k=5, m=2, two rankings), its terms split by
    the private manifest into those some public chunk holds and those only private chunks
    hold, and a term nobody holds of the same length as one of those."""
    store, tokens, terms = fuzz_store(tmp_path_factory.mktemp("client"))
    publication = Publication.open(LocalStore(str(store)))
    public = {t for c in publication.chunks.values() if not c.private for t in c.terms}
    private_only = sorted(set(terms) - public)
    assert private_only and public, "the data must hold both kinds of term"
    rare = private_only[0]
    absent = next(f"{n:0{len(rare)}d}" for n in range(10 ** len(rare))
                  if f"{n:0{len(rare)}d}" not in terms)
    with serve(store, "--deadline-base-ms", str(BASE_MS), "--deadline-count-ms",
               str(COUNT_MS), "--deadline-search-ms", "50", "--deadline-rank-ms", "50"
               ) as (url, _):
        yield {"url": url, "ann": tokens[0], "bob": tokens[1], "public": sorted(public),
               "private_only": private_only, "rare": rare, "absent": absent,
               "ledger": Ledger(ledger_location(LocalStore(str(store))))}


def test_answers_budget_and_history_agree_with_the_ledger(served):
    ledger = served["ledger"]
    token = ledger.add_user("fay", "analyst")
    fay = ledger.authenticate(token)
    a, b = served["public"][:2]
    with Client(served["url"], token) as client:
        one = client.query(f"count({a})", level=0.9)
        both = client.batch([f"count({a} & {b})", f"2*count({a}) - count({b})"])
        again = client.batch([f"count({a} & {b})", f"2*count({a}) - count({b})"])
        budget, history = client.budget(), client.history()
        last = client.history(last=1)
    assert [r["query"] for r in one] == [f"count({a})"]
    assert [r["query"] for r in both] == [f"count({a} & {b})", f"2*count({a}) - count({b})"]
    assert [r["answer"] for r in both] == both.reply["answers"]
    assert [r["answer"] for r in again] == [r["answer"] for r in both]
    assert {r["spent"] for r in both} == {0.01} and {r["reused"] for r in again} == {True}
    assert {r["spent"] for r in again} == {0.0}
    for row in (*one, *both):
        assert row["ci_low"] < row["answer"] < row["ci_high"]
    assert budget == ledger.budget_status(fay) and budget["spent"] == pytest.approx(0.02)
    stored = ledger.history(fay)  # the ledger itself: two charges, the reuse none
    assert [h["alpha"] for h in stored] == [0.01, 0.01]
    assert [r["answer"] for r in history] == [
        value for h in stored for value in h["answer"]["answers"]]
    assert [r["spent"] for r in history] == [0.01, 0.01, 0.01]
    assert [r["at"].timestamp() for r in history] == pytest.approx(
        [stored[0]["at"], stored[1]["at"], stored[1]["at"]])
    assert [r["query"] for r in last] == [r["query"] for r in both]
    frame = both.to_pandas()
    assert list(frame.columns) == ["query", "answer", "rms_error", "ci_low", "ci_high",
                                   "ci_method", "spent", "reused", "answer_id"]
    assert frame["answer"].tolist() == both.reply["answers"]
    assert history.to_pandas()["version"].tolist() == ["v000001"] * 3


def test_an_analysts_history_holds_no_one_elses(served):
    ledger = served["ledger"]
    token = ledger.add_user("cid", "analyst")
    with Client(served["url"], token) as client:
        assert len(client.history()) == 0
        assert list(client.history().to_pandas().columns)[:2] == ["at", "query"]
        client.query(f"count({served['public'][-1]})")
        assert [r["query"] for r in client.history()] == [f"count({served['public'][-1]})"]


def test_discovery_lists_no_term_only_private_chunks_hold(served):
    """The attack: page through GET /v1/terms in small pages, and ask it for every prefix of
    every term that only private chunks hold (the private manifest says which).  None ever
    comes back, and what comes back is exactly the public chunks' terms."""
    url, headers = served["url"], auth(served["ann"])
    listed, after = [], ""
    while True:
        page = httpx.get(url + "/v1/terms", params={"after": after, "limit": 7},
                         headers=headers).json()
        assert len(page["terms"]) <= 7
        listed += page["terms"]
        if page["next"] is None:
            break
        after = page["next"]
    assert listed == served["public"] and page["total"] == len(served["public"])
    private_only = set(served["private_only"])
    for term in served["private_only"]:
        for end in range(len(term) + 1):
            found = httpx.get(url + "/v1/terms", params={"prefix": term[:end], "limit": 10_000},
                              headers=headers).json()["terms"]
            assert not private_only & set(found), (term[:end], found)
            assert found == [t for t in served["public"] if t.startswith(term[:end])]
    with Client(url, served["ann"]) as client:
        assert client.terms() == served["public"]
        assert client.terms(limit=3) == served["public"][:3]
        assert client.terms(prefix=served["rare"]) == [
            t for t in served["public"] if t.startswith(served["rare"])]
    assert httpx.get(url + "/v1/terms").status_code == 401
    assert httpx.get(url + "/v1/terms", headers=auth(served["bob"])).status_code == 403


def test_a_private_only_term_and_an_absent_one_are_refused_alike_and_free(served):
    """Both kinds of unlisted term: the same status, the same body but for the term, held
    to the refusal's time (not answered early), and nothing charged; the opt-in answers and
    charges."""
    url, ledger = served["url"], served["ledger"]
    token = ledger.add_user("dan", "analyst")
    dan = ledger.authenticate(token)
    rare, absent = served["rare"], served["absent"]
    replies = {}
    for term in (rare, absent, rare, absent):
        started = time.monotonic()
        reply = httpx.post(url + "/v1/query", json={"query": f"count({term})"},
                           headers=auth(token), timeout=30)
        assert time.monotonic() - started >= BASE_MS / 1000  # held to the refusal's time
        replies[term] = reply
    assert replies[rare].status_code == replies[absent].status_code == 400
    assert replies[rare].headers["content-type"] == replies[absent].headers["content-type"]
    def masked(term: str) -> dict:
        body = replies[term].json()
        assert f'"{term}"' in body["detail"]
        return body | {"detail": body["detail"].replace(f'"{term}"', '"T"')}
    assert masked(rare) == masked(absent)
    assert masked(rare)["limit"] == "public_terms"
    assert ledger.budget_status(dan)["spent"] == 0 and ledger.history(dan) == []
    with Client(url, token) as client:
        with pytest.raises(ServiceRefused) as refused:
            client.batch([f"count({served['public'][0]})", f"count({absent})"])
        assert refused.value.limit == "public_terms" and absent in str(refused.value)
        assert refused.value.exit_status == ExitCode.USAGE
        assert ledger.budget_status(dan)["spent"] == 0
        started = time.monotonic()
        answered = client.query(f"count({rare})", allow_unlisted=True)
        # a fresh answer: its count is timed, past the refusal's time
        assert time.monotonic() - started >= (BASE_MS + COUNT_MS) / 1000
    assert answered[0]["spent"] == 0.01 and not answered[0]["reused"]
    assert ledger.budget_status(dan)["spent"] == pytest.approx(0.01)
    assert [h["answer"]["answers"] for h in ledger.history(dan)] == [answered.reply["answers"]]


def test_query_url_refuses_an_unlisted_term_unless_allowed(served):
    ledger = served["ledger"]
    token = ledger.add_user("eve", "analyst")

    def ask(*args: str):
        return CliRunner().invoke(main, ["query", f"count({served['absent']})", "--url",
                                         served["url"], "--token", token, "--json", *args])
    refused = ask()
    assert refused.exit_code == 2, refused.output
    assert json.loads(refused.stdout)["http_status"] == 400
    assert served["absent"] in json.loads(refused.stdout)["error"]
    allowed = ask("--allow-unlisted")
    assert allowed.exit_code == 0 and json.loads(allowed.stdout)["charged"] == 0.01
    assert ledger.budget_status(ledger.authenticate(token))["spent"] == pytest.approx(0.01)
    human = CliRunner().invoke(main, ["query", f"count({served['public'][0]})", "--url",
                                      served["url"], "--token", token])
    assert human.exit_code == 0 and "95% in [" in human.output


def test_rankings_are_listed_with_their_public_columns_only(served):
    with Client(served["url"], served["ann"]) as client:
        listed = client.rankings()
        top = client.rank("ranking", "city=a,religion=x", 3)
    assert [(r["name"], r["defense"], r["tuples"], r["public"]) for r in listed] == [
        ("noisy", "dp", 60, ["city", "age"]), ("ranking", "estt", 60, ["city", "age"])]
    assert "religion" not in json.dumps(listed.reply)  # a private column's name stays private
    assert len(top) == 3 and list(top.to_pandas().columns) == ["id", "city", "age"]
    assert top.reply["defense"] == "estt"


def test_typed_errors_carry_the_clis_exit_status(served):
    with Client(served["url"], "nope") as client, pytest.raises(ServiceRefused) as unknown:
        client.budget()
    with Client(served["url"], served["bob"]) as client, pytest.raises(ServiceRefused) as off:
        client.history()
    with Client(served["url"], served["ann"]) as client, pytest.raises(ServiceRefused) as bad:
        client.rank("no-such-ranking", "city=a")
    with Client(f"http://127.0.0.1:{free_port()}", "x") as client, \
            pytest.raises(ServiceUnreachable) as down:
        client.budget()
    for error, status in ((unknown, ExitCode.REFUSED), (off, ExitCode.REFUSED),
                          (bad, ExitCode.USAGE), (down, ExitCode.PROBLEMS)):
        assert error.value.exit_status == status == classify(error.value)[0]
    with Client(served["url"], served["ann"]) as client, pytest.raises(ValueError):
        client.query(f"count({served['public'][0]})", level=1.0)  # refused before it is sent


def test_to_pandas_without_pandas_names_the_extra():
    script = ("import sys; sys.modules['pandas'] = None\n"
              "from cocktail.client import Result\n"
              "Result([], ('a',), {}).to_pandas()")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == (
        f"cocktail.extras.MissingExtra: this needs pandas: {install_command('frames')}")


# -- the intervals, by simulation --------------------------------------------------------------

RELEASES = 10_000
SAMPLERS = {PURE: laplace, ZCDP: gaussian}


def coverage(text: str, definition: str, level: float) -> tuple[list[float], list[str]]:
    """How often the interval at ``level`` held the truth over RELEASES releases of the
    workload's chosen strategy (its own noise, OpenDP's sampler, drawn for every release in
    one call), and how each was bounded."""
    prepared = prepare(parse_batch(text), definition=definition)
    strategy = prepared.choice.optimized
    exact = np.arange(3.0, 3.0 + strategy.A.shape[1]) * 7  # any data: the noise is what varies
    truth = strategy.answer(exact, 1.0, noise=lambda values, _: values)
    stated = prepared.noisy(exact, 0.5).as_dict()  # what a reply says of its noise

    def sampled(values, scale):
        shape = np.shape(values)
        return np.reshape(SAMPLERS[definition](np.ravel(values).tolist(), scale), shape)
    releases = strategy.answer(np.repeat(exact[:, None], RELEASES, axis=1), 0.5, sampled)
    held, how = [], []
    for i, answers in enumerate(releases):
        bounds = [interval(a, stated["expected_squared_error"][i], level, definition,
                           stated["noise_draws"][i], stated["noise_quantiles"][i])
                  for a in answers]
        held.append(float(np.mean([low <= truth[i] <= high for low, high, _ in bounds])))
        how.append(bounds[0][2])
    return held, how


@pytest.mark.parametrize("definition,method", [(PURE, "laplace"), (ZCDP, "gaussian")])
@pytest.mark.parametrize("level", [0.9, 0.95])
def test_an_exact_interval_covers_at_its_level(definition, method, level):
    held, how = coverage("count(a)", definition, level)
    assert how == [method]
    assert abs(held[0] - level) <= 0.01, held


@pytest.mark.parametrize("level", [0.9, 0.95])
def test_a_laplace_sums_interval_covers_at_its_level(level):
    """A batch answered from cell histograms: two of its answers add up several Laplace
    draws (their exact tail, on the ladder), one is a single draw (exact).  At 10,000
    releases the coverage's standard error is 0.3 points: ±1 point is over 3 of them."""
    held, how = coverage("count(a)\ncount(a & b)\ncount(b)", PURE, level)
    assert sorted(how) == ["laplace", "laplace-sum", "laplace-sum"]
    assert all(abs(covered - level) <= 0.01 for covered in held), held


def test_between_the_ladders_levels_a_laplace_sums_interval_is_never_too_narrow():
    """At 93% (between the ladder's 90% and 95%) the chord's bound: at least the level, and
    at most the next level's coverage."""
    held, how = coverage("count(a)\ncount(a & b)\ncount(b)", PURE, 0.93)
    for covered, method in zip(held, how):
        if method == "laplace-sum":
            assert 0.93 - 0.006 <= covered <= 0.95 + 0.006, held


def test_the_exact_tail_of_a_laplace_sum_is_its_closed_form():
    """Two equal draws: P(|L1 + L2| > t) = e^-t (1 + t/2); a single draw: e^-t; and the
    ladder's bound between two levels lies between the exact half-widths around it."""
    for h, level in zip(laplace_sum_ladder([1.0, -1.0]), LADDER):
        assert math.exp(-h) * (1 + h / 2) == pytest.approx(1 - level, rel=1e-6)
    for h, level in zip(laplace_sum_ladder([2.0]), LADDER):
        assert h == pytest.approx(2 * math.log(1 / (1 - level)), rel=1e-8)
    quantiles = laplace_sum_ladder([1.0, 1.0])
    low, high, how = interval(0.0, 4.0, 0.93, PURE, 2, quantiles)
    exact = brentq(lambda t: math.exp(-t) * (1 + t / 2) - 0.07, 0, 20)
    assert how == "laplace-sum" and exact <= high <= quantiles[LADDER.index(0.95)]
    assert high <= exact * 1.01  # the chord is tight between close levels
    assert interval(0.0, 4.0, 0.95, PURE, 2, quantiles)[1] == quantiles[LADDER.index(0.95)]
    assert interval(0.0, 4.0, 0.95, PURE, 2)[2] == "chebyshev"  # stored before the ladder
