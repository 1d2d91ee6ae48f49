"""Who may rank over HTTP, and on which worker: ``POST /v1/rank``'s admission, decided on
arrival from public quantities alone (the time, the caller's token and role, the ranking's
size, its defense and k), before any work on the data.

A flood once filled the rank threads, a top k got one just before its deadline, and whether it
made it (200) or not (503) told how long its private scores took to rank: so each admitted
ranking is **booked** 1/``slots`` of its deadline on a worker, after the bookings already
there, as if every ranking took its worst case, and is admitted only if that booking ends by
its deadline (else 503 at once, from the bookings alone).  Whatever the data costs, no admitted
ranking waits past its booking as long as none runs over its share.

One worker for every ranking let one cheap request black out all of them: a dp top 1,000
(due 64 s after arrival) booked 16 s of it, and four of them from four tokens, 4e-4 α in all,
turned every other analyst's top 10 into 503 for a minute.  So the worker is split into
**lanes**, each with its own thread and its own bookings, one per role and per **length
class** (a ranking's deadline in ``rank_ms`` steps, rounded up to a power of two):

* a booking waits only behind bookings of its own role: another role's rankings never delay
  it, and a 503 tells nothing of what other roles do;
* and only behind rankings of its own class, which are at most twice as long: a top 1,000
  never delays a top 10, and what one request may book delays only requests of its own length;
* each token has one ranking in flight (429 for more), so an analyst holds at most one booking
  of a lane, 1/``slots`` of it.

What a 503 "busy" can then tell is that analysts of the caller's own role are ranking rankings
of the same length: the role is the unit of capacity, and the owner puts analysts who must not
learn of each other's rankings in roles of their own (docs/ranked-retrieval.md).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

BUSY = "the ranking was busy; ask again (a dp answer being computed is stored, and free on retry)"

Lane = tuple[str, int]  # (role, length class)


class NotAdmitted(Exception):
    def __init__(self, status: int, detail: str, limit: str) -> None:
        super().__init__(detail)
        self.status, self.body = status, {"detail": detail, "limit": limit}


@dataclass(frozen=True)
class Booking:
    lane: Lane
    end: float    # when the booking ends: the ranking must be done by then
    share: float  # its length, 1/slots of the ranking's deadline


def length_class(steps: int) -> int:
    """The class of a ranking due ``steps`` × ``rank_ms`` after arrival: ⌈log2 steps⌉, so
    that the rankings of a class are at most twice as long as each other."""
    return (steps - 1).bit_length()


class RankSchedule:
    """The bookings of every lane, on a clock the caller gives (monotonic seconds).  Holds an
    entry per token in flight and per lane with a booking not yet ended, no more; used on the
    event loop only (no lock)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._booked_until: dict[Lane, float] = {}
        self._in_flight: dict[str, float] = {}  # token -> when its reply leaves

    def book(self, token: str, role: str, steps: int, now: float, until: float) -> Booking:
        """Book a ranking of ``steps`` due at ``until`` for ``token`` of ``role``."""
        self._in_flight = {t: at for t, at in self._in_flight.items() if at > now}
        self._booked_until = {lane: end for lane, end in self._booked_until.items()
                              if end > now}
        if token in self._in_flight:
            raise NotAdmitted(429, "one ranking at a time per token: ask again once the last "
                                   "one is answered", "rank_in_flight")
        lane = (role, length_class(steps))
        share = (until - now) / self.slots
        end = max(now, self._booked_until.get(lane, now)) + share
        if end > until:
            raise NotAdmitted(503, "the rankings of your role and size are busy: ask again "
                                   "(nothing was computed)", "rank_slots")
        self._booked_until[lane], self._in_flight[token] = end, until
        return Booking(lane, end, share)


class RankLanes:
    """A thread per lane, made when the lane is first booked, running its rankings in the
    order they were booked; a stuck ranking holds its own lane only.  Lanes are few (roles
    times length classes), so their threads are kept."""

    def __init__(self) -> None:
        self._workers: dict[Lane, ThreadPoolExecutor] = {}

    def submit(self, lane: Lane, work: Callable, *args) -> Future:
        worker = self._workers.get(lane)
        if worker is None:
            worker = self._workers[lane] = ThreadPoolExecutor(
                1, thread_name_prefix=f"rank-{lane[1]}")
        return worker.submit(work, *args)

    def shutdown(self) -> None:
        for worker in self._workers.values():
            worker.shutdown(wait=False, cancel_futures=True)
