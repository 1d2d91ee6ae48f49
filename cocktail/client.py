"""An analyst's client of ``cocktail serve`` (docs/analyst-client.md).

:class:`Client` answers queries and batches with a confidence interval for each answer, shows
the caller's budget and own history, asks a ranking, and tells what may be asked: the rankings
served and the terms of the public chunks.  Results are :class:`Result` (plain rows, the reply
as sent, and ``to_pandas()``); a refusal raises :class:`ServiceRefused` and no answer at all
:class:`ServiceUnreachable`, each carrying the ``exit_status`` ``cocktail`` exits with.
``cocktail query --url`` and ``cocktail rank query --url`` are thin users of it.

It imports httpx and the standard library only (pandas in ``to_pandas``, the ``pandas``
extra): an analyst needs no engine.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone

from .dp.intervals import DEFAULT_LEVEL, check_level, of_answer
from .errors import HTTP_EXIT, ExitCode
from .querylang import parse_batch

TIMEOUT = 900  # seconds: a batch on a cluster runner may take minutes
LEVEL = DEFAULT_LEVEL
ANSWER_COLUMNS = ("query", "answer", "rms_error", "ci_low", "ci_high", "ci_method")
QUERY_COLUMNS = (*ANSWER_COLUMNS, "spent", "reused", "answer_id")
PREVIEW_COLUMNS = ("query", "rms_error", "ci_half_width", "ci_method", "above_fixed")
HISTORY_COLUMNS = ("at", *ANSWER_COLUMNS, "spent", "version")


class ServiceUnreachable(Exception):
    """No answer at all: the address is wrong or the service is down."""

    exit_status = ExitCode.PROBLEMS


class ServiceRefused(Exception):
    """The service answered with an error: ``http_status`` says which kind, ``limit`` the
    published limit that refused it (``public_terms``: a term in no public chunk), if one
    did."""

    def __init__(self, detail: str, http_status: int, limit: str | None = None) -> None:
        super().__init__(detail)
        self.http_status, self.limit = http_status, limit

    @property
    def exit_status(self) -> ExitCode:
        return HTTP_EXIT.get(self.http_status, ExitCode.FAILED)


@dataclass(frozen=True)
class Result:
    """Rows, one plain dict each (an answer, a result, a ranking), in ``columns``; ``reply``
    is the service's reply they came from, as it sent it."""

    rows: list[dict]
    columns: tuple[str, ...]
    reply: dict = field(repr=False)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict]:
        return iter(self.rows)

    def __getitem__(self, index: int) -> dict:
        return self.rows[index]

    def to_pandas(self):
        """The rows as a pandas DataFrame, one column each (the ``frames`` extra)."""
        from .frames import to_frame
        return to_frame(self.rows, list(self.columns))


class Client:
    """An analyst's connection to ``cocktail serve`` at ``url`` with ``token``; ``timeout``
    in seconds for each request.  A context manager (it closes its connections)."""

    def __init__(self, url: str, token: str, *, timeout: float = TIMEOUT) -> None:
        import httpx  # here: `cocktail query --exact` imports this module and asks no server

        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, timeout=timeout,
                                  headers={"Authorization": f"Bearer {token}"})

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def query(self, text: str, alpha: float | None = None, rho: float | None = None,
              objective: str | None = None, level: float = LEVEL,
              allow_unlisted: bool = False) -> Result:
        """Noisy answers to ``text`` (a query, or several on lines or between ``;``: one
        release), charged to the caller's budget unless reused: one row per query with its
        expected RMS error and a confidence interval at ``level`` (docs/dp.md, "Confidence
        intervals").  ``alpha`` (``rho`` under zCDP) spends less than the role's,
        ``objective`` is ``total`` (the default) or ``per-query``; a term in no public chunk is
        refused, free, unless ``allow_unlisted`` (then it is answered and charged)."""
        return self._answers({"query": text}, alpha, rho, objective, level, allow_unlisted)

    def batch(self, texts: Iterable[str], alpha: float | None = None,
              rho: float | None = None, objective: str | None = None, level: float = LEVEL,
              allow_unlisted: bool = False) -> Result:
        """Noisy answers to the queries ``texts``, together (one release, one charge), as
        :meth:`query` answers."""
        return self._answers({"batch": list(texts)}, alpha, rho, objective, level,
                             allow_unlisted)

    def preview(self, text: str, alpha: float | None = None, rho: float | None = None,
                objective: str | None = None, level: float = LEVEL,
                allow_unlisted: bool = False) -> Result:
        """What :meth:`query` would do with ``text``, before spending: a row per query with
        its expected RMS error and interval half-width at ``level``; the reply says the
        ``strategy`` and the ``charge``.  Reads no data and charges nothing; the service
        admits a few a minute (429, ``ServiceRefused``, past them: docs/dp.md, "Previews")."""
        reply = self._ask("/v1/preview", {"query": text}, alpha, rho, objective, level,
                          allow_unlisted)
        queries = [str(q) for q in parse_batch(reply["workload"]).queries]
        intervals = reply["intervals"]
        return Result([{"query": q, "rms_error": rms, "ci_half_width": half, "ci_method": how,
                        "above_fixed": worse} for q, rms, half, how, worse in zip(
                            queries, reply["expected_rms_error"], intervals["half_width"],
                            intervals["method"], reply["above_fixed"], strict=True)],
                      PREVIEW_COLUMNS, reply)

    def _ask(self, path: str, asked: dict, alpha: float | None, rho: float | None,
             objective: str | None, level: float, allow_unlisted: bool) -> dict:
        check_level(level)  # before anything is charged
        options = {"alpha": alpha, "rho": rho, "objective": objective,
                   "allow_unlisted": allow_unlisted or None,
                   "level": None if level == LEVEL else level}  # the reply's intervals
        return self._send("POST", path, json=asked | {
            name: value for name, value in options.items() if value is not None})

    def _answers(self, asked: dict, alpha: float | None, rho: float | None,
                 objective: str | None, level: float, allow_unlisted: bool) -> Result:
        reply = self._ask("/v1/query", asked, alpha, rho, objective, level, allow_unlisted)
        return Result(_answer_rows(reply, level, spent=reply["charged"], reused=reply["reused"],
                                  answer_id=reply["answer_id"]), QUERY_COLUMNS, reply)

    def budget(self) -> dict:
        """The caller's budget (``budget``, ``spent``, ``remaining``, in α, or ρ under zCDP)
        and the dataset's (docs/dp.md)."""
        return self._send("GET", "/v1/budget")

    def history(self, last: int | None = None, level: float = LEVEL) -> Result:
        """The caller's own charged answers, oldest first (the ``last`` ones; by default as
        many as one reply holds, 1,000): a row per query, with its interval at ``level``, when
        it was charged (``at``, UTC) and what (``spent``).  A ranking's charge is one row
        without a query (``version`` says ``rank:NAME:VERSION``); reused answers cost nothing
        and are not here."""
        check_level(level)
        reply = self._send("GET", "/v1/history", params={} if last is None else {"last": last})
        rows = []
        for charge in reply["answers"]:
            common = {"at": datetime.fromtimestamp(charge["at"], timezone.utc),
                      "spent": charge["charged"],
                      "version": charge["version"].rpartition("#")[2]}  # past the store's id
            answer = charge["answer"] or {}
            rows += (_answer_rows(answer, level, **common) if "answers" in answer else
                     [dict.fromkeys(HISTORY_COLUMNS) | common])
        return Result(rows, HISTORY_COLUMNS, reply)

    def rank(self, name: str, query: str, k: int = 10) -> Result:
        """The top ``k`` of ranking ``name`` for ``query`` ('column=value,...'): a row per
        result, its id and public columns; a dp ranking charges the caller's α."""
        reply = self._send("POST", "/v1/rank", json={"query": query, "k": k, "name": name})
        rows = reply["results"]
        return Result(rows, tuple(rows[0]) if rows else ("id",), reply)

    def rankings(self) -> Result:
        """The rankings served: name, version, defense, tuples and public columns."""
        reply = self._send("GET", "/v1/rankings")
        return Result(reply["rankings"], ("name", "version", "defense", "tuples", "public"),
                      reply)

    def terms(self, prefix: str = "", limit: int | None = None) -> list[str]:
        """The terms that occur in public chunks (public by construction), in order: those
        starting with ``prefix``, the first ``limit`` of them if given.  A query may name
        these without ``allow_unlisted``."""
        found: list[str] = []
        after = ""
        while limit is None or len(found) < limit:  # pages of the service's size
            page = self._send("GET", "/v1/terms", params={"prefix": prefix, "after": after})
            found += page["terms"]
            if page["next"] is None:
                break
            after = page["next"]
        return found[:limit]

    def _send(self, method: str, path: str, **request) -> dict:
        import httpx

        try:
            response = self._http.request(method, path, **request)
        except httpx.HTTPError as exc:
            raise ServiceUnreachable(f"cannot reach the overlay service at {self.url}: "
                                     f"{exc}") from None
        try:
            answer = response.json()
        except ValueError:
            answer = {"detail": response.text[:200]}
        if response.status_code != 200:
            detail = answer.get("detail", answer) if isinstance(answer, dict) else answer
            raise ServiceRefused(detail if isinstance(detail, str) else json.dumps(detail),
                                 response.status_code,
                                 answer.get("limit") if isinstance(answer, dict) else None)
        return answer


def _answer_rows(answer: dict, level: float, **common) -> list[dict]:
    """One row per query of a noisy answer (as served, or as the ledger stored it), with its
    interval at ``level``, and ``common`` in each."""
    queries = [str(q) for q in parse_batch(answer["workload"]).queries]
    return [{"query": text, "answer": value, "rms_error": rms, "ci_low": low, "ci_high": high,
             "ci_method": how, **common}
            for text, value, rms, (low, high, how) in zip(
                queries, answer["answers"], answer["expected_rms_error"],
                of_answer(answer, level), strict=True)]
