"""The contract every ``cocktail`` command keeps.

* One exit-status table (:class:`ExitCode`, in :mod:`cocktail.exits`), shown in ``cocktail
  --help`` and docs/cli.md.
* With ``--json``, exactly one JSON object on stdout, whatever the outcome: the command's
  result, or ``{"error": ..., "code": <exit status>, "type": ...}`` for every failure, usage
  errors included: ``--help`` and ``--version`` too (``{"help": text}``, ``{"name": "cocktail",
  "version": ...}``).
* Without it, results on stdout; confirmations ("wrote ...", "published ..."), progress,
  warnings and errors on stderr.

:meth:`Cocktail.main` is the only place where an error becomes an exit status: commands raise,
they never exit with a status of their own choosing (``ctx.exit(PROBLEMS)`` aside).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import itertools
import json
import sys
import traceback
from collections.abc import Callable

import click
from rich.console import Console
from rich.text import Text

from ..exits import ExitCode
from ..extras import MissingExtra

err = Console(stderr=True, soft_wrap=True)  # never break a path or message in two
out = Console(soft_wrap=True)


MEANING = {  # one line each: `cocktail --help` shows them as they are
    ExitCode.DONE: "done",
    ExitCode.PROBLEMS: "a check found problems (audit), or the service is unreachable",
    ExitCode.USAGE: "bad usage or input, no publication at --store, or a missing extra",
    ExitCode.REFUSED: "refused: a token, a publish that would re-partition, or a ledger restore",
    ExitCode.BUDGET: "privacy budget exhausted",
    ExitCode.FAILED: "the store, the service or the system failed (I/O, a port in use, a "
                     "worker killed)",
    ExitCode.INTERNAL: "a bug in cocktail (the traceback goes to stderr)",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}
TYPES = {ExitCode.PROBLEMS: "problems", ExitCode.USAGE: "usage-error",
         ExitCode.REFUSED: "refused", ExitCode.BUDGET: "budget-exhausted",
         ExitCode.FAILED: "failed", ExitCode.INTERNAL: "internal-error",
         ExitCode.INTERRUPTED: "interrupted"}
EXIT_STATUS = "\b\nExit status (docs/cli.md):\n" + "\n".join(
    f"  {code.value:>3}  {meaning}" for code, meaning in MEANING.items())


def classify(exc: BaseException) -> tuple[ExitCode, str]:
    """The exit status and the JSON ``type`` of a failure."""
    if isinstance(exc, click.UsageError):
        return ExitCode.USAGE, TYPES[ExitCode.USAGE]
    if isinstance(exc, MissingExtra):
        return ExitCode.USAGE, "missing-extra"
    if raised(exc, "client:ServiceUnreachable"):
        return exc.exit_status, "unreachable"
    if isinstance(exc, (click.Abort, KeyboardInterrupt)):
        code = ExitCode.INTERRUPTED
    elif raised(exc, "client:ServiceRefused"):
        code = exc.exit_status  # the library's table of what each HTTP status means
    elif raised(exc, "dp.ledger:BudgetExhausted"):
        code = ExitCode.BUDGET
    elif raised(exc, "dp.ledger:Unauthorized", "dp.ledger:Forbidden", "releases.layout:Refused"):
        code = ExitCode.REFUSED
    elif raised(exc, "store.base:StoreUnavailable") or _worker_killed(exc) or (
            isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError)):
        code = ExitCode.FAILED
    elif isinstance(exc, (click.ClickException, ValueError, FileNotFoundError)) or raised(
            exc, "dataset:InputError", "store.base:StoreError", "querylang:QuerySyntaxError",
            "dp.ledger:LedgerError", "cluster.spec:SpecError"):
        code = ExitCode.USAGE
    else:
        code = ExitCode.INTERNAL
    return code, TYPES[code]


def _worker_killed(exc: BaseException) -> bool:
    """A pool's worker process died (killed: out of memory, say), as ``raised`` tells a
    class: a module not imported raised nothing."""
    futures = sys.modules.get("concurrent.futures")
    return futures is not None and isinstance(exc, futures.BrokenExecutor)


def raised(exc: BaseException, *names: str) -> bool:
    """Whether ``exc`` is one of the classes named ``module:Class`` (modules of this package):
    a module not imported raised nothing, so a command imports only what it uses."""
    for name in names:
        module, _, attribute = name.partition(":")
        loaded = sys.modules.get(f"{__package__.rpartition('.')[0]}.{module}")
        if loaded is not None and isinstance(exc, getattr(loaded, attribute)):
            return True
    return False


def wants_json(args: list[str]) -> bool:
    """From the raw arguments: a usage error may come before ``--json`` is parsed."""
    return "--json" in (args[:args.index("--")] if "--" in args else args)


class Cocktail(click.Group):
    """The root group: runs a command and turns whatever it raised into one exit status and
    one error (a JSON object on stdout with ``--json``, else a line on stderr).  Its commands
    are ``lazy``: name -> "module:object" of this package, imported when first used."""

    def __init__(self, *args, lazy: dict[str, str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.lazy)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.lazy:
            return None
        module, _, attribute = self.lazy[name].partition(":")
        return getattr(importlib.import_module(f"{__package__}.{module}"), attribute)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        args = list(sys.argv[1:] if args is None else args)
        as_json = wants_json(args)
        try:
            if as_json and asks_text(args):
                status = self._text_as_json(args, prog_name, complete_var, **extra)
            else:
                status = super().main(args, prog_name, complete_var, standalone_mode=False,
                                      **extra)
            status = status if isinstance(status, int) else ExitCode.DONE  # ctx.exit(n): n
        except SystemExit as exc:  # a library that exits by itself
            if exc.code not in (0, None):
                raise
            status = ExitCode.DONE
        except BaseException as exc:  # noqa: BLE001 - every failure gets its status here
            status = report_failure(exc, as_json)
        if standalone_mode:
            sys.exit(int(status))
        return int(status)


    def _text_as_json(self, args: list[str], prog_name, complete_var, **extra) -> int:
        """``--help`` or the root's ``--version`` under ``--json``: their text, as the one
        JSON object (``{"help": ...}``, ``{"version": ...}``)."""
        if "--version" in _root_options(args):
            from importlib.metadata import version
            click.echo(json.dumps({"name": "cocktail", "version": version("cocktail")}))
            return ExitCode.DONE
        shown = io.StringIO()
        with contextlib.redirect_stdout(shown):
            status = super().main([a for a in args if a != "--json"], prog_name, complete_var,
                                  standalone_mode=False, **extra)
        click.echo(json.dumps({"help": shown.getvalue()}, ensure_ascii=False))
        return status if isinstance(status, int) else ExitCode.DONE


def _root_options(args: list[str]) -> list[str]:
    """The options given before the command's name: the root group's own."""
    return list(itertools.takewhile(lambda arg: arg.startswith("-"), args))


def asks_text(args: list[str]) -> bool:
    """Whether the arguments ask for a help page or the program's version."""
    given = args[:args.index("--")] if "--" in args else args
    return bool({"--help", "-h"} & set(given)) or "--version" in _root_options(given)


def report_failure(exc: BaseException, as_json: bool) -> ExitCode:
    code, kind = classify(exc)
    if code is ExitCode.INTERNAL:
        traceback.print_exception(exc, file=sys.stderr)
    message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
    if code is ExitCode.INTERRUPTED:
        message = "interrupted"
    if as_json:
        extra = {"http_status": exc.http_status} if raised(exc, "client:ServiceRefused") else {}
        if isinstance(exc, MissingExtra):
            extra = {"extra": exc.extra}
        click.echo(json.dumps({"error": message or repr(exc), "code": int(code), "type": kind,
                               **extra}, ensure_ascii=False))
    elif isinstance(exc, click.UsageError):
        exc.show()  # the usage line and the error, as click prints them, on stderr
    else:
        # Text, not markup: a message may hold brackets (a path, a term) rich would eat
        err.print(Text.assemble(("error:", "bold red"), " ", message or repr(exc)),
                  highlight=False)
    return code


def verdict(ok: bool) -> None:
    """A check's outcome as its exit status: DONE when it passed, PROBLEMS when it found some."""
    click.get_current_context().exit(ExitCode.DONE if ok else ExitCode.PROBLEMS)


def emit(as_json: bool, payload: dict, human: Callable[[], None]) -> None:
    """A result: the JSON object, or the human rendering, on stdout."""
    if as_json:
        click.echo(json.dumps(payload, ensure_ascii=False))
    else:
        human()


def confirm(as_json: bool, payload: dict, message: str) -> None:
    """What a command that makes or changes something did: the JSON object on stdout, or
    one line for the human on stderr (stdout stays for results)."""
    if as_json:
        click.echo(json.dumps(payload, ensure_ascii=False))
    else:
        err.print(message, highlight=False, markup=False)


def warn(message: str) -> None:
    err.print(Text.assemble(("warning:", "yellow"), " ", message), highlight=False)
