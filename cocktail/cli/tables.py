"""``cocktail table``: tabular releases on the same stores, versions and JSON conventions."""

from __future__ import annotations

from pathlib import Path

import click

from ..publish import DEFAULT_KEEP
from ..store import open_store
from ..tables.audit import TableAuditReport, audit_table
from ..tables.chain import MEAN_RECODED, ChainAudit, ChainReport, audit_chain, run_chain
from ..tables.data import columns, read_table
from ..tables.ke import Infeasible
from ..tables.ke_release import KeReport, append_ke, publish_ke
from ..tables.propagation import STRATEGIES
from ..tables.publishers import MODELS, publish_group_model
from ..tables.query import AGGREGATES, answer
from ..tables.release import table_store
from .contract import confirm, emit, err, out, plural, verdict, warn
from .options import OWNER, json_option, renamed, store_option

name_option = click.option("--name", default="table", show_default=True,
                           help="Which table of the store (several can live side by side).")


@click.group("table", help=f"Tables beside baskets: (k,e)-anonymous releases that stay safe "
             f"as tuples are appended. {OWNER}")
def table_group() -> None:
    pass


def _model_of(args: list[str]) -> str:
    """The --model among the raw arguments (what the old --k meant depended on it)."""
    for n, arg in enumerate(args):
        if arg.startswith("--model="):
            return arg.partition("=")[2]
        if arg == "--model" and n + 1 < len(args):
            return args[n + 1]
    return "ke"


@renamed({"--k": lambda args: "--class-size" if _model_of(args) == "rho-clone" else "--distinct",
          "--l": "--distinct", "--e": "--range"})
@table_group.command("publish")
@click.argument("path", required=False, type=click.Path(dir_okay=False))
@click.option("--append", "append_path", type=click.Path(dir_okay=False),
              help="Release the current table plus these new tuples (same columns).")
@click.option("--qi", help="Quasi-identifier columns, comma-separated (published as they are).")
@click.option("--sensitive", help="The numeric sensitive column (permuted within partitions).")
@click.option("--model", type=click.Choice(["ke", *MODELS]), default="ke", show_default=True,
              help="ke: (k,e)-anonymous, numeric sensitive column, appends; rho-clone: "
              "classes cloning the sensitive distribution (independent publishers); "
              "l-diverse: Mondrian ℓ-diversity, the baseline the composition attack breaks.")
@click.option("--distinct", type=int, help="Distinct sensitive values per "
              "group, at least: ke's k, l-diverse's l.")
@click.option("--range", "value_range", type=float,
              help="ke's e: the range of the sensitive values per partition, at least.")
@click.option("--class-size", type=int,
              help="rho-clone: tuples per sub-class [default: 1].")
@click.option("--id", "person", help="rho-clone, l-diverse: a column naming the individual, "
              "kept private, for `cocktail attack composition` across publishers.")
@store_option
@name_option
@click.option("--keep", default=DEFAULT_KEEP, show_default=True, type=click.IntRange(1),
              help="Committed versions kept (the release log keeps every release).")
@json_option
def publish_cmd(path: str | None, append_path: str | None, qi: str | None,
                sensitive: str | None, model: str, distinct: int | None,
                value_range: float | None, class_size: int | None, person: str | None,
                store_spec: str, name: str, keep: int, as_json: bool) -> None:
    """Publish PATH (CSV with a header) as a release of --model, or --append NEW.csv (ke).

    ke: partitions minimise the sum of sensitive-value ranges (exact dynamic programme); an
    append keeps every earlier partition whole and adds new tuples only in (k,e)-valid
    groups, so no combination of releases narrows any value down.  New tuples that cannot be
    placed yet wait in the private zone (reported as ``buffered``) and are retried at the
    next append.  rho-clone: the measured ρ, counterfeit and suppressed tuples are reported.
    """
    tstore = table_store(open_store(store_spec), name)
    given = {"--distinct": distinct, "--range": value_range, "--class-size": class_size,
             "--id": person}
    if append_path:
        if path or qi or sensitive or model != "ke" or any(
                given[flag] is not None for flag in ("--distinct", "--range")):
            raise click.UsageError("--append (ke tables) takes the columns, k and e of the "
                                   "first release; give only the new file")
        report = append_ke(tstore, append_path, keep)
        _print_ke(report, as_json)
        return
    needs = {"ke": ("--distinct", "--range"), "rho-clone": (), "l-diverse": ("--distinct",)}
    missing = [flag for flag, value in (("PATH", path), ("--qi", qi), ("--sensitive", sensitive),
                                        *((f, given[f]) for f in needs[model])) if value is None]
    if missing:
        raise click.UsageError(f"a first {model} release needs {', '.join(missing)}")
    _note_ignored(model, given)
    if model != "ke":
        report = publish_group_model(tstore, path, qi, sensitive, model, class_size or 1,
                                     distinct, person, keep)
        confirm(as_json, report.as_dict(), (
            f"{report.version} ({model}): {report.tuples:,} tuples in {report.groups:,} "
            f"groups; ρ = {report.rho:.4f} (measured); {report.counterfeit:,} counterfeit, "
            f"{report.suppressed:,} suppressed ({report.seconds:.2f}s)"))
        return
    try:
        report = publish_ke(tstore, path, qi, sensitive, distinct, value_range, keep)
    except Infeasible as exc:
        raise ValueError(f"{path}: column {sensitive!r}: {exc}; nothing was "
                         f"written") from None
    _print_ke(report, as_json)


# what each model reads of the options it may be given
_USES = {"ke": {"--distinct", "--range"}, "rho-clone": {"--class-size", "--id"},
         "l-diverse": {"--distinct", "--id"}}


def _note_ignored(model: str, given: dict[str, object]) -> None:
    """Say so (on stderr) when an option means nothing to the model, rather than drop it."""
    ignored = [flag for flag, value in given.items()
               if value is not None and flag not in _USES[model]]
    if ignored:
        warn(f"--model {model} ignores {', '.join(ignored)}")


def _print_ke(report: KeReport, as_json: bool) -> None:
    confirm(as_json, report.as_dict(), (
        f"{report.version} ({report.kind}): {report.tuples:,} tuples in {report.partitions:,} "
        f"partitions, sum of ranges {report.sum_of_errors:,}; {report.buffered:,} buffered "
        f"({report.seconds:.2f}s)"))


@table_group.command("audit")
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@store_option
@name_option
@click.option("--releases", "whole_history", is_flag=True,
              help="Also check every release together: the laminar rule and the "
              "multi-release differential attacker.")
@click.option("--chain", "is_chain", is_flag=True,
              help="Audit a chain's hop files (FILES, in hop order) instead of a store: "
              "thresholds, nestedness and the colluders' attack.")
@click.option("--delta", type=click.FloatRange(0, min_open=True),
              help="With --chain: δ, if no chain.json lies beside the files.")
@click.option("--membership", type=click.Path(exists=True, dir_okay=False),
              help="With --chain: the owner's membership file [default: owner/membership.csv "
              "beside the files].")
@json_option
def audit_cmd(files: tuple[str, ...], store_spec: str, name: str, whole_history: bool,
              is_chain: bool, delta: float | None, membership: str | None,
              as_json: bool) -> None:
    """Check the current release (and with --releases all of them), or with --chain a
    chain's hop files; exit status 1 on any violation."""
    if is_chain != bool(files):
        raise click.UsageError("give the hop files with --chain (and only then)")
    if is_chain:
        chain = audit_chain([Path(f) for f in files], delta,
                            Path(membership) if membership else None)
        emit(as_json, chain.as_dict(), lambda: _print_chain_audit(chain))
        verdict(chain.ok)
    report = audit_table(table_store(open_store(store_spec), name), whole_history)
    emit(as_json, report.as_dict(), lambda: _print_audit(report, whole_history))
    verdict(report.ok)


def _print_audit(report: TableAuditReport, whole_history: bool) -> None:
    against = {"ke": f"k={report.k}, e={report.e}", "rho-clone": f"k={report.k}, ρ={report.rho}",
               "l-diverse": f"l={report.l}"}[report.model]
    out.print(f"{report.version} ({report.model}): {report.partitions:,} groups, "
              f"{report.tuples:,} tuples checked against {against}", highlight=False)
    if whole_history:
        out.print(f"{plural(report.releases, 'release')} joined: an attacker holding them all "
                  f"can isolate {plural(report.atoms, 'set')} of tuples (those sharing their "
                  f"group in every release), each checked by the differential attack against "
                  f"{against}; for comparison, the paper's pairwise test flags "
                  f"{plural(report.pairwise_breaches, 'pair')}",
                  highlight=False)
    for violation in report.violations:
        out.print(f"  VIOLATION {violation}", highlight=False, markup=False)
    out.print("PASS" if report.ok else "FAIL")


def _print_chain_audit(chain: ChainAudit) -> None:
    for t in chain.thresholds:
        out.print(f"hop {t['hop']}: P = {t['privacy']:.4f} bits, threshold {t['threshold']:g}"
                  f"; smallest class {t['smallest_class']} (at least {t['min_size']}) "
                  f"{'ok' if t['ok'] else 'VIOLATION'}", highlight=False)
    if chain.membership is None:
        out.print("colluders: not checked (no owner membership file); nestedness from the "
                  "files alone")
    for n in chain.nested:
        if n["ok"] is None:
            out.print(f"  hop {n['hop']} in hop {n['of_hop']}: undecided from the files alone",
                      highlight=False)
        elif not n["ok"]:
            out.print(f"  VIOLATION hop {n['hop']} is not a coarsening of hop {n['of_hop']}: "
                      f"{_offender(n)}", highlight=False)
    for pair in chain.colluders:
        nested = "nested" if pair.nested else "NOT nested"
        out.print(f"hops {pair.hops[0]}+{pair.hops[1]} ({nested}): "
                  f"{plural(pair.disclosed, 'tuple')} pinned and {pair.narrowed:,} narrowed "
                  "only by colluding",
                  highlight=False)
    out.print("PASS" if chain.ok else "FAIL")


def _offender(nested: dict) -> str:
    if nested.get("from") != "files":
        return f"its class {nested['offending_class']} is split"
    if nested["offending_class"] is None:
        return f"hop {nested['of_hop']}'s classes cannot be grouped into its classes"
    at = ", ".join(f"{x:g}" if float(x).is_integer() else f"{x:.6f}"
                   for x in nested["offending_class"])
    return (f"its class of {nested['offending_size']} at ({at}) is no union of hop "
            f"{nested['of_hop']}'s classes")


@table_group.command("chain")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--qi", required=True, help="Numeric quasi-identifier columns, comma-separated "
              "(mean-recoded per class).")
@click.option("--sensitive", required=True, help="The categorical sensitive column.")
@click.option("--hops", required=True, type=click.IntRange(1), help="L: the chain's length.")
@click.option("--delta", required=True, type=click.FloatRange(0, min_open=True),
              help="δ: hop i must have P < (L − i + 1)·δ (Jensen–Shannon, bits).")
@click.option("--weights", help="W: one weight per QI, comma-separated [default: equal].")
@click.option("--strategy", type=click.Choice(STRATEGIES), default="fla", show_default=True,
              help="fla: forward-looking (the paper's scheme); tda: top-down; bua: bottom-up.")
@click.option("--min-size", default=2, show_default=True, type=click.IntRange(1),
              help="Tuples per class at least (the paper has no floor: 1 lets a class be one "
              "person, whose value it then shows).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Where hop1.csv … hopL.csv, chain.json and owner/membership.csv go.")
@json_option
def chain_cmd(path: str, qi: str, sensitive: str, hops: int, delta: float,
              weights: str | None, strategy: str, min_size: int, out_dir: str,
              as_json: bool) -> None:
    """Re-sharing along a chain: T_1 … T_L from PATH (CSV), each computed from the previous
    one only and stricter than it.  Ship hop i's file to the i-th recipient; keep
    owner/membership.csv (it links tuples to classes)."""
    table = read_table(path, columns(qi), sensitive, numeric=False, numeric_qi=MEAN_RECODED)
    given = [float(w) for w in weights.split(",")] if weights else [1.0] * len(table.qi)
    report = run_chain(table, given, hops, delta, strategy, Path(out_dir), min_size)
    emit(as_json, report.as_dict(), lambda: _print_chain(report))


def _print_chain(report: ChainReport) -> None:
    """What was written: a confirmation, so on stderr."""
    for h in report.hops:
        err.print(f"hop {h.hop}: {h.classes:,} classes, P = {h.privacy:.4f} < {h.threshold:g}, "
                  f"utility loss {h.utility_loss:.4f}, cell loss {h.cell_loss:g} "
                  f"({h.seconds:.2f}s)", highlight=False)
    err.print(f"{report.strategy}: Σ utility loss {report.sum_utility_loss:.4f}; files in "
              f"{report.out}", highlight=False)


@table_group.command("query")
@click.argument("aggregate", type=click.Choice(AGGREGATES, case_sensitive=False))
@click.option("--where", default="", help="QI conditions, e.g. 'sex=Male,age>=40'.")
@click.option("--exact", is_flag=True, help=f"Also the true answer and the midpoint's "
              f"relative error. {OWNER}")
@store_option
@name_option
@json_option
def query_cmd(aggregate: str, where: str, exact: bool, store_spec: str, name: str,
              as_json: bool) -> None:
    """COUNT, SUM, AVG, MIN or MAX of the sensitive column over the tuples the QI conditions
    select, as the interval the public release allows."""
    result = answer(table_store(open_store(store_spec), name), aggregate, where, exact)

    def human() -> None:
        if result.low is None:
            out.print(f"{aggregate} over no tuples", highlight=False)
            return
        line = f"{aggregate} over {result.selected:,} tuples: [{result.low}, {result.high}]"
        if result.exact is not None:
            line += f"; exact {result.exact}, midpoint error {result.relative_error}"
        out.print(line, highlight=False)
    emit(as_json, result.as_dict(), human)
