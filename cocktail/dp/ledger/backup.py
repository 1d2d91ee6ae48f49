"""Backup and restore (owner): a consistent private copy tagged by the store's signing key,
restored only with that tag and, over a ledger, never handing budget back nor granting
what the ledger does not unless the owner allows it by name."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import TYPE_CHECKING

from ..noise import DEFINITIONS, SYMBOL
from .charges import _DATASET
from .errors import Forbidden, LedgerError
from .schema import SCHEMA_VERSION, LedgerFile, _newer, ledger_file, private_file

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (Ed25519PrivateKey,
                                                                   Ed25519PublicKey)

    from . import Ledger

TAG_FORMAT = "cocktail-ledger-backup/1"  # a backup's tag, in BACKUP.sig


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
    from ...releases.signing import fingerprint

    digest = _file_sha256(backup)
    return json.dumps({"format": TAG_FORMAT, "sha256": digest,
                       "signer": fingerprint(key.public_key()),
                       "signature": key.sign(_tag_message(digest)).hex()}, indent=1).encode()


def _check_tag(copy: Path, source: Path, key: Ed25519PublicKey | None) -> None:
    """Refuse the private ``copy`` of the backup ``source`` unless its tag, beside ``source``,
    is this store's key's signature of exactly its bytes."""
    from cryptography.exceptions import InvalidSignature

    from ...releases.signing import fingerprint

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


class Backups(LedgerFile):
    """The owner's backups of the ledger, and restoring one."""

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

    @classmethod
    def restore(cls, source: str | Path, target: str | Path, key: Ed25519PublicKey | None,
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
            restored = cls(copy)  # brought to this schema if the backup is older
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
                grants = _grants(cls(current), restored)
                if grants and not allow_grants:
                    raise Forbidden("the backup grants what the ledger does not: "
                                    + "; ".join(grants) + ". Restore it only if you granted "
                                    "these yourself (--allow-grants)")
            ledger_file(target)
            _copy(restored._connection(), target)
        return ledger_summary(target) | {"grants": grants}
