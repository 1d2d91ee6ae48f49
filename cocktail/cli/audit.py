"""``cocktail audit``: the independent verifier's report, and how signatures read."""

from __future__ import annotations

import click

from ..audit import (DEFAULT_MAX_ITEMSETS, AuditReport, ChainAuditReport, ReleaseAuditReport,
                    StoreAudit, audit_as_asked, audit_chain)
from ..releases import signing
from ..store import open_store
from .contract import emit, out, plural, verdict
from .options import json_option, renamed, store_option


def _print_audit(report: AuditReport) -> None:
    status = "[green]PASS[/]" if report.ok else "[bold red]FAIL[/]"
    out.print(f"audit {status} {report.store} {report.version} (k={report.k}, m={report.m}): "
              f"{plural(report.chunks, 'public chunk')}, "
              f"{plural(report.subrecords, 'subrecord')}, "
              f"{plural(report.itemsets_checked, 'itemset')} counted, "
              f"{plural(len(report.violations), 'violation')}", highlight=False)
    if report.placement is not None:
        p = report.placement
        out.print(f"placement: {p['replicas']:,} replicas of {p['blocks']:,} blocks in "
                  f"{p['private_files']:,} private files, {p['replicas_outside_private_racks']} "
                  f"outside {p['private_racks']}* racks", highlight=False)
    if report.provenance is not None and report.provenance.status != "invalid":
        out.print(signature_line(report.provenance.as_dict()), highlight=False, markup=False)
    for v in report.violations[:50]:
        out.print(f"  [red]{v.kind}[/] {v.where}: {v.detail}", highlight=False)


TRUST_KEY_HELP = ("Pin the owner's key: a fingerprint (ed25519:…) or a file holding it or its "
                  "PEM public key (from `cocktail signing-key`). The view's chain of signers "
                  "must start there; without it the chain is only checked to be "
                  "self-consistent, so compare the reported origin out of band.")


def signature_line(signature: dict | None) -> str:
    if not signature:
        return "signature: not checked"
    if signature["status"] == "unsigned":
        return "UNSIGNED: nothing shows who made this view"
    if signature["status"] == "invalid":
        return f"signature INVALID: {signature['detail']}"
    origin = signature["origin"]
    hops = len(signature["signers"])
    text = f"signed by {signature['signer']}" + (
        f", a chain of {hops} signers from {origin}" if hops > 1 else "")
    if not signature["origin_signed"]:
        text += " (its origin was unsigned)"
    if signature["trusted"]:
        return text + " = the pinned key"
    return (text + f"; not pinned: ask the owner for their key (`cocktail signing-key` prints "
            f"its fingerprint) by a channel you trust, and audit again with --trust-key "
            f"{origin} (or the key's file)")


@renamed({"--version": "--at-version"})  # `cocktail --version` is the program's
@click.command("audit")
@click.argument("chain_stores", nargs=-1, metavar="[S1 S2 ...]")
@store_option
@click.option("--at-version", "version", metavar="VERSION",
              help="Audit this version (e.g. v000002) instead of the current one.")
@click.option("--k", type=click.IntRange(1), help="Check a stricter k than the publication's.")
@click.option("--m", type=click.IntRange(1), help="Check a stricter m than the publication's.")
@click.option("--max-itemsets", default=DEFAULT_MAX_ITEMSETS, show_default=True,
              type=click.IntRange(1), help="Per-chunk counting budget; beyond it a chunk fails "
              "as unverifiable.")
@click.option("--releases", "whole_history", is_flag=True,
              help="Owner command: check every release against the release invariant, from "
              "the private release log and the public files that remain, each version's term "
              "index against its chunks, and run the joint-view attacker on small clusters of "
              "all releases together.")
@click.option("--chain", "is_chain", is_flag=True,
              help="Audit a chain of re-shared publications S1 S2 … (in hop order): each "
              "k^m at its own level and its signature sound, no laxer than the hop before, "
              "nested in it and signed as derived from it, no pseudonym shared.")
@click.option("--trust-key", "trust_key", metavar="KEY", help=TRUST_KEY_HELP)
@json_option
def audit_cmd(chain_stores: tuple[str, ...], store_spec: str, version: str | None,
              k: int | None, m: int | None, max_itemsets: int, whole_history: bool,
              is_chain: bool, trust_key: str | None, as_json: bool) -> None:
    """Independently verify what the public zone holds; exit status 1 on any violation.

    Reads only the public zone: every public chunk must be k^m-anonymous, no pseudonym may occur
    in two chunks, and nothing but listed public chunks, their indexes, the manifest and its
    signature may be there. The signature must cover the manifest (an unsigned version is
    reported as such; with --trust-key it fails). On HDFS it also checks that every replica of
    every private file is on a private datanode. Without --at-version, --k or --m it also audits
    every table and ranking of the store.
    """
    if is_chain != bool(chain_stores):
        raise click.UsageError("give the chain's stores with --chain (and only then)")
    if whole_history and trust_key:
        raise click.UsageError("--trust-key checks a public view's signature; --releases is "
                               "the owner's check of its own history")
    trust = signing.trusted_fingerprint(trust_key) if trust_key else None
    if is_chain:
        chain = audit_chain([open_store(spec) for spec in chain_stores], trust)
        emit(as_json, chain.as_dict(), lambda: _print_chain(chain))
        verdict(chain.ok)
    report = audit_as_asked(open_store(store_spec), releases=whole_history, version=version,
                            k=k, m=m, max_itemsets=max_itemsets, trust=trust)
    emit(as_json, report.as_dict(), lambda: PRINTERS[type(report)](report))
    verdict(report.ok)


def _print_store_audit(whole: StoreAudit) -> None:
    if whole.baskets:
        _print_audit(whole.baskets)
    for v in whole.layout:
        out.print(f"  [red]{v.kind}[/] {v.where}: {v.detail}", highlight=False)
    for name, table in whole.tables.items():
        _print_part("table", name, table.version, table.ok, table.violations)
    for name, ranking in whole.rankings.items():
        _print_part("ranking", name, ranking.version, ranking.ok, ranking.violations)


def _print_part(kind: str, name: str, version: str, ok: bool, violations: list[str]) -> None:
    status = "[green]PASS[/]" if ok else "[bold red]FAIL[/]"
    out.print(f"{kind} {name} {version}: {status}, {plural(len(violations), 'violation')}",
              highlight=False)
    for violation in violations[:50]:
        out.print(f"  {violation}", highlight=False, markup=False)


def _joint_view(report: ReleaseAuditReport) -> str:
    """What the joint-view attacker did: it joins the public views one cluster showed in
    several releases; a cluster whose view never changed gives it nothing to join."""
    if not report.clusters_attacked and not report.clusters_too_large:
        return ("joint-view attacker: no cluster's public view changed between releases, so "
                "there was nothing to join")
    return (f"joint-view attacker joined the views of "
            f"{plural(report.clusters_attacked, 'cluster')} shown differently by several "
            f"releases" + (f" ({report.clusters_too_large} too large to join: unverifiable)"
                           if report.clusters_too_large else ""))


def _print_chain(chain: ChainAuditReport) -> None:
    for n, hop in enumerate(chain.hops, start=1):
        out.print(f"hop {n}: {hop['store']} {hop['version']} k={hop['k']} m={hop['m']}: "
                  f"{'ok' if hop['ok'] else 'FAIL'}; {signature_line(hop['signature'])}",
                  highlight=False, markup=False)
    for violation in chain.violations:
        out.print(f"  VIOLATION {violation}", highlight=False, markup=False)
    out.print("PASS" if chain.ok else "FAIL")


def _print_release_audit(report: ReleaseAuditReport) -> None:
    status = "[green]PASS[/]" if report.ok else "[bold red]FAIL[/]"
    kinds = ", ".join(f"{r['version']} {r['kind']}" + (
        " (unsigned)" if r["signature"] == "unsigned" else "") for r in report.releases) \
        or "none logged"
    out.print(f"release audit {status} {report.store}: releases {kinds}; "
              f"{plural(report.pairs_checked, 'pair')} of releases, "
              f"{plural(report.residuals_checked, 'residual')} and "
              f"{plural(report.files_checked, 'public file')} checked; {_joint_view(report)}; "
              f"{plural(len(report.violations), 'violation')}", highlight=False)
    for v in report.violations[:50]:
        out.print(f"  [red]{v.kind}[/] {v.where}: {v.detail}", highlight=False)


PRINTERS = {StoreAudit: _print_store_audit, AuditReport: _print_audit,
            ReleaseAuditReport: _print_release_audit}
