"""The one error model of `cocktail serve`: RFC 9457 problem details.

Every reply of 400 or more, from a route, a guard, the body limit or an unknown path, is an
``application/problem+json`` object: ``type`` (``about:blank``: the status says it all),
``title`` (the status's phrase), ``status``, ``detail`` (what a person reads), and two
members of our own: ``limit``, the published limit (``GET /v1/limits``) that refused the
request, and ``errors``, each field at fault in a body the API could not read (422).  A 401
carries ``WWW-Authenticate: Bearer`` (RFC 6750).  :func:`documented` writes the same model
into each route's OpenAPI responses, so that the document lists every status a route returns.
"""

from __future__ import annotations

from http import HTTPStatus

from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

MEDIA_TYPE = "application/problem+json"
CHALLENGE = 'Bearer realm="cocktail"'
SCHEMA_REF = "#/components/schemas/Problem"


class FieldError(BaseModel):
    loc: list[str | int] = Field(description="Where in the request: body, then the path.")
    msg: str
    type: str


class Problem(BaseModel):
    type: str = "about:blank"
    title: str = Field(description="The status's phrase.")
    status: int
    detail: str = Field(description="What went wrong, for a person.")
    limit: str | None = Field(None, description="The published limit that refused the request "
                                                "(GET /v1/limits), or public_terms: a term in "
                                                "no public chunk (GET /v1/terms).")
    errors: list[FieldError] | None = Field(None, description="422: each field at fault.")


def problem(status: int, detail: str, *, limit: str | None = None,
            errors: list[dict] | None = None) -> JSONResponse:
    body = {"type": "about:blank", "title": HTTPStatus(status).phrase, "status": status,
            "detail": detail}
    if limit is not None:
        body["limit"] = limit
    if errors is not None:
        body["errors"] = errors
    headers = {"WWW-Authenticate": CHALLENGE} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)


def reply(status: int, body: dict) -> JSONResponse:
    """A route's reply: ``body`` as it is on success, as a problem (its ``detail`` and
    ``limit``) on an error."""
    if status < 400:
        return JSONResponse(body, status_code=status)
    return problem(status, str(body.get("detail", HTTPStatus(status).phrase)),
                   limit=body.get("limit"))


WHY = {
    400: "A malformed query, an unknown name, a published limit exceeded (``limit`` names "
         "it), or a term in no public chunk not allowed (``limit``: ``public_terms``); nothing "
         "is charged.",
    401: "No token, or one nobody issued.",
    403: "The token's user is disabled, or the route is not theirs.",
    404: "No such ranking.",
    413: "The request body is over the published size (``limit``: ``body_bytes``).",
    422: "A body or a query parameter the API cannot read (not JSON, wrong types, a missing "
         "or extra field, out of range): ``errors`` names each field at fault.",
    429: "The caller's or the dataset's budget is spent, or the token has a ranking in "
         "flight (``limit``: ``rank_in_flight``); nothing is charged.",
    503: "No publication yet, the counts failed, another request is computing this answer, "
         "or the rankings of the caller's role and size are busy (``limit``: "
         "``rank_slots``): ask again (a retry reuses the charge).",
    500: "A bug in the server, logged for the owner (its trace is never sent): ask again "
         "later, or tell the owner.",
}


def documented(*statuses: int) -> dict:
    """The OpenAPI ``responses`` of these error statuses: the problem model, and the challenge
    header on 401."""
    responses = {}
    for status in statuses:
        response = {"description": WHY[status],
                    "content": {MEDIA_TYPE: {"schema": {"$ref": SCHEMA_REF}}}}
        if status == 401:
            response["headers"] = {"WWW-Authenticate": {
                "description": "The Bearer challenge (RFC 6750).", "schema": {"type": "string"}}}
        responses[status] = response
    return responses


def add_to(openapi: dict) -> dict:
    """The problem model in the document's components (the routes refer to it), and the 500
    of a bug, which any operation may answer."""
    for methods in openapi.get("paths", {}).values():
        for operation in methods.values():
            operation["responses"].setdefault("500", documented(500)[500])
    schemas = openapi.setdefault("components", {}).setdefault("schemas", {})
    problem_schema = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(problem_schema.pop("$defs", {}))  # FieldError
    schemas["Problem"] = problem_schema
    return openapi
