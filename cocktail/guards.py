"""What every request and reply of `cocktail serve` passes through, in one place.

* A body the API cannot read (malformed JSON, wrong types, ``1e999``, NaN, bytes that are not
  UTF-8) is refused 422, naming each field at fault and never echoing the input back: FastAPI's
  default reply echoes it, and an infinite number or undecodable bytes then broke the reply
  itself (a 500).
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse


def guard(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _unreadable)


async def _unreadable(_: Request, exc: RequestValidationError) -> JSONResponse:
    return JSONResponse({"detail": [{"loc": [_text(part) for part in error["loc"]],
                                     "msg": _text(error["msg"]), "type": error["type"]}
                                    for error in exc.errors()]}, status_code=422)


def _text(value) -> str | int:
    """A location or message as JSON can carry it (a dict key may hold a lone surrogate)."""
    if isinstance(value, int):
        return value
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")
