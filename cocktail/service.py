"""`cocktail serve`: the private cloud's HTTP API for analysts (FastAPI; OpenAPI at /docs).

POST /v1/query  {"query": "2*count(a) - count(b & c)"} or {"batch": ["...", "..."]}, and
                optionally "objective": "per-query" (default) or "total" (dp.strategies),
                and "alpha" (or "rho", under zCDP): what to spend, up to the role's;
                a term in no public chunk is refused (400, free) unless "allow_unlisted":
                true (docs/dp.md, "Unlisted terms")
POST /v1/rank   {"query": "city=a,religion=x", "k": 10, "name": "ranking"}: the top k of a
                ranking (`cocktail rank build`), ids and public attributes only
GET  /v1/budget
GET  /v1/history?last=N  the caller's own charged answers, from the ledger
GET  /v1/rankings  the rankings served: name, version, defense, size, public columns
GET  /v1/terms?prefix=P&after=T&limit=N  the terms of the public chunks, in order, by pages
GET  /v1/limits (no token needed: the limits and the response-time schedule are public)
GET  /owner (the owner's dashboard, behind the owner's credential), /analyst (an analyst's own
     budget and answers): :mod:`cocktail.report.dashboard`
GET  /health (no token: whether a publication is served, and which version)
Authorization: Bearer <token>.  401 unknown or missing token, 403 disabled user, 429 budget
spent, 400 malformed query or a limit exceeded (the body names it), 413 request too large,
422 a body that cannot be read, 503 no publication yet or the counts failed; a refused
request spends nothing.  Every error is a problem details object (:mod:`cocktail.problems`),
and the OpenAPI document (/openapi.json, /docs, /redoc) lists every status each route returns.

Analysts hold tokens, never the owner's powers: no route answers exactly, manages roles or
users, or reads the ledger beyond the caller's own budget and answers (the owner's dashboard
refuses an analyst's token).  Every reply to /v1/query and
/v1/rank leaves at a time fixed by the request alone (:mod:`cocktail.dp.deadline`); /v1/rank
answers 404 for a ranking that does not exist, 429 while the token has one in flight, and 503
when the rankings of the caller's role and size are booked up
(:mod:`cocktail.rank.admission`).
"""

from __future__ import annotations

import asyncio
import datetime
import gc
import heapq
import ipaddress
import logging
import os
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Literal

from cryptography import x509

from .extras import require

require("fastapi")  # a missing [serve] is one line naming it, not an ImportError
require("fastapi_offline")
require("uvicorn")

from fastapi import Body, Depends, FastAPI, Query  # noqa: E402
from fastapi.openapi.utils import get_openapi  # noqa: E402
from fastapi.responses import JSONResponse  # noqa: E402
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer  # noqa: E402
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field  # noqa: E402
from pydantic_core import PydanticCustomError  # noqa: E402
from starlette.concurrency import run_in_threadpool  # noqa: E402

from . import problems  # noqa: E402
from .dp.answer import warm_up
from .dp.deadline import Deadlines
from .dp.ledger import Ledger, LedgerError
from .dp.limits import LIMITS, LimitExceeded, Limits
from .dp.search import Searches
from .dp.session import Answered, ComputeFailed, Source, begin
from .dp.strategies import OBJECTIVES, PER_QUERY
from .guards import Protocol, guard
from .private_config import open_ledger, store_identity
from .query import BACKENDS, Engine, Publication
from .querylang import QuerySyntaxError
from .rank.admission import BUSY, NotAdmitted, RankLanes, RankSchedule
from .rank.model import MAX_K
from .rank.service import NoRanking, Rankings, answer_rank
from .report.dashboard import add_dashboard
from .releases import current_version
from .store import Store, StoreError

bearer = HTTPBearer(auto_error=False)
HISTORY_MAX = 1000  # answers in one reply of GET /v1/history
TERMS_PAGE = 10_000  # terms in one page of GET /v1/terms at most
log = logging.getLogger("cocktail.serve")


_TEXT = Field(min_length=1, max_length=LIMITS.text_bytes,
              description="The query language: docs/dp.md (at most text_bytes UTF-8 bytes).")


def _not_text(value):
    if isinstance(value, (str, bool)):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


# JSON Schema's integer: 10.0 is one (pydantic's strict mode refuses it, and Schemathesis sends
# it), "10" and true are not (its lax mode takes them).
_JsonInt = Annotated[int, Field(strict=False), BeforeValidator(_not_text)]


# Strict: a number is one in the JSON ("0.05" is 422, as the schema says), not whatever
# pydantic's lax mode can coerce; a JSON int is still a float.
class _Asked(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    objective: Literal[OBJECTIVES] = Field(  # type: ignore[valid-type]
        PER_QUERY, description="per-query: no query worse than the best fixed strategy; "
                               "total: the lowest total error.")
    alpha: float | None = Field(
        None, gt=0, allow_inf_nan=False,
        description="The α to spend (the privacy parameter of this release), from alpha_floor "
                    "times the role's α per query up to it; by default the role's.  A smaller "
                    "α costs less budget and adds more noise.  Another α is another release, "
                    "charged anew.")
    rho: float | None = Field(
        None, gt=0, allow_inf_nan=False,
        description="For a role under zCDP (its budget in ρ): the ρ to spend, as alpha is "
                    "for a role under pure DP; each role takes only its own.")
    allow_unlisted: bool = Field(
        False, description="Answer, and charge, a query naming a term that occurs in no "
                           "public chunk (GET /v1/terms); without it such a query is refused "
                           "(400, limit public_terms), free.")


class OneQuery(_Asked):
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"query": "2*count(a) - count(b & c)"}]})
    query: str = _TEXT

    @property
    def text(self) -> str:
        return self.query


class Batch(_Asked):
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"batch": ["count(a)", "count(a & b)"], "objective": "per-query"}]})
    batch: list[Annotated[str, Field(min_length=1)]] = Field(
        min_length=1, max_length=LIMITS.queries,
        description="Linear queries answered together (one charge).")

    @property
    def text(self) -> str:
        return "\n".join(self.batch)


class RankRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [
        {"query": "city=a,religion=x", "k": 10, "name": "ranking"}]})
    query: str = Field(min_length=1, max_length=LIMITS.text_bytes,
                       description="column=value pairs, comma-separated: docs/ranked-retrieval.md")
    k: _JsonInt = Field(10, ge=1, le=MAX_K)
    name: str = Field("ranking", min_length=1, max_length=LIMITS.term_bytes)


class Budget(BaseModel):
    """A user's budget, in α (pure DP) or in ρ (a role under zCDP: ``definition``)."""
    user: str
    role: str
    alpha_per_query: float | None = None
    rho_per_query: float | None = Field(None, description="A role under zCDP.")
    definition: Literal["zcdp"] | None = Field(None, description="Absent under pure DP.")
    budget: float
    spent: float
    remaining: float
    dataset_budget: float | None
    dataset_spent: float
    dataset_rho_budget: float | None = None
    dataset_rho_spent: float = 0.0
    dataset_rho_total: float = Field(0.0, description="The dataset's whole loss in ρ: the zCDP "
                                     "charges, and α²/2 for each pure one.")


class Answer(BaseModel):
    """A noisy answer (docs/dp.md: every field)."""
    model_config = ConfigDict(extra="allow")
    workload: str
    answers: list[float]
    expected_squared_error: list[float]
    expected_rms_error: list[float]
    noise_draws: list[int] | None = Field(
        None, description="How many noise draws each answer adds up: 1 is exactly Laplace "
                          "(Gaussian under zCDP), what its confidence interval rests on "
                          "(docs/dp.md, \"Confidence intervals\"); absent from answers stored "
                          "before.")
    alpha: float | None = Field(None, description="What the release spent under pure DP.")
    rho: float | None = Field(None, description="What it spent under zCDP (with the "
                              "(epsilon, delta) it implies).")
    epsilon: float | None = None
    delta: float | None = None
    strategy: str
    answer_id: str
    reused: bool
    charged: float
    budget: Budget
    version: str


class TopK(BaseModel):
    """A ranking's top k: ids and public attributes only (docs/ranked-retrieval.md)."""
    model_config = ConfigDict(extra="allow")
    name: str
    version: str
    defense: str
    query: str
    k: int
    results: list[dict[str, str]]
    alpha: float | None = Field(None, description="dp rankings: the α charged for it.")


class Charge(BaseModel):
    """One charged answer of the caller's (GET /v1/history)."""
    at: float = Field(description="When it was charged (seconds since the epoch).")
    charged: float = Field(description="α, or ρ for a role under zCDP.")
    version: str = Field(description="The store's identity and the version it was asked of "
                                     "(a ranking's: rank:NAME:VERSION).")
    answer: dict | None = Field(description="The answer as stored (a ranking's: its results); "
                                            "null until it is.")


class History(BaseModel):
    user: str
    answers: list[Charge] = Field(description="Oldest first.")


class Ranking(BaseModel):
    """A ranking served: all of it public (its public manifest and size)."""
    name: str
    version: str
    defense: str
    tuples: int
    public: list[str] = Field(description="The public columns a result shows.")


class RankingList(BaseModel):
    rankings: list[Ranking]


class Terms(BaseModel):
    """A page of the terms that occur in public chunks (public by construction)."""
    version: str
    terms: list[str]
    next: str | None = Field(description="Pass as ``after`` for the next page; null on the "
                                         "last one.")
    total: int = Field(description="Public terms in the version, whatever the prefix.")


class Published(BaseModel):
    limits: dict[str, float]
    deadlines: dict[str, float | dict[str, float]]


class Health(BaseModel):
    status: Literal["ok"]
    version: str = Field(description="The publication served.")


class NoPublication(Exception):
    pass


class CurrentPublication:
    """The store's current version, opened and warmed once and shared by every request;
    a watcher opens a new version when CURRENT changes and swaps it in whole."""

    def __init__(self, store: Store, runner: str, interval: float = 1.0) -> None:
        self._store, self._runner, self._interval = store, runner, interval
        self.identity = store_identity(store)
        self._source: Source | None = None
        self._stop = threading.Event()
        self.refresh()
        threading.Thread(target=self._watch, name="publication-watcher", daemon=True).start()

    def refresh(self) -> None:
        version = current_version(self._store)
        if version is None or (self._source and self._source.version == version):
            return
        started = time.perf_counter()
        publication = Publication.open(self._store, version).warm(BACKENDS[self._runner].READS)
        # Millions of warm objects live as long as the version: keep the cyclic collector off
        # them, or its full passes stall every request for tens of milliseconds (and miss
        # deadlines).  They are still freed by reference counting when the version goes.
        gc.collect()
        gc.freeze()
        self._source = Source(version, Engine(publication, self._runner).counts,  # one swap
                              self.identity, publication.public_terms)
        log.info("serving %s (opened in %.2f s)", version, time.perf_counter() - started)

    def _watch(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.refresh()
            except (StoreError, OSError, ValueError) as exc:
                log.warning("cannot open the new version yet: %s", exc)

    def get(self) -> Source:
        source = self._source
        if source is None:
            raise NoPublication("the store holds no publication yet")
        return source

    def close(self) -> None:
        self._stop.set()


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes (413) before they are read into memory."""

    def __init__(self, app, limit: int) -> None:
        self.app, self.limit = app, limit

    @staticmethod
    def document(openapi: dict) -> dict:
        """Every operation that takes a body lists the 413 this limit answers it with."""
        for methods in openapi["paths"].values():
            for operation in methods.values():
                if "requestBody" in operation:
                    operation["responses"]["413"] = problems.documented(413)[413]
        return openapi

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            return await _too_large(send, self.limit)
        seen = 0

        async def counted():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _BodyTooLarge
            return message
        try:
            await self.app(scope, counted, send)
        except _BodyTooLarge:
            await _too_large(send, self.limit)


class _BodyTooLarge(Exception):
    pass


async def _too_large(send, limit: int) -> None:
    response = problems.problem(413, f"the request body is over {limit:,} bytes",
                                limit="body_bytes")
    await response({"type": "http"}, None, send)


class Releaser:
    """Wakes each held reply at its time.  The event loop's timers wake on whole milliseconds
    counted from when the loop went idle, so the work done before the wait would shift the
    wake-up by up to 1 ms (a test caught it); one thread sleeps on the OS's precise timer
    instead and hands each due reply back to the loop."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, asyncio.AbstractEventLoop, asyncio.Future]] = []
        self._changed = threading.Condition()
        self._count = 0
        threading.Thread(target=self._run, name="releaser", daemon=True).start()

    def at(self, when: float) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._changed:
            self._count += 1
            heapq.heappush(self._due, (when, self._count, loop, future))
            self._changed.notify()
        return future

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._due:
                    self._changed.wait()
                delay = self._due[0][0] - time.monotonic()
                if delay > 0:
                    self._changed.wait(delay)  # woken early by a sooner reply, or on time
                    continue
                _, _, loop, future = heapq.heappop(self._due)
            loop.call_soon_threadsafe(_release, future)


def _release(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


def create_app(source: CurrentPublication, ledger: Ledger, deadlines: Deadlines,
               rankings: Rankings, store: Store, limits: Limits = LIMITS) -> FastAPI:
    pool = ThreadPoolExecutor(4, thread_name_prefix="counts")
    # Queries run in threads of their own, never in those /v1/budget and the other routes
    # run in: the steps that never wait (refusals, reused answers) in some, and a request
    # that waits (for a search, its counts, or another request's answer) in others, so a
    # storm of waiters holds up neither; strategy searches run in one thread, at most one per
    # user at a time.
    admitting = ThreadPoolExecutor(16, thread_name_prefix="admit")
    waiting = ThreadPoolExecutor(64, thread_name_prefix="query")
    searches = Searches(workers=1, per_user=1)
    # Rankings run in threads of their own, a lane's in the order RankSchedule booked them: a
    # flood of them, or one waiting on another's answer, never takes the threads every other
    # route runs in.
    lanes = RankLanes()
    releaser = Releaser()
    schedule = RankSchedule(deadlines.rank_slots)
    warm_up()  # before the first request, whose reply would leave late
    ledger.rename_store(store.url, source.identity)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        yield
        source.close()
        for executor in (pool, admitting, waiting):
            executor.shutdown(wait=False, cancel_futures=True)
        lanes.shutdown()
        searches.shutdown()

    app = FastAPI(title="Cocktail", version="1", lifespan=lifespan,
                  docs_url=None, redoc_url=None,  # guard() serves them under its own policy
                  description="Differentially private counting, linear and batch linear queries "
                              "over a k^m-anonymous hybrid-cloud publication. Every error is a "
                              "problem details object (RFC 9457).")
    app.add_middleware(BodyLimit, limit=4 * limits.text_bytes)
    guard(app)

    def openapi() -> dict:
        if app.openapi_schema is None:
            app.openapi_schema = BodyLimit.document(problems.add_to(get_openapi(
                title=app.title, version=app.version, description=app.description,
                routes=app.routes)))
        return app.openapi_schema
    app.openapi = openapi

    def token(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> str | None:
        return credentials.credentials if credentials else None

    def answer(step: Callable[[], Answered | Callable], arrival: float
               ) -> tuple[int, dict, float] | Callable[[], Answered]:
        """The reply to ``step`` (:func:`begin`, or the rest it returned, which is returned
        in turn) and when it leaves."""
        refusal_at = arrival + deadlines.refusal
        try:
            answered = step()
            if not isinstance(answered, Answered):
                return answered
            return 200, answered.body, answered.release_at
        except LimitExceeded as exc:
            return 400, {"detail": str(exc), "limit": exc.limit}, refusal_at
        except (LedgerError, QuerySyntaxError) as exc:
            return getattr(exc, "status", 400), {"detail": str(exc)}, refusal_at
        except NoPublication as exc:
            return 503, {"detail": str(exc)}, refusal_at
        except ComputeFailed as exc:
            return 503, {"detail": str(exc)}, arrival + deadlines.fresh(1)
        except Exception:  # a bug: still no early reply, and the owner sees the trace
            log.exception("internal error answering a query")
            return 500, {"detail": "internal error (logged for the owner)"}, refusal_at

    @app.post("/v1/query", response_model=Answer,
              responses=problems.documented(400, 401, 403, 422, 429, 503))
    async def query(request: OneQuery | Batch = Body(), bearer_token: str | None = Depends(token)):
        """Noisy answers with their expected squared errors; charges the caller's budget.
        The reply leaves at a time fixed by the request alone."""
        arrival = time.monotonic()
        reply = await asyncio.wrap_future(admitting.submit(answer, lambda: begin(
            ledger, source.get(), bearer_token, request.text, limits=limits,
            deadlines=deadlines, pool=pool, searches=searches, arrival=arrival,
            objective=request.objective, alpha=request.alpha, rho=request.rho,
            allow_unlisted=request.allow_unlisted), arrival))
        if callable(reply):
            reply = await asyncio.wrap_future(waiting.submit(answer, reply, arrival))
        status, body, release_at = reply
        await releaser.at(release_at)
        return problems.reply(status, body)

    def rank_answer(bearer_token: str, request: RankRequest, until: float, booked: float,
                    share: float) -> tuple[int, dict]:
        started = time.monotonic()
        if started + share > until:  # those before ran over their shares: refuse, unread
            log.warning("a ranking started %.0f ms past its booking: the rankings served take "
                        "longer than --deadline-rank-ms / --rank-slots",
                        (started + share - until) * 1000)
            return 503, {"detail": BUSY}
        try:
            version, index = rankings.get(request.name)
            return 200, answer_rank(index, version, request.name, request.query, request.k,
                                    ledger, bearer_token, booked, store=rankings.identity)
        except ComputeFailed as exc:
            return 503, {"detail": str(exc)}
        except LedgerError as exc:
            return exc.status, {"detail": str(exc)}
        except NoRanking as exc:
            return 404, {"detail": str(exc)}
        except ValueError as exc:  # a malformed query, an unknown column, k out of range
            return 400, {"detail": str(exc)}
        except Exception:
            log.exception("internal error answering a ranking")
            return 500, {"detail": "internal error (logged for the owner)"}
        finally:
            late = time.monotonic() - booked
            if late > share / 2:  # the schedule's promise rests on this: tell the owner
                log.warning("ranking %r ended %.0f ms past its booking of %.0f ms (raise "
                            "--deadline-rank-ms or lower --rank-slots)", request.name,
                            late * 1000, share * 1000)

    @app.post("/v1/rank", response_model=TopK,
              responses=problems.documented(400, 401, 403, 404, 422, 429, 503))
    async def rank(request: RankRequest, bearer_token: str | None = Depends(token)):
        """The top k of a ranking: ids and public attributes only.  A dp ranking charges the
        caller's α (once per query and k; asked again, the stored answer comes back).  Every
        reply leaves at the ranking's deadline (``rank_ms`` per 300,000 tuples, longer for a
        dp top k: ``cocktail.dp.deadline``) after arrival; one token has one ranking in
        flight (429), and one not booked at arrival (the server is busy) or not ready by its
        deadline is 503, never late."""
        tuples, noisy = rankings.cost(request.name)
        steps = deadlines.rank_steps(tuples, request.k, noisy)
        until = time.monotonic() + deadlines.rank(tuples, request.k, noisy)
        try:
            user = await run_in_threadpool(ledger.authenticate, bearer_token)  # before booking
            booking = schedule.book(bearer_token, user.role, steps, time.monotonic(), until)
            work = asyncio.wrap_future(lanes.submit(booking.lane, rank_answer, bearer_token,
                                                    request, until, booking.end, booking.share))
            status, body = await asyncio.wait_for(work, max(0.0, until - time.monotonic()))
        except LedgerError as exc:
            status, body = exc.status, {"detail": str(exc)}
        except NotAdmitted as exc:
            status, body = exc.status, exc.body
        except asyncio.TimeoutError:  # ran over: its own cost shows, so the owner is told
            log.warning("a ranking missed its deadline: the rankings served take longer than "
                        "--deadline-rank-ms / --rank-slots")
            status, body = 503, {"detail": BUSY}
        await releaser.at(until)
        return problems.reply(status, body)

    @app.get("/v1/budget", response_model=Budget, responses=problems.documented(401, 403))
    def budget(bearer_token: str | None = Depends(token)):
        """What the caller has spent and has left, and the dataset-wide budget."""
        try:
            return JSONResponse(ledger.budget_status(ledger.authenticate(bearer_token)))
        except LedgerError as exc:
            return problems.problem(exc.status, str(exc))

    @app.get("/v1/history", response_model=History,
             responses=problems.documented(401, 403, 422))
    def history(last: int = Query(HISTORY_MAX, ge=1, le=HISTORY_MAX,
                                  description="How many of the latest answers."),
                bearer_token: str | None = Depends(token)):
        """The caller's own charged answers, oldest first, from the ledger (nobody else's)."""
        try:
            user = ledger.authenticate(bearer_token)
        except LedgerError as exc:
            return problems.problem(exc.status, str(exc))
        return JSONResponse({"user": user.name, "answers": [
            {"at": h["at"], "charged": h["alpha"], "version": h["version"],
             "answer": h["answer"]} for h in ledger.history(user, last)]})

    @app.get("/v1/rankings", response_model=RankingList,
             responses=problems.documented(401, 403))
    def rankings_served(bearer_token: str | None = Depends(token)):
        """The rankings one may ask (POST /v1/rank), with what is public of each."""
        try:
            ledger.authenticate(bearer_token)
        except LedgerError as exc:
            return problems.problem(exc.status, str(exc))
        return JSONResponse({"rankings": rankings.described()})

    @app.get("/v1/terms", response_model=Terms,
             responses=problems.documented(401, 403, 422, 503))
    def public_terms(prefix: str = Query("", max_length=limits.term_bytes),
                     after: str = Query("", max_length=limits.term_bytes,
                                        description="The last term of the page before."),
                     limit: int = Query(1000, ge=1, le=TERMS_PAGE),
                     bearer_token: str | None = Depends(token)):
        """The terms that occur in the current version's public chunks, in order, a page at a
        time: what the public cloud holds already, never a term only private chunks hold.
        A query naming a term not listed here is refused unless it allows it."""
        try:
            ledger.authenticate(bearer_token)
            served = source.get()
        except LedgerError as exc:
            return problems.problem(exc.status, str(exc))
        except NoPublication as exc:
            return problems.problem(503, str(exc))
        found, more = served.public_terms.page(prefix, after, limit)
        return JSONResponse({"version": served.version, "terms": found,
                             "next": found[-1] if more else None,
                             "total": len(served.public_terms)})

    @app.get("/v1/limits", response_model=Published)
    def published_limits() -> JSONResponse:
        """The limits every request is checked against, and when replies leave."""
        return JSONResponse({"limits": limits.as_dict() | {"rank_in_flight_per_token": 1},
                             "deadlines": deadlines.schedule(limits)})

    @app.get("/health", response_model=Health, responses=problems.documented(503))
    def health() -> JSONResponse:
        """For a load balancer or a supervisor: 200 while a publication is served (no
        token; the version is in every answer anyway), 503 before the first one."""
        try:
            return JSONResponse({"status": "ok", "version": source.get().version})
        except NoPublication as exc:
            return problems.problem(503, str(exc))

    add_dashboard(app, store, ledger)
    return app


EXPIRY_WARNING = datetime.timedelta(days=30)  # a certificate closer to its end is logged


@dataclass(frozen=True)
class Tls:
    """The certificate chain and key `cocktail serve` speaks HTTPS with, checked on load: each
    fault is one clear error before anything listens (exit status 2).  The key and its
    passphrase file must be the owner's alone, as ssh has it; every certificate of the chain
    valid now (clients would refuse the server); an encrypted key is opened with the
    passphrase file, never by asking on the terminal, which a daemon has none of (OpenSSL
    asks when given no passphrase)."""

    cert: str
    key: str
    expires: datetime.datetime  # when the first certificate of the chain ends
    password: str | None = field(default=None, repr=False)

    @classmethod
    def load(cls, cert: str, key: str, password_file: str | None = None) -> Tls:
        try:
            _owner_only(key, "--tls-key")
            password = _passphrase(password_file) if password_file else None
            expires = _valid_now(cert)
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                cert, key, password=lambda: password or _no_prompt(key))
        except (ssl.SSLError, OSError) as exc:
            mismatch = getattr(exc, "reason", None) == "KEY_VALUES_MISMATCH"
            hint = f" (is {password_file} the key's passphrase?)" \
                if password_file and not mismatch else ""
            raise ValueError(f"cannot use {cert} with {key} for TLS: {exc}{hint}") from None
        return cls(cert, key, expires, password)


def _owner_only(path: str, option: str) -> None:
    mode = os.stat(path).st_mode & 0o777
    if mode & 0o077:
        raise ValueError(f"{option} {path} is open to others (mode {mode:04o}): a secret must "
                         f"be its owner's alone. Run: chmod 600 {path}")


def _passphrase(path: str) -> str:
    _owner_only(path, "--tls-key-password-file")
    with open(path, encoding="utf-8") as file:
        passphrase = file.readline().rstrip("\r\n")
    if not passphrase:
        raise ValueError(f"--tls-key-password-file {path}: its first line is empty")
    return passphrase


def _no_prompt(key: str) -> str:
    raise ValueError(f"--tls-key {key} is encrypted: give its passphrase with "
                     "--tls-key-password-file FILE (the owner's alone), or decrypt the key "
                     "(openssl pkey -in KEY -out PLAIN); cocktail serve never asks for it")


def _valid_now(cert: str) -> datetime.datetime:
    """When the first certificate of the chain in ``cert`` ends, once each is valid now."""
    with open(cert, "rb") as file:
        try:
            chain = x509.load_pem_x509_certificates(file.read())
        except ValueError as exc:
            raise ValueError(f"--tls-cert {cert}: not a PEM certificate chain ({exc})") from None
    now = datetime.datetime.now(datetime.timezone.utc)
    for certificate in chain:
        subject = certificate.subject.rfc4514_string()
        start, end = certificate.not_valid_before_utc, certificate.not_valid_after_utc
        if end <= now:
            raise ValueError(f"--tls-cert {cert}: the certificate of {subject} expired on "
                             f"{end:%Y-%m-%d %H:%M} UTC; clients refuse it: renew it")
        if start > now:
            raise ValueError(f"--tls-cert {cert}: the certificate of {subject} is not valid "
                             f"before {start:%Y-%m-%d %H:%M} UTC; clients refuse it: check "
                             "this host's clock, or wait")
    return min(certificate.not_valid_after_utc for certificate in chain)


class Server:
    """`cocktail serve`: on a socket already listening (:func:`cocktail.daemon.listen`), the
    rankings opened and the app made; :meth:`run` serves until Ctrl-C, over HTTPS when given
    :class:`Tls`."""

    def __init__(self, app: FastAPI, listening: socket.socket, tls: Tls | None = None) -> None:
        self.app, self._listening, self._tls = app, listening, tls
        bound = listening.getsockname()
        host = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        self.url = f"{'https' if tls else 'http'}://{host}:{bound[1]}"

    @classmethod
    def start(cls, store: Store, runner: str, deadlines: Deadlines, listening: socket.socket,
              tls: Tls | None = None) -> Server:
        """``listening``: :func:`cocktail.daemon.listen`'s socket, which queues clients
        while this opens and warms the publication."""
        logging.basicConfig(level=logging.INFO,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        if tls is None and not ipaddress.ip_address(listening.getsockname()[0]).is_loopback:
            log.warning("serving plain HTTP on %s: tokens and answers cross the network in "
                        "the clear (give --tls-cert and --tls-key)", listening.getsockname()[0])
        if tls is not None and tls.expires - datetime.datetime.now(datetime.timezone.utc) < \
                EXPIRY_WARNING:
            log.warning("the TLS certificate %s expires on %s UTC: renew it before then, or "
                        "clients refuse this server", tls.cert, f"{tls.expires:%Y-%m-%d %H:%M}")
        rankings = Rankings(store)
        log.info("rankings open: %s", ", ".join(rankings.warm()) or "none")
        return cls(create_app(CurrentPublication(store, runner), open_ledger(store), deadlines,
                              rankings, store), listening, tls)

    def run(self, access_log: bool = False) -> None:
        import uvicorn

        sys.setswitchinterval(0.001)  # many short requests: hand the GIL over often (tails)
        host, port = self._listening.getsockname()[:2]
        config = uvicorn.Config(self.app, host=host, port=port, log_level="info",
                                access_log=access_log, http=Protocol,
                                ssl_certfile=self._tls.cert if self._tls else None,
                                ssl_keyfile=self._tls.key if self._tls else None,
                                ssl_keyfile_password=self._tls.password if self._tls else None)
        uvicorn.Server(config).run(sockets=[self._listening])
