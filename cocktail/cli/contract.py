"""What every ``cocktail`` command group shares: consoles, the error policy (one clear line,
or one JSON object, and an exit status that says what kind of error it was), progress bars,
``--json`` output and the common options."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from ..cluster.spec import SpecError
from ..dataset import InputError
from ..dp.ledger import BudgetExhausted, Forbidden, LedgerError, Unauthorized
from ..overlay.layout import PhaseProgress
from ..querylang import QuerySyntaxError
from ..releases import Refused
from ..store import StoreError, StoreUnavailable

err = Console(stderr=True, soft_wrap=True)  # never break a path or message in two
out = Console(soft_wrap=True)

EXPECTED_ERRORS = (InputError, StoreError, QuerySyntaxError, LedgerError, SpecError, ValueError,
                   OSError)
OWNER = "Owner command: it reads the store's private zone; analysts never run it."


EXIT_STATUS = """\b
Exit status: 0 done; 1 a check found problems (audit) or the service is unreachable; 2 bad
usage or input; 3 refused (token, or a publish that would re-partition); 4 budget exhausted;
5 the store or the system failed."""


def exit_status(exc: Exception) -> int:
    if isinstance(exc, BudgetExhausted):
        return 4
    if isinstance(exc, (Unauthorized, Forbidden, Refused)):
        return 3
    if isinstance(exc, StoreUnavailable) or (isinstance(exc, OSError)
                                             and not isinstance(exc, FileNotFoundError)):
        return 5
    return 2


def fail_cleanly(command: Callable) -> Callable:
    """Turn the errors a user can cause into one clear line (one JSON object with --json) and
    the exit status that says what kind of error it was."""
    @wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except EXPECTED_ERRORS as exc:
            failure(exit_status(exc), str(exc), kwargs.get("as_json", False))
    return wrapper


def failure(status: int, message: str, as_json: bool, **extra) -> None:
    if as_json:
        click.echo(json.dumps({"error": message, "code": status, **extra}, ensure_ascii=False))
    else:
        # Text, not markup: a message may hold brackets (a path, a term) rich would eat
        err.print(Text.assemble(("error:", "bold red"), " ", message), highlight=False)
    sys.exit(status)


@contextmanager
def progress_bars(label: str, enabled: bool, plain: bool = True) -> Iterator[PhaseProgress]:
    """``update(phase, done, total)``: a bar per phase on a terminal (stderr); when stderr is
    piped, a plain line as each phase ends (unless ``plain`` is off, e.g. with --json)."""
    if not enabled:
        yield lambda phase, done, total: None
        return
    if not err.is_terminal:
        started, last = time.perf_counter(), {}

        def line(phase: str, done: int, total: int) -> None:
            if done >= total and last.get(phase) != done:
                last[phase] = done
                if plain:
                    err.print(f"{label}: {phase} {done:,}/{total:,} "
                              f"({time.perf_counter() - started:.1f}s)", highlight=False)
        yield line
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True) as bar:
        tasks: dict[str, int] = {}

        def update(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(f"{label}: {phase}", total=total)
            bar.update(tasks[phase], completed=done, total=total)
        yield update


def emit(as_json: bool, payload: dict, human: Callable[[], None]) -> None:
    if as_json:
        click.echo(json.dumps(payload, ensure_ascii=False))
    else:
        human()


store_option = click.option(
    "--store", "store_spec", default="cocktail-store", envvar="COCKTAIL_STORE", show_default=True,
    help="Where the publication lives: a directory (the embedded local store) or local:PATH.")
json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print one JSON object instead of text.")
