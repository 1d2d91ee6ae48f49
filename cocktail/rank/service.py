"""One ranked-retrieval answer, for the CLI and for ``POST /v1/rank`` alike, and the rankings
a server keeps open.

Deterministic defenses (none, esvt, estt) answer from the published scores and charge nothing:
asking again gives the same list.  ``dp`` goes through the budget ledger like every noisy
answer: the same query and k asked again by the same role returns the stored list (fresh noise
would let them average it away); a fresh one charges the caller's α, and is released only
after it is stored.  A query asking no private column depends on no private value: it is
answered exactly and charged nothing.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from ..dp.ledger import Ledger
from ..dp.noise import PURE
from ..dp.session import ComputeFailed
from ..private_config import store_identity
from ..releases import current_version
from ..releases.layout import RANKS, names
from ..store import Store
from .index import RankIndex
from .model import MAX_K, parse_query
from .release import load_ranking, rank_store

RECHECK = 1.0  # seconds between two looks at a ranking's current version


class NoRanking(LookupError):
    pass


@dataclass
class _Open:
    version: str
    index: RankIndex
    checked: float


class Rankings:
    """The store's rankings, each opened once and reopened when its current version changes
    (looked at no more than once a RECHECK per ranking).  ``warm`` opens them all up front,
    so that no request waits for a load."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.identity = store_identity(store)
        self._open: dict[str, _Open] = {}
        self._lock = threading.Lock()

    def warm(self) -> list[str]:
        found = names(self._store, RANKS)
        for name in found:
            self.get(name)
        return found

    def get(self, name: str) -> tuple[str, RankIndex]:
        with self._lock:
            now = time.monotonic()
            known = self._open.get(name)
            if known and now - known.checked < RECHECK:
                return known.version, known.index
            version = current_version(rank_store(self._store, name))
            if version is None:
                raise NoRanking(f"no ranking {name!r}")
            if not known or known.version != version:
                version, index, _ = load_ranking(self._store, name)
                known = _Open(version, index, now)
                self._open[name] = known
            known.checked = now
            return known.version, known.index

    def described(self) -> list[dict]:
        """Each ranking as analysts may know it: its name, version, defense, size and public
        columns, all in its public manifest (a private column's name is in the private zone
        only)."""
        found = []
        for name in names(self._store, RANKS):
            try:
                version, index = self.get(name)
            except NoRanking:  # listed, but no version committed yet
                continue
            found.append({"name": name, "version": version, "defense": index.defense,
                          "tuples": len(index.ids), "public": list(index.schema.public)})
        return found

    def cost(self, name: str) -> tuple[int, bool]:
        """The size of an open ranking and whether its defense is dp (both public: its table
        is published, and every answer names its defense), (0, False) if not open; read
        without the lock, which a load may hold for long."""
        known = self._open.get(name)
        return (len(known.index.ids), known.index.defense == "dp") if known else (0, False)


def answer_rank(index: RankIndex, version: str, name: str, text: str, k: int,
                ledger: Ledger | None, token: str | None, until: float | None = None, *,
                store: str) -> dict:
    """The body of one answer; a dp answer another request is computing is waited for until
    ``until`` (monotonic), taken over if that request's process died.  ``store`` is the
    store's identity: a ledger may serve several stores, whose rankings share names."""
    if not 1 <= k <= MAX_K:
        raise ValueError(f"k must be between 1 and {MAX_K} (got {k})")
    query = parse_query(index.schema, text)
    body = {"name": name, "version": version, "defense": index.defense,
            "query": query.canonical(), "k": k}
    if index.defense != "dp":
        if ledger is not None and token:
            ledger.authenticate(token)  # analysts are known; nothing is charged
        return body | {"results": [index.row(i) for i in index.top(query, k)]}
    user = ledger.authenticate(token)
    # refuses a noise scale past any float; under zCDP at the α whose α²/2 is the role's ρ
    draw = index.noisy_sampler(query, k, user.pure_alpha)
    if index.sensitivity(query) == 0:  # no private column asked: nothing to protect or charge
        return body | {"results": [index.row(i) for i in draw()],
                       "alpha": 0.0, "charged": 0.0, "reused": False,
                       "budget": ledger.budget_status(user)}
    while True:
        ticket = ledger.reserve(user, f"{store}#rank:{name}:{version}",
                                f"top {k}: {query.canonical()}")
        if ticket.state == "answered":
            return body | _alpha(ledger.result(ticket))
        if ticket.state == "reserved":
            break
        stored = ledger.wait(ticket, until)
        if stored is not None:
            return body | _alpha(stored)
        if until is not None and time.monotonic() >= until:
            raise ComputeFailed("another request is still computing this answer; ask again "
                                "(free)")
    rows = draw()
    spent = {"alpha": user.pure_alpha} | ({} if user.definition == PURE else
                                          {"definition": user.definition, "rho": user.alpha})
    stored = ledger.fulfil(ticket, {"results": [index.row(i) for i in rows], **spent})
    return body | stored


def _alpha(stored: dict) -> dict:
    """A stored answer under today's names: answers stored before the privacy parameter
    was called α everywhere hold it as ``epsilon``."""
    if "epsilon" in stored:
        stored = {("alpha" if key == "epsilon" else key): value for key, value in stored.items()}
    return stored
