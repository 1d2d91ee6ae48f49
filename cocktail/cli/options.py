"""What the command groups share besides the contract: common options, old spellings kept as
deprecated aliases, the analysts' credentials, and progress bars."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from .contract import err, warn

if TYPE_CHECKING:
    from ..overlay.layout import PhaseProgress  # the engine: the analysts' commands use us

OWNER = "Owner command: it reads the store's private zone; analysts never run it."



def _not_empty(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Before any work (publish reads its input first): an empty --store is bad usage."""
    from ..store import StoreError, not_empty

    try:
        return not_empty(value)
    except StoreError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


store_option = click.option(
    "--store", "store_spec", default="cocktail-store", envvar="COCKTAIL_STORE", show_default=True,
    callback=_not_empty,
    help="Where the publication lives: a directory (the embedded local store), local:PATH, or "
    "webhdfs://NAMENODE:9870/PATH?fs=hdfs://NAMENODE:8020 for HDFS (docs/hadoop.md); "
    "default $COCKTAIL_STORE, else ./cocktail-store.")
json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print one JSON object on stdout, on failure too.")
create_option = click.option(
    "--create", is_flag=True,
    help="Set the store up although it holds no publication yet (else refused: a mistyped "
    "--store would silently become a new store).")
url_option = click.option(
    "--url", envvar="COCKTAIL_URL",
    help="Analysts: the overlay service (`cocktail serve`) that answers ($COCKTAIL_URL).")


def token_options(command: Callable) -> Callable:
    """``--token`` (or $COCKTAIL_TOKEN) and ``--token-file``, for the analysts' commands."""
    command = click.option("--token-file", type=click.File("r"),
                           help="Analysts: a file holding your token (it then stays out of "
                           "the process list and the shell history).")(command)
    return click.option("--token", envvar="COCKTAIL_TOKEN",
                        help="Analysts: your token ($COCKTAIL_TOKEN).")(command)


def read_token(token: str | None, token_file) -> str | None:
    """The analyst's token: from --token-file, else --token or $COCKTAIL_TOKEN."""
    if token_file is None:
        return token or None
    source = click.get_current_context().get_parameter_source("token")
    if token and source is click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError("give --token or --token-file, not both")
    text = token_file.read().strip()
    if not text:
        raise click.BadParameter(f"{token_file.name} holds no token", param_hint="--token-file")
    return text


def need_service(url: str | None, token: str | None, otherwise: str) -> str:
    """An analyst's command needs both the service and a token: missing either is bad usage
    (exit 2), before anything is sent."""
    if not url or not token:
        raise click.UsageError(
            "analysts' answers come from the overlay service: give --url URL (or $COCKTAIL_URL) "
            f"and --token TOKEN, --token-file FILE or $COCKTAIL_TOKEN; {otherwise}")
    return url


def renamed(spellings: dict[str, str | Callable[[list[str]], str]]) -> Callable:
    """Keep a command's old option spellings working, each with a one-line warning on stderr.
    ``spellings`` maps an old flag to its new one, or to a function of the arguments that
    picks it (an old flag that meant different things under different options)."""
    def apply(command: click.Command) -> click.Command:
        parse = command.parse_args

        def parse_args(ctx: click.Context, args: list[str]) -> list[str]:
            return parse(ctx, respell(args, spellings))
        command.parse_args = parse_args
        return command
    return apply


def respell(args: list[str], spellings: dict) -> list[str]:
    respelled = []
    for n, arg in enumerate(args):
        if arg == "--":
            return respelled + args[n:]
        name, eq, value = arg.partition("=")
        new = spellings.get(name)
        if new is not None:
            new = new(args) if callable(new) else new
            warn(f"{name} is deprecated here; use {new}")
            arg = new + eq + value
        respelled.append(arg)
    return respelled


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
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn)  # here: only a terminal shows bars

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True) as bar:
        tasks: dict[str, int] = {}

        def update(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(f"{label}: {phase}", total=total)
            bar.update(tasks[phase], completed=done, total=total)
        yield update
