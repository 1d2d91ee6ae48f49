"""Who may ask: roles (a per-query α and a budget, under pure DP or zCDP), users and their
tokens (stored only as SHA-256 hashes), the owner's credential, and the refusals counted
for the owner."""

from __future__ import annotations

import hmac
import math
import re
import secrets
import time
from dataclasses import dataclass

from ..noise import DEFINITIONS, PARAMETER, PURE
from .errors import Forbidden, LedgerError, Unauthorized
from .schema import LedgerFile, _sha256

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")


@dataclass(frozen=True)
class User:
    name: str
    role: str
    alpha: float  # per query: an α, or a ρ under "zcdp"
    budget: float
    definition: str = PURE

    @property
    def pure_alpha(self) -> float:
        """The α of a pure-DP mechanism (a dp ranking's) that spends one query's budget: α,
        or √(2ρ) under zCDP, since an α-DP release is α²/2-zCDP."""
        return self.alpha if self.definition == PURE else math.sqrt(2 * self.alpha)


def check_name(kind: str, name: str) -> str:
    if not NAME.fullmatch(name):
        raise LedgerError(f"a {kind} name is 1-64 letters, digits or '_.@-', starting with a "
                          f"letter or digit; got {name!r}")
    return name


class Accounts(LedgerFile):
    """Roles, users, tokens and the owner's credential (the owner administers them)."""

    def add_role(self, name: str, alpha: float, budget: float,
                 definition: str = PURE) -> None:
        """Create or change a role: ``alpha`` per query and ``budget`` per user, each an α,
        or a ρ under "zcdp".  A role's definition never changes once it has charged anyone:
        its users' spending would change meaning."""
        check_name("role", name)
        if definition not in DEFINITIONS:
            raise LedgerError(f"unknown privacy definition {definition!r}: use one of "
                              f"{', '.join(DEFINITIONS)}")
        if not (0 < alpha < float("inf")) or not (0 <= budget < float("inf")):
            raise LedgerError(f"a role needs a finite {PARAMETER[definition]} > 0 and a finite "
                              "budget >= 0")
        with self._transaction() as db:
            row = db.execute("SELECT definition FROM roles WHERE name = ?", (name,)).fetchone()
            if row and row[0] != definition and db.execute(
                    "SELECT 1 FROM charges WHERE role = ? LIMIT 1", (name,)).fetchone():
                raise LedgerError(f"role {name!r} is under {row[0]} and has charged its users: "
                                  f"its definition cannot change (make another role)")
            db.execute("INSERT INTO roles VALUES (?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
                       "alpha = excluded.alpha, budget = excluded.budget, "
                       "definition = excluded.definition", (name, alpha, budget, definition))

    def roles(self) -> list[dict]:
        db = self._connection()
        return [{"name": n, "alpha": a, "budget": b, "definition": d}
                for n, a, b, d in db.execute(
                    "SELECT name, alpha, budget, definition FROM roles ORDER BY name")]

    def add_user(self, name: str, role: str) -> str:
        """Create a user; returns the token, which is not stored and cannot be shown again."""
        check_name("user", name)
        token = secrets.token_urlsafe(32)
        with self._transaction() as db:
            if not db.execute("SELECT 1 FROM roles WHERE name = ?", (role,)).fetchone():
                raise LedgerError(f"no role {role!r}; create it with `cocktail roles add`")
            if db.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
                raise LedgerError(f"user {name!r} exists already")
            db.execute("INSERT INTO users (name, role, token_hash) VALUES (?, ?, ?)",
                       (name, role, _sha256(token)))
        return token

    # -- a user's token and account (owner) -------------------------------------------------

    def rotate_token(self, name: str) -> str:
        """A new token for user ``name`` (a lost or leaked one): the old token stops working
        at once, the budget spent stays.  Shown once, like :meth:`add_user`'s."""
        token = secrets.token_urlsafe(32)
        self._for_user(name, "UPDATE users SET token_hash = ? WHERE name = ?", _sha256(token))
        return token

    def remove_user(self, name: str) -> None:
        """Remove user ``name``: its token stops working.  Its charges stay, so the dataset's
        budget still counts what it spent."""
        self._for_user(name, "DELETE FROM users WHERE name = ?")

    def set_active(self, name: str, active: bool) -> None:
        self._for_user(name, "UPDATE users SET active = ? WHERE name = ?", int(active))

    def _for_user(self, name: str, sql: str, *values) -> None:
        """``sql`` on user ``name``'s row (``values``, then the name, its parameters); an
        unknown name is an error, with nothing changed."""
        with self._transaction() as db:
            if not db.execute(sql, (*values, name)).rowcount:
                raise LedgerError(f"no user {name!r}")

    def _accounts(self) -> dict[str, tuple[str, str, bool]]:
        """Each user's role, token hash and whether enabled: what a restore compares."""
        return {name: (role, token, bool(active)) for name, role, token, active in
                self._connection().execute("SELECT name, role, token_hash, active FROM users")}

    def users(self) -> list[dict]:
        rows = self._connection().execute(
            "SELECT name, role, active, spent FROM users ORDER BY name").fetchall()
        return [{"name": n, "role": r, "active": bool(a), "spent": s} for n, r, a, s in rows]

    def new_owner_token(self) -> str:
        """A fresh owner credential for the dashboard (the previous one stops working); only
        its hash is kept, so it is shown once."""
        token = secrets.token_urlsafe(32)
        with self._transaction() as db:
            db.execute("INSERT INTO settings VALUES ('owner_token_sha256', ?) ON CONFLICT(key) "
                       "DO UPDATE SET value = excluded.value", (_sha256(token),))
        return token

    def check_owner(self, token: str | None) -> None:
        """Raise unless ``token`` is the owner's credential: 401 without one, 403 for any
        other token (an analyst's included)."""
        if not token:
            raise Unauthorized("the owner's credential is needed (`cocktail owner-token`)")
        stored = self._owner_hash()
        if stored is None or not hmac.compare_digest(stored, _sha256(token)):
            raise Forbidden("not the owner's credential")

    def _owner_hash(self) -> str | None:
        row = self._connection().execute(
            "SELECT value FROM settings WHERE key = 'owner_token_sha256'").fetchone()
        return row[0] if row else None

    def authenticate(self, token: str | None) -> User:
        if not token:
            raise Unauthorized("missing token")
        row = self._connection().execute(
            "SELECT u.name, u.role, u.active, r.alpha, r.budget, r.definition FROM users u "
            "JOIN roles r ON r.name = u.role WHERE u.token_hash = ?", (_sha256(token),)).fetchone()
        if row is None:
            raise Unauthorized("unknown token")
        name, role, active, alpha, budget, definition = row
        if not active:
            raise self.refused(name, Forbidden(f"user {name!r} is disabled"))
        return User(name, role, alpha, budget, definition)

    def refused(self, user: str, error: LedgerError) -> LedgerError:
        """Count a known user's refused request for the owner (an unknown token names nobody:
        it goes to the server's log only); returns the error, for the caller to raise."""
        now = time.time()
        with self._transaction() as db:
            db.execute("INSERT INTO refusals VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT DO UPDATE "
                       "SET count = count + 1, last_at = excluded.last_at",
                       (user, error.status, str(error), now, now))
        return error
