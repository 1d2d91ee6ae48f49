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
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from .served import auth, serve
from .test_fuzz import fuzz_store

CONFIG = Path(__file__).with_name("schemathesis.toml")
SEED = os.environ.get("COCKTAIL_SCHEMATHESIS_SEED", "38")  # fixed: a failure replays


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    store, tokens, _ = fuzz_store(tmp_path_factory.mktemp("openapi"))
    # Short deadlines: the contract, not the timing, is under test here
    with serve(store, "--deadline-search-ms", "50", "--deadline-rank-ms", "20") as (url, _):
        yield url, tokens


def test_schemathesis_finds_nothing_over_every_operation(served, tmp_path):
    url, tokens = served
    listed = httpx.get(url + "/openapi.json").json()["paths"]
    assert {"/v1/query", "/v1/rank", "/v1/budget", "/v1/history", "/v1/rankings",
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
    assert set(query) == {"200", "400", "401", "403", "413", "422", "429", "503"}


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
