"""One analyst request, end to end: authenticate, parse, prepare, charge, add noise."""

from __future__ import annotations

from ..publication import Publication
from ..querylang import Workload, parse_batch
from .answer import prepare
from .ledger import Ledger


def ask(ledger: Ledger, publication: Publication, token: str | None, workload: Workload | str,
        runner: str = "fast") -> dict:
    """The noisy answer for the token's user, charged to its budget (or reused for free).

    The exact values are computed before the ledger's transaction (they never leave this
    function) and the noise is drawn inside it, after the charge."""
    user = ledger.authenticate(token)
    if isinstance(workload, str):
        workload = parse_batch(workload, "query")
    key = str(workload)
    prepared = None if ledger.cached(user.role, publication.version, key) \
        else prepare(workload, publication, runner)

    def release(alpha: float) -> dict:
        ready = prepared or prepare(workload, publication, runner)
        return ready.noisy(alpha).as_dict()

    return ledger.answer(user, publication.version, key, release) | {"version": publication.version}
