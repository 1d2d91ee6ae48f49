"""One analyst request, end to end, in the order that keeps refusals free and time flat.

1. authenticate; 2. parse and check the published limits, and that every term occurs in a
public chunk unless the request allows otherwise (:class:`UnlistedTerms`); 3. reuse the role's
earlier answer, or charge the budget and reserve the answer (:meth:`Ledger.reserve`) — a
refusal stops here, having done no work on the data; a request that finds the answer pending
(another request of the role computing it) waits for it, and searches and counts nothing
unless it takes the reservation over; 4. choose the strategy (data independent; a search is
shared by shape, :mod:`.search`); 5. compute the exact counts, against the deadline when one
is given; 6. add noise, store, release.

:class:`Answered` says when the answer may leave (``release_at``, monotonic seconds): the
service holds the reply until then, so its timing depends on the request alone.  :func:`begin`
does the steps that never wait (1-3), so that the service can answer refusals and reused
answers in threads that never wait, and run the rest, which may, in a pool of its own.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Container
from concurrent.futures import Executor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from functools import partial

from ..querylang import Workload
from .answer import Counts, Prepared, prepare
from .deadline import Deadlines
from .ledger import Ledger, Ticket, User
from .limits import LIMITS, LimitExceeded, Limits
from .search import SEARCHES, Searches
from .noise import PARAMETER
from .objectives import DEFAULT_OBJECTIVE
from .strategies import PER_QUERY, check_objective, most_counts, searched
from .workload import Matrices

log = logging.getLogger("cocktail.dp")


@dataclass(frozen=True)
class Source:
    """The data as the DP layer sees it: a version name, an exact-count function, and the
    identity of the store it comes from (:func:`cocktail.private_config.store_identity`,
    never its path: analysts see it in ``answer_id``) — so that one ledger can serve several
    stores (one budget for overlapping data) without handing one store's stored answer to a
    query on another."""

    version: str
    counts: Counts
    store: str = ""
    # The terms of the version's public chunks (query.view.PublicTerms), None: no check
    public_terms: Container[str] | None = None

    @property
    def publication(self) -> str:
        """The ledger's name for the data an answer was computed from."""
        return f"{self.store}#{self.version}" if self.store else self.version


@dataclass(frozen=True)
class Answered:
    body: dict
    release_at: float | None  # monotonic; None when no deadline was asked for


class ComputeFailed(Exception):
    """No answer to release: the counts failed, or the request that reserved the answer is
    still computing it at this one's deadline; the charge is kept for the retry."""


class UnlistedTerms(LimitExceeded):
    """A query naming terms that occur in no public chunk, not allowed to: refused before
    anything is charged.  The list of public terms is public, so the refusal says nothing
    the public cloud does not: a term only private chunks hold and a term nobody holds are
    refused alike (docs/dp.md, "Unlisted terms")."""

    def __init__(self, terms: list[str]) -> None:
        named = ", ".join(json.dumps(t, ensure_ascii=False) for t in terms)
        super().__init__("public_terms", (
            f"{'terms' if len(terms) > 1 else 'term'} {named} "
            f"{'occur' if len(terms) > 1 else 'occurs'} in no public chunk of "
            "this publication (GET /v1/terms lists those that do); nothing was charged. "
            'To ask anyway, and be charged, send "allow_unlisted": true (cocktail query '
            "--allow-unlisted)"))
        self.terms = terms


def admit(ledger: Ledger, token: str | None, request: Workload | str,
          limits: Limits = LIMITS, objective: str = DEFAULT_OBJECTIVE, alpha: float | None = None,
          rho: float | None = None, listed: Container[str] | None = None
          ) -> tuple[User, Workload, float]:
    """Steps 1-2: who asks and what, within the limits and, given ``listed``, naming only
    terms in it, and what it spends (its own choice within its role's, or its role's: an
    ``alpha`` under pure DP, a ``rho`` under zCDP); touches no data."""
    check_objective(objective)
    user = ledger.authenticate(token)
    workload = limits.check(request) if isinstance(request, Workload) else limits.parse(request)
    unlisted = [] if listed is None else [t for t in workload.terms if t not in listed]
    if unlisted:
        raise UnlistedTerms(unlisted)
    asked, name = {"alpha": alpha, "rho": rho}, PARAMETER[user.definition]
    for other, value in asked.items():
        if other != name and value is not None:
            raise LimitExceeded(name, f"your role spends {name} ({user.definition}), not {other}")
    return user, workload, limits.spend(asked[name], user.alpha, name)


def ask(ledger: Ledger, source: Source, token: str | None, request: Workload | str, *,
        limits: Limits = LIMITS, deadlines: Deadlines | None = None,
        pool: Executor | None = None, searches: Searches = SEARCHES,
        arrival: float | None = None, objective: str = DEFAULT_OBJECTIVE,
        alpha: float | None = None, rho: float | None = None,
        allow_unlisted: bool = False) -> Answered:
    """The noisy answer for the token's user, charged to its budget (or reused for free),
    from the strategy chosen under ``objective`` (:data:`.strategies.OBJECTIVES`), at the
    request's ``alpha`` or ``rho`` (at most its role's; by default the role's).  A term in
    none of the source's public chunks is refused (:class:`UnlistedTerms`) unless
    ``allow_unlisted``.

    With ``deadlines`` (and a ``pool`` to compute in), the counts must be ready by the
    deadline; otherwise the default answer is released."""
    step = begin(ledger, source, token, request, limits=limits, deadlines=deadlines, pool=pool,
                 searches=searches, arrival=arrival, objective=objective, alpha=alpha,
                 rho=rho, allow_unlisted=allow_unlisted)
    return step if isinstance(step, Answered) else step()


def begin(ledger: Ledger, source: Source, token: str | None, request: Workload | str, *,
          limits: Limits = LIMITS, deadlines: Deadlines | None = None,
          pool: Executor | None = None, searches: Searches = SEARCHES,
          arrival: float | None = None, objective: str = DEFAULT_OBJECTIVE,
          alpha: float | None = None, rho: float | None = None, allow_unlisted: bool = False
          ) -> Answered | Callable[[], Answered]:
    """Steps 1-3 of :func:`ask`, which never wait: a refusal raises, a reused answer is
    returned, and otherwise the rest of the work (waiting for a pending answer, or choosing and
    computing a reserved one) is returned to be called."""
    arrival = time.monotonic() if arrival is None else arrival
    user, workload, spend = admit(ledger, token, request, limits, objective, alpha, rho,
                                  None if allow_unlisted else source.public_terms)
    key = answer_key(workload, objective, None if spend == user.alpha else spend)
    ticket = ledger.reserve(user, source.publication, key, alpha=spend)
    if ticket.state == "answered":
        return _answered(ledger.result(ticket), source,
                         arrival + deadlines.refusal if deadlines else None)
    return partial(_finish, ledger, source, ticket, workload, key, spend, limits, deadlines,
                   pool, searches, arrival, objective)


def _finish(ledger: Ledger, source: Source, ticket: Ticket, workload: Workload, key: str,
            spend: float, limits: Limits, deadlines: Deadlines | None, pool: Executor | None,
            searches: Searches, arrival: float, objective: str) -> Answered:
    matrices = Matrices(workload)
    while ticket.state == "pending":
        # Wait first: only a request that paid for the answer may make the server search.
        until = due(matrices, deadlines, arrival)
        stored = ledger.wait(ticket, until)
        if stored is not None:
            return _answered(stored, source, until)
        if until is not None and time.monotonic() >= until:
            # Its process lives and will store the answer; a placeholder stored here instead
            # would be every later asker's answer.
            raise ComputeFailed("another request is still computing this answer; ask again "
                                "(free)")
        # Its process died, or its reservation went stale: take the reservation over.
        ticket = ledger.reserve(ticket.user, ticket.version, key, alpha=spend)
        if ticket.state == "answered":  # stored meanwhile
            return _answered(ledger.result(ticket), source, until)
    # Reserved: charged now, or a dead request's paid reservation taken over.
    prepared = prepare(workload, limits.search_units, objective, searches=searches,
                       user=ticket.user.name, until=strategy_due(matrices, deadlines, arrival),
                       definition=ticket.user.definition)
    until = due(matrices, deadlines, arrival, chosen=time.monotonic())
    try:
        answer = _compute(prepared, source, spend, until, pool)
    except Exception as exc:
        ledger.abandon(ticket)
        log.exception("counts for %s failed", ticket.key[:12])
        raise ComputeFailed("the private cloud could not compute the answer; ask again "
                            "(the retry reuses this charge)") from exc
    return _answered(ledger.fulfil(ticket, answer), source, until)


def strategy_due(m: Matrices, deadlines: Deadlines | None, arrival: float) -> float:
    """When the strategy for ``m`` must be chosen (monotonic): a searched shape's
    ``deadlines.search`` after arrival, for an answer and a preview alike; any other shape
    needs no search, and has no such bound."""
    return arrival + deadlines.search if deadlines and searched(m) else math.inf


def due(m: Matrices, deadlines: Deadlines | None, arrival: float,
        chosen: float | None = None) -> float | None:
    """When a fresh answer to ``m`` leaves (monotonic), by the workload alone.  A searched
    shape's strategy is due ``deadlines.search`` after arrival and its counts are timed as the
    most any candidate needs (:func:`.strategies.most_counts`): the same time whether the
    search ran now, was kept from anyone's earlier request, or was cut short, and whichever
    strategy won.  Any other shape needs no search
    (NOQ or NOT, over its counting queries), and leaves their time after its choice was made
    (``chosen``; at arrival for a request that chose none)."""
    if deadlines is None:
        return None
    if searched(m):
        return arrival + deadlines.search + deadlines.fresh(most_counts(m))
    return (arrival if chosen is None else chosen) + deadlines.fresh(len(m.workload.counts))


def answer_key(workload: Workload, objective: str, alpha: float | None = None) -> str:
    """What the ledger reuses an answer by: the workload's canonical text, the objective
    unless it is "per-query" (the default before "total" was: answers stored then keep their
    keys, and a "total" request never reuses one), and the α spent unless it is the role's.
    Another objective or another α is another release (another strategy, or noise of another
    scale), so it is charged anew: keyed by text alone, its fresh answer would come for the
    first one's charge — two noisy answers for one.  A workload's text ends with
    ")", so no workload's key reads as another's."""
    key = str(workload) if objective == PER_QUERY else f"{workload} | objective {objective}"
    return key if alpha is None else f"{key} | alpha {alpha!r}"


def _answered(body: dict, source: Source, release_at: float | None) -> Answered:
    return Answered(body | {"version": source.version}, release_at)


def _compute(prepared: Prepared, source: Source, alpha: float, until: float | None,
             pool: Executor | None) -> dict:
    if until is None or pool is None:
        return prepared.noisy(prepared.exact(source.counts), alpha).as_dict()
    future = pool.submit(prepared.exact, source.counts)
    try:
        exact = future.result(timeout=max(0.0, until - time.monotonic()))
    except FutureTimeout:
        future.cancel()
        log.warning("deadline missed: %d counts not ready in time; released the default answer "
                    "(raise --deadline-base-ms / --deadline-count-ms)", prepared.evaluations)
        return prepared.default(alpha).as_dict()
    return prepared.noisy(exact, alpha).as_dict()

