"""What every route of one app shares: the publication, the ledger, the schedule of replies,
and the threads and admission the requests run in."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..dp.deadline import Deadlines
from ..dp.ledger import Ledger
from ..dp.limits import Limits
from ..dp.search import Searches
from ..rank.admission import RankLanes, RankSchedule
from ..rank.service import Rankings
from .admission import Releaser
from .publication import CurrentPublication


@dataclass(frozen=True)
class Served:
    """The app's shared parts (:func:`cocktail.service.app.create_app` makes them)."""

    source: CurrentPublication
    ledger: Ledger
    deadlines: Deadlines
    rankings: Rankings
    limits: Limits
    pool: ThreadPoolExecutor       # the counts
    admitting: ThreadPoolExecutor  # the steps of a query that never wait
    waiting: ThreadPoolExecutor    # a query that waits (a search, counts, an answer)
    searches: Searches
    lanes: RankLanes
    releaser: Releaser
    schedule: RankSchedule
