"""The routes anyone may call, without a token: the published limits and schedule, and health."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from .. import problems
from ..dp.intervals import LADDER
from .models import Health, Published
from .publication import NoPublication
from .served import Served


def add_public_routes(app: FastAPI, served: Served) -> None:
    """GET /v1/limits and /health."""
    source, deadlines, limits = served.source, served.deadlines, served.limits

    @app.get("/v1/limits", response_model=Published)
    def published_limits() -> JSONResponse:
        """The limits every request is checked against, and when replies leave."""
        return JSONResponse({"limits": limits.as_dict() | {"rank_in_flight_per_token": 1},
                             "intervals_ladder": list(LADDER),
                             "deadlines": deadlines.schedule(limits)})

    @app.get("/health", response_model=Health, responses=problems.documented(503))
    def health() -> JSONResponse:
        """For a load balancer or a supervisor: 200 while a publication is served (no
        token; the version is in every answer anyway), 503 before the first one."""
        try:
            return JSONResponse({"status": "ok", "version": source.get().version})
        except NoPublication as exc:
            return problems.problem(503, str(exc))
