"""`cocktail serve`: the private cloud's HTTP API for analysts (FastAPI; OpenAPI at /docs).

POST /v1/query  {"query": "2*count(a) - count(b & c)"} or {"batch": ["...", "..."]}, and
                optionally "objective": "total" (default) or "per-query" (dp.strategies),
                and "alpha" (or "rho", under zCDP): what to spend, up to the role's;
                a term in no public chunk is refused (400, free) unless "allow_unlisted":
                true (docs/dp.md, "Unlisted terms")
POST /v1/preview  the same body: the strategy, each query's expected error and interval, and
                the charge, before spending (no data read, nothing charged; rate-limited)
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

The package: :mod:`.app` wires the routes of :mod:`.analyst` (analysts, with a token)
and :mod:`.public` (health and limits) and the pages of :mod:`cocktail.report.dashboard`;
:mod:`.admission` (body limit, replies released on time), :mod:`.publication`, :mod:`.models`,
:mod:`.tls` and :mod:`.server` (`cocktail serve`).
"""

from __future__ import annotations

from ..extras import require

require("fastapi")  # a missing [serve] is one line naming it, not an ImportError
require("fastapi_offline")
require("uvicorn")

from .app import create_app  # noqa: E402
from .publication import CurrentPublication  # noqa: E402
from .server import Server  # noqa: E402
from .tls import Tls  # noqa: E402

__all__ = ["CurrentPublication", "Server", "Tls", "create_app"]
