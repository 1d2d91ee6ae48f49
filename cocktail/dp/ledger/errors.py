"""The errors a ledger raises that a user may cause, each with the HTTP status it maps to."""


class LedgerError(Exception):
    """Base of the errors a user may cause; ``status`` is the HTTP status it maps to."""

    status = 400


class Unauthorized(LedgerError):
    status = 401


class Forbidden(LedgerError):
    status = 403


class BudgetExhausted(LedgerError):
    status = 429
