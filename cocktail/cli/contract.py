"""The contract every ``cocktail`` command keeps.

* One exit-status table (:class:`~cocktail.errors.ExitCode`, the library's), shown in
  ``cocktail --help`` and docs/cli.md.
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
import io
import itertools
import json
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator

import click
from rich.console import Console
from rich.text import Text

from ..errors import MEANING, ExitCode, Terminated, exit_status, raised
from ..extras import DISTRIBUTION, MissingExtra, require

err = Console(stderr=True, soft_wrap=True)  # never break a path or message in two
out = Console(soft_wrap=True)
TYPES = {ExitCode.PROBLEMS: "problems", ExitCode.USAGE: "usage-error",
         ExitCode.REFUSED: "refused", ExitCode.BUDGET: "budget-exhausted",
         ExitCode.FAILED: "failed", ExitCode.INTERNAL: "internal-error",
         ExitCode.INTERRUPTED: "interrupted", ExitCode.TERMINATED: "terminated"}
EXIT_STATUS = "\b\nExit status (docs/cli.md):\n" + "\n".join(
    f"  {code.value:>3}  {meaning}" for code, meaning in MEANING.items())


def classify(exc: BaseException) -> tuple[ExitCode, str]:
    """The exit status and the JSON ``type`` of a failure: click's own, else the library's
    table (:func:`cocktail.errors.exit_status`)."""
    if isinstance(exc, click.Abort):
        code = ExitCode.INTERRUPTED
    elif isinstance(exc, click.ClickException):  # a usage error, a bad --option file
        code = ExitCode.USAGE
    else:
        code = exit_status(exc)
    if isinstance(exc, MissingExtra):
        return code, "missing-extra"
    if raised(exc, "client:ServiceUnreachable"):
        return code, "unreachable"
    return code, TYPES[code]


def wants_json(args: list[str]) -> bool:
    """From the raw arguments: a usage error may come before ``--json`` is parsed."""
    return "--json" in (args[:args.index("--")] if "--" in args else args)


class Lazy(click.Group):
    """A group whose commands are ``lazy``: name -> "module:object" of this package, imported
    when first used.  A command whose module needs an extra this install lacks (the owner's
    engine, on an analyst's client) is listed saying so, and running it is that one error."""

    def __init__(self, *args, lazy: dict[str, str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.lazy)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.lazy:
            return None
        module, _, attribute = self.lazy[name].partition(":")
        try:
            return getattr(require(f"{__package__}.{module}"), attribute)
        except MissingExtra as missing:
            return _unavailable(name, missing)


def _unavailable(name: str, missing: MissingExtra) -> click.Command:
    """A command that raises ``missing`` whatever its arguments (``--help`` included)."""
    def fail(args: tuple[str, ...]) -> None:
        raise missing
    return click.Command(name, callback=fail, short_help=str(missing), add_help_option=False,
                         params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
                         context_settings={"ignore_unknown_options": True})


class Cocktail(Lazy):
    """The root group: runs a command and turns whatever it raised into one exit status and
    one error (a JSON object on stdout with ``--json``, else a line on stderr)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        args = list(sys.argv[1:] if args is None else args)
        as_json = wants_json(args)
        try:
            with sigterm_raises():
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
            click.echo(json.dumps({"name": "cocktail", "version": version(DISTRIBUTION)}))
            return ExitCode.DONE
        shown = io.StringIO()
        with contextlib.redirect_stdout(shown):
            status = super().main([a for a in args if a != "--json"], prog_name, complete_var,
                                  standalone_mode=False, **extra)
        click.echo(json.dumps({"help": shown.getvalue()}, ensure_ascii=False))
        return status if isinstance(status, int) else ExitCode.DONE


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """While a command runs, SIGTERM raises :class:`Terminated` in the main thread, which ends
    it with its exit status (143) and, with --json, its one object; the handler before is
    put back after.  A child forked meanwhile (a pool's worker) ends as the default would."""
    if threading.current_thread() is not threading.main_thread():
        yield  # a CliRunner in a thread: only the main thread may set handlers
        return
    main_process = os.getpid()

    def terminated(signum: int, frame) -> None:
        if os.getpid() != main_process:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Terminated("terminated (SIGTERM)")
    before = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


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
    else:
        if isinstance(exc, click.UsageError) and exc.ctx is not None:
            err.print(f"{exc.ctx.get_usage()}\nTry '{exc.ctx.command_path} --help' for help.\n",
                      highlight=False, markup=False)  # as click shows it, then our one prefix
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


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 private chunk``, ``2 private chunks``: a count and its noun, agreeing."""
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"


def warn(message: str) -> None:
    err.print(Text.assemble(("warning:", "yellow"), " ", message), highlight=False)
