"""The routes analysts call, each with their token: a query, its preview, a ranking's top k,
and their own budget, answers, the rankings served and the public terms."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from fastapi import Body, Depends, FastAPI, Query
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from .. import problems
from ..dp import preview as previews
from ..dp.deadline import Deadlines
from ..dp.intervals import described
from ..dp.ledger import LedgerError
from ..dp.limits import LimitExceeded
from ..dp.session import Answered, ComputeFailed, begin
from ..querylang import QuerySyntaxError
from ..rank.admission import BUSY, NotAdmitted
from ..rank.service import NoRanking, answer_rank
from .models import (Answer, Batch, Budget, History, OneQuery, Preview, RankingList,
                     RankRequest, Terms, TopK)
from .publication import NoPublication
from .served import Served

bearer = HTTPBearer(auto_error=False)
HISTORY_MAX = 1000  # answers in one reply of GET /v1/history
TERMS_PAGE = 10_000  # terms in one page of GET /v1/terms at most
log = logging.getLogger("cocktail.serve")


def token(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> str | None:
    return credentials.credentials if credentials else None


def reply_of(step: Callable[[], Answered | Callable], arrival: float, deadlines: Deadlines
             ) -> tuple[int, dict, float] | Callable[[], Answered]:
    """The reply to ``step`` (:func:`begin`, or the rest it returned, which is returned in
    turn) and when it leaves."""
    refusal_at = arrival + deadlines.refusal
    try:
        answered = step()
        if not isinstance(answered, Answered):
            return answered
        return 200, answered.body, answered.release_at
    except LimitExceeded as exc:  # 400; 429 for a preview over its rate (PreviewRate)
        return getattr(exc, "status", 400), {"detail": str(exc), "limit": exc.limit}, refusal_at
    except (LedgerError, QuerySyntaxError) as exc:
        return getattr(exc, "status", 400), {"detail": str(exc)}, refusal_at
    except NoPublication as exc:
        return 503, {"detail": str(exc)}, refusal_at
    except ComputeFailed as exc:
        return 503, {"detail": str(exc)}, arrival + deadlines.fresh(1)
    except Exception:  # a bug: still no early reply, and the owner sees the trace
        log.exception("internal error answering a query")
        return 500, {"detail": "internal error (logged for the owner)"}, refusal_at


async def _replied(served: Served, step: Callable[[], Answered | Callable], arrival: float
                   ) -> tuple[int, dict, float]:
    """``step`` run in the threads that never wait, and what it returns to wait for in
    those that may."""
    reply = await asyncio.wrap_future(served.admitting.submit(
        reply_of, step, arrival, served.deadlines))
    if callable(reply):
        reply = await asyncio.wrap_future(served.waiting.submit(
            reply_of, reply, arrival, served.deadlines))
    return reply


def add_query_route(app: FastAPI, served: Served) -> None:
    """POST /v1/query: noisy answers, charged, each reply leaving at its time."""
    ledger, source, deadlines, limits = (served.ledger, served.source, served.deadlines,
                                         served.limits)

    @app.post("/v1/query", response_model=Answer,
              responses=problems.documented(400, 401, 403, 422, 429, 503))
    async def query(request: OneQuery | Batch = Body(), bearer_token: str | None = Depends(token)):
        """Noisy answers with their expected squared errors and their intervals at ``level``;
        charges the caller's budget.  The reply leaves at a time fixed by the request alone."""
        arrival = time.monotonic()
        status, body, release_at = await _replied(served, lambda: begin(
            ledger, source.get(), bearer_token, request.text, limits=limits,
            deadlines=deadlines, pool=served.pool, searches=served.searches, arrival=arrival,
            objective=request.objective, alpha=request.alpha, rho=request.rho,
            allow_unlisted=request.allow_unlisted), arrival)
        if status == 200:  # post-processing at the level asked: a reused answer's too
            body = body | {"intervals": described(body, request.level)}
        await served.releaser.at(release_at)
        return problems.reply(status, body)


def add_preview_route(app: FastAPI, served: Served) -> None:
    """POST /v1/preview: what a query would do, before spending, rate-limited."""
    ledger, source, limits = served.ledger, served.source, served.limits
    gate = previews.PreviewGate(limits.previews_per_minute, limits.previews_all_per_minute)

    @app.post("/v1/preview", response_model=Preview,
              responses=problems.documented(400, 401, 403, 422, 429, 503))
    async def preview(request: OneQuery | Batch = Body(),
                      bearer_token: str | None = Depends(token)):
        """What answering the query would do, before spending: the strategy, each query's
        expected error and interval half-width at ``level``, and the charge.  Reads no data
        and charges nothing; at most ``previews_per_minute`` a user and
        ``previews_all_per_minute`` in all (429 past them), and every admitted preview leaves
        ``search_ms`` after arrival (docs/dp.md, "Previews")."""
        arrival = time.monotonic()

        def begin_preview():
            return previews.begin(
                ledger, bearer_token, request.text, gate, limits=limits,
                deadlines=served.deadlines, searches=served.searches, arrival=arrival,
                objective=request.objective, alpha=request.alpha, rho=request.rho,
                level=request.level,
                listed=None if request.allow_unlisted else source.get().public_terms)
        status, body, release_at = await _replied(served, begin_preview, arrival)
        await served.releaser.at(release_at)
        return problems.reply(status, body)


def add_rank_route(app: FastAPI, served: Served) -> None:
    """POST /v1/rank: a ranking's top k, booked on its lane, leaving at its deadline."""
    ledger, rankings, deadlines = served.ledger, served.rankings, served.deadlines
    lanes, schedule, releaser = served.lanes, served.schedule, served.releaser

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


def add_account_routes(app: FastAPI, served: Served) -> None:
    """What an analyst may read of their own: budget, answers, the rankings served and the
    public terms."""
    ledger, rankings, source, limits = (served.ledger, served.rankings, served.source,
                                        served.limits)

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
