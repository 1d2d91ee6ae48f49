"""Taking records back: `cocktail forget` (named records) and `cocktail retract` (a release's
records), each one new release that the public cloud cannot diff to re-associate what it
erases (docs/releases.md).  Thin over :mod:`cocktail.publish.forget`."""

from __future__ import annotations

import click

from ..publish.forget import ErasureReport, forget, retract
from ..releases import Refused
from ..store import open_store
from .contract import confirm, plural
from .options import OWNER, json_option, store_option

ENGINE_HELP = ("Only the single engine erases: an erasure touches the few clusters that held "
               "the records, read and rewritten in this process; there is nothing for Spark to "
               "spread (docs/releases.md).")
REASON_HELP = "Why, for the release log and the receipt (never an id or a term)."
KEEP_HELP = ("Versions kept afterwards, the new one included. The default, 1, deletes at once "
             "every older file that held an erased record; more keeps them until pruned.")


def erasure_options(command):
    """The options both erasures take: the store, why, what to keep, the engine, --json."""
    for option in reversed((
            store_option,
            click.option("--reason", required=True, help=REASON_HELP),
            click.option("--keep", default=1, show_default=True, type=click.IntRange(1),
                         help=KEEP_HELP),
            click.option("--engine", type=click.Choice(["single", "spark"]), default="single",
                         show_default=True, help=ENGINE_HELP),
            json_option)):
        command = option(command)
    return command


def _engine(value: str) -> None:
    if value != "single":
        raise Refused(f"--engine {value}: {ENGINE_HELP} Run it with --engine single "
                      "(nothing written)")


def _receipt(report: ErasureReport, as_json: bool) -> None:
    what = plural(report.records_erased, "record") + (
        f" of release {report.retracted}" if report.retracted else "")
    confirm(as_json, report.as_dict(),
            f"erased {what} as {report.version} ({report.reason}): "
            f"{plural(report.retired_clusters, 'cluster')} retired from the public zone "
            f"({plural(report.retired_chunks, 'chunk')}), "
            f"{plural(report.files_removed, 'file')} deleted"
            + (f", {report.files_pending} kept by versions {', '.join(report.kept_versions)}"
               if report.files_pending else ""))


@click.command("forget", help="Erase records from the current release, by id (one a line, from "
               f"IDS or stdin): a new release that holds nothing of them. {OWNER}")
@click.argument("ids_file", metavar="IDS", type=click.File("r"), default="-")
@erasure_options
def forget_cmd(ids_file, store_spec: str, reason: str, keep: int, engine: str,
               as_json: bool) -> None:
    _engine(engine)
    ids = [line.rstrip("\r\n") for line in ids_file if line.strip()]
    _receipt(forget(open_store(store_spec), ids, reason, keep), as_json)


@click.command("retract", help="Take back every record release VERSION added (a bad batch): a "
               f"new release that holds nothing of them. {OWNER}")
@click.argument("version")
@erasure_options
def retract_cmd(version: str, store_spec: str, reason: str, keep: int, engine: str,
                as_json: bool) -> None:
    _engine(engine)
    _receipt(retract(open_store(store_spec), version, reason, keep), as_json)
