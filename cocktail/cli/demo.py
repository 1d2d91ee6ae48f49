"""``cocktail demo``: the whole pipeline on synthetic data, in one command."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click
from rich.table import Table

from ..anonymity import METHODS
from ..demo import DemoSettings, run_demo
from ..publish import PublishParams
from .contract import emit, out, verdict
from .options import json_option, progress_bars


@click.command("demo")
@click.option("--workdir", default=DemoSettings.workdir, show_default=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="Where the synthetic dataset and the local store are written.")
@click.option("--records", default=DemoSettings.records, show_default=True,
              type=click.IntRange(100))
@click.option("--seed", default=DemoSettings.seed, show_default=True, type=int)
@click.option("--k", default=PublishParams.k, show_default=True, type=click.IntRange(2))
@click.option("--m", default=PublishParams.m, show_default=True, type=click.IntRange(1))
@click.option("--method", default=PublishParams.method, show_default=True,
              type=click.Choice(list(METHODS)))
@json_option
def demo_cmd(workdir: Path, records: int, seed: int, k: int, m: int, method: str,
             as_json: bool) -> None:
    """Generate synthetic baskets, publish, audit and query them, and print a short report."""
    settings = DemoSettings(workdir=workdir, records=records, seed=seed,
                            params=PublishParams(k=k, m=m, method=method))
    with progress_bars("publishing", not as_json) as update:
        result = run_demo(settings, progress=update)
    emit(as_json, result, lambda: _print_demo(result))
    verdict(result["ok"])


def _print_demo(result: dict) -> None:
    p = result["publish"]
    out.print(f"[bold]1. data[/]      {p['records']:,} synthetic records -> {result['dataset']}")
    out.print(f"[bold]2. publish[/]   {p['version']} (k={p['k']}, m={p['m']}, {p['method']}): "
              f"{p['clusters']} clusters, {p['public_chunks']:,} public chunks, "
              f"{p['private_chunks']:,} private chunks, {p['private_term_share']:.1%} of term "
              f"occurrences private, {p['seconds']:.1f}s", highlight=False)
    _print_audit_line = "[green]PASS[/]" if result["audit"]["ok"] else "[bold red]FAIL[/]"
    out.print(f"[bold]3. audit[/]     {_print_audit_line}: {result['audit']['chunks']:,} public "
              f"chunks k^m-anonymous, {len(result['audit']['violations'])} violation(s)",
              highlight=False)
    table = Table(title="4. exact counts (owner view) vs brute force on the raw data")
    for column in ("query", "answer", "brute force", ""):
        table.add_column(column)
    for a in result["queries"]:
        table.add_row(a["query"], str(a["answer"]), str(a["brute_force"]),
                      "[green]=[/]" if a["equal"] else "[red]differs[/]")
    out.print(table)
    noisy = result["noisy"]
    table = Table(title=f"5. the same as an analyst sees them: α={noisy['alpha']:g}, "
                        f"{noisy['strategy']}, {noisy['budget']['remaining']:g} of "
                        f"{noisy['budget']['budget']:g} budget left")
    for column in ("query", "noisy answer", "expected error (RMS)"):
        table.add_column(column)
    for query, answer, error in zip(noisy["workload"].split("; "), noisy["answers"],
                                    noisy["expected_rms_error"]):
        table.add_row(query, f"{answer:.1f}", f"± {error:.1f}")
    out.print(table)
    out.print(f"store: {result['store']}  (try: {_this_command()} audit --store "
              f"{result['store']})", highlight=False, markup=False)
    out.print(f"[bold]6. report[/]    {result['report']}: coverage, the publication's shape, "
              f"the audit, releases and budget as charts; open it with: xdg-open "
              f"{result['report']}", highlight=False)


def _this_command() -> str:
    """``cocktail`` if that is what the shell finds, else the path that ran this one."""
    here = Path(sys.argv[0]).resolve()
    found = shutil.which("cocktail")
    return "cocktail" if found and Path(found).resolve() == here else str(here)
