"""The analysts' client of ``cocktail serve``: what ``cocktail query --url`` and ``cocktail rank
query --url`` send, and the refusals they get back as typed errors."""

from __future__ import annotations

import json

from .exits import ExitCode

TIMEOUT = 900  # seconds: a batch on a cluster runner may take minutes
# What each refusal of the service means as the CLI's exit status; any other error is FAILED
HTTP_EXIT = {400: ExitCode.USAGE, 404: ExitCode.USAGE, 413: ExitCode.USAGE,
             422: ExitCode.USAGE, 401: ExitCode.REFUSED, 403: ExitCode.REFUSED,
             429: ExitCode.BUDGET}


class ServiceUnreachable(Exception):
    """No answer at all: the address is wrong or the service is down."""

    exit_status = ExitCode.PROBLEMS


class ServiceRefused(Exception):
    """The service answered with an error; ``http_status`` says which kind, ``exit_status``
    what the CLI exits with."""

    def __init__(self, detail: str, http_status: int) -> None:
        super().__init__(detail)
        self.http_status = http_status

    @property
    def exit_status(self) -> ExitCode:
        return HTTP_EXIT.get(self.http_status, ExitCode.FAILED)


def query(url: str, token: str, text: str, objective: str, alpha: float | None = None,
          rho: float | None = None) -> dict:
    """Noisy answers to counting or linear queries (one, or a batch in ``text``), at the
    role's α (or ρ) or the ``alpha`` (``rho``) given."""
    spend = {name: value for name, value in (("alpha", alpha), ("rho", rho)) if value is not None}
    return _post(url, "/v1/query", token, {"query": text, "objective": objective, **spend})


def rank(url: str, token: str, name: str, query: str, top: int) -> dict:
    """The ``top`` results of ranking ``name`` for ``query`` ('col=value,...')."""
    return _post(url, "/v1/rank", token, {"query": query, "k": top, "name": name})


def _post(url: str, path: str, token: str, body: dict) -> dict:
    import httpx  # only the analysts' commands pay for the HTTP client

    try:
        response = httpx.post(url.rstrip("/") + path, json=body,
                              headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT)
    except httpx.HTTPError as exc:
        raise ServiceUnreachable(f"cannot reach the overlay service at {url}: {exc}") from None
    try:
        answer = response.json()
    except ValueError:
        answer = {"detail": response.text[:200]}
    if response.status_code != 200:
        detail = answer.get("detail", answer) if isinstance(answer, dict) else answer
        raise ServiceRefused(detail if isinstance(detail, str) else json.dumps(detail),
                             response.status_code)
    return answer
