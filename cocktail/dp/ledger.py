"""Roles, users and privacy budgets in a durable SQLite ledger.

* A role gives its users a per-query α and a total budget each; a dataset-wide budget caps all
  users together, so colluding users cannot average noise away beyond it.
* The same workload asked again by anyone of the same role, on the same publication version,
  gets the earlier noisy answer back at no cost (fresh noise would let them average it away).
* Charging and answering happen in one write transaction (``BEGIN IMMEDIATE``): the budget is
  checked and charged, and the answer stored, before anything is released; two concurrent
  queries cannot both pass a check that only one of them fits, and a restart forgets nothing.
* Tokens are random (``secrets``), shown once, and stored only as SHA-256 hashes.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS roles (name TEXT PRIMARY KEY, alpha REAL NOT NULL CHECK (alpha > 0),
                                  budget REAL NOT NULL CHECK (budget >= 0));
CREATE TABLE IF NOT EXISTS users (name TEXT PRIMARY KEY, role TEXT NOT NULL REFERENCES roles(name),
                                  token_hash TEXT NOT NULL UNIQUE, active INTEGER NOT NULL DEFAULT 1);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS charges (id INTEGER PRIMARY KEY, user TEXT NOT NULL, role TEXT NOT NULL,
                                    version TEXT NOT NULL, workload TEXT NOT NULL,
                                    alpha REAL NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS answers (role TEXT NOT NULL, version TEXT NOT NULL,
                                    workload TEXT NOT NULL, answer TEXT NOT NULL,
                                    PRIMARY KEY (role, version, workload));
"""


class LedgerError(Exception):
    """Base of the errors a user may cause; ``status`` is the HTTP status it maps to."""

    status = 400


class Unauthorized(LedgerError):
    status = 401


class Forbidden(LedgerError):
    status = 403


class BudgetExhausted(LedgerError):
    status = 429


@dataclass(frozen=True)
class User:
    name: str
    role: str
    alpha: float
    budget: float


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Ledger:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.executescript(SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=ON")
            yield db
        finally:
            db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")  # the write lock first: checks and charges serialise
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    # -- administration ------------------------------------------------------------------

    def add_role(self, name: str, alpha: float, budget: float) -> None:
        if alpha <= 0 or budget < 0:
            raise LedgerError("a role needs alpha > 0 and budget >= 0")
        with self._transaction() as db:
            db.execute("INSERT INTO roles VALUES (?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
                       "alpha = excluded.alpha, budget = excluded.budget", (name, alpha, budget))

    def roles(self) -> list[dict]:
        with self._connect() as db:
            return [{"name": n, "alpha": a, "budget": b}
                    for n, a, b in db.execute("SELECT name, alpha, budget FROM roles ORDER BY name")]

    def add_user(self, name: str, role: str) -> str:
        """Create a user; returns the token, which is not stored and cannot be shown again."""
        token = secrets.token_urlsafe(32)
        with self._transaction() as db:
            if not db.execute("SELECT 1 FROM roles WHERE name = ?", (role,)).fetchone():
                raise LedgerError(f"no role {role!r}; create it with `cocktail roles add`")
            if db.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
                raise LedgerError(f"user {name!r} exists already")
            db.execute("INSERT INTO users (name, role, token_hash) VALUES (?, ?, ?)",
                       (name, role, _hash(token)))
        return token

    def set_active(self, name: str, active: bool) -> None:
        with self._transaction() as db:
            if not db.execute("UPDATE users SET active = ? WHERE name = ?",
                              (int(active), name)).rowcount:
                raise LedgerError(f"no user {name!r}")

    def users(self) -> list[dict]:
        with self._connect() as db:
            rows = db.execute("SELECT u.name, u.role, u.active, COALESCE(SUM(c.alpha), 0) "
                              "FROM users u LEFT JOIN charges c ON c.user = u.name "
                              "GROUP BY u.name ORDER BY u.name").fetchall()
        return [{"name": n, "role": r, "active": bool(a), "spent": s} for n, r, a, s in rows]

    def set_dataset_budget(self, budget: float) -> None:
        if budget < 0:
            raise LedgerError("the dataset budget must be >= 0")
        with self._transaction() as db:
            db.execute("INSERT INTO settings VALUES ('dataset_budget', ?) ON CONFLICT(key) "
                       "DO UPDATE SET value = excluded.value", (repr(float(budget)),))

    def budget_status(self, user: User | None = None) -> dict:
        with self._connect() as db:
            return self._status(db, user)

    def _status(self, db: sqlite3.Connection, user: User | None) -> dict:
        row = db.execute("SELECT value FROM settings WHERE key = 'dataset_budget'").fetchone()
        dataset_budget = float(row[0]) if row else None
        dataset_spent = db.execute("SELECT COALESCE(SUM(alpha), 0) FROM charges").fetchone()[0]
        status = {"dataset_budget": dataset_budget, "dataset_spent": dataset_spent}
        if user:
            spent = db.execute("SELECT COALESCE(SUM(alpha), 0) FROM charges WHERE user = ?",
                               (user.name,)).fetchone()[0]
            status |= {"user": user.name, "role": user.role, "alpha_per_query": user.alpha,
                       "budget": user.budget, "spent": spent,
                       "remaining": max(0.0, user.budget - spent)}
        return status

    # -- answering -----------------------------------------------------------------------

    def authenticate(self, token: str | None) -> User:
        if not token:
            raise Unauthorized("missing token (send 'Authorization: Bearer <token>')")
        with self._connect() as db:
            row = db.execute("SELECT u.name, u.role, u.active, r.alpha, r.budget FROM users u "
                             "JOIN roles r ON r.name = u.role WHERE u.token_hash = ?",
                             (_hash(token),)).fetchone()
        if row is None:
            raise Unauthorized("unknown token")
        name, role, active, alpha, budget = row
        if not active:
            raise Forbidden(f"user {name!r} is disabled")
        return User(name, role, alpha, budget)

    def cached(self, role: str, version: str, workload: str) -> bool:
        with self._connect() as db:
            return db.execute("SELECT 1 FROM answers WHERE role = ? AND version = ? AND "
                              "workload = ?", (role, version, workload)).fetchone() is not None

    def answer(self, user: User, version: str, workload: str,
               release: Callable[[float], dict]) -> dict:
        """The noisy answer of ``workload`` for ``user``: the role's earlier one if there is
        one (free), else ``release(alpha)`` after charging α to the user and the dataset."""
        with self._transaction() as db:
            cached = db.execute("SELECT answer FROM answers WHERE role = ? AND version = ? AND "
                                "workload = ?", (user.role, version, workload)).fetchone()
            if cached:
                return json.loads(cached[0]) | {"reused": True, "charged": 0.0,
                                                "budget": self._status(db, user)}
            status = self._status(db, user)
            if status["spent"] + user.alpha > user.budget + 1e-12:
                raise BudgetExhausted(f"privacy budget exhausted: user {user.name!r} has "
                                      f"{status['remaining']:g} of "
                                      f"{user.budget:g} left; a query costs {user.alpha:g}")
            budget = status["dataset_budget"]
            if budget is not None and status["dataset_spent"] + user.alpha > budget + 1e-12:
                raise BudgetExhausted("the dataset-wide privacy budget is spent")
            db.execute("INSERT INTO charges (user, role, version, workload, alpha, at) "
                       "VALUES (?, ?, ?, ?, ?, ?)",
                       (user.name, user.role, version, workload, user.alpha, time.time()))
            answer = release(user.alpha)
            db.execute("INSERT INTO answers VALUES (?, ?, ?, ?)",
                       (user.role, version, workload, json.dumps(answer)))
            return answer | {"reused": False, "charged": user.alpha,
                             "budget": self._status(db, user)}
