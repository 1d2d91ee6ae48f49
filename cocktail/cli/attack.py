"""``cocktail attack``: attacks as measurements of a risk."""

from __future__ import annotations

import click

from ..attacks.chunk_composition import compose_stores
from ..attacks.composition import composition, is_table_release, load_table_release
from ..attacks.rank import attack_ranking
from ..store import open_store
from .contract import emit, out, plural
from .options import OWNER, json_option, renamed, store_option
from .publish import sensitive_terms


@click.group("attack", help=f"Attacks as measurements of a risk. {OWNER}")
def attack_group() -> None:
    pass


@attack_group.command("composition")
@click.option("--release", "specs", multiple=True, required=True, metavar="STORE[#TABLE]",
              help="A release (give two or more): a store's basket publication, or its table "
              "TABLE (a store holding tables only: its table 'table').")
@click.option("--known-terms", "m", type=click.IntRange(1), default=None,
              help="Baskets: how many of a victim's terms the adversary knows "
              "[default: the largest m of the stores].")
@click.option("--sensitive-terms", "sensitive_file", type=click.File("r"), default=None,
              help="Baskets: the terms whose disclosure counts, one per line [default: those "
              "the stores were published with].")
@json_option
def composition_cmd(specs: tuple[str, ...], m: int | None, sensitive_file,
                    as_json: bool) -> None:
    """The composition attack across independent releases of overlapping people.  Tables:
    for each person in two or more, intersect their groups' sensitive values.  Baskets: an
    adversary who knows m terms of a victim intersects the sensitive terms of the public
    subrecords holding them in every release.  Reports certain disclosures, candidate-set
    sizes, and the attacker's accuracy against always guessing the most common value."""
    if len(specs) < 2:
        raise click.UsageError("give two releases or more (--release A --release B)")
    baskets = [not is_table_release(spec) for spec in specs]
    if any(baskets) != all(baskets):
        raise click.UsageError("the releases mix basket publications and tables")
    if all(baskets):
        report = compose_stores(specs, m, frozenset(sensitive_terms(sensitive_file)))
        emit(as_json, report.as_dict(), lambda: out.print(
            f"{report.overlapping:,} people in two or more releases, {report.attacked:,} "
            f"located in two or more by {report.known_terms} known terms: "
            f"{plural(report.certain_disclosures, 'certain disclosure')} by composition, "
            f"{report.disclosed_alone:,} by one release alone, {report.misled:,} misled; "
            f"candidates min {report.candidates_min}, median {report.candidates_median}; "
            f"attacker accuracy {report.attacker_accuracy} against {report.baseline_accuracy} "
            f"for the most common term", highlight=False))
        return
    if m is not None or sensitive_file is not None:
        raise click.UsageError("--known-terms and --sensitive-terms are for basket releases")
    report = composition([load_table_release(spec) for spec in specs])
    emit(as_json, report.as_dict(), lambda: out.print(
        f"{report.overlapping:,} people in two or more releases, {report.attacked:,} shown in "
        f"two or more: {plural(report.certain_disclosures, 'certain disclosure')}; candidates "
        f"min {report.candidates_min}, median {report.candidates_median}; attacker accuracy "
        f"{report.attacker_accuracy} against {report.baseline_accuracy} for the majority "
        f"value", highlight=False))


@renamed({"--epsilon": "--alpha"})  # α, as everywhere else
@attack_group.command("rank")
@store_option
@click.option("--name", default="ranking", show_default=True, help="Which ranking.")
@click.option("--victims", type=click.IntRange(1), default=100, show_default=True,
              help="Tuples attacked (spread over the table).")
@click.option("--alpha", type=click.FloatRange(min=0, min_open=True), default=1.0,
              show_default=True, help="dp rankings: the α the attacker spends on each "
              "victim's column, over all its probes.")
@click.option("--sybils", type=click.IntRange(1), default=4, show_default=True,
              help="estt: accounts per victim created before the build, hoping to be its "
              "partner.")
@json_option
def rank_attack_cmd(store_spec: str, name: str, victims: int, alpha: float, sybils: int,
                    as_json: bool) -> None:
    """Attack a ranking through ranks alone: the differencing attacker (accounts with the
    victim's public values, a probe per private value), the sybil partner (ESTT) and the
    prior-aware attacker; success rate per attacker against chance and the prior alone."""
    report = attack_ranking(open_store(store_spec), name, victims, alpha, sybils)
    emit(as_json, report.as_dict(), lambda: out.print(
        f"{report.defense} (l={report.l}), {report.victims} victims x "
        f"{len(report.columns)} private columns: "
        + ", ".join(f"{a} {s:.1%} ({report.candidates[a]:.2f} candidates)"
                    for a, s in report.success.items())
        + f"; chance {report.chance:.1%}, prior alone {report.prior_only:.1%}"
        + (f"; sybils partnered {report.partnered:.1%} of victims" if report.partnered
           is not None else "")
        + (f"; dp bound at α={report.alpha:g}: {report.dp_bound:.1%}" if report.dp_bound
           else ""),
        highlight=False))
