"""The owner's side of `cocktail rank`, over the owner's engine: generate a table, build a
ranking, and answer from the store (``rank query`` without ``--url``)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from ..dataset import InputError
from ..dp.ledger import Forbidden
from ..private_config import open_ledger, store_identity
from ..rank.defenses import DEFENSES
from ..rank.release import build_from_file, load_ranking
from ..rank.service import answer_rank
from ..releases import layout
from ..store import open_store
from ..synthetic import PAPER_DOMAINS, RankSpec, write_table
from ..tables.data import names
from .contract import confirm
from .options import json_option, renamed, store_option
from .rank import name_option, only_ranking


def _weights(spec: str | None) -> dict[str, float]:
    weights = {}
    for part in names(spec or ""):
        column, sep, value = part.partition("=")
        try:
            weights[column.strip()] = float(value)
        except ValueError:
            raise InputError(f"--weights: {part!r} is not COLUMN=NUMBER") from None
        if not sep:
            raise InputError(f"--weights: {part!r} is not COLUMN=NUMBER")
    return weights


def _sizes(spec: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in names(spec))
    except ValueError:
        raise InputError(f"{spec!r}: give domain sizes as integers, e.g. 5,2,2,5,6") from None


@click.command("generate")
@click.argument("output", type=click.Path(dir_okay=False, writable=True, path_type=Path))
@click.option("--tuples", type=click.IntRange(1), default=300_000, show_default=True)
@click.option("--public", "public_sizes", default=",".join(map(str, PAPER_DOMAINS)),
              show_default=True, help="Domain size of each public column (A1, A2, ...).")
@click.option("--private", "private_sizes", default=",".join(map(str, PAPER_DOMAINS)),
              show_default=True, help="Domain size of each private column (B1, B2, ...).")
@click.option("--correlation", type=click.FloatRange(0, 1), default=0.3, show_default=True,
              help="How often B_j follows A_j (what a domain expert can exploit).")
@click.option("--seed", type=int, default=0, show_default=True)
@json_option
def generate_cmd(output: Path, tuples: int, public_sizes: str, private_sizes: str,
                 correlation: float, seed: int, as_json: bool) -> None:
    """Write a synthetic table of distinct tuples in the paper's shape to OUTPUT (CSV)."""
    spec = RankSpec(tuples, _sizes(public_sizes), _sizes(private_sizes), correlation, seed)
    started = time.perf_counter()
    written = write_table(spec, output)
    public = ",".join(c for c in spec.columns if c.startswith("A"))
    private = ",".join(c for c in spec.columns if c.startswith("B"))
    confirm(as_json, {"output": str(output), "tuples": written, "public": public,
                      "private": private, "seconds": round(time.perf_counter() - started, 3)},
            f"wrote {written:,} distinct tuples to {output} (public {public}; private "
            f"{private})")


@renamed({"--l": "--candidates"})
@click.command("build")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--public", required=True, help="Public columns, comma-separated (shown).")
@click.option("--private", required=True,
              help="Private columns, comma-separated (ranked on, never shown).")
@click.option("--defense", type=click.Choice(DEFENSES), default="estt", show_default=True,
              help="none; esvt (virtual tuples); estt (true tuples paired by matching); "
              "dp (noisy top-k, charged to the analyst's budget).")
@click.option("--candidates", "l", type=int, default=2, show_default=True,
              help="esvt/estt: l, every private value hidden among at least l candidates.")
@click.option("--id", "id_column", default=None,
              help="A public id column (default: the row number).")
@click.option("--numeric", default="", help="Numeric columns (similarity 1 − |x − y|/range).")
@click.option("--weights", default=None, help="COLUMN=W,... (default 1 each).")
@click.option("--workload", type=click.File("r"), default=None,
              help="esvt, l = 2: queries (one per line) for the paper's workload-aware "
              "generator, made an involution; default: a secret random generator.")
@name_option
@store_option
@json_option
def build_cmd(path: Path, public: str, private: str, defense: str, l: int,
              id_column: str | None, numeric: str, weights: str | None, workload,
              name: str, store_spec: str, as_json: bool) -> None:
    """Build (or rebuild, keeping every unchanged tuple's set) ranking NAME from a CSV file."""
    report = build_from_file(open_store(store_spec), name, path, names(public), names(private),
                             defense, l, id_column=id_column, numeric=names(numeric),
                             weights=_weights(weights), workload=workload)
    confirm(as_json, report.as_dict(), (
        f"ranking {report.name} {report.version}: {report.tuples:,} tuples, defense "
        f"{report.defense}" + (f" (l={report.l}): {report.sets:,} sets, {report.virtual:,} "
                               f"virtual, {report.obfuscated:,} values obfuscated, "
                               f"{report.suppressed:,} suppressed, {report.kept_sets:,} kept"
                               if defense in ("esvt", "estt") else "")
        + f" ({report.seconds:.2f}s)"))


def answer(store_spec: str, name: str | None, query: str, top: int,
           token: str | None) -> dict:
    """The owner's answer from the store (an analyst's, with ``token``, on a dp ranking), from
    ranking ``name`` (None: the only one)."""
    started = time.perf_counter()
    store = open_store(store_spec)
    name = name or only_ranking(layout.names(store, layout.RANKS))
    version, index, _ = load_ranking(store, name)
    ledger = open_ledger(store) if token or index.defense == "dp" else None
    if index.defense == "dp" and not token:
        raise Forbidden("a dp ranking answers analysts only: give --token (each query is "
                        "charged to their budget)")
    body = answer_rank(index, version, name, query, top, ledger, token,
                       store=store_identity(store))
    body["seconds"] = round(time.perf_counter() - started, 4)
    return body
