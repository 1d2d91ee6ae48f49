"""The dashboard of `cocktail serve`: the owner's report live, and each analyst's own page.

* ``/owner`` — the report of :mod:`cocktail.report.page`, behind the owner's credential
  (`cocktail owner-token`; never an analyst's token: 403).  The store's part is computed once
  per version and the ledger's on every load; the page polls ``/owner/state`` and reloads
  itself when CURRENT (or a table's) moves.
* ``/analyst`` — an analyst's remaining budget and past answers, and nothing of anyone else's.

A browser signs in once through a form that sets an HttpOnly, SameSite=Strict cookie scoped
to the page's path; scripts may send ``Authorization: Bearer`` instead.  The form refuses
cross-site posts (:mod:`cocktail.guards`).  plotly.js is served
from the package (``/static/plotly.js``): the pages need no network beyond this server.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from functools import cache
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from ..dp.ledger import Ledger, LedgerError, User
from ..dp.noise import PURE, SYMBOL
from ..guards import form_page, page, posted_here
from ..problems import documented, problem
from ..releases import current_version
from ..releases.layout import AREAS, named_store, parts
from ..store import Store
from .numbers import ledger_numbers, store_numbers
from .page import document, get_plotlyjs, render, utc

PLOTLY = "/static/plotly.js"
# The pages show the latest charges and answers only: built on every load, a page of the
# whole ledger grew with it, and so did the server's memory (it never gives the peak back).
PAGE_ROWS = 1_000
OWNER_COOKIE, ANALYST_COOKIE = "cocktail_owner", "cocktail_analyst"


class OwnerReport:
    """The store's numbers, recomputed only when a version moves (the audit is not free)."""

    def __init__(self, store: Store) -> None:
        self._store, self._lock = store, threading.Lock()
        self._key: tuple | None = None
        self._numbers: dict = {}

    def state(self) -> tuple:
        held = tuple((area.folder, name, current_version(named_store(self._store, area, name)))
                     for area, name in parts(self._store))
        return current_version(self._store), held

    def numbers(self) -> dict:
        with self._lock:
            key = self.state()
            if key != self._key:
                self._numbers, self._key = store_numbers(self._store), key
            return self._numbers


def _credential(request: Request, cookie: str) -> str | None:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return request.cookies.get(cookie)


def _login(request: Request, path: str, status: int, message: str) -> HTMLResponse:
    return form_page(request, f"{path}/login", lambda token: document(
        "Cocktail: sign in",
        f"<h1>Cocktail</h1><p>{html.escape(message)}</p><form method='post' "
        f"action='{path}/login'><input type='hidden' name='form' value='{token}'><label>Token "
        "<input type='password' name='token' id='token' autocomplete='off'></label> "
        "<button type='submit' id='sign-in'>Sign in</button></form>"), status)


async def _sign_in(request: Request, path: str, cookie: str,
                   check: Callable[[str], object]) -> Response:
    """The login form's POST: refused (403, no cookie) unless it comes from this server's own
    form; then the token checked by ``check``, then kept in a cookie."""
    fields = parse_qs((await request.body()).decode("utf-8", "replace"))
    if not posted_here(request, f"{path}/login", (fields.get("form") or [""])[0]):
        return _login(request, path, 403, "Refused: sign in through this server's own page.")
    token = (fields.get("token") or [""])[0].strip()
    try:
        check(token)
    except LedgerError as exc:
        return _login(request, path, exc.status, f"Refused: {exc}.")
    response = RedirectResponse(path, status_code=303)
    response.set_cookie(cookie, token, httponly=True, samesite="strict", path=path)
    return response


def add_dashboard(app: FastAPI, store: Store, ledger: Ledger) -> None:
    report = OwnerReport(store)

    # The pages, their sign-in forms and plotly.js are for browsers, not API clients: they
    # stay out of the OpenAPI document (docs/report.md describes them); /owner/state is the
    # pages' JSON and is in it.
    @app.get(PLOTLY, include_in_schema=False)
    def plotly_js() -> Response:
        return Response(_plotly(), media_type="application/javascript",
                        headers={"Cache-Control": "max-age=86400"})

    @app.get("/owner", response_class=HTMLResponse, include_in_schema=False)
    def owner_page(request: Request) -> HTMLResponse:
        try:
            ledger.check_owner(_credential(request, OWNER_COOKIE))
        except LedgerError as exc:
            return _login(request, "/owner", exc.status, f"The owner's dashboard: {exc}.")
        numbers = report.numbers() | {"ledger": ledger_numbers(ledger, PAGE_ROWS)}
        return page(request, render(numbers, script=PLOTLY, refresh="/owner/state"))

    @app.post("/owner/login", include_in_schema=False)
    async def owner_login(request: Request) -> Response:
        return await _sign_in(request, "/owner", OWNER_COOKIE, ledger.check_owner)

    @app.get("/owner/state", responses=documented(401, 403))
    def owner_state(request: Request) -> JSONResponse:
        """The store's current version and each table's and ranking's: the owner's page
        reloads when one moves (the owner's token, never an analyst's)."""
        try:
            ledger.check_owner(_credential(request, OWNER_COOKIE))
        except LedgerError as exc:
            return problem(exc.status, str(exc))
        version, parts = report.state()
        return JSONResponse({"version": version} | {
            area.folder: {name: at for folder, name, at in parts if folder == area.folder}
            for area in AREAS})

    @app.get("/analyst", response_class=HTMLResponse, include_in_schema=False)
    def analyst_page(request: Request) -> HTMLResponse:
        try:
            user = ledger.authenticate(_credential(request, ANALYST_COOKIE))
        except LedgerError as exc:
            return _login(request, "/analyst", exc.status, f"Your budget and answers: {exc}.")
        return page(request, _analyst_html(user, ledger))

    @app.post("/analyst/login", include_in_schema=False)
    async def analyst_login(request: Request) -> Response:
        return await _sign_in(request, "/analyst", ANALYST_COOKIE, ledger.authenticate)


@cache
def _plotly() -> bytes:
    """plotly.js (4.6 MB), read and encoded once: per request, anyone could make the server
    read and copy it (no credential is needed for a script)."""
    return get_plotlyjs().encode()


def _analyst_html(user: User, ledger: Ledger) -> str:
    status = ledger.budget_status(user)
    symbol = SYMBOL[user.definition]
    rows = "".join(
        f"<tr><td>{utc(h['at'])}</td><td>{html.escape(h['version'])}</td>"
        f"<td>{h['alpha']:g}</td><td>{html.escape(_summary(h['answer']))}</td></tr>"
        for h in ledger.history(user, PAGE_ROWS))
    return document(
        f"Cocktail: {user.name}",
        f"<h1>{html.escape(user.name)}</h1><p class='meta'>role {html.escape(user.role)}, "
        f"{symbol}{'' if user.definition == PURE else ' (zCDP)'} = {user.alpha:g} per query</p>"
        "<div class='cards'>"
        f"<div class='card' id='remaining'><b>{status['remaining']:g}</b>remaining of "
        f"{status['budget']:g}</div><div class='card'><b>{status['spent']:g}</b>spent</div>"
        f"</div><h2>Your answers</h2><p class='meta'>the last {PAGE_ROWS:,} at most</p>"
        "<table class='data' id='answers'><thead><tr>"
        f"<th>time (UTC)</th><th>version</th><th>{symbol}</th><th>answer</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>")


def _summary(answer: dict | None) -> str:
    if answer is None:
        return "(not stored: the request stopped)"
    if "workload" in answer:
        shown = ", ".join(f"{a:.6g}" for a in answer["answers"])
        return f"{answer['workload']} → {shown}"
    return f"top {len(answer.get('results', []))}: " + ", ".join(
        str(r.get("id")) for r in answer.get("results", []))
