"""Strategy searches as shared, charged work: one per shape at a time, in a pool of their own.

A searched workload's strategy (:func:`.strategies.choose`) depends on its shape and objective
alone, so the choices are kept by shape (the most recently used, up to a bound in bytes), and
while one shape is searched every other request of that shape waits on the same future instead
of searching again.

The service gives :class:`Searches` a bounded pool: searches never run in the threads that
answer requests (nor in the count pool), so a storm of them cannot hold the threads that
``GET /v1/budget`` or a reused answer needs, and each user may have at most ``per_user``
searches queued or running: a request over it gets the best fixed candidate (no search), and
one whose search is not done by its time the better of NOQ and NOT (:func:`fallback`, a few
milliseconds: the counts still make their deadline).  Only a request that has paid for its
answer — charged, or taking over a dead request's reservation — ever asks for a search
(:func:`.session.ask`).  Without a pool (the CLI, tests) a search runs in the caller's thread,
still shared.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter, OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from .limits import LIMITS
from .objectives import DEFAULT_OBJECTIVE
from .strategies import PURE, Choice, check_objective, choose, noq, noT, searched
from .workload import Matrices

log = logging.getLogger("cocktail.dp")


def fallback(m: Matrices, definition: str = PURE) -> Choice:
    """The better of NOQ and NOT, when no search is done in time (no cells, no search: a few
    milliseconds at most); never kept."""
    plain = [noq(m, definition), noT(m, definition)]
    best = min(plain, key=lambda s: s.expected_error(1.0))
    return Choice(*plain, best, best, complete=False)


def _nbytes(choice: Choice) -> int:
    """The memory a kept choice holds: its strategies' matrices (up to ~3 MB at 256 cells)."""
    strategies = {id(s): s for s in (choice.noq, choice.not_, choice.fixed, choice.optimized)}
    return sum(s.A.nbytes + s.R.nbytes for s in strategies.values())


class Searches:
    """The kept choices (the most recently used, at most ``max_bytes`` of matrices) and the
    searches in flight; searches run in ``workers`` threads of their own (none: in the
    caller's thread), at most ``per_user`` at a time for each user."""

    def __init__(self, workers: int = 0, per_user: int = 1,
                 max_bytes: int = 32 << 20) -> None:
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="search") if workers else None
        self._per_user, self._max_bytes = per_user, max_bytes
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple, tuple[Choice, int]] = OrderedDict()
        self._kept_bytes = 0
        self._running: dict[tuple, Future] = {}
        self._users: Counter[str] = Counter()

    def choose(self, m: Matrices, search_units: int = LIMITS.search_units,
               objective: str = DEFAULT_OBJECTIVE, user: str = "", until: float = math.inf,
               definition: str = PURE) -> Choice:
        """The choice for ``m``'s shape under ``definition``: kept, being searched (waited
        on), or searched now for ``user``, by ``until`` (monotonic) at the latest."""
        check_objective(objective)
        if not searched(m):  # no search: cheap, and never kept
            return choose(m, search_units, objective, definition=definition)
        key = (m.shape, search_units, objective, definition)
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key][0]
            future = self._running.get(key)
            start = future is None and (self._pool is None
                                        or self._users[user] < self._per_user)
            if start:
                self._users[user] += 1
                future = self._running[key] = Future()
        if future is None:  # this user's searches are running: no other for them now
            log.warning("%s has %d strategy searches running; answered with the best fixed "
                        "candidate", user, self._per_user)
            # no search: the fixed candidates, ~0.1 s at most
            return choose(m, 0, objective, definition=definition)
        if start:
            # It stops a fifth of its time early, so that what follows it (the chosen
            # strategies' pseudo-inverses) is done, and off the CPU, when the reply is due.
            now = time.monotonic()
            stop = until if until == math.inf else now + 0.8 * max(0.0, until - now)
            work = (future, key, m, search_units, objective, user, stop, definition)
            if self._pool is None:
                self._search(*work)
            else:
                self._pool.submit(self._search, *work)
        try:
            return future.result(timeout=None if until == math.inf
                                 else max(0.0, until - time.monotonic()))
        except FutureTimeout:
            log.warning("strategy search not done in time; answered with NOQ or NOT (raise "
                        "--deadline-search-ms)")
            return fallback(m, definition)

    def _search(self, future: Future, key: tuple, m: Matrices, search_units: int,
                objective: str, user: str, until: float, definition: str) -> None:
        choice, error = None, None
        started = time.thread_time()
        try:  # queued past its time, a search would only compute what no one waits for
            choice = (fallback(m, definition) if time.monotonic() >= until
                      else choose(m, search_units, objective, until, definition))
            choice.optimized.noise_quantiles(1.0)  # its intervals' ladder, kept with it
        except BaseException as exc:  # noqa: BLE001 - handed to every waiter
            error = exc
        else:  # what a search costs, for the owner: the shape's size, never its terms
            log.info("searched a strategy: %d terms, %d queries, %s, %.2f CPU-s%s",
                     len(m.terms), len(m.W), objective, time.thread_time() - started,
                     "" if choice.complete else ", cut short (not kept)")
        with self._lock:
            del self._running[key]
            self._users[user] -= 1
            if not self._users[user]:
                del self._users[user]
            if choice is not None and choice.complete:
                self._keep(key, choice)
        if error is None:
            future.set_result(choice)
        else:
            future.set_exception(error)

    def _keep(self, key: tuple, choice: Choice) -> None:
        """Keep ``choice`` (under the lock), dropping the least recently used over the bound."""
        size = _nbytes(choice)
        self._kept[key] = (choice, size)
        self._kept_bytes += size
        while self._kept_bytes > self._max_bytes and len(self._kept) > 1:
            self._kept_bytes -= self._kept.popitem(last=False)[1][1]

    @property
    def kept_bytes(self) -> int:
        return self._kept_bytes

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._kept_bytes = 0

    def shutdown(self, wait: bool = False) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=True)


SEARCHES = Searches()  # in the caller's thread: the CLI, tests, benchmarks
