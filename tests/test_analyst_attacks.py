"""A hostile analyst against `cocktail serve`: timing, free work, crashes and the boundary.

Each test is the attack itself; it would catch the leak it names.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import ks_2samp

from cocktail import chunkformat as fmt
from cocktail.dataset import load
from cocktail.dp import session
from cocktail.dp.deadline import Deadlines
from cocktail.dp.ledger import BudgetExhausted, Ledger
from cocktail.dp.limits import LIMITS, LimitExceeded
from cocktail.dp.objectives import DEFAULT_OBJECTIVE
from cocktail.dp.session import Source, ask
from cocktail.dp.strategies import SEARCH_CPU_SECONDS
from cocktail.overlay.planner import plan_conjunction
from cocktail.private_config import ledger_location, store_identity
from cocktail.publish import PublishParams, publish
from cocktail.query import Engine, Publication
from cocktail.querylang import QuerySyntaxError, parse_batch
from cocktail.store import LocalStore

from .conftest import dataset_path
from .served import auth, in_process, serve, until
from .test_fuzz import routes

SAMPLES = 200  # requests per side of each timing comparison


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    """BMS-WebView-1 (6,000 records) served as in production, with a term held by one record
    and an absent term of the same length."""
    root = tmp_path_factory.mktemp("attacked")
    dataset = load(dataset_path("bms-webview-1.dat")).head(6000)
    store = LocalStore(root / "store")
    publish(dataset, store, PublishParams(k=5, m=3))
    support = Counter(t for r in dataset.records for t in r)
    rare = min((t for t, s in support.items() if s == 1), key=lambda t: (len(t), t))
    absent = next(f"{n:0{len(rare)}d}" for n in range(10 ** len(rare)) if f"{n:0{len(rare)}d}"
                  not in support)
    ledger = Ledger(ledger_location(store))
    ledger.add_role("spent", alpha=0.1, budget=0.0)
    ledger.add_role("rich", alpha=0.001, budget=10.0)
    ledger.add_role("admin-ish", alpha=1.0, budget=1.0)
    tokens = {name: ledger.add_user(name, role)
              for name, role in (("broke", "spent"), ("funded", "rich"), ("fuzzer", "rich"),
                                 ("prober", "admin-ish"))}
    with serve(root / "store", log=root / "serve.log") as (url, process):
        yield {"url": url, "store": store, "dataset": dataset, "rare": rare, "absent": absent,
               "tokens": tokens, "ledger": ledger, "pid": process.pid,
               "log": root / "serve.log"}


def threshold_accuracy(a: list[float], b: list[float]) -> float:
    """The best single-threshold classifier of a vs b, trained on the first half of each and
    scored on the second: the attacker's success rate on fresh requests."""
    half = len(a) // 2
    train = sorted(a[:half] + b[:half])
    best, rule = 0.0, (train[0], True)
    for cut in train:
        for a_below in (True, False):
            right = sum((x <= cut) == a_below for x in a[:half]) + \
                sum((x <= cut) != a_below for x in b[:half])
            if right > best:
                best, rule = right, (cut, a_below)
    cut, a_below = rule
    right = sum((x <= cut) == a_below for x in a[half:]) + \
        sum((x <= cut) != a_below for x in b[half:])
    return right / (len(a) - half + len(b) - half)


def timed(client: httpx.Client, url: str, token: str, texts: list[str]) -> tuple[list[float],
                                                                                  list[int]]:
    times, codes = [], []
    for text in texts:
        started = time.perf_counter()
        response = client.post(url + "/v1/query", json={"query": text, "allow_unlisted": True},
                               headers=auth(token))  # private and absent terms: answered
        times.append(time.perf_counter() - started)
        codes.append(response.status_code)
    return times, codes


def test_the_timing_attack_works_without_deadlines(target):
    """The leak as it was: the answer computed per request, before any budget check, takes
    visibly longer for a term one record holds than for an absent one."""
    store, rare, absent = target["store"], target["rare"], target["absent"]
    publication = Publication.open(store)
    publication.locations  # a server keeps its publication open, its plan's view read

    def old_server_time(term: str) -> float:
        """Plan, read the planned chunks' indexes and maps: the work the old server did per
        request, and only as much of it as the data asked for."""
        started = time.perf_counter()
        for task in plan_conjunction((term,), publication).tasks:
            chunk = publication.chunk_info(task.chunk)
            store.read("private", fmt.pseudonym_map_path(publication.map_home(chunk.unit),
                                                         chunk.unit))
            store.read("private" if task.private else "public",
                       fmt.index_path(chunk.home, task.chunk))
        return time.perf_counter() - started

    # Each try is the fastest of fifteen requests, the attacker's usual filter for load noise,
    # and the two kinds alternate, so that a busy spell of the machine slows both alike.  The
    # two distributions are told apart (the same KS test the defended routes pass), an order
    # of magnitude apart at the median.  A threshold trained on half the tries once scored
    # only 0.6 in CI, medians ~50 µs against ~4.5 µs: a load spike in the training half put
    # the threshold above the other half's present times.
    present, missing = [], []
    for _ in range(60):
        present.append(min(old_server_time(rare) for _ in range(15)))
        missing.append(min(old_server_time(absent) for _ in range(15)))
    assert ks_2samp(present, missing).pvalue < 1e-6, (present, missing)
    assert np.median(present) > 3 * np.median(missing), (present, missing)


@pytest.mark.parametrize("analyst", ["broke", "funded"])
def test_response_times_do_not_tell_a_present_term_from_an_absent_one(target, analyst):
    """200 interleaved requests each for a term held by one record and for an absent term,
    from an analyst whose budget is spent (every reply 429) and from one whose budget pays
    for fresh answers (each text new, so each computed): the two distributions of response
    times are the same.  Which of a pair goes first is drawn (seeded): always asking the
    present term first once showed a 47 µs shift of the second request, order not data.
    The shift is measured pair by pair (the median of present minus absent), as an attacker
    timing back-to-back requests would: two medians apart drifted 3 ms under CI's load, with
    the pairs themselves indistinguishable (accuracy 0.53)."""
    url, token = target["url"], target["tokens"][analyst]
    rare, absent = target["rare"], target["absent"]
    present_times, missing_times = [], []
    first = np.random.default_rng(43).integers(0, 2, SAMPLES + 1)
    with httpx.Client(timeout=30) as client:
        timed(client, url, token, [f"count({rare})"] * 5)  # connection and caches warm
        for n in range(1, SAMPLES + 1):
            # Distinct weights: each workload a new shape, so the (data-independent) strategy
            # search costs the same on both sides.
            pair = ((2 * n + 11, rare, present_times), (2 * n + 12, absent, missing_times))
            for weight, term, times in pair if first[n] else pair[::-1]:
                elapsed, codes = timed(client, url, token, [f"{weight}*count({term})"])
                assert codes == [429 if analyst == "broke" else 200]
                times.extend(elapsed)
    accuracy = threshold_accuracy(present_times, missing_times)
    p_value = ks_2samp(present_times, missing_times).pvalue
    shift = abs(np.median(np.subtract(present_times, missing_times)))
    assert accuracy <= 0.65 and p_value > 0.001 and shift < 0.002, (accuracy, p_value, shift)


def test_a_spent_analyst_costs_no_data_dependent_work(tmp_path, monkeypatch):
    """After the budget is spent, the most expensive requests the limits allow are refused
    before any strategy search or count."""
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=1.0, budget=1.0)
    token = ledger.add_user("ann", "analyst")
    counted, prepared = [], []
    source = Source("v1", lambda queries: counted.append(len(queries)) or [0] * len(queries))
    real_prepare = session.prepare
    monkeypatch.setattr(session, "prepare",
                        lambda w, *a, **k: prepared.append(w) or real_prepare(w, *a, **k))
    ask(ledger, source, token, "count(a)")
    assert len(counted) == 1 and len(prepared) == 1
    eight = [f"t{i}" for i in range(8)]
    cells = "\n".join(f"count({a} & {b})" for a in eight for b in eight if a < b)  # 2^8 cells
    widest = "\n".join(f"count(w{i} & w{(i + step) % LIMITS.terms})"  # 32 terms, 64 queries
                       for step in (1, 2) for i in range(LIMITS.terms))
    for text in (cells, widest):
        with pytest.raises(BudgetExhausted):
            ask(ledger, source, token, text)
    assert len(counted) == 1 and len(prepared) == 1


# -- the strategy search: charged work only, shared, and invisible in time ----------------

def cpu_seconds(pid: int) -> float:
    """A process's user and system CPU time, all its threads (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_storm_of_waiters_costs_one_search_and_starves_no_other_route(target):
    """One analyst pays for a new 8-term batch; 44 of the same role, their budgets spent, ask
    it at once.  Each found it pending and ran the whole strategy search before waiting,
    uncharged: 91 CPU-s for the storm, and another analyst's GET /v1/budget took 74.7 s.  Now a
    pending request waits first, the one search runs in a thread of its own, and the waiters
    hold none of the threads the other routes answer in."""
    ledger, url = target["ledger"], target["url"]
    ledger.add_role("storm", alpha=0.1, budget=0.1)
    payer = ledger.add_user("storm-payer", "storm")
    broke = [ledger.add_user(f"storm-{n}", "storm") for n in range(44)]
    for n, token in enumerate(broke):  # each spent its budget on something else
        ledger.reserve(ledger.authenticate(token), "elsewhere", f"count(spent{n})")
    batch = [f"{n + 17}*count(storm{n})" for n in range(8)]  # a shape no other test asks

    def ask(token: str) -> httpx.Response:
        return asker.post(url + "/v1/query", json={"batch": batch, "allow_unlisted": True},
                          headers=auth(token))

    def timed_budget() -> float:
        started = time.perf_counter()
        assert watcher.get(url + "/v1/budget").status_code == 200
        return time.perf_counter() - started

    def searches() -> int:  # the server logs each search as it ends
        return target["log"].read_text().count("searched a strategy")

    searched = searches()
    with httpx.Client(headers=auth(target["tokens"]["funded"]), timeout=120) as watcher, \
            httpx.Client(timeout=120, limits=httpx.Limits(max_connections=64)) as asker, \
            ThreadPoolExecutor(len(broke) + 1) as pool:
        timed_budget()  # connected
        cpu, started = cpu_seconds(target["pid"]), time.monotonic()
        paid = pool.submit(ask, payer)
        time.sleep(0.2)  # it reserves, and pays, first
        storm = [pool.submit(ask, token) for token in broke]
        with ThreadPoolExecutor(8) as probes:  # every 50 ms, however long each takes
            timed = []
            while not all(reply.done() for reply in storm):
                timed.append(probes.submit(timed_budget))
                time.sleep(0.05)
            budget_times = [probe.result() for probe in timed]
        replies = [paid.result()] + [reply.result() for reply in storm]
        lasted = time.monotonic() - started
    # One search; cut short by its time on a loaded machine, it may end after the replies.
    assert until(lambda: searches() > searched) and searches() == searched + 1
    cpu = cpu_seconds(target["pid"]) - cpu
    bodies = [reply.json() for reply in replies]
    assert [reply.status_code for reply in replies] == [200] * 45, bodies
    assert bodies[0]["charged"] == 0.1 and not bodies[0]["reused"]
    assert all(b["reused"] and b["answers"] == bodies[0]["answers"] for b in bodies[1:])
    # One search is at most SEARCH_CPU_SECONDS (1.2 s; ~0.5 s here); each request, the 45 and
    # the budget probes, costs the server a few ms (HTTP, the ledger, polling), more on a loaded
    # machine, where the storm lasts longer and so draws more probes (2.62 s for ~100 requests
    # in CI).  The storm cost 91 s before: 45 searches.
    requests = len(replies) + len(budget_times)
    assert cpu < SEARCH_CPU_SECONDS + 0.025 * requests, (cpu, requests)
    # Before, every request thread searched, and no GET was answered within 120 s.  Now none
    # waits for the storm: 4-6 ms at the median here.  A machine loaded far past its cores
    # (this server runs niced) stretches every reply, so the bounds are the storm's own
    # length, which waiting for it would take.
    assert np.median(budget_times) < lasted / 4 and max(budget_times) < lasted, \
        (lasted, budget_times)


def test_a_fresh_answers_time_does_not_tell_whether_another_role_asked_its_shape(target):
    """Strategy choices are kept by shape for every role, and a fresh answer left a fixed time
    after its strategy was chosen: a shape another role had asked came back at once, a new
    one after its search (97 ms against 2,193 ms, a perfect split over 16 replies).  Now a
    searched shape's strategy is due search_ms after arrival, whether it was searched then,
    kept from another role's request, or cut short."""
    from starlette.testclient import TestClient

    from cocktail.dp.limits import Limits
    from cocktail.rank.service import Rankings
    from cocktail.service import CurrentPublication, create_app

    store, ledger = target["store"], target["ledger"]
    ledger.add_role("warmer", alpha=0.001, budget=10.0)
    ledger.add_role("timer", alpha=0.001, budget=10.0)
    warmer, timer = ledger.add_user("warmer", "warmer"), ledger.add_user("timer", "timer")
    deadlines = Deadlines(base_ms=30, count_ms=1, search_ms=400)
    app = create_app(CurrentPublication(store, "fast"), ledger, deadlines, Rankings(store),
                     store, limits=Limits(search_units=2_000))  # small searches: a quick test
    kept, new = [], []

    def ask(client: TestClient, token: str, text: str) -> float:
        started = time.perf_counter()
        reply = client.post("/v1/query", json={"query": text, "allow_unlisted": True},
                            headers=auth(token))
        assert reply.status_code == 200 and not reply.json()["reused"], reply.text
        return time.perf_counter() - started

    switching = sys.getswitchinterval()
    sys.setswitchinterval(0.001)  # as `cocktail serve` does
    try:
        with TestClient(app, base_url="http://127.0.0.1:8080") as client:
            for n in range(8):  # distinct weights: each a shape no one asked before
                shape = f"{n + 2}*count(A) + count(B); count(A & B) - {n + 3}*count(C)"
                ask(client, warmer, shape.replace("A", "wa").replace("B", "wb")
                    .replace("C", "wc"))
                kept.append(ask(client, timer, shape.replace("A", "ta").replace("B", "tb")
                                .replace("C", "tc")))
                new.append(ask(client, timer, f"{n + 2}*count(na) + 2*count(nb); "
                                              f"{n + 4}*count(na & nc)"))
    finally:
        sys.setswitchinterval(switching)
    assert min(kept + new) >= 0.43  # search_ms + base: held, kept or not
    # Before, a new shape came back later by its whole search (≥ 0.1 s even for these).
    assert abs(np.median(kept) - np.median(new)) < 0.05, (kept, new)


# -- the boundary --------------------------------------------------------------------------

def test_no_route_gives_an_analyst_an_exact_answer_or_the_owners_powers(target):
    url, ledger = target["url"], target["ledger"]
    token = target["tokens"]["prober"]
    spec = httpx.get(url + "/openapi.json").json()
    documented = {(path, method.upper()) for path, methods in spec["paths"].items()
                  for method in methods}
    with in_process(target["store"].root) as served:  # every route, listed or not
        served_routes = set((path, method) for method, path in routes(served.app)[0]
                            if method != "HEAD")
    # A new route must be reviewed here before it ships.  /v1/rank: ids and public attributes
    # of a ranking's top k only (tests/test_rank.py checks the body and the deadline).  /owner*:
    # the owner's dashboard, refusing every analyst token; /analyst*: the caller's own budget
    # and answers; /static/plotly.js: the charting library (tests/test_report.py); /health:
    # whether a version is served, and which; /docs, /redoc, /openapi.json: the contract.
    # /v1/history: the caller's own charged answers; /v1/rankings: what each ranking's public
    # manifest says; /v1/terms: the public chunks' terms, never a private-only one
    # (tests/test_client.py attacks both).  /v1/preview: the strategy, expected errors and
    # charge of a workload, reading no data (the preview storm below attacks its search work).
    api = {("/v1/query", "POST"), ("/v1/preview", "POST"), ("/v1/budget", "GET"), ("/v1/limits", "GET"),
           ("/v1/rank", "POST"), ("/owner/state", "GET"), ("/health", "GET"),
           ("/v1/history", "GET"), ("/v1/rankings", "GET"), ("/v1/terms", "GET")}
    assert documented == api
    assert served_routes == api | {("/owner", "GET"), ("/owner/login", "POST"),
                                   ("/analyst", "GET"), ("/analyst/login", "POST"),
                                   ("/static/plotly.js", "GET"), ("/docs", "GET"),
                                   ("/redoc", "GET"), ("/openapi.json", "GET")}
    dataset, rare = target["dataset"], target["rare"]
    top = max(dataset.terms(), key=lambda t: dataset.count_containing([t]))
    def powers():
        return ledger.roles(), [(u["name"], u["role"], u["active"]) for u in ledger.users()]

    before = powers()
    answer = httpx.post(url + "/v1/query", json={"query": f"count({top})"},
                        headers=auth(token)).json()
    assert answer["answers"][0] != dataset.count_containing([top])  # noise, never the count
    assert "exact" not in json.dumps(answer).lower().replace("sensitivity_exact", "")
    for path in ("/v1/query", "/v1/budget", "/v1/limits", "/v1/history", "/v1/rankings",
                 "/v1/terms", "/v1/roles", "/v1/users", "/v1/exact", "/v1/ledger"):
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            response = httpx.request(method, url + path, headers=auth(token),
                                     json={"query": f"count({rare})", "name": "prober",
                                           "role": "boss", "alpha": 1000, "budget": 1e12,
                                           "exact": True})
            assert response.status_code in (200, 404, 405, 422, 429), (method, path)
    assert powers() == before
    assert [u["spent"] for u in ledger.users() if u["name"] == "prober"] == [1.0]


# -- fuzzing: no input makes a 500 --------------------------------------------------------

_TERM = st.one_of(st.from_regex(r"[\w.:/#@+\-]{1,12}", fullmatch=True),
                  st.text(max_size=24).map(lambda t: json.dumps(t, ensure_ascii=False)),
                  st.text(alphabet="ab\"\\&()*;#\n", max_size=8))
_NUMBER = st.one_of(st.integers(-10 ** 9, 10 ** 9).map(str),
                    st.floats().map(repr),
                    st.sampled_from(["1e400", "1e308", "1e-400", ".5", "00", "1e6", "1000001"]))
_COUNT = st.lists(_TERM, min_size=1, max_size=40).map(lambda ts: f"count({' & '.join(ts)})")
_PART = st.tuples(st.sampled_from(["", " + ", " - ", "-"]),
                  st.one_of(st.just(""), _NUMBER.map(lambda n: n + "*")), _COUNT)
_LINEAR = st.lists(_PART, min_size=1, max_size=6).map(
    lambda parts: "".join(sign + weight + count for sign, weight, count in parts))
_BATCH = st.lists(st.one_of(_LINEAR, st.just("# comment"), st.just("")), min_size=1,
                  max_size=80).flatmap(lambda lines: st.sampled_from(["\n", ";", "; "]).map(
                      lambda sep: sep.join(lines)))
QUERIES = st.one_of(_BATCH, st.text(max_size=300),
                    st.tuples(_BATCH, st.text(max_size=40)).map("".join))
FUZZ = settings(max_examples=400, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(QUERIES)
def test_fuzz_the_query_language_and_the_strategies(text):
    """Any text is a workload within the limits whose noisy default release is finite, or a
    QuerySyntaxError / LimitExceeded — never another exception."""
    try:
        workload = LIMITS.parse(text)
    except (QuerySyntaxError, LimitExceeded):
        return
    prepared = session.prepare(workload)
    assert all(np.isfinite(prepared.default(0.5).answers))


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(body=st.one_of(
    QUERIES.map(lambda q: {"query": q}),
    st.lists(QUERIES, max_size=5).map(lambda b: {"batch": b}),
    st.recursive(st.none() | st.booleans() | st.floats() | st.text(max_size=20),
                 lambda inner: st.lists(inner, max_size=4) |
                 st.dictionaries(st.sampled_from(["query", "batch", "x"]), inner, max_size=3),
                 max_leaves=10)))
def test_fuzz_the_http_api(target, body):
    response = httpx.post(target["url"] + "/v1/query", json=body, timeout=60,
                          headers=auth(target["tokens"]["fuzzer"]))
    assert response.status_code in (200, 400, 413, 422, 429), (body, response.text)
    assert isinstance(response.json(), dict)


def test_a_reused_answer_leaves_at_its_own_arrival_plus_the_refusal_time(tmp_path):
    """A reused answer is held until the refusal time after its own arrival, as a refusal is:
    released any earlier (e.g. at once), its reply would tell an analyst that someone of
    their role asked the same before.  A fresh answer of one count leaves its fresh time
    after its strategy's choice, never before its arrival plus that time."""
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=1.0, budget=5.0)
    ann, bob = (ledger.add_user(name, "analyst") for name in ("ann", "bob"))
    source = Source("v1", lambda queries: [500] * len(queries))
    deadlines = Deadlines(base_ms=250, count_ms=10)
    arrival = time.monotonic()
    with ThreadPoolExecutor(1) as pool:
        fresh = ask(ledger, source, ann, "count(a)", deadlines=deadlines, pool=pool,
                    arrival=arrival)
    assert not fresh.body["reused"]
    assert arrival + 0.26 <= fresh.release_at <= time.monotonic() + 0.26
    reused = ask(ledger, source, bob, "count(a)", deadlines=deadlines, arrival=arrival + 5)
    assert reused.body["reused"] and reused.body["answers"] == fresh.body["answers"]
    assert reused.release_at == pytest.approx(arrival + 5.25)


# -- crashes: a request killed between its reservation and its stored answer ----------------

KILLED_ASKER = """
import os, signal, sys
from concurrent.futures import ThreadPoolExecutor
from cocktail.dp.deadline import Deadlines
from cocktail.dp.ledger import Ledger
from cocktail.dp.session import Source, ask

path, token, version, store, text = sys.argv[1:]
def die(queries):  # SIGKILL while the counts run: reserved and charged, nothing stored
    os.kill(os.getpid(), signal.SIGKILL)
ask(Ledger(path), Source(version, die, store), token, text,
    deadlines=Deadlines(base_ms=30, count_ms=1), pool=ThreadPoolExecutor(1))
"""


def kill_mid_request(ledger_path, source: Source, token: str, text: str) -> None:
    """A real process asks, reserves, and is SIGKILLed before its answer is stored."""
    died = subprocess.run([sys.executable, "-c", KILLED_ASKER, str(ledger_path), token,
                           source.version, source.store, text], capture_output=True, timeout=60)
    assert died.returncode == -signal.SIGKILL, died.stderr.decode()


def test_a_request_killed_mid_answer_never_leaves_a_placeholder_for_the_role(tmp_path):
    """A SIGKILL between reserve and store left a pending reservation; the retry waited out
    its deadline and stored the default answer (noise around zero) for the whole role.  Now
    the retry sees the reserver is dead and computes the real answer, at no second charge."""
    data = tmp_path / "d.dat"
    data.write_text("".join(f"common {i % 7}\n" for i in range(400)))
    store = LocalStore(tmp_path / "store")
    publish(load(data), store, PublishParams(k=2, m=2))
    engine = Engine(Publication.open(store))
    source = Source(engine.version, engine.counts, store_identity(store))
    ledger = Ledger(ledger_location(store))
    ledger.add_role("analyst", alpha=1.0, budget=5.0)
    tokens = [ledger.add_user(name, "analyst") for name in ("ann", "bob")]
    deadlines = Deadlines(base_ms=1000, count_ms=1)  # a loaded machine still makes it
    with ThreadPoolExecutor(2) as pool:
        for n in range(3):
            text = f"{n + 1}*count(common)"
            kill_mid_request(ledger.path, source, tokens[0], text)
            retry = ask(ledger, source, tokens[0], text, deadlines=deadlines, pool=pool).body
            # Lap(1) noise: 30 away from the truth has probability e^-30; the placeholder is
            # noise around 0, 400 (n + 1) away.
            assert abs(retry["answers"][0] - 400 * (n + 1)) < 30 * (n + 1), retry
            assert retry["expected_squared_error"] == [pytest.approx(2 * (n + 1) ** 2)]
            assert retry["charged"] == 0  # the killed request paid for it
            other = ask(ledger, source, tokens[1], text, deadlines=deadlines, pool=pool).body
            assert other["answers"] == retry["answers"] and other["reused"]
    assert ledger.budget_status(ledger.authenticate(tokens[0]))["spent"] == 3.0


def test_a_request_waiting_on_a_live_reserver_stores_nothing_at_its_deadline(tmp_path):
    """The reserver lives (it is slow): the waiter replies at its deadline with 'ask again'
    and stores no placeholder; the reserver's real answer is what the role then gets."""
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=1.0, budget=5.0)
    token = ledger.add_user("ann", "analyst")
    user = ledger.authenticate(token)
    source = Source("v1", lambda queries: [500] * len(queries))
    key = session.answer_key(parse_batch("count(a)"), DEFAULT_OBJECTIVE)  # what ask reserves
    slow = ledger.reserve(user, source.publication, key)  # alive: this very process
    with ThreadPoolExecutor(1) as pool, pytest.raises(session.ComputeFailed, match="ask again"):
        ask(ledger, source, token, "count(a)", deadlines=Deadlines(base_ms=30, count_ms=1),
            pool=pool)
    assert ledger.reserve(user, source.publication, key).state == "pending"
    ledger.fulfil(slow, {"answers": [501.5]})
    assert ask(ledger, source, token, "count(a)").body["answers"] == [501.5]


def test_counts_that_fail_leave_the_paid_reservation_to_the_retry_at_once(tmp_path):
    """The counts raise once: the request is refused ("ask again") and its reservation
    released, so the same token's retry computes the answer now, charged nothing more (the
    failed request paid for it), instead of finding its own dead request's reservation in
    flight and being refused at every deadline until it goes stale (600 s)."""
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.add_role("analyst", alpha=0.5, budget=5.0)
    token = ledger.add_user("ann", "analyst")
    failures = [OSError("the private cloud is unreachable")]

    def counts(queries):
        if failures:
            raise failures.pop()
        return [500] * len(queries)

    source = Source("v1", counts)
    deadlines = Deadlines(base_ms=1000, count_ms=1)  # a loaded machine still makes it
    with ThreadPoolExecutor(1) as pool:
        with pytest.raises(session.ComputeFailed, match="reuses this charge"):
            ask(ledger, source, token, "count(a)", deadlines=deadlines, pool=pool)
        retry = ask(ledger, source, token, "count(a)", deadlines=deadlines, pool=pool).body
    # Lap(2) noise: 30 away has probability e^-15; the default answer is noise around 0.
    assert abs(retry["answers"][0] - 500) < 30, retry
    assert retry["charged"] == 0 and not retry["reused"]
    assert ledger.budget_status(ledger.authenticate(token))["spent"] == 0.5


def test_a_flood_of_free_rank_requests_does_not_time_private_ties(tmp_path):
    """16 clients of one token flood a 200,000-tuple ranking (no defense: every answer free)
    for 30 s, each request asking at random for a value some tuples hold or one nobody holds
    (every tuple ties, and ranking them takes ~2x longer).  Replies came whenever the top k
    was done, late under the flood, and their time told the two apart; now every admitted
    reply leaves at the ranking's deadline (the token's one ranking in flight keeps them
    inside it) and a miss (503) is no likelier for the costly query.  Only admitted replies
    are compared: a 429 is decided before the query is read, and would dilute the leak."""
    from scipy.stats import fisher_exact

    from .test_rank import cli
    table = tmp_path / "big.csv"
    assert cli("rank", "generate", str(table), "--tuples", "200000")[0] == 0
    store = tmp_path / "s"
    assert cli("rank", "build", str(table), "--public", "A1,A2,A3,A4,A5", "--private",
               "B1,B2,B3,B4,B5", "--defense", "none", "--store", str(store))[0] == 0
    ledger = Ledger(ledger_location(LocalStore(store)))
    ledger.add_role("analyst", alpha=0.1, budget=1.0)
    token = ledger.add_user("flooder", "analyst")
    # 250 ms: ~6x the costly ranking's 40 ms here, headroom an operator gives a loaded host
    with serve(store, "--deadline-rank-ms", "250") as (url, _), httpx.Client() as client:
        stop = time.monotonic() + 30

        def flood(worker: int) -> list[tuple[bool, float, int]]:
            choose, replies = np.random.default_rng([41, worker]), []
            while time.monotonic() < stop:
                held = bool(choose.integers(2))
                started = time.perf_counter()
                reply = client.post(url + "/v1/rank", headers=auth(token), timeout=60,
                                    json={"query": "B2=1" if held else "B2=3", "k": 10})
                replies.append((held, time.perf_counter() - started, reply.status_code))
            return replies

        with ThreadPoolExecutor(16) as pool:
            replies = [r for worker in pool.map(flood, range(16)) for r in worker]
    statuses = Counter(status for _, _, status in replies)
    admitted = [(is_held, seconds, status) for is_held, seconds, status in replies
                if status != 429]
    held = [seconds for is_held, seconds, _ in admitted if is_held]
    absent = [seconds for is_held, seconds, _ in admitted if not is_held]
    assert statuses[429] > 0 and len(held) >= 30 and len(absent) >= 30, statuses
    assert set(statuses) <= {200, 429, 503}, statuses
    misses = [[sum(1 for h, _, s in admitted if h == side and s == 503),
               sum(1 for h, _, s in admitted if h == side and s != 503)] for side in (True, False)]
    assert statuses[503] <= len(admitted) // 4 and fisher_exact(misses)[1] > 0.001, misses
    accuracy = threshold_accuracy(held, absent)
    p_value = ks_2samp(held, absent).pvalue
    assert accuracy <= 0.7 and p_value > 0.001, (accuracy, p_value, np.median(held),
                                                  np.median(absent))
    assert min(held + absent) >= 0.25


def test_a_multi_token_rank_flood_does_not_tell_a_costly_probe_from_a_cheap_one(tmp_path):
    """Ten tokens of one role flood POST /v1/rank with a dp top k that a live process of their
    role holds reserved (so each request waits for it), while twenty probers ask a
    100,000-tuple ranking (no defense) for a private value 5 tuples hold (fewer than k: every
    tuple ties and is sorted, ~5x the work) or one 50 hold, in a seeded random order.  The
    flood held the rank threads until each waiter's deadline, a probe got one only a moment
    before its own, and the costlier probe missed it (503) more often: 98 of 300 against 32,
    Fisher p 5e-11.  Now a token has one ranking in flight, and the server books each a
    worst-case share of its one rank worker at arrival: every probe is answered in time."""
    import asyncio

    from scipy.stats import fisher_exact

    from cocktail.rank.model import RankTable, Schema
    from cocktail.rank.release import build_ranking

    from .test_rank import cli, people, table_file
    from .test_service import STUCK_RANKER
    n, rng, store = 100_000, np.random.default_rng(37), tmp_path / "s"
    private = rng.integers(0, 5, n).astype(float)
    private[:5], private[5:55] = 5, 6  # "rare": 5 tuples, "some": 50
    schema = Schema(("A1",), ("B1",), {}, {}, {"A1": ("a", "b"), "B1": (
        "v0", "v1", "v2", "v3", "v4", "rare", "some")})
    build_ranking(LocalStore(str(store)), "probed", RankTable(
        schema, [f"t{i}" for i in range(n)], rng.integers(0, 2, (n, 1)).astype(float),
        private[:, None]), "none", 2)
    data = table_file(tmp_path, "id,city,age,religion,income,smoker", people(60))
    assert cli("rank", "build", str(data), "--public", "city,age", "--private",
               "religion,income,smoker", "--id", "id", "--numeric", "age", "--defense", "dp",
               "--name", "held", "--store", str(store))[0] == 0
    ledger = Ledger(ledger_location(LocalStore(str(store))))
    ledger.add_role("crowd", alpha=0.5, budget=1.0)
    ledger.add_role("probe", alpha=0.5, budget=1.0)
    crowd = [ledger.add_user(f"crowd{i}", "crowd") for i in range(11)]
    probers = [ledger.add_user(f"prober{i}", "probe") for i in range(20)]
    held = {"query": "city=a,religion=x", "k": 3, "name": "held"}
    stuck = subprocess.Popen([sys.executable, "-c", STUCK_RANKER, str(store), "held",
                              held["query"], crowd[0]], stdout=subprocess.PIPE)
    flood_codes: Counter = Counter()
    try:
        assert stuck.stdout.readline() == b"reserved\n"
        # 40 slots of 34 ms, for 30 tokens; the old server knew no slots, and its rate limit
        # (10 a second per token) let the flood in
        with serve(store, "--deadline-rank-ms", "1350", "--rank-slots", "40") as (url, _):
            stop = False

            async def flood() -> None:
                async def one(client: httpx.AsyncClient) -> None:
                    while not stop:
                        reply = await client.post(url + "/v1/rank", json=held)
                        flood_codes[reply.status_code] += 1

                clients = [httpx.AsyncClient(timeout=60, headers=auth(token))
                           for token in crowd[1:]]
                await asyncio.gather(*(one(client) for client in clients for _ in range(24)))
                for client in clients:
                    await client.aclose()

            def probe(n: int) -> list[tuple[bool, int]]:
                kinds = [True, False] * 15  # 600 probes in all, 300 of each kind
                np.random.default_rng(n).shuffle(kinds)
                with httpx.Client(timeout=60, headers=auth(probers[n])) as client:
                    return [(costly, client.post(url + "/v1/rank", json={
                        "query": "B1=rare" if costly else "B1=some", "k": 10,
                        "name": "probed"}).status_code) for costly in kinds]

            with ThreadPoolExecutor(1 + len(probers)) as pool:
                flooding = pool.submit(asyncio.run, flood())
                time.sleep(2)
                probes = [reply for replies in pool.map(probe, range(len(probers)))
                          for reply in replies]
                stop = True
                flooding.result()
    finally:
        stuck.kill()
        stuck.wait()
    table = [[sum(costly == kind and status == 200 for costly, status in probes),
              sum(costly == kind and status != 200 for costly, status in probes)]
             for kind in (True, False)]
    p_value = fisher_exact(table).pvalue
    assert flood_codes[200] == 0 and sum(flood_codes.values()) >= 500, flood_codes
    assert p_value > 0.05 and table[0][0] + table[1][0] >= len(probes) / 2, \
        (table, p_value, flood_codes)


def test_four_dp_top_1000s_do_not_black_out_anyone_elses_top_10(tmp_path):
    """Round 4's blackout: one rank worker, and a dp top 1,000 booked a quarter of its 64 s
    deadline on it; four of them from four tokens, 15 s apart, 4e-4 α in all, turned every
    other analyst's top 10 into 503 for a minute.  Here at rank_ms 25 (a top 1,000 due 4 s
    after arrival, booked 1 s; a dp top 10 due 200 ms, booked 50 ms) four crowd tokens book
    a top 1,000 a second apart, while an analyst of another role and one of the crowd's own
    role each ask a dp top 10 in turn: every top 10 is answered as before the attack, and
    leaves when it did (a booking waits only behind its own role's rankings of its length)."""
    from .test_service import dp_ranking_store
    store, ledger = dp_ranking_store(tmp_path, tuples=3000, records=300, budget=100.0)
    ledger.add_role("crowd", alpha=0.5, budget=100.0)
    crowd = [ledger.add_user(f"crowd{n}", "crowd") for n in range(4)]
    victims = {"ann": ledger.add_user("ann", "analyst"), "cara": ledger.add_user("cara", "crowd")}
    top_10 = {"query": "city=a,religion=x", "k": 10}

    def asks(token: str, until: float) -> list[tuple[int, float]]:
        replies = []
        with httpx.Client(timeout=30, headers=auth(token)) as client:
            while time.monotonic() < until:
                started = time.monotonic()
                status = client.post(url + "/v1/rank", json=top_10).status_code
                replies.append((status, time.monotonic() - started))
        return replies

    def attack(n: int) -> int:
        time.sleep(n)
        return httpx.post(url + "/v1/rank", headers=auth(crowd[n]), timeout=30,
                          json={"query": f"city=a,religion={'xyz'[n % 3]}", "k": 1000}
                          ).status_code

    with serve(store, "--deadline-rank-ms", "25") as (url, _):
        with ThreadPoolExecutor(2) as pool:  # the victims alone (their first answers charge)
            before = [r for got in pool.map(asks, victims.values(),
                                            [time.monotonic() + 2] * 2) for r in got]
        with ThreadPoolExecutor(6) as pool:
            attacks = pool.map(attack, range(4))
            time.sleep(0.2)  # the first top 1,000 is booked
            during = [r for got in pool.map(asks, victims.values(),
                                            [time.monotonic() + 4] * 2) for r in got]
            attacks = list(attacks)
    assert attacks == [200] * 4, attacks  # the lane took all four (booked 1 s each)
    refused = [status for status, _ in during if status != 200]
    assert len(during) >= 20 and len(refused) <= len(during) * 0.05, Counter(s for s, _ in during)
    assert all(status == 200 for status, _ in before), Counter(s for s, _ in before)
    took = [[seconds for _, seconds in replies] for replies in (before, during)]
    assert min(took[1]) >= 0.2  # the deadline, attack or not
    assert abs(np.median(took[1]) - np.median(took[0])) < 0.03, (np.median(took[0]),
                                                                  np.median(took[1]))


def test_a_storm_of_previews_of_new_shapes_buys_no_free_search_work(target):
    """Previews read no data and charge nothing, so nothing but their gate bounds the searches
    they buy.  20 tokens each send 50 previews of 8-term batches of shapes nobody asked:
    the server admits its 3 a minute (each may search, at most SEARCH_CPU_SECONDS), refuses
    the rest with 429 before looking at any shape, and another analyst's GET /v1/budget is
    answered all along."""
    ledger, url = target["ledger"], target["url"]
    ledger.add_role("previewers", alpha=0.1, budget=0.0)  # nothing to spend: previews only
    tokens = [ledger.add_user(f"previewer-{n}", "previewers") for n in range(20)]

    def storm(n: int) -> list[httpx.Response]:
        with httpx.Client(headers=auth(tokens[n]), timeout=120) as client:
            return [client.post(url + "/v1/preview", json={"allow_unlisted": True, "batch": [
                f"{n * 50 + k + 2}*count(p{n}x{k}a{i}) + count(p{n}x{k}a{(i + 1) % 8})"
                for i in range(8)]}) for k in range(50)]  # weights: every shape new

    def timed_budget() -> float:
        started = time.perf_counter()
        assert watcher.get(url + "/v1/budget").status_code == 200
        return time.perf_counter() - started

    def searches() -> int:
        return target["log"].read_text().count("searched a strategy")

    searched = searches()
    with httpx.Client(headers=auth(target["tokens"]["funded"]), timeout=120) as watcher, \
            ThreadPoolExecutor(20) as pool:
        timed_budget()  # connected
        quiet = [timed_budget() for _ in range(20)]  # before the storm, on this machine's load
        cpu, started = cpu_seconds(target["pid"]), time.monotonic()
        replies = [pool.submit(storm, n) for n in range(20)]
        budget_times = []
        while not all(reply.done() for reply in replies):
            budget_times.append(timed_budget())
            time.sleep(0.05)
        replies = [r for reply in replies for r in reply.result()]
        lasted = time.monotonic() - started
    cpu = cpu_seconds(target["pid"]) - cpu
    codes = Counter(r.status_code for r in replies)
    minutes = math.ceil(lasted / 60)
    assert set(codes) == {200, 429} and codes[200] <= 3 * minutes, (codes, lasted)
    assert {r.json()["limit"] for r in replies if r.status_code == 429} <= {
        "previews_per_minute", "previews_all_per_minute"}
    # at most one search per admitted preview (fewer if two of one user's overlapped: the
    # second gets the best fixed candidate), none for the refused
    assert until(lambda: searches() > searched) and searches() <= searched + codes[200]
    # The admitted previews' searches, and 1,000 requests refused by the gate at a few ms of
    # the server's CPU each (HTTP, the token's lookup), more on a loaded machine.
    requests = len(replies) + len(budget_times)
    assert cpu < codes[200] * SEARCH_CPU_SECONDS + 0.004 * requests, (cpu, requests, codes)
    # A loaded machine stretches every reply (this server runs niced): the bound is generous,
    # the figures measured are in docs/dp.md ("Previews").
    assert np.median(budget_times) < 0.25 and max(budget_times) < lasted / 2, \
        (np.median(budget_times), max(budget_times), lasted)
    print(f"preview storm: {len(replies)} previews in {lasted:.1f} s, {codes[200]} admitted, "
          f"server CPU {cpu:.2f} s; /v1/budget median {np.median(budget_times) * 1000:.1f} ms, "
          f"worst {max(budget_times) * 1000:.1f} ms over {len(budget_times)}; before it, "
          f"median {np.median(quiet) * 1000:.1f} ms")
