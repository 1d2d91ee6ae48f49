"""What was answered: each role's stored answers (first writer wins, reused at no cost),
the re-shares of a chain, answer ids, and the history the analyst and the owner read."""

from __future__ import annotations

import json
import math
import time
from collections import Counter, deque

from .accounts import User
from .charges import STALE_SECONDS, Charges, Ticket, _dead, _exact
from .errors import LedgerError

HISTORY = ("SELECT c.at, c.alpha, c.version, a.answer FROM charges c LEFT JOIN answers a ON "
           "a.role = c.role AND a.version = c.version AND a.workload_sha256 = c.workload_sha256 "
           "WHERE c.user = ? ORDER BY c.at DESC, c.id DESC LIMIT ?")
_POLL, _POLL_MAX = 0.005, 0.1  # a waiter's first pause, doubled up to the longest


def answer_id(hop: int, role: str, key: str, version: str) -> str:
    """``HOP~ROLE~SHA~VERSION``: neither a role name nor a hash holds ``~``, and the
    version (a store and version, which may hold anything) comes last."""
    return f"{hop}~{role}~{key}~{version}"


def parse_answer_id(text: str) -> tuple[int, str, str, str]:
    parts = text.split("~", 3)
    if len(parts) != 4 or not parts[0].isdigit() or int(parts[0]) < 1:
        raise LedgerError(f"{text!r} is not an answer id (HOP~ROLE~SHA~VERSION, as "
                          f"`answer_id` in a query's JSON)")
    return int(parts[0]), parts[1], parts[2], parts[3]


class Answers(Charges):
    """Stored answers and re-shares, and the history of charges."""

    def overview(self, last: int | None = None) -> dict:
        """The owner's view: roles, users with what they spent and have left, the dataset's
        budget, the charges (when, who, how much, and the user's total after it; the ``last``
        ones only, if given: a page must not grow with the ledger) with how many there are,
        and the refusals, counted per user, status and reason."""
        db = self._connection()
        roles = {r["name"]: r for r in self.roles()}
        users = [u | {"budget": roles[u["role"]]["budget"], "alpha": roles[u["role"]]["alpha"],
                      "remaining": max(0.0, _exact(roles[u["role"]]["budget"] - u["spent"]))}
                 for u in self.users()]
        charges: deque[dict] = deque(maxlen=last)  # the cursor streams; only these are kept
        running: Counter[str] = Counter()
        for at, user, role, alpha, version in db.execute(
                "SELECT at, user, role, alpha, version FROM charges ORDER BY at, id"):
            running[user] += alpha
            charges.append({"at": at, "user": user, "role": role, "alpha": alpha,
                            "version": version, "spent": running[user]})
        refusals = [{"user": user, "status": status, "reason": reason, "count": count,
                     "first_at": first, "last_at": latest}
                    for user, status, reason, count, first, latest in db.execute(
                        "SELECT * FROM refusals ORDER BY last_at, user, status, reason")]
        return {"roles": list(roles.values()), "users": users, "charges": list(charges),
                "charge_count": db.execute("SELECT COUNT(*) FROM charges").fetchone()[0],
                "refusals": refusals, **self._status(db, None)}

    def history(self, user: User, last: int | None = None) -> list[dict]:
        """A user's own charged answers, oldest first (what the analyst page shows them): the
        ``last`` ones only, if given."""
        rows = self._connection().execute(
            HISTORY, (user.name, -1 if last is None else last)).fetchall()
        return [{"at": at, "alpha": alpha, "version": version,
                 "answer": json.loads(answer) if answer else None}
                for at, alpha, version, answer in reversed(rows)]

    def fulfil(self, ticket: Ticket, answer: dict) -> dict:
        """Store ``answer`` unless one is stored already (first writer wins); the stored one
        is what every asker gets."""
        where = (ticket.user.role, ticket.version, ticket.key)
        with self._transaction() as db:
            db.execute("UPDATE answers SET answer = ? WHERE role = ? AND version = ? AND "
                       "workload_sha256 = ? AND answer IS NULL", (json.dumps(answer), *where))
            stored = db.execute("SELECT answer FROM answers WHERE role = ? AND version = ? AND "
                                "workload_sha256 = ?", where).fetchone()[0]
        return self.result(ticket, json.loads(stored))

    def result(self, ticket: Ticket, answer: dict | None = None) -> dict:
        """The answer as the asker sees it: whether it was reused, what it cost, what is left."""
        return (answer or ticket.answer) | {
            "answer_id": answer_id(1, ticket.user.role, ticket.key, ticket.version),
            "reused": ticket.state != "reserved", "charged": ticket.charged,
            "budget": self.budget_status(ticket.user)}

    def wait(self, ticket: Ticket, until: float | None) -> dict | None:
        """The answer another request is computing, once stored; None as soon as its process
        is dead or its reservation stale (reserve again to take it over), or if it is not
        stored by ``until`` (monotonic time).  Polled ever less often (5 ms, doubling up to
        100 ms, and at ``until``): a storm of waiters costs the server next to nothing."""
        where = (ticket.user.role, ticket.version, ticket.key)
        db = self._connection()
        pause = _POLL
        while True:
            row = db.execute("SELECT answer, reserved_at, owner FROM answers WHERE role = ? AND "
                             "version = ? AND workload_sha256 = ?", where).fetchone()
            if row[0] is not None:
                return self.result(ticket, json.loads(row[0]))
            if time.time() - row[1] >= STALE_SECONDS or _dead(row[2]):
                return None
            left = math.inf if until is None else until - time.monotonic()
            if left <= 0:
                return None
            # No later than ``until``: a ranking's wait ends with its booked share of the rank
            # worker, and the next ranking starts then (cocktail.rank.admission).
            time.sleep(min(pause, left))
            pause = min(2 * pause, _POLL_MAX)

    def answer_at(self, hop: int, role: str, key: str, version: str) -> dict | None:
        """A chain's answer at ``hop``: the stored answer at hop 1, a re-share after."""
        db = self._connection()
        if hop == 1:
            row = db.execute("SELECT answer FROM answers WHERE role = ? AND version = ? AND "
                             "workload_sha256 = ?", (role, version, key)).fetchone()
        else:
            row = db.execute("SELECT answer FROM reshares WHERE chain = ? AND hop = ?",
                             (answer_id(1, role, key, version), hop)).fetchone()
        return json.loads(row[0]) if row and row[0] is not None else None

    def store_reshare(self, hop: int, role: str, key: str, version: str, alpha: float,
                      answer: dict) -> dict:
        """Store a hop's answer unless one is stored already (first writer wins)."""
        chain = answer_id(1, role, key, version)
        with self._transaction() as db:
            db.execute("INSERT OR IGNORE INTO reshares VALUES (?, ?, ?, ?, ?)",
                       (chain, hop, alpha, json.dumps(answer), time.time()))
            stored = db.execute("SELECT answer FROM reshares WHERE chain = ? AND hop = ?",
                                (chain, hop)).fetchone()[0]
        return json.loads(stored)

    def rename_store(self, old: str, new: str) -> None:
        """Key what was computed from store ``old`` (the ledger named stores by their path
        once) by ``new``, its identity, so that it is still reused and re-shared; an answer
        already stored under ``new`` wins."""
        prefix, renamed = old + "#", new + "#"
        with self._transaction() as db:
            for table in ("answers", "charges"):
                db.execute(f"UPDATE OR IGNORE {table} SET version = ? || substr(version, ?) "
                           "WHERE substr(version, 1, ?) = ?",
                           (renamed, len(prefix) + 1, len(prefix), prefix))
            for chain, hop in db.execute("SELECT chain, hop FROM reshares").fetchall():
                first, role, key, version = parse_answer_id(chain)
                if version.startswith(prefix):
                    db.execute("UPDATE OR IGNORE reshares SET chain = ? WHERE chain = ? AND "
                               "hop = ?", (answer_id(first, role, key,
                                                     renamed + version[len(prefix):]),
                                           chain, hop))
