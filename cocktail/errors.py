"""The one exit-status table: what each failure of Cocktail means, for the library and the
command line alike.

:func:`exit_status` gives the status ``cocktail`` ends with when a command raises an
exception; ``cocktail.cli.contract.classify`` calls it, so a library caller who catches an
exception and the command line agree by construction (``docs/cli.md`` shows the table).
"""

from __future__ import annotations

import sys
from enum import IntEnum

from .extras import MissingExtra


class ExitCode(IntEnum):
    """The exit statuses of ``cocktail``, one meaning each (:data:`MEANING`)."""

    DONE = 0
    PROBLEMS = 1
    USAGE = 2
    REFUSED = 3
    BUDGET = 4
    FAILED = 5
    INTERNAL = 70       # sysexits' EX_SOFTWARE
    INTERRUPTED = 130   # 128 + SIGINT
    TERMINATED = 143    # 128 + SIGTERM, what a shell reports for a process SIGTERM ended


MEANING = {  # one line each: `cocktail --help` shows them as they are
    ExitCode.DONE: "done",
    ExitCode.PROBLEMS: "a check found problems (audit), or the service is unreachable",
    ExitCode.USAGE: "bad usage or input, no publication at --store, or a missing extra",
    ExitCode.REFUSED: "refused: a token, a publish that would re-partition or repeat a batch, "
                      "an erasure on Spark, or a ledger restore",
    ExitCode.BUDGET: "privacy budget exhausted",
    ExitCode.FAILED: "the store, the service or the system failed (I/O, a port in use, a "
                     "worker killed)",
    ExitCode.INTERNAL: "a bug in cocktail (the traceback goes to stderr)",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
    ExitCode.TERMINATED: "stopped by SIGTERM (kill, a service manager); `serve` first "
                         "finishes the requests in flight",
}
# what the overlay service's refusals mean to a client; any other error is FAILED
HTTP_EXIT = {400: ExitCode.USAGE, 404: ExitCode.USAGE, 413: ExitCode.USAGE,
             422: ExitCode.USAGE, 401: ExitCode.REFUSED, 403: ExitCode.REFUSED,
             429: ExitCode.BUDGET}


class Terminated(BaseException):
    """The process was sent SIGTERM (``cocktail`` raises it in its main thread, so that
    cleanups run and ``--json`` still prints its one object)."""


def exit_status(exc: BaseException) -> ExitCode:
    """The exit status ``cocktail`` ends with when it meets ``exc``: 2 for bad input or a
    store holding no publication, 3 for a refusal (a publish that would re-partition, a
    token), 4 for a spent budget, 5 for a failed store or system, 70 for a bug."""
    if isinstance(exc, MissingExtra):
        return ExitCode.USAGE
    if raised(exc, "client:ServiceUnreachable", "client:ServiceRefused"):
        return exc.exit_status  # the client's errors carry theirs (HTTP_EXIT, for a refusal)
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    if isinstance(exc, Terminated):
        return ExitCode.TERMINATED
    if raised(exc, "dp.ledger:BudgetExhausted"):
        return ExitCode.BUDGET
    if raised(exc, "dp.ledger:Unauthorized", "dp.ledger:Forbidden", "releases.layout:Refused"):
        return ExitCode.REFUSED
    if raised(exc, "store.base:StoreUnavailable") or _worker_killed(exc) or (
            isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError)):
        return ExitCode.FAILED
    if isinstance(exc, (ValueError, FileNotFoundError)) or raised(
            exc, "dataset:InputError", "store.base:StoreError", "querylang:QuerySyntaxError",
            "dp.ledger:LedgerError", "cluster.spec:SpecError"):
        return ExitCode.USAGE
    return ExitCode.INTERNAL


def _worker_killed(exc: BaseException) -> bool:
    """A pool's worker process died (killed: out of memory, say), as ``raised`` tells a
    class: a module not imported raised nothing."""
    futures = sys.modules.get("concurrent.futures")
    return futures is not None and isinstance(exc, futures.BrokenExecutor)


def raised(exc: BaseException, *names: str) -> bool:
    """Whether ``exc`` is one of the classes named ``module:Class`` (modules of this package):
    a module not imported raised nothing, so a caller imports only what it uses."""
    for name in names:
        module, _, attribute = name.partition(":")
        loaded = sys.modules.get(f"{__package__}.{module}")
        if loaded is not None and isinstance(exc, getattr(loaded, attribute)):
            return True
    return False
