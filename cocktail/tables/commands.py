"""``cocktail table``: tabular releases on the same stores, versions and JSON conventions."""

from __future__ import annotations

import sys

import click

from ..cli_support import OWNER, emit, fail_cleanly, json_option, out, store_option
from ..publish import DEFAULT_KEEP
from ..store import open_store
from .audit import TableAuditReport, audit_table
from .ke import Infeasible
from .ke_release import KeReport, append_ke, publish_ke
from .publishers import MODELS, publish_group_model
from .query import AGGREGATES, answer
from .release import table_store

name_option = click.option("--name", default="table", show_default=True,
                           help="Which table of the store (several can live side by side).")


@click.group("table", help=f"Tables beside baskets: (k,e)-anonymous releases that stay safe "
             f"as tuples are appended. {OWNER}")
def table_group() -> None:
    pass


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
@click.option("--k", type=int, help="ke: distinct sensitive values per partition; rho-clone: "
              "tuples per sub-class (≥ 1).")
@click.option("--e", type=float, help="ke: range of the sensitive values per partition (≥ 0).")
@click.option("--l", "ell", type=int, help="l-diverse: distinct sensitive values per group.")
@click.option("--id", "person", help="rho-clone, l-diverse: a column naming the individual, "
              "kept private, for `cocktail attack composition` across publishers.")
@store_option
@name_option
@click.option("--keep", default=DEFAULT_KEEP, show_default=True, type=click.IntRange(1),
              help="Committed versions kept (the release log keeps every release).")
@json_option
@fail_cleanly
def publish_cmd(path: str | None, append_path: str | None, qi: str | None,
                sensitive: str | None, model: str, k: int | None, e: float | None,
                ell: int | None, person: str | None, store_spec: str, name: str, keep: int,
                as_json: bool) -> None:
    """Publish PATH (CSV with a header) as a release of --model, or --append NEW.csv (ke).

    ke: partitions minimise the sum of sensitive-value ranges (exact dynamic programme); an
    append keeps every earlier partition whole and adds new tuples only in (k,e)-valid
    groups, so no combination of releases narrows any value down.  New tuples that cannot be
    placed yet wait in the private zone (reported as ``buffered``) and are retried at the
    next append.  rho-clone: the measured ρ, counterfeit and suppressed tuples are reported.
    """
    tstore = table_store(open_store(store_spec), name)
    if append_path:
        if path or qi or sensitive or k is not None or e is not None or model != "ke":
            raise click.UsageError("--append (ke tables) takes the columns, k and e of the "
                                   "first release; give only the new file")
        report = append_ke(tstore, append_path, keep)
        _print_ke(report, as_json)
        return
    needs = {"ke": (("--k", k), ("--e", e)), "rho-clone": (("--k", k),),
             "l-diverse": (("--l", ell),)}[model]
    missing = [flag for flag, given in (("PATH", path), ("--qi", qi),
                                        ("--sensitive", sensitive), *needs) if given is None]
    if missing:
        raise click.UsageError(f"a first {model} release needs {', '.join(missing)}")
    if model != "ke":
        report = publish_group_model(tstore, path, qi, sensitive, model, k or 1, ell, person,
                                     keep)
        emit(as_json, report.as_dict(), lambda: out.print(
            f"{report.version} ({model}): {report.tuples:,} tuples in {report.groups:,} "
            f"groups; ρ = {report.rho:.4f} (measured); {report.counterfeit:,} counterfeit, "
            f"{report.suppressed:,} suppressed ({report.seconds:.2f}s)", highlight=False))
        return
    try:
        report = publish_ke(tstore, path, qi, sensitive, k, e, keep)
    except Infeasible as exc:
        raise ValueError(f"{path}: column {sensitive!r}: {exc}; nothing was "
                         f"written") from None
    _print_ke(report, as_json)


def _print_ke(report: KeReport, as_json: bool) -> None:
    emit(as_json, report.as_dict(), lambda: out.print(
        f"{report.version} ({report.kind}): {report.tuples:,} tuples in {report.partitions:,} "
        f"partitions, sum of ranges {report.sum_of_errors:,}; {report.buffered:,} buffered "
        f"({report.seconds:.2f}s)", highlight=False))


@table_group.command("audit")
@store_option
@name_option
@click.option("--releases", "whole_history", is_flag=True,
              help="Also check every release together: the laminar rule and the "
              "multi-release differential attacker.")
@json_option
@fail_cleanly
def audit_cmd(store_spec: str, name: str, whole_history: bool, as_json: bool) -> None:
    """Check the current release (and with --releases all of them); exit status 1 on any
    violation."""
    report = audit_table(table_store(open_store(store_spec), name), whole_history)
    emit(as_json, report.as_dict(), lambda: _print_audit(report, whole_history))
    sys.exit(0 if report.ok else 1)


def _print_audit(report: TableAuditReport, whole_history: bool) -> None:
    against = {"ke": f"k={report.k}, e={report.e}", "rho-clone": f"k={report.k}, ρ={report.rho}",
               "l-diverse": f"l={report.l}"}[report.model]
    out.print(f"{report.version} ({report.model}): {report.partitions:,} groups, "
              f"{report.tuples:,} tuples checked against {against}", highlight=False)
    if whole_history:
        out.print(f"{report.releases} releases, {report.atoms:,} sets the attacker can isolate; "
                  f"the paper's pairwise test flags {report.pairwise_breaches}", highlight=False)
    for violation in report.violations:
        out.print(f"  VIOLATION {violation}", highlight=False, markup=False)
    out.print("PASS" if report.ok else "FAIL")


@table_group.command("query")
@click.argument("aggregate", type=click.Choice(AGGREGATES))
@click.option("--where", default="", help="QI conditions, e.g. 'sex=Male,age>=40'.")
@click.option("--exact", is_flag=True, help=f"Also the true answer and the midpoint's "
              f"relative error. {OWNER}")
@store_option
@name_option
@json_option
@fail_cleanly
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
