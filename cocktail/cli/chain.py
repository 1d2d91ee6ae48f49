"""Chains of re-shared publications: ``republish``, ``chain plan`` and ``reshare``."""

from __future__ import annotations

import click
from rich.table import Table

from ..dp.reshare import reshare
from ..publish.chain_plan import CLUSTERINGS, STRATEGIES, PlanReport, plan_chain
from ..publish.republish import republish
from ..private_config import open_ledger
from ..releases import signing
from ..store import open_store
from .audit import TRUST_KEY_HELP, signature_line
from .contract import confirm, emit, out
from .options import OWNER, json_option, store_option


@click.command("republish")
@click.option("--from", "source", required=True, help="The store whose public view is re-shared.")
@click.option("--to", "target", required=True, help="The recipient's store (written).")
@click.option("--k", required=True, type=click.IntRange(2), help="k', at least the source's.")
@click.option("--m", required=True, type=click.IntRange(1), help="m', at least the source's.")
@click.option("--trust-key", "trust_key", metavar="KEY", help=TRUST_KEY_HELP)
@click.option("--allow-unsigned", is_flag=True,
              help="Re-share a source that carries no signature (one published before "
              "signing); the derived view records that its origin was unsigned.")
@json_option
def republish_cmd(source: str, target: str, k: int, m: int, trust_key: str | None,
                  allow_unsigned: bool, as_json: bool) -> None:
    """Re-share a public view at a stricter (k, m), from that view alone: chunks are split
    and terms withheld, never merged; fresh pseudonyms; nested in the source.

    The source must pass the independent verifier at its own (k, m) and carry a sound
    signature (from --trust-key's chain, if given), else nothing is written (exit 2). The
    derived view is signed with the recipient store's own key, after the source's signers."""
    trust = signing.trusted_fingerprint(trust_key) if trust_key else None
    report = republish(open_store(source), open_store(target), k, m, trust=trust,
                       allow_unsigned=allow_unsigned)
    confirm(as_json, report.as_dict(), (
        f"{report.store} {report.version} (k={k}, m={m}) from {report.source} "
        f"{report.source_version}: {report.public_chunks:,} chunks from "
        f"{report.source_chunks:,}, {report.public_occurrences:,} of "
        f"{report.source_occurrences:,} term occurrences shown, {report.withheld_terms:,} "
        f"withheld ({report.seconds:.2f}s)\nsource {signature_line(report.source_signature)}"
        f"\nsigned by {report.signer} (this store's key)"))


@click.group("chain", help=f"Chains of re-shared publications, planned at the owner. {OWNER}")
def chain_group() -> None:
    pass


def _levels(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of integers") from None


@chain_group.command("plan")
@store_option
@click.option("--k", "ks", required=True, help="k per hop, comma-separated, e.g. 5,10,20.")
@click.option("--m", "ms", required=True, help="m per hop, comma-separated, e.g. 2,2,3.")
@click.option("--strategy", type=click.Choice(STRATEGIES), default="lookahead",
              show_default=True, help="greedy: each hop splits the one before; backward: "
              "strictest first, laxer hops merge its chunks; lookahead: a rollout over greedy "
              "that also weighs the backward plan.")
@click.option("--clusters-for", type=click.Choice(CLUSTERINGS), default="strictest",
              show_default=True, help="Lay the clusters out for the strictest hop (its "
              "frequent terms stay public) or the first (more pairs early, terms withheld "
              "later, as re-sharing would).")
@click.option("--out", default=None, metavar="DIR",
              help="Write hop i as a public-only view in the store DIR/hopI (audit them with "
              "cocktail audit --chain).")
@json_option
def chain_plan_cmd(store_spec: str, ks: str, ms: str, strategy: str, clusters_for: str,
                   out: str | None, as_json: bool) -> None:
    """Plan every hop of a chain from the owner's data: clusters laid out for the strictest
    hop, one nested chunking per hop, reported per hop (chunks, occurrences, utility)."""
    levels_k, levels_m = _levels(ks), _levels(ms)
    hops = [open_store(f"{out.rstrip('/')}/hop{i}") for i in range(1, len(levels_k) + 1)] \
        if out else []
    report = plan_chain(open_store(store_spec), levels_k, levels_m, strategy, hops, clusters_for)
    emit(as_json, report.as_dict(), lambda: _print_plan(report))


def _print_plan(report: PlanReport) -> None:
    table = Table(title=f"{report.strategy} chain from {report.store} {report.version}: "
                  f"{report.records:,} records in {report.clusters:,} clusters laid out for "
                  f"the {report.clusters_for} hop")
    for column in ("hop", "k", "m", "public chunks", "occurrences shown", "U_i (pairs kept)",
                   "UL_i", "written to"):
        table.add_column(column, justify="right")
    for n, hop in enumerate(report.hops, start=1):
        table.add_row(str(n), str(hop["k"]), str(hop["m"]), f"{hop['public_chunks']:,}",
                      f"{hop['public_occurrences']:,} ({hop['occurrence_share']:.1%})",
                      f"{hop['utility']:,}", f"{hop['utility_loss']:.4f}",
                      f"{hop['store']} {hop['version']}" if "store" in hop else "-")
    out.print(table)
    out.print(f"ΣU = {report.total_utility:,} of {report.associations:,} pairs per hop "
              f"({report.seconds:.2f}s)", highlight=False)


@click.command("reshare")
@click.argument("answer_id")
@click.option("--alpha", required=True, type=click.FloatRange(min=0, min_open=True),
              help="The next hop's α: at most the hop before's (a re-share only adds noise).")
@store_option
@json_option
def reshare_cmd(answer_id: str, alpha: float, store_spec: str, as_json: bool) -> None:
    """Re-share a stored noisy answer (ANSWER_ID, as `answer_id` in a query's JSON) with the
    next hop of a chain: the answer plus fresh Laplace noise at --alpha, stored, so that hop
    always gets the same one.  Charges nothing: the chain cost its first α.  Owner command."""
    answer = reshare(open_ledger(open_store(store_spec)), answer_id, alpha)
    emit(as_json, answer, lambda: out.print(
        f"hop {answer['hop']} (α = {answer['alpha']:g}{', reused' if answer['reused'] else ''})"
        f": {', '.join(f'{a:.2f}' for a in answer['answers'])}; answer id "
        f"{answer['answer_id']}", highlight=False, markup=False))
