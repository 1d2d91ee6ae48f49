"""The ledger's SQLite file: its tables, the migrations from each older schema, and how it
is opened (a private file, one connection per thread, write transactions one at a time)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import LedgerError

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


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


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


def _newer(db: sqlite3.Connection, schema: int, path: str | Path | None = None) -> str:
    path = path or db.execute("PRAGMA database_list").fetchone()[2]
    return (f"{path}: ledger schema {schema}, newer than this cocktail reads ({SCHEMA_VERSION}): "
            "upgrade cocktail (going back to this one needs the backup taken before the upgrade: "
            "docs/publication-format.md, \"Format versions and upgrading\")")


class LedgerFile:
    """The file and its connections, brought to this schema on opening; what the ledger
    keeps in it is in the classes :class:`cocktail.dp.ledger.Ledger` is made of."""

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
