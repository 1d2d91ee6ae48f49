"""The HTTP surface under malformed input: a deterministic fuzzer over every route and method the
app itself lists (never a hand-written list).  No reply may be a 5xx, and every error reply of
the API (``/v1/...``) and every JSON reply anywhere is well-formed, strict JSON with a
``detail``; every reply carries the security headers (:mod:`cocktail.guards`).  The generator is seeded: a failure names the request that caused it, and replays."""

from __future__ import annotations

import json
import logging
import os
import random
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from starlette.routing import Route

from cocktail.cli import main
from cocktail.dp.ledger import Ledger
from cocktail.private_config import ledger_location
from cocktail.store import LocalStore

from .served import in_process

RUN = CliRunner()
REQUESTS = 5_200
EXTRA_METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH")  # what a route does not allow: 405
HEADERS = {"content-security-policy", "x-frame-options", "x-content-type-options",
           "referrer-policy"}


def fuzz_store(root: Path) -> tuple[Path, list[str], list[str]]:
    """A published store with two rankings (estt and dp), two analysts (one disabled) and an
    owner token: (the store, [ann, bob, owner], the published terms)."""
    data, store, people = root / "d.dat", root / "s", root / "people.csv"
    RUN.invoke(main, ["generate", str(data), "--records", "1500", "--seed", "7"])
    assert RUN.invoke(main, ["publish", str(data), "--store", str(store), "--k", "5",
                             "--m", "2"]).exit_code == 0
    people.write_text("id,city,age,religion,income,smoker\n" + "".join(
        f"p{i},{'ab'[i % 2]},{20 + i % 7},{'xyz'[i % 3]},{(i * 7) % 5},{i % 2}\n"
        for i in range(60)))
    for name, defense in (("ranking", "estt"), ("noisy", "dp")):
        built = RUN.invoke(main, ["rank", "build", str(people), "--public", "city,age",
                                  "--private", "religion,income,smoker", "--id", "id",
                                  "--numeric", "age", "--defense", defense, "--name", name,
                                  "--store", str(store)])
        assert built.exit_code == 0, built.output
    ledger = Ledger(ledger_location(LocalStore(str(store))))
    ledger.add_role("analyst", alpha=0.01, budget=1e6)
    tokens = [ledger.add_user("ann", "analyst"), ledger.add_user("bob", "analyst"),
              ledger.new_owner_token()]
    ledger.set_active("bob", False)
    return store, tokens, sorted(set(data.read_text().split()))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return fuzz_store(tmp_path_factory.mktemp("fuzz"))


@pytest.fixture(scope="module")
def client(built):
    store, tokens, _ = built
    with in_process(store) as served:
        yield served, tokens


NASTY = [None, True, False, 0, -1, 1, 10, 2**31, -2**63, 10**400, 1.5, -0.0, 1e308, "", " ",
         "count(a)", "count(a &", "count(\ud800)", "city=a,religion=x", "ranking", "../x",
         "x" * 5000, "\x00", "é", [], {}, ["count(a)"], [1, 2], {"query": "count(a)"},
         ["count(a)"] * 100]
RAW = [b"", b"{", b"}", b"[", b"null", b"[]", b'"x"', b"1e999", b"NaN", b"-Infinity",
       b'{"query": 1e999}', b'{"k": 1e999, "query": "city=a"}', b'{"query": NaN}',
       b'{"query": "count(a)", "k": -1e999}', b'{"batch": [1e999, NaN]}',
       b'{"query": "count(a)"', b'{"query": "\\ud800"}', b'{"query": "\\u0000"}',
       b'{"name": "\\udfff", "query": "city=a"}', b'{"query": "city=a", "name": 1e999}',
       "{\"query\": \"count(caf\u00e9)\"}".encode("latin-1"), b"\xff\xfe\x00{", b"\x80\x81\x82",
       b'\xef\xbb\xbf{"query": "count(a)"}', b"query=count(a)&k=3", b"token=x&token=y",
       b"token=%ff%fe", b"token=" + b"\xff" * 20, b"--x\r\nContent-Disposition: form-data\r\n\r\n"]
TYPES = [None, "application/json", "text/plain", "text/plain; charset=latin-1",
         "application/x-www-form-urlencoded", "multipart/form-data", "multipart/form-data; "
         "boundary=x", "application/json; charset=utf-16", "application/octet-stream", "*/*",
         "application/json; charset=\xff", "garbage"]
QUERIES = ["", "?k=1e999", "?query=count(a)&query=x", "?%ff=%fe", "?" + "a=1&" * 200,
           "?token=abc", "?%7f%00", "?k=NaN&name=../x"]
FIELDS = ["query", "batch", "k", "name", "token", "unknown"]


def body(rng: random.Random) -> bytes:
    """A request body: a raw malformed one, a deep nest, an oversized one, or JSON (or a form)
    of nasty values under the fields the routes read."""
    kind = rng.random()
    if kind < 0.3:
        return rng.choice(RAW)
    if kind < 0.36:
        depth = rng.choice([50, 1_000, 50_000])
        return rng.choice([b"[" * depth + b"]" * depth, b'{"query": ' * depth + b"1"])
    if kind < 0.38:
        return b'{"query": "' + b"x" * rng.choice([70_000, 300_000]) + b'"}'
    fields = {f: rng.choice(NASTY) for f in rng.sample(FIELDS, rng.randint(0, 3))}
    if kind < 0.45:
        return "&".join(f"{k}={v}" for k, v in fields.items()).encode("utf-8", "surrogatepass")
    return json.dumps(fields).encode()


def headers(rng: random.Random, tokens: list[str]) -> dict:
    chosen = {}
    content_type = rng.choice(TYPES)
    if content_type:
        chosen["Content-Type"] = content_type
    credential = rng.choice([None, *tokens, "", "nonsense", "x" * 3000, "\xff\xfe", "a b"])
    if credential is not None:
        scheme = rng.choice(["Bearer ", "bearer ", "Basic ", "Bearer  ", ""])
        chosen["Authorization"] = scheme + credential
    if rng.random() < 0.2:
        chosen["Cookie"] = rng.choice(["cocktail_owner=" + tokens[-1], "cocktail_analyst=x",
                                       "cocktail_csrf=\xff; cocktail_owner=", "=;;=", "a" * 5000])
    if rng.random() < 0.2:
        chosen["Origin"] = rng.choice(["http://127.0.0.1:8080", "https://evil.example", "null",
                                       "\xff"])
    return {name: value.encode("latin-1") for name, value in chosen.items()}  # any octets


def routes(app) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Every (method, path) the app serves, and those it does not (other methods, unknown
    paths), from the app."""
    served, other = set(), {("GET", "/no-such-page"), ("POST", "/v1/no-such-route")}
    for route in app.routes:
        if isinstance(route, Route):
            served |= {(m, route.path) for m in route.methods}
            other |= {(m, route.path) for m in set(EXTRA_METHODS) - route.methods}
    return sorted(served), sorted(other)


def strict_json(text: str):
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_the_issues_inputs_are_refused_with_a_4xx(client):
    served, tokens = client
    for path, raw in (("/v1/query", b'{"query": 1e999}'), ("/v1/rank", b'{"k":1e999}'),
                      ("/v1/rank", b'{"query": "city=a", "k": 1e999}'),
                      ("/v1/query", b'{"query": NaN}'),
                      ("/v1/rank", b'{"query": "city=\\udfff"}')):  # once echoed back: a 500
        reply = served.post(path, content=raw, headers={"Content-Type": "application/json",
                                                          "Authorization": f"Bearer {tokens[0]}"})
        assert 400 <= reply.status_code < 500 and "detail" in strict_json(reply.text), raw
    latin = "count(café)".encode("latin-1")
    for content_type in ("text/plain", "application/json", None):
        reply = served.post("/v1/query", content=latin,
                            headers={"Content-Type": content_type} if content_type else {})
        assert 400 <= reply.status_code < 500 and "detail" in strict_json(reply.text)


def test_no_fuzzed_request_gets_a_5xx_or_a_malformed_error(client):
    served, tokens = client
    pairs, others = routes(served.app)
    api = {path for _, path in pairs if path.startswith("/v1/")}
    assert {"/v1/query", "/v1/rank", "/v1/budget", "/owner/login", "/analyst/login"} <= \
        {path for _, path in pairs}
    rng = random.Random(30)
    failures, statuses = [], {}
    for n in range(REQUESTS):  # every route and method, round after round; every 5th, another
        method, path = others[n // 5 % len(others)] if n % 5 == 4 else pairs[n % len(pairs)]
        request = {"method": method, "url": path + rng.choice(QUERIES),
                   "headers": headers(rng, tokens),
                   "content": body(rng) if method in ("POST", "PUT", "PATCH") else None}
        reply = served.request(**request)
        statuses[reply.status_code] = statuses.get(reply.status_code, 0) + 1
        problem = None
        if reply.status_code >= 500:
            problem = "5xx"
        elif HEADERS - set(reply.headers):
            problem = f"no {HEADERS - set(reply.headers)}"
        elif method != "HEAD" and reply.status_code >= 400 and (
                path in api or reply.headers.get("content-type", "").startswith(
                    ("application/json", "application/problem+json"))):
            try:  # the one error model: RFC 9457 problem details
                error = strict_json(reply.text)
                assert reply.headers["content-type"] == "application/problem+json"
                assert error["status"] == reply.status_code and isinstance(error["detail"], str)
                assert reply.status_code != 401 or "www-authenticate" in reply.headers
            except (ValueError, AssertionError, TypeError, KeyError) as exc:
                problem = f"not a problem: {exc!r}"
        if problem:
            failures.append((problem, reply.status_code, request, reply.text[:200]))
    kinds = {(p, s, r["method"], r["url"].split("?")[0]) for p, s, r, _ in failures}
    assert sum(statuses.values()) >= 5_000 and not failures, (len(failures), kinds, failures[:3])
    assert statuses.get(200, 0) > 100  # the valid requests among them were answered


def test_every_reply_carries_the_security_headers(client):
    """Every route and method the app lists, the 404 of a route it does not, the 405 of a
    method, the 413 of an oversized body and the 422 of an unreadable one."""
    served, tokens = client
    pairs, others = routes(served.app)
    replies = [served.request(method, path, headers={"Authorization": f"Bearer {tokens[0]}"})
               for method, path in pairs + others]
    replies += [served.post("/v1/query", content=b"x" * 300_000),
                served.post("/v1/query", content=b'{"query": 1e999}')]
    assert {404, 405, 413, 422} <= {r.status_code for r in replies}
    for reply in replies:
        assert HEADERS <= set(reply.headers), (reply.request.url, reply.status_code)
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert reply.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in reply.headers["content-security-policy"]
        assert reply.headers["referrer-policy"] == "same-origin"


# -- memory ------------------------------------------------------------------------------------

MEMORY_REQUESTS = 3_000  # after a warm-up of 1,000; benchmarks/serve_memory.py runs 20,000


def hostile(n: int, rng: random.Random, tokens: list[str], terms: list[str],
            routes_: tuple[list, list]) -> dict:
    """The n-th request of a long hostile run, for TestClient.request: the fuzzer's malformed
    ones, and valid ones that each ask something new (fresh answers, terms nobody holds,
    top ks with new values and k, tokens nobody issued) or read the budget and the pages."""
    pairs, others = routes_
    auth = {"Authorization": f"Bearer {tokens[0]}"}
    kind = n % 8
    if kind < 2:
        method, path = others[n // 5 % len(others)] if n % 5 == 4 else pairs[n % len(pairs)]
        return {"method": method, "url": path + rng.choice(QUERIES),
                "headers": headers(rng, tokens),
                "content": body(rng) if method in ("POST", "PUT", "PATCH") else None}
    a, b, c = rng.sample(terms, 3)
    texts = {2: f"{1 + n % 3}*count({a} & {b})", 3: f"count({a})\n2*count({b} & {c})",
             4: f"count(zz{n})"}
    if kind in texts:
        return {"method": "POST", "url": "/v1/query", "headers": auth,
                "json": {"query": texts[kind], "allow_unlisted": True}}  # answered, even zz
    if kind == 5:
        return {"method": "POST", "url": "/v1/rank", "headers": auth, "json": {
            "query": f"city={rng.choice('abc')},religion={rng.choice('xyzw')},age={n % 90}",
            "k": 1 + n % 60, "name": rng.choice(["noisy", "ranking"])}}
    if kind == 6:
        return {"method": "POST", "url": rng.choice(["/v1/query", "/v1/rank"]),
                "json": {"query": "count(a)"}, "headers": {"Authorization": f"Bearer t{n}"}}
    return {"method": "GET", "url": rng.choice(["/v1/budget", "/v1/limits", "/analyst"]),
            "headers": auth}


def resident_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") \
        / 2 ** 20


def memory_run(store: Path, tokens: list[str], terms: list[str], requests: int,
               warm_up: int = 1_000, every: int = 500) -> list[tuple[int, float]]:
    """(requests sent, this process's resident MB) every ``every`` requests after ``warm_up``,
    the app served in process (its memory is this process's).  Logging is off meanwhile: a
    held reply that misses its deadline on a loaded machine is logged, and a test runner
    keeps every record it captures."""
    rng, samples = random.Random(37), []
    logging.disable(logging.WARNING)
    try:
        with in_process(store, rank_ms=20) as served:
            routes_ = routes(served.app)
            for n in range(warm_up + requests):
                served.request(**hostile(n, rng, tokens, terms, routes_))
                if n + 1 >= warm_up and (n + 1 - warm_up) % every == 0:
                    samples.append((n + 1 - warm_up, resident_mb()))
    finally:
        logging.disable(logging.NOTSET)
    return samples


def test_server_memory_stays_flat_over_a_long_hostile_run(built):
    """A probing run of tens of thousands of requests once took a server from 438 to 814 MB.
    After a warm-up, the resident memory stays within 10% of its median: every cache the
    server keeps is bounded (docs/dp.md, memory)."""
    samples = memory_run(*built, MEMORY_REQUESTS)
    assert flat(samples), samples


def flat(samples: list[tuple[int, float]], within: float = 0.1) -> bool:
    middle = float(np.median([mb for _, mb in samples]))
    return all(abs(mb - middle) <= within * middle for _, mb in samples)
