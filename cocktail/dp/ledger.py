"""Roles, users and privacy budgets in a durable SQLite ledger.

* A role gives its users a per-query α and a total budget each; a dataset-wide budget caps all
  users together, so colluding users cannot average noise away beyond it.  A role is under pure
  differential privacy (α, basic composition: budgets add α) or under zero-concentrated DP
  ("zcdp": its α is a ρ, budgets add ρ), fixed once it has charged anyone; the dataset has a
  cap for each, and the whole, reported in ρ, is Σρ plus Σα²/2 of the pure charges (an
  α-DP release is α²/2-zCDP).
* The same workload asked again by anyone of the same role, on the same publication version,
  gets the earlier noisy answer back at no cost (fresh noise would let them average it away).
* A fresh answer is *reserved* before anything is computed: one write transaction
  (``BEGIN IMMEDIATE``) checks and charges the budget and records the pending answer, so a
  refused request costs the server no work, two concurrent queries cannot both pass a check
  that only one of them fits, and a restart forgets nothing.  The answer is stored before it is
  released (:meth:`Ledger.fulfil`, first writer wins), so everyone who asks gets the same one.
  A reservation names the process that made it; once that process is dead (or, when no one
  here can tell, once the reservation is stale) the next request takes it over and computes
  the answer, without a second charge — never a placeholder in its place.
* Tokens are random (``secrets``), shown once, and stored only as SHA-256 hashes; a workload is
  stored once (in its answer), charges name it by hash.
* A backup carries a tag beside it: the store's Ed25519 signing key (private zone) signs its
  bytes, so a backup kept somewhere less trusted cannot be edited and restored.  A restore over
  a ledger also refuses what the backup would grant that the ledger does not (a larger budget or
  cap, a new role, user or token) unless the owner allows it by name.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import re
import secrets
import shutil
import socket
import sqlite3
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import TYPE_CHECKING

from .noise import DEFINITIONS, PARAMETER, PURE, SYMBOL, ZCDP

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (Ed25519PrivateKey,
                                                                   Ed25519PublicKey)

SCHEMA_VERSION = 8
SCHEMA = """
CREATE TABLE IF NOT EXISTS roles (name TEXT PRIMARY KEY, alpha REAL NOT NULL CHECK (alpha > 0),
                                  budget REAL NOT NULL CHECK (budget >= 0),
                                  definition TEXT NOT NULL DEFAULT 'pure'
                                  CHECK (definition IN ('pure', 'zcdp')));
CREATE TABLE IF NOT EXISTS users (name TEXT PRIMARY KEY, role TEXT NOT NULL REFERENCES roles(name),
                                  token_hash TEXT NOT NULL UNIQUE,
                                  active INTEGER NOT NULL DEFAULT 1,
                                  spent REAL NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS charges (id INTEGER PRIMARY KEY, user TEXT NOT NULL, role TEXT NOT NULL,
                                    version TEXT NOT NULL, workload_sha256 TEXT NOT NULL,
                                    alpha REAL NOT NULL, at REAL NOT NULL);
-- A user's own charges, newest first (the analyst's page), without reading everyone's: at a
-- million charges that read was 72 ms a page, 3 ms with it.  Added in version 8.
CREATE INDEX IF NOT EXISTS charges_by_user ON charges (user, at, id);
CREATE TABLE IF NOT EXISTS answers (role TEXT NOT NULL, version TEXT NOT NULL,
                                    workload_sha256 TEXT NOT NULL, answer TEXT,
                                    reserved_at REAL NOT NULL, owner TEXT,
                                    PRIMARY KEY (role, version, workload_sha256));
CREATE TABLE IF NOT EXISTS reshares (chain TEXT NOT NULL, hop INTEGER NOT NULL CHECK (hop >= 2),
                                     alpha REAL NOT NULL CHECK (alpha > 0),
                                     answer TEXT NOT NULL, at REAL NOT NULL,
                                     PRIMARY KEY (chain, hop));
CREATE TABLE IF NOT EXISTS refusals (user TEXT NOT NULL, status INTEGER NOT NULL,
                                     reason TEXT NOT NULL, count INTEGER NOT NULL,
                                     first_at REAL NOT NULL, last_at REAL NOT NULL,
                                     PRIMARY KEY (user, status, reason));
"""
HISTORY = ("SELECT c.at, c.alpha, c.version, a.answer FROM charges c LEFT JOIN answers a ON "
           "a.role = c.role AND a.version = c.version AND a.workload_sha256 = c.workload_sha256 "
           "WHERE c.user = ? ORDER BY c.at DESC, c.id DESC LIMIT ?")
# Version 1 kept the workload text in every charge and answer and summed charges for budgets.
MIGRATE_FROM_1 = """
ALTER TABLE users ADD COLUMN spent REAL NOT NULL DEFAULT 0;
UPDATE users SET spent = (SELECT COALESCE(SUM(alpha), 0) FROM charges WHERE user = users.name);
INSERT OR REPLACE INTO settings SELECT 'dataset_spent', COALESCE(SUM(alpha), 0) FROM charges;
CREATE TABLE charges_2 (id INTEGER PRIMARY KEY, user TEXT NOT NULL, role TEXT NOT NULL,
                        version TEXT NOT NULL, workload_sha256 TEXT NOT NULL,
                        alpha REAL NOT NULL, at REAL NOT NULL);
INSERT INTO charges_2 SELECT id, user, role, version, sha256(workload), alpha, at FROM charges;
DROP TABLE charges;
ALTER TABLE charges_2 RENAME TO charges;
CREATE TABLE answers_2 (role TEXT NOT NULL, version TEXT NOT NULL, workload_sha256 TEXT NOT NULL,
                        answer TEXT, reserved_at REAL NOT NULL,
                        PRIMARY KEY (role, version, workload_sha256));
INSERT INTO answers_2 SELECT role, version, sha256(workload), answer, 0 FROM answers;
DROP TABLE answers;
ALTER TABLE answers_2 RENAME TO answers;
"""
# Version 5 and before kept a row per refusal: 30,000 refusals grew the owner's page 4×.
COUNT_REFUSALS_OF_5 = """
INSERT INTO refusals SELECT user, status, reason, COUNT(*), MIN(at), MAX(at) FROM refusals_5
GROUP BY user, status, reason;
DROP TABLE refusals_5;
"""
# Version 6 and before: every role pure; the pure charges' share of the dataset's ρ.
ZCDP_OF_6 = """
ALTER TABLE roles ADD COLUMN definition TEXT NOT NULL DEFAULT 'pure'
CHECK (definition IN ('pure', 'zcdp'));
INSERT OR REPLACE INTO settings SELECT 'dataset_pure_rho', COALESCE(SUM(alpha * alpha), 0) / 2
FROM charges;
"""
STALE_SECONDS = 600.0  # a reservation this old belongs to a process that died
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
_POLL, _POLL_MAX = 0.005, 0.1  # a waiter's first pause, doubled up to the longest
TAG_FORMAT = "cocktail-ledger-backup/1"  # a backup's tag, in BACKUP.sig


# Per definition: the dataset's cap and spending in the settings.
_DATASET = {PURE: ("dataset_budget", "dataset_spent"),
            ZCDP: ("dataset_rho_budget", "dataset_rho_spent")}


def dataset_budget_text(status: dict) -> str:
    """The dataset-wide caps and spending of a :meth:`Ledger.budget_status`, each in its unit
    (α for pure-DP roles, ρ for zCDP ones), and the whole in ρ."""
    def cap(value: float | None) -> str:
        return "no cap" if value is None else f"{value:g}"
    return (f"dataset-wide: pure-DP roles spent α {status['dataset_spent']:g} of "
            f"{cap(status['dataset_budget'])}; zCDP roles spent ρ "
            f"{status['dataset_rho_spent']:g} of {cap(status['dataset_rho_budget'])}; in all "
            f"ρ = {status['dataset_rho_total']:g} (an α-DP charge counts α²/2)")


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
    alpha: float  # per query: an α, or a ρ under "zcdp"
    budget: float
    definition: str = PURE

    @property
    def pure_alpha(self) -> float:
        """The α of a pure-DP mechanism (a dp ranking's) that spends one query's budget: α,
        or √(2ρ) under zCDP, since an α-DP release is α²/2-zCDP."""
        return self.alpha if self.definition == PURE else math.sqrt(2 * self.alpha)


@dataclass(frozen=True)
class Ticket:
    """What :meth:`Ledger.reserve` found or made for one workload."""

    user: User
    version: str
    key: str                    # SHA-256 of the workload's canonical text
    state: str                  # "answered", "pending" (someone else computes it), "reserved"
    charged: float = 0.0
    answer: dict | None = None  # when answered


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


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _exact(value: float) -> float:
    """Budget arithmetic without float dust: 10 × 0.1 spends exactly 1."""
    return round(value, 12)


def check_name(kind: str, name: str) -> str:
    if not NAME.fullmatch(name):
        raise LedgerError(f"a {kind} name is 1-64 letters, digits or '_.@-', starting with a "
                          f"letter or digit; got {name!r}")
    return name


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


def private_file(path: Path) -> None:
    """Make ``path`` readable by its owner only, whatever the umask, creating it if absent: the
    ledger (SQLite gives its -wal and -shm files the same) and the owner's report."""
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
    os.chmod(path, 0o600)


def ledger_file(path: Path) -> None:
    """`private_file` for a live ledger. One that root makes (an owner command run on the
    service's host before the service, a restore onto a lost ledger) goes to the owner of its
    directory: the service's user, which must write it."""
    made = not path.exists()
    private_file(path)
    if made and os.geteuid() == 0:
        directory = path.parent.stat()
        os.chown(path, directory.st_uid, directory.st_gid)


def _copy(source: sqlite3.Connection, target: Path) -> None:
    copy = sqlite3.connect(target)
    try:
        source.backup(copy)
    finally:
        copy.close()


def _snapshot(source: sqlite3.Connection, path: Path) -> None:
    """A consistent copy of ``source`` in a new private file, in rollback-journal mode: a copy
    of a WAL ledger is one too, and reading it would make -wal and -shm files beside it."""
    private_file(path)
    _copy(source, path)
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA journal_mode=DELETE")
    finally:
        db.close()


def _scratch(beside: Path) -> TemporaryDirectory:
    """A new directory of the owner's only (mode 0700) beside ``beside``: SQLite makes its
    journals there, never at a name someone else chose, and a link out of it is a hard link."""
    beside.mkdir(mode=0o700, parents=True, exist_ok=True)
    return TemporaryDirectory(prefix=".cocktail-ledger-", dir=beside)


def _place(made: Path, at: Path) -> None:
    """Give the finished file ``made`` the name ``at``, never over anything there: a hard link
    fails on any existing name, a dangling symbolic link included, and follows none."""
    try:
        os.link(made, at)
    except FileExistsError:
        raise LedgerError(f"{at} exists: a backup never overwrites a file (nor writes where a "
                          "link points)") from None


def _tag_path(backup: Path) -> Path:
    return backup.with_name(backup.name + ".sig")


def _tag_message(digest: str) -> bytes:
    # Domain separation: no publication's signed statement (cocktail-signature/1) reads so.
    return f"{TAG_FORMAT}\n{digest}".encode()


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def _tag(backup: Path, key: Ed25519PrivateKey) -> bytes:
    """The backup's tag: the store's key signs the SHA-256 of all its bytes."""
    from ..releases.signing import fingerprint

    digest = _file_sha256(backup)
    return json.dumps({"format": TAG_FORMAT, "sha256": digest,
                       "signer": fingerprint(key.public_key()),
                       "signature": key.sign(_tag_message(digest)).hex()}, indent=1).encode()


def _check_tag(copy: Path, source: Path, key: Ed25519PublicKey | None) -> None:
    """Refuse the private ``copy`` of the backup ``source`` unless its tag, beside ``source``,
    is this store's key's signature of exactly its bytes."""
    from cryptography.exceptions import InvalidSignature

    from ..releases.signing import fingerprint

    tag = _tag_path(source)
    if key is None:
        raise Forbidden(f"the store has no signing key (private/signing.key) to check {tag} "
                        "with: nothing shows the backup is the owner's")
    try:
        document = json.loads(tag.read_bytes())
        signature = bytes.fromhex(document["signature"])
    except FileNotFoundError:
        raise Forbidden(f"{tag} is missing: nothing shows {source} is the owner's backup (a "
                        "backup restores only with the tag `ledger backup` wrote beside it)"
                        ) from None
    except (ValueError, KeyError, TypeError):
        raise Forbidden(f"{tag}: not a {TAG_FORMAT} tag") from None
    if not isinstance(document, dict) or document.get("format") != TAG_FORMAT:
        raise Forbidden(f"{tag}: not a {TAG_FORMAT} tag")
    digest = _file_sha256(copy)
    try:
        key.verify(signature, _tag_message(digest))
    except InvalidSignature:
        why = (f"{source} was altered after it was tagged (its SHA-256 is {digest}, the tag "
               f"names {document.get('sha256')})" if document.get("sha256") != digest else
               f"{tag} is not signed by this store's key {fingerprint(key)} (it names "
               f"{document.get('signer')})")
        raise Forbidden(f"{why}: refused, nothing restored") from None


def _newer(db: sqlite3.Connection, schema: int, path: str | Path | None = None) -> str:
    path = path or db.execute("PRAGMA database_list").fetchone()[2]
    return (f"{path}: ledger schema {schema}, newer than this cocktail reads ({SCHEMA_VERSION}): "
            "upgrade cocktail (going back to this one needs the backup taken before the upgrade: "
            "docs/publication-format.md, \"Format versions and upgrading\")")


def ledger_summary(path: str | Path) -> dict:
    """What a ledger file holds, read only and checked whole (``PRAGMA integrity_check``):
    its schema version, each user's spending, the dataset's, and how many charges."""
    path = Path(path)
    if not path.is_file():
        raise LedgerError(f"{path}: no such file")
    try:
        db = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
        try:
            if db.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
                raise LedgerError(f"{path}: the ledger is damaged (integrity check failed)")
            schema = db.execute("PRAGMA user_version").fetchone()[0]
            if schema > SCHEMA_VERSION:
                raise LedgerError(_newer(db, schema, path))
            if schema < 1:
                raise LedgerError(f"{path}: not a ledger this version reads (schema {schema})")
            users = dict(db.execute("SELECT name, spent FROM users ORDER BY name"))
            spent = dict(db.execute("SELECT key, value FROM settings WHERE key IN "
                                    "('dataset_spent', 'dataset_rho_spent')"))
            charges = db.execute("SELECT count(*) FROM charges").fetchone()[0]
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise LedgerError(f"{path}: not a ledger ({exc})") from None
    return {"path": str(path), "schema": schema, "users": users, "charges": charges,
            "dataset_spent": float(spent.get("dataset_spent", 0.0)),
            "dataset_rho_spent": float(spent.get("dataset_rho_spent", 0.0))}


def _refuse_handing_back(current: dict, backup: dict) -> None:
    """Refuse a backup (by :func:`ledger_summary`) that has spent less than the ledger, for any
    user or the dataset: the analysts could spend it again on the same data."""
    less = sorted(user for user, spent in current["users"].items()
                  if spent > backup["users"].get(user, 0.0) * (1 + 1e-12))
    if less or any(current[key] > backup[key] * (1 + 1e-12)
                   for key in ("dataset_spent", "dataset_rho_spent")):
        who = ", ".join(less) or "the dataset"
        raise Forbidden(f"the backup has spent less than the ledger ({who}): restoring "
                        "it would hand budget back. Restore only onto a lost ledger, "
                        "or from a newer backup")


def _grants(before: Ledger, after: Ledger) -> list[str]:
    """What ``after`` grants that ``before`` does not, one line each: a new role, a role's
    larger α or budget or other definition, a new user, a user's other role, a token hash
    ``before`` never issued, a disabled user enabled, a larger (or no) dataset cap, an owner
    credential ``before`` never issued."""
    grown = []
    roles = {role["name"]: role for role in before.roles()}
    for role in after.roles():
        name, was, symbol = role["name"], roles.get(role["name"]), SYMBOL[role["definition"]]
        if was is None:
            grown.append(f"new role {name!r} ({symbol}={role['alpha']:g} per query, budget "
                         f"{role['budget']:g})")
        elif was["definition"] != role["definition"]:
            grown.append(f"role {name!r} under {role['definition']}, not {was['definition']}")
        else:
            grown += [f"role {name!r} {what} {was[key]:g} -> {role[key]:g}"
                      for key, what in (("alpha", f"{symbol} per query"), ("budget", "budget"))
                      if role[key] > was[key]]
    users = before._accounts()
    for name, (role, token, active) in after._accounts().items():
        if name not in users:
            grown.append(f"new user {name!r} (role {role!r})")
            continue
        was_role, was_token, was_active = users[name]
        grown += [text for grew, text in (
            (role != was_role, f"user {name!r} in role {role!r}, not {was_role!r}"),
            (token != was_token, f"user {name!r} with a token the ledger did not issue"),
            (active and not was_active, f"user {name!r} enabled"))
            if grew]
    caps, new_caps = before.budget_status(), after.budget_status()
    for definition in DEFINITIONS:
        cap, new = caps[_DATASET[definition][0]], new_caps[_DATASET[definition][0]]
        if cap is not None and (new is None or new > cap):
            grown.append(f"dataset {SYMBOL[definition]} cap {cap:g} -> "
                         f"{'none' if new is None else format(new, 'g')}")
    if after._owner_hash() not in (None, before._owner_hash()):
        grown.append("an owner credential the ledger did not issue")
    return grown


class Ledger:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        ledger_file(self.path)
        self._local = threading.local()
        self._writer = threading.Lock()
        with self._transaction() as db:
            self._migrate(db)

    def _connection(self) -> sqlite3.Connection:
        """One connection per thread, opened once: a request pays no connection set-up."""
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("PRAGMA cache_size=-512")  # KiB per connection: one per server thread
            db.create_function("sha256", 1, _sha256, deterministic=True)
            self._local.db = db
        return db

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        db = self._connection()
        # Threads of one process queue here, handed over at once; SQLite's own busy handler
        # (for other processes) sleeps up to 100 ms between tries.
        with self._writer:
            db.execute("BEGIN IMMEDIATE")  # the write lock first: checks and charges serialise
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @staticmethod
    def _migrate(db: sqlite3.Connection) -> None:
        """Bring the file to this schema inside the caller's transaction (no executescript:
        it would commit first).  A newer schema (a later cocktail's) is refused: this version
        would charge and answer by rules that file no longer follows."""
        schema = db.execute("PRAGMA user_version").fetchone()[0]
        if schema > SCHEMA_VERSION:
            raise LedgerError(_newer(db, schema))
        if schema == SCHEMA_VERSION:
            return
        columns = {row[1] for row in db.execute("PRAGMA table_info(charges)")}
        listed = "at" in {row[1] for row in db.execute("PRAGMA table_info(refusals)")}
        roles = {row[1] for row in db.execute("PRAGMA table_info(roles)")}
        if listed:
            db.execute("ALTER TABLE refusals RENAME TO refusals_5")
        script = ((MIGRATE_FROM_1 if "workload" in columns else "") + SCHEMA
                  + (COUNT_REFUSALS_OF_5 if listed else "")
                  + (ZCDP_OF_6 if roles and "definition" not in roles else ""))
        for statement in script.split(";"):
            if statement.strip():
                db.execute(statement)
        if "owner" not in {row[1] for row in db.execute("PRAGMA table_info(answers)")}:
            db.execute("ALTER TABLE answers ADD COLUMN owner TEXT")  # version 4 and before
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # -- backup and restore (owner) --------------------------------------------------------

    def backup(self, target: str | Path, key: Ed25519PrivateKey) -> dict:
        """A consistent copy of the ledger at ``target`` (SQLite's online backup: requests go on
        meanwhile), readable by its owner only, checked by reading it back, and its tag at
        ``target.sig`` (:func:`_tag`, with the store's ``key``); what it holds.  Both are made
        whole in a private directory first, then linked into place: never over an existing
        file or through a link, and no SQLite journal is ever made beside ``target``."""
        target = Path(target)
        with _scratch(target.parent) as scratch:
            copy, tag = Path(scratch) / "backup.sqlite", Path(scratch) / "backup.sig"
            _snapshot(self._connection(), copy)
            summary = ledger_summary(copy)
            private_file(tag)
            tag.write_bytes(_tag(copy, key))  # after the copy is complete and closed
            _place(copy, target)
            try:
                _place(tag, _tag_path(target))
            except LedgerError:
                target.unlink()  # ours, linked a moment ago: no backup without its tag
                raise
        return summary | {"path": str(target), "tag": str(_tag_path(target))}

    @staticmethod
    def restore(source: str | Path, target: str | Path, key: Ed25519PublicKey | None,
                allow_grants: bool = False) -> dict:
        """Copy the backup ``source`` over the ledger at ``target`` (absent, or still in use).

        Refused (:class:`Forbidden`, nothing applied) unless the backup's tag is ``key``'s
        signature of its bytes (checked on a private copy, which is what is restored); when
        the backup has spent less than the ledger, for any user or the dataset (it would hand
        budget back); and, unless ``allow_grants``, when it grants what the ledger does not
        (:func:`_grants`).  Onto a lost ledger only the tag vouches for it.  What it holds,
        with ``grants``: what it granted."""
        source, target = Path(source), Path(target)
        with _scratch(target.parent) as scratch:
            copy = Path(scratch) / "backup.sqlite"
            private_file(copy)
            shutil.copyfile(source, copy)
            _check_tag(copy, source, key)
            backup = ledger_summary(copy)
            restored = Ledger(copy)  # brought to this schema if the backup is older
            grants = []
            if target.exists() and target.stat().st_size:
                _refuse_handing_back(ledger_summary(target), backup)
                # compared on a copy: a refusal leaves the ledger as it was, even unmigrated
                current = Path(scratch) / "current.sqlite"
                reader = sqlite3.connect(f"file:{target.resolve()}?mode=ro", uri=True)
                try:
                    _snapshot(reader, current)
                finally:
                    reader.close()
                grants = _grants(Ledger(current), restored)
                if grants and not allow_grants:
                    raise Forbidden("the backup grants what the ledger does not: "
                                    + "; ".join(grants) + ". Restore it only if you granted "
                                    "these yourself (--allow-grants)")
            ledger_file(target)
            _copy(restored._connection(), target)
        return ledger_summary(target) | {"grants": grants}

    # -- administration (owner) ----------------------------------------------------------

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
        with self._transaction() as db:
            if not db.execute("UPDATE users SET token_hash = ? WHERE name = ?",
                              (_sha256(token), name)).rowcount:
                raise LedgerError(f"no user {name!r}")
        return token

    def remove_user(self, name: str) -> None:
        """Remove user ``name``: its token stops working.  Its charges stay, so the dataset's
        budget still counts what it spent."""
        with self._transaction() as db:
            if not db.execute("DELETE FROM users WHERE name = ?", (name,)).rowcount:
                raise LedgerError(f"no user {name!r}")

    def set_active(self, name: str, active: bool) -> None:
        with self._transaction() as db:
            if not db.execute("UPDATE users SET active = ? WHERE name = ?",
                              (int(active), name)).rowcount:
                raise LedgerError(f"no user {name!r}")

    def _accounts(self) -> dict[str, tuple[str, str, bool]]:
        """Each user's role, token hash and whether enabled: what a restore compares."""
        return {name: (role, token, bool(active)) for name, role, token, active in
                self._connection().execute("SELECT name, role, token_hash, active FROM users")}

    def users(self) -> list[dict]:
        rows = self._connection().execute(
            "SELECT name, role, active, spent FROM users ORDER BY name").fetchall()
        return [{"name": n, "role": r, "active": bool(a), "spent": s} for n, r, a, s in rows]

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

    # -- answering -----------------------------------------------------------------------

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

    def abandon(self, ticket: Ticket) -> None:
        """The reserved answer could not be computed: let the next request take it over at
        once (its charge stays paid; nothing was released)."""
        with self._transaction() as db:
            db.execute("UPDATE answers SET reserved_at = 0 WHERE role = ? AND version = ? AND "
                       "workload_sha256 = ? AND answer IS NULL",
                       (ticket.user.role, ticket.version, ticket.key))
