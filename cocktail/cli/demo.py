"""``cocktail demo``: the whole pipeline on synthetic data, in one command."""

from __future__ import annotations

import shutil
import sys
from functools import partial
from pathlib import Path

import click

from ..anonymity import METHODS
from ..demo import DemoSettings, print_step, run_demo
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
    shown = (lambda name, result: None) if as_json else partial(print_step, out)
    result = run_demo(settings, shown, lambda: progress_bars("publishing", not as_json))
    emit(as_json, result, lambda: out.print(
        f"store: {result['store']}  (try: {_this_command()} audit --store {result['store']})",
        highlight=False, markup=False))
    verdict(result["ok"])


def _this_command() -> str:
    """``cocktail`` if that is what the shell finds, else what ran this one: ``python -m
    cocktail.cli`` (sys.argv[0] is then the package's ``__main__.py``, not a command), or the
    script's path."""
    here = Path(sys.argv[0]).resolve()
    found = shutil.which("cocktail")
    if found and Path(found).resolve() == here:
        return "cocktail"
    if here.name == "__main__.py":
        return f"{Path(sys.executable).name} -m cocktail.cli"
    return str(here)
