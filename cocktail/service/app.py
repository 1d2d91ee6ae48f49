"""The app: its shared parts made, its middleware and OpenAPI document, and its routes added
(:mod:`.analyst`, :mod:`.public`, and the owner's and analysts' pages of
:mod:`cocktail.report.dashboard`)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from .. import problems
from ..dp.answer import warm_up
from ..dp.deadline import Deadlines
from ..dp.ledger import Ledger
from ..dp.limits import LIMITS, Limits
from ..dp.search import Searches
from ..guards import guard
from ..rank.admission import RankLanes, RankSchedule
from ..rank.service import Rankings
from ..report.dashboard import add_dashboard
from ..store import Store
from .admission import BodyLimit, Releaser
from .analyst import add_account_routes, add_preview_route, add_query_route, add_rank_route
from .public import add_public_routes
from .publication import CurrentPublication
from .served import Served


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

    served = Served(source, ledger, deadlines, rankings, limits, pool, admitting, waiting,
                    searches, lanes, releaser, schedule)
    add_query_route(app, served)
    add_preview_route(app, served)
    add_rank_route(app, served)
    add_account_routes(app, served)
    add_public_routes(app, served)
    add_dashboard(app, store, ledger)
    return app
