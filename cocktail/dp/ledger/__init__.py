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

The ledger is one :class:`Ledger`, made of one class per thing it keeps: the file and its
schema (:mod:`.schema`), accounts (:mod:`.accounts`), charges and reservations
(:mod:`.charges`), answers and history (:mod:`.answers`), backups (:mod:`.backup`).
"""

from __future__ import annotations

from .accounts import User
from .answers import Answers, answer_id, parse_answer_id
from .backup import Backups
from .charges import Ticket
from .errors import BudgetExhausted, Forbidden, LedgerError, Unauthorized
from .schema import private_file

__all__ = ["BudgetExhausted", "Forbidden", "Ledger", "LedgerError", "Ticket",
           "Unauthorized", "User", "answer_id", "parse_answer_id", "private_file"]


class Ledger(Answers, Backups):
    """Roles, users and privacy budgets in one SQLite file: this package's docstring says how."""
