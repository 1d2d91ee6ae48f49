"""What every request and reply of `cocktail serve` passes through, in one place.

* A body the API cannot read (malformed JSON, wrong types, ``1e999``, NaN, bytes that are not
  UTF-8) is refused 422, naming each field at fault and never echoing the input back: FastAPI's
  default reply echoes it, and an infinite number or undecodable bytes then broke the reply
  itself (a 500).  It, and the 404 of an unknown path and the 405 of a wrong method, are
  problem details like every other error (:mod:`cocktail.problems`).
* Every reply, errors and 404s included, carries a Content-Security-Policy (scripts from this
  server or inline with the request's nonce only; no framing; forms post here only),
  X-Frame-Options, X-Content-Type-Options: nosniff and Referrer-Policy
  (:func:`security_headers`).  A page's inline scripts get the nonce through :func:`page`; a
  route may set a policy of its own (``/docs``).  uvicorn's own 400, to a request it cannot
  parse (which never reaches the app), carries them too (:class:`Protocol`).
* ``/docs`` (Swagger UI) and ``/redoc`` load their scripts from this server (the
  ``fastapi-offline`` package's copies), never from a CDN: offline, they still work.
* A sign-in form resists cross-site posts twice over (:func:`form_page`, :func:`posted_here`):
  the post's Origin (or, lacking one, its Referer) must name this server, and it must carry the
  token of a form this server gave the same browser.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from urllib.parse import urlsplit

from importlib.resources import files

import h11
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from uvicorn.protocols.http.h11_impl import H11Protocol

from .problems import problem

ASSETS = "/static/docs/"  # Swagger UI's and Redoc's scripts, from fastapi-offline
FORM_COOKIE = "cocktail_form"
_FORM_KEY = secrets.token_bytes(32)  # per process: a form does not outlive a restart


def guard(app: FastAPI) -> None:
    """Install the guards on ``app`` (after its other middleware: the headers go outermost,
    onto the 413 of a body limit too)."""
    app.add_exception_handler(RequestValidationError, _unreadable)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _internal)
    app.add_middleware(SecurityHeaders)
    app.mount(ASSETS.rstrip("/"), StaticFiles(directory=str(files("fastapi_offline") / "static")),
              name="docs-assets")
    app.add_api_route("/docs", _docs(app), include_in_schema=False)
    app.add_api_route("/redoc", _redoc(app), include_in_schema=False)


_MODEL = re.compile(r"[A-Z]\w*$|.*\[")  # a union member's name or a validator's tag: ours


async def _unreadable(_: Request, exc: RequestValidationError) -> JSONResponse:
    errors = _as_sent(exc.errors())
    fields = ", ".join(dict.fromkeys(".".join(str(part) for part in error["loc"])
                                     for error in errors))
    hint = ("; send a JSON object, with Content-Type: application/json (/docs shows each "
            "route's)" if any(e["type"] in NOT_JSON for e in errors) else "")
    return problem(422, f"the request cannot be read: {fields or 'its body'} (see errors){hint}",
                   errors=errors)


NOT_JSON = {"json_invalid", "model_attributes_type", "dict_type", "model_type"}


def _as_sent(found: list[dict]) -> list[dict]:
    """The errors in the request's own terms: where a body may take several shapes (a query
    or a batch), those of the shape it came nearest to (fewest errors; all, on a tie), each
    at its place in the request, without our models' names."""
    by_shape: dict[str, list[dict]] = {}
    for error in found:
        loc = list(error["loc"])
        shape = loc.pop(1) if len(loc) > 1 and isinstance(loc[1], str) \
            and _MODEL.match(loc[1]) else ""
        loc = [part for part in loc if not (isinstance(part, str) and _MODEL.match(part))]
        by_shape.setdefault(shape, []).append(
            {"loc": [_text(part) for part in loc], "msg": _text(error["msg"]),
             "type": error["type"]})
    fewest = min(map(len, by_shape.values()), default=0)
    kept = [e for errors in by_shape.values() if len(errors) == fewest for e in errors]
    return list({(tuple(e["loc"]), e["type"]): e for e in kept}.values())


async def _http_error(_: Request, exc: HTTPException) -> JSONResponse:
    response = problem(exc.status_code, str(exc.detail))
    response.headers.update(exc.headers or {})  # a 405's Allow
    return response


async def _internal(request: Request, _: Exception) -> JSONResponse:
    """A route's bug: a problem like any other error, not Starlette's plain text.  Starlette
    answers it outside every middleware, :class:`SecurityHeaders` too, so the headers are set
    here; the traceback is still logged for the owner (the exception goes on to the server)."""
    response = problem(500, "internal error (logged for the owner)")
    nonce = request.scope.get("state", {}).get("nonce") or secrets.token_urlsafe(16)
    response.headers.update(dict(security_headers(nonce)))
    return response


def _text(value) -> str | int:
    """A location or message as JSON can carry it (a dict key may hold a lone surrogate)."""
    if isinstance(value, int):
        return value
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")


def policy(nonce: str, scripts: str = "'self'", styles: str = "'self'",
           images: str = "'self' data:") -> str:
    return (f"default-src 'none'; script-src {scripts} 'nonce-{nonce}'; "
            # plotly.js writes style elements and attributes as it draws
            f"style-src {styles} 'unsafe-inline'; img-src {images}; connect-src 'self'; "
            "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")


def security_headers(nonce: str) -> list[tuple[str, str]]:
    """What every reply carries (a route may set its own policy)."""
    return [("Content-Security-Policy", policy(nonce)), ("X-Frame-Options", "DENY"),
            ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "same-origin")]


class SecurityHeaders:
    """Each request gets a fresh nonce (``request.state.nonce``); each reply the headers,
    unless the route set its own."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        nonce = secrets.token_urlsafe(16)
        scope.setdefault("state", {})["nonce"] = nonce

        async def headed(message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in security_headers(nonce):
                    headers.setdefault(name, value)
            await send(message)
        await self.app(scope, receive, headed)


class Protocol(H11Protocol):
    """uvicorn's HTTP/1.1, whose own 400 to a request it cannot parse (malformed header bytes
    never reach the app, nor :class:`SecurityHeaders`) carries the security headers too.
    uvicorn's ``headers=`` option would not do: its h11 protocol leaves them off that 400."""

    def send_400_response(self, msg: str) -> None:  # uvicorn's, with the headers added
        headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close"),
                   *((name.encode(), value.encode())
                     for name, value in security_headers(secrets.token_urlsafe(16)))]
        for event in (h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                      h11.Data(data=msg.encode("ascii")), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        self.transport.close()


def page(request: Request, html: str, status_code: int = 200, headers=None) -> HTMLResponse:
    """An HTML reply whose inline scripts run under the policy: each gets the request's nonce
    (every text the pages show is escaped, so any ``<script`` in them is the page's own)."""
    nonce = request.state.nonce
    return HTMLResponse(html.replace("<script", f'<script nonce="{nonce}"'),
                        status_code=status_code, headers=headers)


def _docs(app: FastAPI):
    def docs(request: Request) -> HTMLResponse:
        """Swagger UI, from this server's own copy."""
        html = get_swagger_ui_html(
            openapi_url=app.openapi_url, title=f"{app.title} - API",
            swagger_js_url=ASSETS + "swagger-ui-bundle.js",
            swagger_css_url=ASSETS + "swagger-ui.css", swagger_favicon_url=ASSETS + "favicon.png")
        return page(request, html.body.decode())
    return docs


def _redoc(app: FastAPI):
    def redoc(request: Request) -> HTMLResponse:
        """Redoc, from this server's own copy; it renders in a worker it makes from a blob."""
        html = get_redoc_html(openapi_url=app.openapi_url, title=f"{app.title} - API",
                              redoc_js_url=ASSETS + "redoc.standalone.js",
                              redoc_favicon_url=ASSETS + "favicon.png", with_google_fonts=False)
        rules = policy(request.state.nonce) + "; worker-src 'self' blob:"
        return page(request, html.body.decode(), headers={"Content-Security-Policy": rules})
    return redoc


def form_page(request: Request, action: str, render: Callable[[str], str],
              status_code: int) -> HTMLResponse:
    """A page whose form posts to ``action``: ``render`` puts the form's token in it; the
    browser's half goes in a cookie that only ``action`` receives."""
    seed = secrets.token_urlsafe(16)
    response = page(request, render(_form_token(seed, action)), status_code)
    response.set_cookie(FORM_COOKIE, seed, path=action, httponly=True, samesite="strict")
    return response


def posted_here(request: Request, action: str, token: str) -> bool:
    """Whether a post to ``action`` came from this server's own form in the same browser.  The
    token is keyed to the cookie and the action, so neither a token fetched by an attacker
    nor a cookie planted from a sibling host passes alone."""
    source = request.headers.get("origin") or request.headers.get("referer") or ""
    try:
        here = urlsplit(source).netloc == request.headers.get("host")
    except ValueError:  # not a URL
        return False
    seed = request.cookies.get(FORM_COOKIE, "")
    return here and bool(seed) and hmac.compare_digest(
        token.encode("utf-8", "replace"), _form_token(seed, action).encode())


def _form_token(seed: str, action: str) -> str:
    return hmac.new(_FORM_KEY, f"{action}\n{seed}".encode("utf-8", "replace"),
                    hashlib.sha256).hexdigest()
