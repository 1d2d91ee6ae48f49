"""The HTTP contract: the OpenAPI document of `cocktail serve` is the truth.

Schemathesis, every check, over every operation the document lists, against a real server
with an analyst's token: a status a route returns but does not document, a body that does not
match its schema, a schema-valid request refused, a content type not named, a 5xx, all fail.
Then what a property-based tester cannot see: one error model everywhere (RFC 9457 problem
details, also for paths the document does not list), the Bearer challenge on 401, and the
docs pages working offline."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from .served import auth, in_process, serve
from .test_fuzz import HEADERS, fuzz_store

CONFIG = Path(__file__).with_name("schemathesis.toml")
SEED = os.environ.get("COCKTAIL_SCHEMATHESIS_SEED", "38")  # fixed: a failure replays


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return fuzz_store(tmp_path_factory.mktemp("openapi"))


@pytest.fixture(scope="module")
def served(built):
    store, tokens, _ = built
    # Short deadlines: the contract, not the timing, is under test here
    with serve(store, "--deadline-search-ms", "50", "--deadline-rank-ms", "20") as (url, _):
        yield url, tokens


def test_schemathesis_finds_nothing_over_every_operation(served, tmp_path):
    url, tokens = served
    listed = httpx.get(url + "/openapi.json").json()["paths"]
    assert {"/v1/query", "/v1/preview", "/v1/rank", "/v1/budget", "/v1/history", "/v1/rankings",
            "/v1/terms", "/v1/limits", "/health", "/owner/state"} == set(listed)
    run = subprocess.run(
        [sys.executable, "-m", "schemathesis.cli", "--config-file", str(CONFIG), "run",
         url + "/openapi.json", "--checks", "all", "--max-examples", "40", "--seed", SEED,
         "-H", f"Authorization: Bearer {tokens[0]}", "--report-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env=os.environ | {"NO_COLOR": "1"})
    summary = run.stdout[-6000:]
    assert run.returncode == 0, summary
    tested = re.search(r"Tested: (\d+)", summary)
    assert tested and int(tested.group(1)) == len(
        [m for methods in listed.values() for m in methods]), summary
    assert re.search(r"(\d+) generated, \1 passed", summary), summary


def problem_of(reply: httpx.Response) -> dict:
    assert reply.headers["content-type"] == "application/problem+json", reply.headers
    body = reply.json()
    assert body["status"] == reply.status_code and body["type"] == "about:blank"
    assert isinstance(body["title"], str) and isinstance(body["detail"], str)
    return body


def test_every_error_is_a_problem_and_401_challenges(served):
    url, tokens = served
    post = lambda path, **kw: httpx.post(url + path, timeout=30, **kw)  # noqa: E731
    replies = {
        401: httpx.get(url + "/v1/budget"),
        403: httpx.get(url + "/v1/budget", headers=auth(tokens[1])),  # bob is disabled
        404: httpx.get(url + "/no/such/path"),
        405: httpx.delete(url + "/v1/query"),
        413: post("/v1/query", content=b"x" * 300_000),
        422: post("/v1/query", json={}, headers=auth(tokens[0])),
        400: post("/v1/query", json={"query": "count(a"}, headers=auth(tokens[0])),
    }
    for status, reply in replies.items():
        assert reply.status_code == status, (status, reply.text)
        problem_of(reply)
    assert replies[401].headers["www-authenticate"] == 'Bearer realm="cocktail"'
    unreadable = replies[422].json()
    assert {tuple(e["loc"][-1:]) for e in unreadable["errors"]} == {("query",), ("batch",)}
    assert replies[405].headers["allow"] == "POST"
    both = post("/v1/query", json={"query": "count(a)", "batch": ["count(a)"]},
                headers=auth(tokens[0]))
    assert both.status_code == 422 and problem_of(both)["errors"]


def test_a_number_given_as_a_string_is_unreadable(served):
    """The schema says number and integer; pydantic's lax mode took "0.05" and "10" for them.
    Both are 422 naming the field; a JSON int still reads as a number, and 10.0 as an integer
    (JSON Schema's)."""
    url, tokens = served
    for path, body, field in (("/v1/query", {"query": "count(a)", "alpha": "0.05"}, "alpha"),
                              ("/v1/rank", {"query": "city=a", "k": "10"}, "k")):
        reply = httpx.post(url + path, json=body, headers=auth(tokens[0]), timeout=30)
        assert reply.status_code == 422, (path, reply.text)
        assert field in {e["loc"][-1] for e in problem_of(reply)["errors"]}
    whole = httpx.post(url + "/v1/query", headers=auth(tokens[0]), timeout=30,
                       json={"query": "count(a)", "alpha": 1, "allow_unlisted": True})
    assert whole.status_code == 400 and problem_of(whole)["limit"] == "alpha"  # read, too big
    ten = httpx.post(url + "/v1/rank", json={"query": "city=a", "k": 10.0},
                     headers=auth(tokens[0]), timeout=30)
    assert ten.status_code == 200 and ten.json()["k"] == 10


def test_the_document_names_every_status_in_one_model(served):
    url, _ = served
    document = httpx.get(url + "/openapi.json").json()
    problem = document["components"]["schemas"]["Problem"]
    assert {"type", "title", "status", "detail", "limit", "errors"} <= set(problem["properties"])
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            for status, response in operation["responses"].items():
                if int(status) >= 400:
                    assert list(response["content"]) == ["application/problem+json"], (
                        path, method, status)
                    assert response["content"]["application/problem+json"]["schema"] == {
                        "$ref": "#/components/schemas/Problem"}
                if status == "401":
                    assert "WWW-Authenticate" in response["headers"]
    query = document["paths"]["/v1/query"]["post"]["responses"]
    assert set(query) == {"200", "400", "401", "403", "413", "422", "429", "500", "503"}
    preview = document["paths"]["/v1/preview"]["post"]["responses"]
    assert set(preview) == set(query)


def test_a_routes_bug_is_a_problem_with_the_security_headers(built):
    """Starlette answered an unhandled exception with its own plain-text 500, outside every
    middleware: no problem model, none of the security headers."""
    with in_process(built[0]) as client:

        @client.app.get("/v1/broken")
        def broken() -> dict:
            raise RuntimeError("a bug, with a secret in its message")
        reply = client.get("/v1/broken")
        documented = client.get("/openapi.json").json()["paths"]["/v1/broken"]["get"]
    assert reply.status_code == 500 and "secret" not in reply.text
    assert problem_of(reply)["detail"] == "internal error (logged for the owner)"
    assert HEADERS <= {name.lower() for name in reply.headers}, reply.headers
    assert "500" in documented["responses"]


def test_every_operation_that_takes_a_body_documents_the_413_of_the_body_limit(served, built):
    """The body limit answers before any route: each operation with a request body lists its
    413, one added later too, and only those."""
    url, tokens = served
    oversized = httpx.post(url + "/v1/rank", content=b"x" * 300_000, headers=auth(tokens[0]),
                           timeout=30)
    assert oversized.status_code == 413 and problem_of(oversized)["limit"] == "body_bytes"
    with in_process(built[0]) as client:

        @client.app.post("/v1/later")
        def later(body: dict) -> dict:
            return body
        document = client.get("/openapi.json").json()
    assert httpx.get(url + "/openapi.json").json()["paths"].items() <= \
        document["paths"].items()  # the same document, and the route added later
    takes_a_body = set()
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            assert ("413" in operation["responses"]) == ("requestBody" in operation), path
            takes_a_body |= {path} if "requestBody" in operation else set()
    assert takes_a_body == {"/v1/query", "/v1/preview", "/v1/rank", "/v1/later"}


def test_the_servers_own_400_carries_the_security_headers(served):
    """A header uvicorn cannot parse is answered 400 by uvicorn itself, before the app and its
    guards: that reply carries the headers every other reply does."""
    url, _ = served
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(b"GET /v1/limits HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n")
        reply = b""
        while chunk := connection.recv(65536):
            reply += chunk
    head = reply.split(b"\r\n\r\n", 1)[0].decode().split("\r\n")
    assert head[0] == "HTTP/1.1 400 Bad Request", head
    headers = {line.partition(":")[0].lower(): line.partition(":")[2].strip() for line in head[1:]}
    assert HEADERS <= set(headers), headers
    assert headers["x-frame-options"] == "DENY" and headers["referrer-policy"] == "same-origin"
    assert headers["x-content-type-options"] == "nosniff"
    assert "frame-ancestors 'none'" in headers["content-security-policy"]


def test_health_says_what_is_served(served):
    url, _ = served
    reply = httpx.get(url + "/health")
    assert reply.status_code == 200 and reply.json()["status"] == "ok"
    assert re.fullmatch(r"v\d{6}", reply.json()["version"])


def test_the_docs_pages_load_nothing_from_elsewhere(served):
    url, _ = served
    for page in ("/docs", "/redoc"):
        html = httpx.get(url + page).text
        sources = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert sources and all(s.startswith("/") for s in sources), sources
        for source in sources:
            if source != "/openapi.json":
                assert httpx.get(url + source).status_code == 200, source
    assert "worker-src 'self' blob:" in httpx.get(url + "/redoc").headers[
        "content-security-policy"]
