"""What answering costs: budgets (each user's, the dataset's cap per definition), and a
fresh answer's charge and reservation, made in one write transaction before anything is
computed, taken over once the process that made it is dead or it is stale."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from ..noise import PARAMETER, PURE, ZCDP
from .accounts import Accounts, User
from .errors import BudgetExhausted, LedgerError
from .schema import _sha256

STALE_SECONDS = 600.0  # a reservation this old belongs to a process that died


# Per definition: the dataset's cap and spending in the settings.
_DATASET = {PURE: ("dataset_budget", "dataset_spent"),
            ZCDP: ("dataset_rho_budget", "dataset_rho_spent")}


@dataclass(frozen=True)
class Ticket:
    """What :meth:`Ledger.reserve` found or made for one workload."""

    user: User
    version: str
    key: str                    # SHA-256 of the workload's canonical text
    state: str                  # "answered", "pending" (someone else computes it), "reserved"
    charged: float = 0.0
    answer: dict | None = None  # when answered


def _exact(value: float) -> float:
    """Budget arithmetic without float dust: 10 × 0.1 spends exactly 1."""
    return round(value, 12)


def _started(pid: int | str) -> str | None:
    """When a process started (clock ticks since boot; None if it is gone or no /proc): it
    tells a process from a later one given the same pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] in "ZX" else fields[19]  # a zombie is dead too


def _this_process() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{_started('self')}"


def _dead(owner: str | None) -> bool:
    """Whether the process that reserved an answer is known to be dead: only on this host,
    with /proc, is there a way to know (elsewhere the reservation waits to go stale)."""
    host, _, rest = (owner or "").partition(":")
    pid, _, started = rest.partition(":")
    if host != socket.gethostname() or started == "None" or not pid.isdigit():
        return False
    return _started(pid) != started


class Charges(Accounts):
    """Budgets, and the charge and reservation of each fresh answer."""

    def set_dataset_budget(self, budget: float, definition: str = PURE) -> None:
        """The cap on all users of the roles under ``definition`` together (an α, or a ρ)."""
        if not 0 <= budget < float("inf"):
            raise LedgerError("the dataset budget must be finite and >= 0")
        with self._transaction() as db:
            db.execute("INSERT INTO settings VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET "
                       "value = excluded.value", (_DATASET[definition][0], repr(float(budget))))

    def budget_status(self, user: User | None = None) -> dict:
        return self._status(self._connection(), user)

    @staticmethod
    def _setting(db: sqlite3.Connection, key: str) -> float | None:
        row = db.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return float(row[0]) if row else None

    def _status(self, db: sqlite3.Connection, user: User | None) -> dict:
        status = {"dataset_budget": self._setting(db, "dataset_budget"),
                  "dataset_spent": self._setting(db, "dataset_spent") or 0.0,
                  "dataset_rho_budget": self._setting(db, "dataset_rho_budget"),
                  "dataset_rho_spent": self._setting(db, "dataset_rho_spent") or 0.0}
        # the whole dataset's loss in ρ: the zCDP charges, and α²/2 for each pure one
        status["dataset_rho_total"] = _exact(status["dataset_rho_spent"]
                                             + (self._setting(db, "dataset_pure_rho") or 0.0))
        if user:
            spent = db.execute("SELECT spent FROM users WHERE name = ?",
                               (user.name,)).fetchone()[0]
            status |= {"user": user.name, "role": user.role,
                       f"{PARAMETER[user.definition]}_per_query": user.alpha,
                       "budget": user.budget, "spent": spent,
                       "remaining": max(0.0, _exact(user.budget - spent))}
            if user.definition != PURE:
                status["definition"] = user.definition
        return status

    def reserve(self, user: User, version: str, workload: str,
                stale_after: float = STALE_SECONDS, alpha: float | None = None) -> Ticket:
        """The role's answer if there is one; else charge the user ``alpha`` (by default the
        role's α) and reserve the answer.

        Raises :class:`BudgetExhausted` (nothing charged) when the user's or the dataset's
        budget cannot pay it."""
        cost = user.alpha if alpha is None else alpha
        key = _sha256(workload)
        where = (user.role, version, key)
        stored = self._connection().execute(  # a reused answer needs no write lock
            "SELECT answer FROM answers WHERE role = ? AND version = ? AND workload_sha256 = ?",
            where).fetchone()
        if stored and stored[0] is not None:
            return Ticket(user, version, key, "answered", answer=json.loads(stored[0]))
        now = time.time()
        with self._transaction() as db:
            row = db.execute("SELECT answer, reserved_at, owner FROM answers WHERE role = ? "
                             "AND version = ? AND workload_sha256 = ?", where).fetchone()
            if row and row[0] is not None:
                return Ticket(user, version, key, "answered", answer=json.loads(row[0]))
            if row and now - row[1] < stale_after and not _dead(row[2]):
                return Ticket(user, version, key, "pending")
            if row:  # its process died before storing an answer; its charge was paid
                db.execute("UPDATE answers SET reserved_at = ?, owner = ? WHERE role = ? AND "
                           "version = ? AND workload_sha256 = ?", (now, _this_process(), *where))
                return Ticket(user, version, key, "reserved")
            try:
                self._charge(db, user, version, key, now, cost)
            except BudgetExhausted as exc:
                refusal = exc
            else:
                refusal = None
                db.execute("INSERT INTO answers VALUES (?, ?, ?, NULL, ?, ?)",
                           (*where, now, _this_process()))
        if refusal is not None:
            raise self.refused(user.name, refusal)
        return Ticket(user, version, key, "reserved", charged=cost)

    def _charge(self, db: sqlite3.Connection, user: User, version: str, key: str,
                now: float, cost: float) -> None:
        status = self._status(db, user)
        if _exact(status["spent"] + cost) > user.budget:
            raise BudgetExhausted(f"privacy budget exhausted: user {user.name!r} has "
                                  f"{status['remaining']:g} of {user.budget:g} left; this "
                                  f"query costs {cost:g}")
        budget_key, spent_key = _DATASET[user.definition]
        dataset_spent = _exact(status[spent_key] + cost)
        if status[budget_key] is not None and dataset_spent > status[budget_key]:
            raise BudgetExhausted("the dataset-wide privacy budget is spent")
        db.execute("INSERT INTO charges (user, role, version, workload_sha256, alpha, at) "
                   "VALUES (?, ?, ?, ?, ?, ?)",
                   (user.name, user.role, version, key, cost, now))
        db.execute("UPDATE users SET spent = ? WHERE name = ?",
                   (_exact(status["spent"] + cost), user.name))
        db.execute("INSERT INTO settings VALUES (?, ?) ON CONFLICT(key) "
                   "DO UPDATE SET value = excluded.value", (spent_key, repr(dataset_spent)))
        if user.definition == PURE:  # its share of the dataset's loss in ρ
            db.execute("INSERT INTO settings VALUES ('dataset_pure_rho', ?) ON CONFLICT(key) "
                       "DO UPDATE SET value = excluded.value", (repr(_exact(
                           (self._setting(db, "dataset_pure_rho") or 0.0) + cost * cost / 2)),))

    def abandon(self, ticket: Ticket) -> None:
        """The reserved answer could not be computed: let the next request take it over at
        once (its charge stays paid; nothing was released)."""
        with self._transaction() as db:
            db.execute("UPDATE answers SET reserved_at = 0 WHERE role = ? AND version = ? AND "
                       "workload_sha256 = ? AND answer IS NULL",
                       (ticket.user.role, ticket.version, ticket.key))
