"""One ranked-retrieval answer, for the CLI and for ``POST /v1/rank`` alike.

Deterministic defenses (none, esvt, estt) answer from the published scores and charge nothing:
asking again gives the same list.  ``dp`` goes through the budget ledger like every noisy
answer: the same query and k asked again by the same role returns the stored list (fresh noise
would let them average it away); a fresh one charges the caller's α, and is released only
after it is stored.
"""

from __future__ import annotations

from ..dp.ledger import Ledger, LedgerError
from .index import RankIndex
from .model import parse_query

MAX_K = 1000


def answer_rank(index: RankIndex, version: str, name: str, text: str, k: int,
                ledger: Ledger | None, token: str | None) -> dict:
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
    ticket = ledger.reserve(user, f"rank:{name}:{version}", f"top {k}: {query.canonical()}")
    if ticket.state == "answered":
        return body | ledger.result(ticket)
    if ticket.state == "pending":
        stored = ledger.wait(ticket, None)
        if stored is None:
            raise LedgerError("another request was computing this answer and stopped; ask "
                              "again (its charge is reused)")
        return body | stored
    rows = index.noisy_top(query, k, user.alpha)
    stored = ledger.fulfil(ticket, {"results": [index.row(i) for i in rows],
                                    "epsilon": user.alpha})
    return body | stored
