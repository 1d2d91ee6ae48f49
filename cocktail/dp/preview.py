"""A workload's preview: the strategy, each query's expected error and interval, and the
charge, before anything is spent (SmartNoise's ``get_simple_accuracy`` and
``get_privacy_cost`` in one).

A preview reads no data and charges nothing: everything in it is a function of the workload,
the objective, the role's definition and the α (or ρ) it would spend.  It must not become free
search work for a hostile analyst, so (docs/dp.md, "Previews"):

* it is admitted by :class:`PreviewGate` first: at most ``previews_per_minute`` a user and
  ``previews_all_per_minute`` for the whole server, counted before the shape cache is looked
  at, so a refusal (429) says nothing of which shapes are kept;
* its strategy comes from the same shared search (:class:`.search.Searches`: the kept choices,
  one search per shape at a time, one per user, in the search thread), due ``search_ms`` after
  arrival as a query's is, and the preview leaves then whatever happened: its time depends on
  its arrival alone.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Container
from functools import partial

from ..querylang import Workload
from .answer import prepare
from .deadline import Deadlines
from .intervals import DEFAULT_LEVEL, described
from .ledger import Ledger, User
from .limits import LIMITS, LimitExceeded, Limits
from .noise import PARAMETER
from .objectives import DEFAULT_OBJECTIVE
from .search import SEARCHES, Searches
from .session import Answered, admit, strategy_due
from .strategies import above
from .workload import Matrices

WINDOW = 60.0  # seconds: the gate counts the previews admitted in the last minute


class PreviewRate(LimitExceeded):
    """Too many previews in the last minute, the caller's or the server's: 429, free."""

    status = 429


class PreviewGate:
    """Admits at most ``per_user`` previews a user and ``per_server`` in all in any
    ``window`` seconds (monotonic clock)."""

    def __init__(self, per_user: int, per_server: int, window: float = WINDOW) -> None:
        self._per_user, self._per_server, self._window = per_user, per_server, window
        self._lock = threading.Lock()
        self._all: deque[float] = deque()
        self._users: dict[str, deque[float]] = {}

    def admit(self, user: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            for times in (self._all, *self._users.values()):
                while times and times[0] <= now - self._window:
                    times.popleft()
            self._users = {name: times for name, times in self._users.items() if times}
            mine = self._users.setdefault(user, deque())
            if len(mine) >= self._per_user:
                raise PreviewRate("previews_per_minute", f"{len(mine)} previews of yours in the "
                                  f"last minute; the limit is {self._per_user}: ask again later")
            if len(self._all) >= self._per_server:
                raise PreviewRate("previews_all_per_minute", "the server has answered its "
                                  f"{self._per_server} previews of the last minute: ask again "
                                  "later")
            mine.append(now)
            self._all.append(now)


def begin(ledger: Ledger, token: str | None, request: Workload | str, gate: PreviewGate, *,
          limits: Limits = LIMITS, deadlines: Deadlines | None = None,
          searches: Searches = SEARCHES, arrival: float | None = None,
          objective: str = DEFAULT_OBJECTIVE, alpha: float | None = None,
          rho: float | None = None, listed: Container[str] | None = None,
          level: float = DEFAULT_LEVEL) -> Callable[[], Answered]:
    """Admit a preview (:func:`.session.admit`'s checks, then the gate: a refusal raises),
    and return the rest of its work, which may wait for the shared search."""
    arrival = time.monotonic() if arrival is None else arrival
    user, workload, spend = admit(ledger, token, request, limits, objective, alpha, rho, listed)
    gate.admit(user.name)
    return partial(_preview, ledger, user, workload, spend, limits, deadlines, searches,
                   arrival, objective, level)


def _preview(ledger: Ledger, user: User, workload: Workload, spend: float, limits: Limits,
             deadlines: Deadlines | None, searches: Searches, arrival: float, objective: str,
             level: float) -> Answered:
    prepared = prepare(workload, limits.search_units, objective, searches=searches,
                       user=user.name, until=strategy_due(Matrices(workload), deadlines, arrival),
                       definition=user.definition)
    strategy, choice = prepared.choice.optimized, prepared.choice
    variances = [float(v) for v in strategy.variances(spend)]
    fixed = [float(v) for v in choice.fixed.variances(spend)]
    noise = {"answers": [0.0] * len(variances), "expected_squared_error": variances,
             "noise_draws": [int(n) for n in strategy.draws()],
             "noise_quantiles": strategy.noise_quantiles(spend), "definition": user.definition}
    intervals = described(noise, level)
    body = {"workload": str(workload), "objective": objective, "definition": user.definition,
            PARAMETER[user.definition]: spend, "charge": spend, "strategy": strategy.name,
            "strategy_errors": choice.report(spend), "sensitivity": strategy.sensitivity,
            "expected_squared_error": variances,
            "expected_rms_error": [math.sqrt(v) for v in variances],
            "noise_draws": noise["noise_draws"], "noise_quantiles": noise["noise_quantiles"],
            "fixed_expected_squared_error": fixed,
            "above_fixed": above(variances, fixed).tolist(),
            "intervals": {"level": level, "half_width": intervals["high"],
                          "method": intervals["method"]},
            "budget": ledger.budget_status(user)}
    return Answered(body, None if deadlines is None else arrival + deadlines.search)
