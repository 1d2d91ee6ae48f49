"""The ``cocktail`` command line: a thin layer over the library.

Every command that reports results takes ``--json`` and then prints exactly one JSON object on
stdout; progress and errors go to stderr.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import time
from functools import partial
from pathlib import Path

import click
from rich.table import Table

from .anonymity import METHODS
from .attacks.chunk_composition import basket_composition, load_basket_release
from .attacks.composition import composition, load_table_release
from .attacks.rank import attack_ranking
from .cli_support import (EXIT_STATUS, OWNER, emit, err, fail_cleanly, failure, json_option,
                          out, progress_bars, store_option)
from .publish.append import append
from .publish.chain_plan import CLUSTERINGS, STRATEGIES, PlanReport, plan_chain
from .publish.republish import republish
from .cluster.render import CLUSTER_SETTINGS, render_host, write_host
from .cluster.spec import ROLES, SIDES, load_spec
from .audit import (DEFAULT_MAX_ITEMSETS, AuditReport, ChainAuditReport, ReleaseAuditReport,
                    StoreAudit, audit, audit_chain, audit_releases, audit_store)
from .dataset import FORMATS, load, write_fimi
from .demo import DemoSettings, print_step, run_demo
from .publish import DEFAULT_KEEP, PublishParams, publish
from .dp.deadline import DEFAULT_DEADLINES, Deadlines
from .dp.ledger import Ledger
from .dp.reshare import reshare
from .dp.strategies import OBJECTIVES, PER_QUERY
from .extras import require
from .private_config import ledger_location, set_ledger_location
from .querylang import Workload, parse_batch, parse_count
from .query import BACKENDS, Engine, Publication, describe
from .query.backends.streaming import tasks_json
from .rank.commands import rank_group
from .releases import current_version, signing
from .store import open_store
from .synthetic import SyntheticSpec, generate
from .tables.commands import table_group

@click.group(context_settings={"help_option_names": ["-h", "--help"]},
             epilog=EXIT_STATUS)
@click.version_option(package_name="cocktail")
def main() -> None:
    """Cocktail: publish set-valued data k^m-anonymously on a hybrid cloud and query it."""


@main.command("generate")
@click.argument("output", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--records", default=SyntheticSpec.records, show_default=True, type=click.IntRange(1))
@click.option("--items", default=SyntheticSpec.items, show_default=True, type=click.IntRange(1))
@click.option("--avg-len", default=SyntheticSpec.avg_record_len, show_default=True,
              type=click.FloatRange(min=1.0), help="Average record length.")
@click.option("--patterns", default=SyntheticSpec.patterns, show_default=True,
              type=click.IntRange(1), help="Number of correlated patterns.")
@click.option("--seed", default=SyntheticSpec.seed, show_default=True, type=int)
@json_option
@fail_cleanly
def generate_cmd(output: Path, records: int, items: int, avg_len: float, patterns: int,
                 seed: int, as_json: bool) -> None:
    """Write a synthetic IBM Quest-style basket dataset (FIMI format) to OUTPUT."""
    spec = SyntheticSpec(records=records, items=items, avg_record_len=avg_len,
                         patterns=patterns, seed=seed)
    data = generate(spec)
    write_fimi(data, output)
    emit(as_json, {"output": str(output), "records": len(data), "seed": seed},
          lambda: err.print(f"wrote {len(data):,} records to {output}"))


@main.command("publish")
@click.argument("input_path", metavar="INPUT")
@store_option
@click.option("--k", default=PublishParams.k, show_default=True, type=click.IntRange(2),
              help="Every published itemset of up to m terms occurs in at least k records.")
@click.option("--m", default=PublishParams.m, show_default=True, type=click.IntRange(1),
              help="Adversary knowledge: number of terms of a record they may know.")
@click.option("--method", default=PublishParams.method, show_default=True,
              type=click.Choice(list(METHODS)), help="Vertical partitioning scheme.")
@click.option("--cluster-size", default=PublishParams.cluster_size, show_default=True,
              type=click.IntRange(1), help="Records per cluster of the horizontal split.")
@click.option("--format", "input_format", type=click.Choice(FORMATS),
              help="Input format (default: from the file name and content).")
@click.option("--skip-bad-lines", is_flag=True,
              help="Skip malformed input lines (reported) instead of stopping at the first.")
@click.option("--keep", default=DEFAULT_KEEP, show_default=True, type=click.IntRange(1),
              help="Committed versions to keep, the new one included. Pruning frees space; it "
              "does not make a version unseen (the release log keeps every release).")
@click.option("--append", "appending", is_flag=True,
              help="Add INPUT's records to the store's current release as a new release that "
              "cannot compose with the earlier ones (docs/releases.md); keeps the store's k, "
              "m, method and cluster size.")
@click.option("--min-new", type=click.IntRange(1),
              help="With --append: records needed to form new clusters; fewer wait in the "
              "private buffer (default: the larger of k and a quarter of the cluster size).")
@click.option("--rebase", is_flag=True,
              help="Re-partition a store that has released before, accepting that the new "
              "chunking composes with what the public cloud saw (docs/releases.md); recorded "
              "in the release log.")
@click.option("--workers", default=PublishParams.workers, show_default=True,
              type=click.IntRange(1), help="Processes partitioning clusters in parallel "
              "(single-machine engine).")
@click.option("--engine", type=click.Choice(["single", "spark"]), default="single",
              show_default=True, help="Where the publish runs: this process (and a process "
              "pool), or Spark (docs/engines.md says when to pick which). Both make the same "
              "publication from the same input.")
@click.option("--master", default="local[2]", show_default=True,
              help="With --engine spark: the Spark master (local[N], yarn, spark://...).")
@click.option("--spark-conf", "spark_conf", multiple=True, metavar="KEY=VALUE",
              help="With --engine spark: a Spark setting (repeatable), e.g. "
              "spark.yarn.executor.nodeLabelExpression=private.")
@click.option("--overlay/--no-overlay", default=True, show_default=True,
              help="Cluster with the term-based overlay tree (else a fixed-size split).")
@click.option("--aggregate/--no-aggregate", default=True, show_default=True,
              help="Pool leftover private subrecords up the tree and re-partition them.")
@click.option("--aggregate-volume", default=PublishParams.aggregate_volume, show_default=True,
              type=click.IntRange(1), help="Pooled private subrecords at which a tree node "
              "re-partitions them itself instead of passing them up to the root.")
@click.option("--sensitive-terms", "sensitive_file", type=click.File("r"),
              help="Sensitive terms (one per line): ρ-clone the clusters over them instead of "
              "growing the overlay tree, and partition them apart, so that no public chunk "
              "holds one beside another term; stops the composition attack across "
              "publishers (docs/composition.md).")
@click.option("--index-shard", default=PublishParams.index_shard, show_default=True,
              type=click.IntRange(1), help="Record positions per part of the private term "
              "index, at most (appends keep the store's); a cluster runner counts each part in "
              "its own task (docs/engines.md).")
@click.option("--max-rho", default=PublishParams.max_rho, show_default=True,
              type=click.FloatRange(0, 1), help="With --sensitive-terms: refuse (writing "
              "nothing) when the measured ρ is larger.")
@json_option
@fail_cleanly
def publish_cmd(input_path: str, store_spec: str, k: int, m: int, method: str,
                cluster_size: int, input_format: str | None, skip_bad_lines: bool, keep: int,
                appending: bool, min_new: int | None, rebase: bool, workers: int,
                engine: str, master: str, spark_conf: tuple[str, ...],
                overlay: bool, aggregate: bool, aggregate_volume: int, sensitive_file,
                index_shard: int, max_rho: float, as_json: bool) -> None:
    """Partition INPUT and publish it as a new version of the store (owner command).

    INPUT is FIMI/SPMF (.dat, .txt), CSV of record_id,term pairs (.csv) or JSON Lines
    ({"id":..., "terms":[...]}, .jsonl); with --engine spark also an hdfs:// URL. The first
    publish of a store is its first release; later ones --append (a second fresh partition
    is refused unless --rebase).
    """
    context = click.get_current_context()
    explicit = {name for name in ("master", "spark_conf", "workers")
                if context.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE}
    if min_new is not None and not appending:
        raise click.UsageError("--min-new goes with --append")
    if engine == "single" and explicit & {"master", "spark_conf"}:
        raise click.UsageError("--master and --spark-conf go with --engine spark")
    if engine == "spark" and "workers" in explicit:
        raise click.UsageError("--workers is the single-machine engine's; on Spark, the "
                               "master says how many executors (e.g. --master local[4])")
    sensitive = _sensitive_terms(sensitive_file)
    if sensitive and (engine == "spark" or appending):
        raise click.UsageError("--sensitive-terms goes with a fresh publish on the "
                               "single-machine engine (an append keeps the store's own)")
    params = PublishParams(k=k, m=m, method=method, cluster_size=cluster_size, keep=keep,
                           workers=workers, overlay=overlay, aggregate=aggregate,
                           aggregate_volume=aggregate_volume, sensitive=sensitive,
                           index_shard=index_shard, max_rho=max_rho)
    if appending:
        fixed = [f"--{name.replace('_', '-')}" for name in ("k", "m", "method", "cluster_size",
                                                          "overlay", "aggregate", "rebase",
                                                          "index_shard")
                 if context.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
        if fixed:
            raise click.UsageError(f"--append keeps the store's own parameters; drop "
                                   f"{', '.join(fixed)}")
    if engine == "spark" and appending:
        _print_appended(_append_on_spark(input_path, store_spec, master, spark_conf,
                                         input_format, skip_bad_lines, min_new, as_json),
                        as_json)
        return
    if engine == "spark":
        report = _publish_on_spark(input_path, store_spec, params, master, spark_conf,
                                   input_format, skip_bad_lines, rebase, as_json)
        _print_published(report, report.as_dict(), as_json)
        return
    started = time.perf_counter()
    dataset = load(Path(input_path), input_format, skip_bad_lines=skip_bad_lines)
    loading = round(time.perf_counter() - started, 3)
    if dataset.skipped_lines:
        err.print(f"[yellow]skipped {dataset.skipped_lines} malformed line(s) of {input_path}[/]")
    if appending:
        with progress_bars("append", True, not as_json) as update:
            added = append(dataset, open_store(store_spec), min_new, progress=update)
        _print_appended(added, as_json)
        return
    with progress_bars("publish", True, not as_json) as update:
        report = publish(dataset, open_store(store_spec), params, progress=update,
                         rebase=rebase)
    payload = report.as_dict()
    payload["phase_seconds"] = {"load": loading, **report.phase_seconds}
    _print_published(report, payload, as_json)


def _sensitive_terms(stream) -> tuple[str, ...]:
    if stream is None:
        return ()
    terms = tuple(sorted({line.strip() for line in stream
                          if line.strip() and not line.lstrip().startswith("#")}))
    if not terms:
        raise click.BadParameter(f"{stream.name} names no term", param_hint="--sensitive-terms")
    return terms


SPARK_MISSING = ("the Spark engine needs pyspark, which is not installed here: "
                 "pip install 'cocktail[spark]' (and a Java runtime), or use --engine single")


def _spark_engine(master: str, spark_conf: tuple[str, ...], as_json: bool):
    """The Spark engine's module and settings; pyspark loads only when asked, and its absence
    is one line naming the extra to install."""
    settings = []
    for item in spark_conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}",
                                     param_hint="--spark-conf")
        settings.append((key.strip(), value))
    try:
        from .publish import spark
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in ("pyspark", "py4j"):
            raise
        failure(2, SPARK_MISSING, as_json)
    return spark, spark.SparkSettings(master, tuple(settings))


def _publish_on_spark(source: str, store_spec: str, params: PublishParams, master: str,
                      spark_conf: tuple[str, ...], input_format: str | None,
                      skip_bad_lines: bool, rebase: bool, as_json: bool):
    spark, settings = _spark_engine(master, spark_conf, as_json)
    store = open_store(store_spec)
    with progress_bars("publish", True, not as_json) as update:
        return spark.publish_spark(source, store, params, settings,
                                   data_format=input_format, skip_bad_lines=skip_bad_lines,
                                   rebase=rebase, progress=update)


def _append_on_spark(source: str, store_spec: str, master: str, spark_conf: tuple[str, ...],
                     input_format: str | None, skip_bad_lines: bool, min_new: int | None,
                     as_json: bool):
    spark, settings = _spark_engine(master, spark_conf, as_json)
    store = open_store(store_spec)

    def loaded(dataset) -> None:
        if dataset.skipped_lines:
            err.print(f"[yellow]skipped {dataset.skipped_lines} malformed line(s) of "
                      f"{source}[/]")

    with progress_bars("append", True, not as_json) as update:
        return spark.append_spark(source, store, settings, data_format=input_format,
                                  skip_bad_lines=skip_bad_lines, min_new=min_new,
                                  progress=update, loaded=loaded)


def _print_appended(added, as_json: bool) -> None:
    emit(as_json, added.as_dict(), lambda: out.print(
        f"appended {added.appended_records:,} records as {added.version} to {added.store}: "
        f"{added.extended_records:,} extend {added.extended_clusters} clusters, "
        f"{added.new_cluster_records:,} form {added.new_clusters} new clusters, "
        f"{added.buffered_records:,} wait in the private buffer; "
        f"{added.promoted_pairs:,} private (record, term) pairs promoted into "
        f"{added.promoted_chunks} new public chunks; {added.public_chunks:,} public "
        f"chunks, public coverage {(added.public_coverage or 0):.2%}; "
        f"{added.seconds:.1f}s", highlight=False))


def _print_published(report, payload: dict, as_json: bool) -> None:
    before = report.private_before_aggregation
    if report.skipped_lines and report.engine == "spark":
        err.print(f"[yellow]skipped {report.skipped_lines} malformed line(s)[/]")
    emit(as_json, payload, lambda: out.print(
        f"published {report.version} to {report.store}: {report.records:,} records in "
        f"{report.clusters} clusters (+{report.aggregated_clusters} aggregated) -> "
        f"{report.public_chunks:,} public chunks, {report.private_chunks:,} private chunks; "
        f"private subrecords {before['private_subrecords']:,} -> {report.private_subrecords:,}, "
        f"private terms {before['private_terms']:,} -> {report.private_terms:,} after "
        f"aggregation; {report.seconds:.1f}s"
        + (f"; clusters ρ-cloned, ρ = {report.rho:.4f}" if report.rho is not None else ""),
        highlight=False))


def _print_audit(report: AuditReport) -> None:
    status = "[green]PASS[/]" if report.ok else "[bold red]FAIL[/]"
    out.print(f"audit {status} {report.store} {report.version} (k={report.k}, m={report.m}): "
              f"{report.chunks:,} public chunks, {report.subrecords:,} subrecords, "
              f"{report.itemsets_checked:,} itemsets counted, "
              f"{len(report.violations)} violation(s)", highlight=False)
    if report.placement is not None:
        p = report.placement
        out.print(f"placement: {p['replicas']:,} replicas of {p['blocks']:,} blocks in "
                  f"{p['private_files']:,} private files, {p['replicas_outside_private_racks']} "
                  f"outside {p['private_racks']}* racks", highlight=False)
    if report.provenance is not None and report.provenance.status != "invalid":
        out.print(_signature_line(report.provenance.as_dict()), highlight=False, markup=False)
    for v in report.violations[:50]:
        out.print(f"  [red]{v.kind}[/] {v.where}: {v.detail}", highlight=False)


@main.command("owner-token")
@store_option
@json_option
@fail_cleanly
def owner_token_cmd(store_spec: str, as_json: bool) -> None:
    """A new credential for the owner's dashboard (`cocktail serve`, /owner); the previous one
    stops working.  Shown once: only its hash is kept, in the ledger.  Owner command."""
    token = _ledger(store_spec).new_owner_token()
    emit(as_json, {"token": token}, lambda: click.echo(token))


@main.command("report")
@store_option
@click.option("--out", "out_path", type=click.Path(dir_okay=False, writable=True,
                                                  path_type=Path),
              default=Path("report.html"), show_default=True,
              help="The HTML file to write (self-contained: it opens with no network).")
@json_option
@fail_cleanly
def report_cmd(store_spec: str, out_path: Path, as_json: bool) -> None:
    """The owner's report of a store: coverage against the floor, the publication's shape,
    the audit, the releases, the privacy budget and the tables, as charts with their numbers
    (owner command: it reads the private zone and the ledger)."""
    from .dp.ledger import private_file
    from .report.numbers import gather, owner_ledger
    from .report.page import render

    store = open_store(store_spec)
    numbers = gather(store, owner_ledger(store))
    private_file(out_path)  # it holds every analyst's spending: the owner's eyes only
    out_path.write_text(render(numbers), encoding="utf-8")
    emit(as_json, numbers | {"out": str(out_path)}, lambda: out.print(
        f"wrote {out_path} ({out_path.stat().st_size / 1e6:.1f} MB); open it with: "
        f"xdg-open {out_path}", highlight=False, markup=False))


TRUST_KEY_HELP = ("Pin the owner's key: a fingerprint (ed25519:…) or a file holding it or its "
                  "PEM public key (from `cocktail signing-key`). The view's chain of signers "
                  "must start there; without it the chain is only checked to be "
                  "self-consistent, so compare the reported origin out of band.")


def _signature_line(signature: dict | None) -> str:
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
    return text + "; not pinned: compare " + origin + " with the owner's out of band"


@main.command("audit")
@click.argument("chain_stores", nargs=-1, metavar="[S1 S2 ...]")
@store_option
@click.option("--version", "version", help="Audit this version instead of the current one.")
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
@fail_cleanly
def audit_cmd(chain_stores: tuple[str, ...], store_spec: str, version: str | None,
              k: int | None, m: int | None, max_itemsets: int, whole_history: bool,
              is_chain: bool, trust_key: str | None, as_json: bool) -> None:
    """Independently verify what the public zone holds; exit status 1 on any violation.

    Reads only the public zone: every public chunk must be k^m-anonymous, no pseudonym may occur
    in two chunks, and nothing but listed public chunks, their indexes, the manifest and its
    signature may be there. The signature must cover the manifest (an unsigned version is
    reported as such; with --trust-key it fails). On HDFS it also checks that every replica of
    every private file is on a private datanode. Without --version, --k or --m it also audits
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
        sys.exit(0 if chain.ok else 1)
    if whole_history:
        history = audit_releases(open_store(store_spec), max_itemsets=max_itemsets)
        emit(as_json, history.as_dict(), lambda: _print_release_audit(history))
        sys.exit(0 if history.ok else 1)
    if version or k or m:
        report = audit(open_store(store_spec), version=version, k=k, m=m,
                       max_itemsets=max_itemsets, trust=trust)
        emit(as_json, report.as_dict(), lambda: _print_audit(report))
        sys.exit(0 if report.ok else 1)
    whole = audit_store(open_store(store_spec), max_itemsets=max_itemsets, trust=trust)
    emit(as_json, whole.as_dict(), lambda: _print_store_audit(whole))
    sys.exit(0 if whole.ok else 1)


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
    out.print(f"{kind} {name} {version}: {status}, {len(violations)} violation(s)",
              highlight=False)
    for violation in violations[:50]:
        out.print(f"  {violation}", highlight=False, markup=False)


def _print_chain(chain: ChainAuditReport) -> None:
    for n, hop in enumerate(chain.hops, start=1):
        out.print(f"hop {n}: {hop['store']} {hop['version']} k={hop['k']} m={hop['m']}: "
                  f"{'ok' if hop['ok'] else 'FAIL'}; {_signature_line(hop['signature'])}",
                  highlight=False, markup=False)
    for violation in chain.violations:
        out.print(f"  VIOLATION {violation}", highlight=False, markup=False)
    out.print("PASS" if chain.ok else "FAIL")


@main.command("republish")
@click.option("--from", "source", required=True, help="The store whose public view is re-shared.")
@click.option("--to", "target", required=True, help="The recipient's store (written).")
@click.option("--k", required=True, type=click.IntRange(2), help="k', at least the source's.")
@click.option("--m", required=True, type=click.IntRange(1), help="m', at least the source's.")
@click.option("--trust-key", "trust_key", metavar="KEY", help=TRUST_KEY_HELP)
@click.option("--allow-unsigned", is_flag=True,
              help="Re-share a source that carries no signature (one published before "
              "signing); the derived view records that its origin was unsigned.")
@json_option
@fail_cleanly
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
    emit(as_json, report.as_dict(), lambda: out.print(
        f"{report.store} {report.version} (k={k}, m={m}) from {report.source} "
        f"{report.source_version}: {report.public_chunks:,} chunks from "
        f"{report.source_chunks:,}, {report.public_occurrences:,} of "
        f"{report.source_occurrences:,} term occurrences shown, {report.withheld_terms:,} "
        f"withheld ({report.seconds:.2f}s)\nsource {_signature_line(report.source_signature)}"
        f"\nsigned by {report.signer} (this store's key)", highlight=False, markup=False))


@main.command("signing-key", help="Show the key that signs the store's versions: its "
              "fingerprint and public key, for recipients to pin with --trust-key (made on "
              f"first use; the private key stays in private/{signing.KEY_FILE}). {OWNER}")
@store_option
@click.option("--out", "out_path", type=click.Path(dir_okay=False),
              help="Also write the public key (PEM) there, to hand to recipients.")
@json_option
@fail_cleanly
def signing_key_cmd(store_spec: str, out_path: str | None, as_json: bool) -> None:
    key = signing.signing_key(open_store(store_spec))
    pem = signing.public_pem(key)
    if out_path:
        Path(out_path).write_bytes(pem)
    fingerprint = signing.fingerprint(key.public_key())
    emit(as_json, {"store": store_spec, "fingerprint": fingerprint,
                   "public_key_pem": pem.decode(), "out": out_path},
         lambda: out.print(f"{fingerprint}\n{pem.decode().rstrip()}", highlight=False,
                           markup=False))


@main.group("chain", help=f"Chains of re-shared publications, planned at the owner. {OWNER}")
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
@fail_cleanly
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


def _print_release_audit(report: ReleaseAuditReport) -> None:
    status = "[green]PASS[/]" if report.ok else "[bold red]FAIL[/]"
    kinds = ", ".join(f"{r['version']} {r['kind']}" for r in report.releases) or "none logged"
    out.print(f"release audit {status} {report.store}: releases {kinds}; "
              f"{report.pairs_checked} pair(s), {report.residuals_checked:,} residuals and "
              f"{report.files_checked:,} public files checked; joint-view attacker on "
              f"{report.clusters_attacked} cluster(s) ({report.clusters_too_large} too large); "
              f"{len(report.violations)} violation(s)", highlight=False)
    for v in report.violations[:50]:
        out.print(f"  [red]{v.kind}[/] {v.where}: {v.detail}", highlight=False)


def _ledger(store_spec: str) -> Ledger:
    """The owner's ledger, where the store's private zone says it is (never the caller)."""
    return Ledger(ledger_location(open_store(store_spec)))


@main.command("query")
@click.argument("expression", required=False)
@click.option("--batch", "batch_file", type=click.File("r"),
              help="A file of linear queries, one per line (or ';'-separated): one release.")
@click.option("--url", envvar="COCKTAIL_URL",
              help="Analysts: the overlay service (`cocktail serve`) that answers ($COCKTAIL_URL).")
@click.option("--token", envvar="COCKTAIL_TOKEN", help="Analysts: your token ($COCKTAIL_TOKEN).")
@click.option("--objective", type=click.Choice(OBJECTIVES), default=PER_QUERY,
              show_default=True,
              help="Analysts: 'per-query' answers no query less accurately than the best fixed "
              "strategy; 'total' takes the lowest total error, which may answer some queries "
              "less accurately (the reply says which). Each objective is its own charge.")
@click.option("--exact", is_flag=True,
              help="Owner command: exact answers read from the store's private zone, without "
              "noise (one query, or a --batch in one job). They must not be given to analysts.")
@store_option
@click.option("--runner", type=click.Choice(list(BACKENDS)), default="fast", show_default=True,
              help="With --exact: where counts run: in-process over the term index (fast), "
              "an mrjob job of map tasks over the chunks (inline, local, spark, hadoop), or "
              "one over the term index's parts, a map task each (index-*: docs/engines.md).")
@click.option("-v", "--verbose", is_flag=True, help="With --exact: show the plan and the tasks.")
@json_option
@fail_cleanly
def query_cmd(expression: str | None, batch_file, url: str | None, token: str | None,
              objective: str, exact: bool, store_spec: str, runner: str, verbose: bool,
              as_json: bool) -> None:
    """Answer a query: 'count(a & b)', '2*count(a) - count(b)', or a --batch file.

    \b
    Analysts: noisy answers from the overlay service, charged to their budget:
      cocktail query 'count(a & b)' --url http://overlay:8080 --token TOKEN
    Owner: exact answers straight from the store (no token):
      cocktail query --exact 'count(a & b)' --store STORE

    \b
    Exit status: 0 answered; 1 service unreachable; 2 malformed query, a limit exceeded or
    bad usage; 3 token refused (unknown, missing, disabled); 4 budget exhausted; 5 the
    service or the store failed.
    """
    if (expression is None) == (batch_file is None):
        raise click.UsageError("give one EXPRESSION or --batch FILE")
    text = batch_file.read() if batch_file is not None else expression
    source = getattr(batch_file, "name", "query")
    if not exact:
        if not url or not token:
            raise click.UsageError(
                "noisy answers come from the overlay service: give --url URL (or $COCKTAIL_URL) "
                "and --token TOKEN (or $COCKTAIL_TOKEN); exact answers are the owner's (--exact)")
        _ask_service(url, token, text, source, objective, as_json)
        return
    if token:
        raise click.UsageError("--exact is an owner command that reads the store's private "
                               "zone; it takes no token (unset COCKTAIL_TOKEN)")
    started = time.perf_counter()
    query = parse_count(expression) if batch_file is None else None
    workload = None if query else parse_batch(text, source)
    log = (lambda line: err.print(f"[dim]{line}[/]", highlight=False)) if verbose else None
    engine = Engine(Publication.open(open_store(store_spec)), runner, log)
    if workload is not None:
        _exact_batch(engine, workload, started, as_json)
        return
    answer = engine.count(query)
    emit(as_json, {"query": str(query), "answer": answer, "exact": True, "runner": runner,
                    "version": engine.version,
                    "seconds": round(time.perf_counter() - started, 4)},
          lambda: out.print(f"{query} = {answer}  (exact, {engine.version})",
                            highlight=False, markup=False))


ANALYST_EXIT = {400: 2, 413: 2, 422: 2, 401: 3, 403: 3, 429: 4}  # else 5


def _ask_service(url: str, token: str, text: str, source: str, objective: str,
                 as_json: bool) -> None:
    """POST the queries to `cocktail serve` and print its answer; the exit status says why
    it was refused."""
    import httpx

    try:
        response = httpx.post(url.rstrip("/") + "/v1/query",
                              json={"query": text, "objective": objective},
                              headers={"Authorization": f"Bearer {token}"}, timeout=900)
    except httpx.HTTPError as exc:
        failure(1, f"cannot reach the overlay service at {url}: {exc}", as_json)
    try:
        body = response.json()
    except ValueError:
        body = {"detail": response.text[:200]}
    if response.status_code != 200:
        detail = body.get("detail", body)
        failure(ANALYST_EXIT.get(response.status_code, 5),
                 detail if isinstance(detail, str) else json.dumps(detail), as_json,
                 http_status=response.status_code)
    emit(as_json, body, lambda: _print_noisy(parse_batch(text, source), body))


def _exact_batch(engine: Engine, workload: Workload, started: float, as_json: bool) -> None:
    """Owner-only exact answers to a batch: one job (per side) for all its counting queries."""
    answers = [int(a) if float(a).is_integer() else a for a in engine.answers(workload)]
    payload = {"queries": [str(q) for q in workload.queries], "answers": answers, "exact": True,
               "runner": engine.backend_name, "version": engine.version,
               "seconds": round(time.perf_counter() - started, 4)}
    emit(as_json, payload, lambda: [out.print(f"{q} = {a:g}", highlight=False, markup=False)
                                     for q, a in zip(payload["queries"], answers)])


def _print_noisy(workload: Workload, result: dict) -> None:
    above = result.get("above_fixed") or [False] * len(result["answers"])  # older answers
    for query, answer, error, worse in zip(workload.queries, result["answers"],
                                           result["expected_rms_error"], above):
        note = ", above the best fixed strategy's" if worse else ""
        out.print(f"{query} ≈ {answer:.1f}  (± {error:.1f} RMS expected{note})",
                  highlight=False, markup=False)
    budget = result["budget"]
    note = "reused, no charge" if result["reused"] else f"charged α={result['charged']:g}"
    out.print(f"[dim]{result['strategy']}; {note}; {budget['remaining']:g} of "
              f"{budget['budget']:g} left[/]", highlight=False)


@main.group("roles", help=f"Roles: the per-query α and total budget their users get. {OWNER}")
def roles_group() -> None:
    pass


@roles_group.command("add")
@click.argument("name")
@click.option("--alpha", type=click.FloatRange(min=0, min_open=True), required=True,
              help="Privacy parameter spent by each query.")
@click.option("--budget", type=click.FloatRange(min=0), required=True,
              help="Total α each user of the role may spend.")
@store_option
@fail_cleanly
def roles_add(name: str, alpha: float, budget: float, store_spec: str) -> None:
    """Create or update a role (owner command)."""
    _ledger(store_spec).add_role(name, alpha, budget)
    err.print(f"role {name}: α={alpha:g} per query, budget {budget:g} per user", markup=False)


@roles_group.command("list")
@store_option
@json_option
@fail_cleanly
def roles_list(store_spec: str, as_json: bool) -> None:
    """List roles (owner command)."""
    roles = _ledger(store_spec).roles()
    emit(as_json, {"roles": roles}, lambda: [out.print(
        f"{r['name']}: α={r['alpha']:g} per query, budget {r['budget']:g}", markup=False)
        for r in roles])


@main.group("users", help=f"Analysts: each has a role and a token. {OWNER}")
def users_group() -> None:
    pass


@users_group.command("add")
@click.argument("name")
@click.option("--role", required=True)
@store_option
@json_option
@fail_cleanly
def users_add(name: str, role: str, store_spec: str, as_json: bool) -> None:
    """Create a user and print its token, shown once: it is stored only as a hash (owner
    command)."""
    token = _ledger(store_spec).add_user(name, role)
    emit(as_json, {"user": name, "role": role, "token": token}, lambda: out.print(token))


@users_group.command("list")
@store_option
@json_option
@fail_cleanly
def users_list(store_spec: str, as_json: bool) -> None:
    """List users with the α they have spent (owner command)."""
    users = _ledger(store_spec).users()
    emit(as_json, {"users": users}, lambda: [out.print(
        f"{u['name']} ({u['role']}{'' if u['active'] else ', disabled'}): spent {u['spent']:g}",
        markup=False) for u in users])


@users_group.command("disable")
@click.argument("name")
@store_option
@fail_cleanly
def users_disable(name: str, store_spec: str) -> None:
    """Refuse the user's token from now on, 403 (owner command)."""
    _ledger(store_spec).set_active(name, False)


@users_group.command("enable")
@click.argument("name")
@store_option
@fail_cleanly
def users_enable(name: str, store_spec: str) -> None:
    """Accept the user's token again (owner command)."""
    _ledger(store_spec).set_active(name, True)


@main.command("budget", help="Show (or --set) the dataset-wide privacy budget and what has been "
                             f"spent. {OWNER}")
@click.option("--set", "total", type=click.FloatRange(min=0),
              help="Set the dataset-wide budget that caps all users together.")
@store_option
@json_option
@fail_cleanly
def budget_cmd(total: float | None, store_spec: str, as_json: bool) -> None:
    ledger = _ledger(store_spec)
    if total is not None:
        ledger.set_dataset_budget(total)
    status = ledger.budget_status()
    emit(as_json, status, lambda: out.print(
        f"dataset budget {status['dataset_budget']}, spent {status['dataset_spent']:g}"))


@main.command("reshare")
@click.argument("answer_id")
@click.option("--alpha", required=True, type=click.FloatRange(min=0, min_open=True),
              help="The next hop's α: at most the hop before's (a re-share only adds noise).")
@store_option
@json_option
@fail_cleanly
def reshare_cmd(answer_id: str, alpha: float, store_spec: str, as_json: bool) -> None:
    """Re-share a stored noisy answer (ANSWER_ID, as `answer_id` in a query's JSON) with the
    next hop of a chain: the answer plus fresh Laplace noise at --alpha, stored, so that hop
    always gets the same one.  Charges nothing: the chain cost its first α.  Owner command."""
    answer = reshare(_ledger(store_spec), answer_id, alpha)
    emit(as_json, answer, lambda: out.print(
        f"hop {answer['hop']} (α = {answer['alpha']:g}{', reused' if answer['reused'] else ''})"
        f": {', '.join(f'{a:.2f}' for a in answer['answers'])}; answer id "
        f"{answer['answer_id']}", highlight=False, markup=False))


@main.group("ledger", help=f"Where the budget ledger lives. {OWNER}")
def ledger_group() -> None:
    pass


@ledger_group.command("path")
@click.argument("path", required=False, type=click.Path(dir_okay=False, path_type=Path))
@store_option
@json_option
@fail_cleanly
def ledger_path_cmd(path: Path | None, store_spec: str, as_json: bool) -> None:
    """Print the ledger's path, or record PATH as the ledger of this store (in its private
    zone; needed once for HDFS stores, whose ledger is a file on the overlay host). Owner
    command."""
    store = open_store(store_spec)
    location = set_ledger_location(store, path) if path else ledger_location(store)
    emit(as_json, {"ledger": str(location)}, lambda: click.echo(str(location)))


@main.command("serve", help="Serve the analysts' HTTP API: token auth, JSON, noisy answers "
                            f"only; OpenAPI docs at /docs. {OWNER}")
@store_option
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535))
@click.option("--runner", type=click.Choice(list(BACKENDS)), default="fast", show_default=True)
@click.option("--deadline-base-ms", type=click.FloatRange(min=0, min_open=True),
              help="Reply time of refusals and reused answers, and the base of fresh ones "
                   "(default per runner; fast: 30).")
@click.option("--deadline-count-ms", type=click.FloatRange(min=0),
              help="Added to a fresh answer's reply time per conjunctive count it needs, "
                   "counts rounded up to a power of two (default per runner; fast: 1).")
@click.option("--deadline-rank-ms", type=click.FloatRange(min=0, min_open=True),
              default=Deadlines.rank_ms, show_default=True,
              help="Reply time of every POST /v1/rank (top-k over a ranking).")
@click.option("--deadline-search-ms", type=click.FloatRange(min=0, min_open=True),
              default=Deadlines.search_ms, show_default=True,
              help="When, after arrival, a batch's strategy search must be done; its fresh "
                   "answer leaves this plus base plus a count per cell of its terms.")
@click.option("--rank-slots", type=click.IntRange(1, 1000), default=Deadlines.rank_slots,
              show_default=True, help="POST /v1/rank: rankings booked per rank deadline, each "
                                      "for 1/SLOTS of it on one worker; the deadline must "
                                      "cover SLOTS worst cases.")
@click.option("--access-log", is_flag=True, help="Log every request.")
@fail_cleanly
def serve_cmd(store_spec: str, host: str, port: int, runner: str,
              deadline_base_ms: float | None, deadline_count_ms: float | None,
              deadline_rank_ms: float, deadline_search_ms: float, rank_slots: int,
              access_log: bool) -> None:
    uvicorn = require("uvicorn")
    require("fastapi")  # before the service's own import, so a missing [serve] is one line
    from .rank.service import Rankings
    from .service import CurrentPublication, create_app

    default = DEFAULT_DEADLINES[runner]
    deadlines = Deadlines(deadline_base_ms or default.base_ms,
                          default.count_ms if deadline_count_ms is None else deadline_count_ms,
                          deadline_rank_ms, deadline_search_ms, rank_slots)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    store = open_store(store_spec)
    rankings = Rankings(store)
    logging.getLogger("cocktail.serve").info("rankings open: %s",
                                             ", ".join(rankings.warm()) or "none")
    app = create_app(CurrentPublication(store, runner), Ledger(ledger_location(store)), deadlines,
                     rankings, store)
    sys.setswitchinterval(0.001)  # many short requests: hand the GIL over often (tail latency)
    uvicorn.run(app, host=host, port=port, log_level="info", access_log=access_log)


@main.command("plan", help="Show the map tasks a counting query becomes. " + OWNER +
              " (A plan reveals the tree.)")
@click.argument("expression")
@store_option
@click.option("--tasks-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the tasks as the streaming scripts' TASKS.json, for a "
              "hand-run `hadoop jar hadoop-streaming.jar` (docs/overlay.md).")
@json_option
@fail_cleanly
def plan_cmd(expression: str, store_spec: str, tasks_file: Path | None, as_json: bool) -> None:
    query = parse_count(expression)
    publication = Publication.open(open_store(store_spec))
    plan = Engine(publication).plan(query)
    if tasks_file:
        tasks_file.write_text(tasks_json(plan.tasks))
    payload = {"query": str(query), "nodes_visited": plan.nodes_visited,
               "index_files": sorted({publication.index_location(t.chunk) for t in plan.tasks}),
               "branches_pruned": plan.branches_pruned, "clusters": len(plan.clusters),
               "clusters_pruned": plan.clusters_pruned,
               "tasks": [{"chunk": t.chunk, "zone": "private" if t.private else "public",
                          "terms": list(t.terms),
                          "clusters": sorted(c for c, ts in plan.clusters.items() if t in ts)}
                         for t in plan.tasks]}

    def human() -> None:
        out.print(describe(plan), highlight=False)
        table = Table()
        for column in ("chunk", "zone", "terms", "clusters"):
            table.add_column(column)
        for task in payload["tasks"]:
            table.add_row(task["chunk"], task["zone"], " & ".join(task["terms"]),
                          ", ".join(map(str, task["clusters"])))
        out.print(table)

    emit(as_json, payload, human)


@main.command("demo")
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
@fail_cleanly
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
    sys.exit(0 if result["ok"] else 1)


def _this_command() -> str:
    """``cocktail`` if that is what the shell finds, else the path that ran this one."""
    here = Path(sys.argv[0]).resolve()
    found = shutil.which("cocktail")
    return "cocktail" if found and Path(found).resolve() == here else str(here)


spec_option = click.option(
    "--spec", "spec_path", default="hadoop_conf/cluster.yaml", envvar="COCKTAIL_CLUSTER",
    show_default=True, type=click.Path(dir_okay=False, path_type=Path),
    help="The cluster description ($COCKTAIL_CLUSTER).")


@main.group("cluster")
def cluster_group() -> None:
    """The Hadoop cluster description (hadoop_conf/cluster.yaml) and what is rendered from it."""


@cluster_group.command("hosts")
@spec_option
@click.option("--role", type=click.Choice(ROLES), help="Only hosts with this role.")
@click.option("--side", type=click.Choice(SIDES), help="Only private or only public hosts.")
@click.option("--field", type=click.Choice(["name", "address", "rack", "side", "roles"]),
              default="name", show_default=True, help="What to print for each host.")
@json_option
@fail_cleanly
def cluster_hosts(spec_path: Path, role: str | None, side: str | None, field: str,
                  as_json: bool) -> None:
    """List the hosts, one per line (for scripts), or all their fields with --json."""
    spec = load_spec(spec_path)
    hosts = [h for h in spec.hosts if (role is None or role in h.roles)
             and (side is None or h.side == side)]
    payload = {"cluster": spec.name, "network": str(spec.network),
               "hosts": [{"name": h.name, "address": h.address, "side": h.side,
                          "rack": h.rack, "roles": list(h.roles)} for h in hosts]}

    def human() -> None:
        for host in payload["hosts"]:
            value = host[field]
            click.echo(" ".join(value) if isinstance(value, list) else value)

    emit(as_json, payload, human)


@cluster_group.command("get")
@spec_option
@click.argument("key", type=click.Choice(sorted(CLUSTER_SETTINGS)))
@fail_cleanly
def cluster_get(spec_path: Path, key: str) -> None:
    """Print one setting of the cluster file (for scripts)."""
    click.echo(CLUSTER_SETTINGS[key](load_spec(spec_path)))


@cluster_group.command("render")
@spec_option
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Directory to write; with --host, the host's HADOOP_CONF_DIR itself, "
                   "else one subdirectory per host.")
@click.option("--host", "host_names", multiple=True, help="Only this host (repeatable).")
@click.option("--home", help="Hadoop's directory instead of the spec's hadoop.home.")
@click.option("--data", help="State directory instead of hadoop.data; {host} is replaced by "
                             "the host name.")
@click.option("--set", "settings", multiple=True, metavar="FILE:NAME=VALUE",
              help="Set one more property, e.g. hdfs-site.xml:dfs.heartbeat.interval=1.")
@json_option
@fail_cleanly
def cluster_render(spec_path: Path, out_dir: Path, host_names: tuple[str, ...],
                   home: str | None, data: str | None, settings: tuple[str, ...],
                   as_json: bool) -> None:
    """Write each host's Hadoop configuration directory (site files, topology script, hosts,
    workers, node labels, roles)."""
    spec = load_spec(spec_path)
    overrides = _overrides(settings)
    hosts = [spec.host(name) for name in host_names] if host_names else list(spec.hosts)
    written = {}
    for host in hosts:
        target = out_dir if len(host_names) == 1 else out_dir / host.name
        files = render_host(spec, host, home=home,
                            data=data.replace("{host}", host.name) if data else None,
                            conf_dir=str(target.resolve()), overrides=overrides)
        write_host(target, files)
        written[host.name] = str(target)
    emit(as_json, {"cluster": spec.name, "written": written},
          lambda: [click.echo(f"{name}: {path}") for name, path in written.items()])


def _overrides(settings: tuple[str, ...]) -> dict[str, dict[str, str]]:
    overrides: dict[str, dict[str, str]] = {}
    for setting in settings:
        file, sep, assignment = setting.partition(":")
        name, eq, value = assignment.partition("=")
        if not (sep and eq and name):
            raise click.BadParameter(f"{setting!r} is not FILE:NAME=VALUE", param_hint="--set")
        overrides.setdefault(file, {})[name] = value
    return overrides


main.add_command(table_group)
main.add_command(rank_group)


@main.group("attack", help=f"Attacks as measurements of a risk. {OWNER}")
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
@fail_cleanly
def composition_cmd(specs: tuple[str, ...], m: int | None, sensitive_file,
                    as_json: bool) -> None:
    """The composition attack across independent releases of overlapping people.  Tables:
    for each person in two or more, intersect their groups' sensitive values.  Baskets: an
    adversary who knows m terms of a victim intersects the sensitive terms of the public
    subrecords holding them in every release.  Reports certain disclosures, candidate-set
    sizes, and the attacker's accuracy against always guessing the most common value."""
    if len(specs) < 2:
        raise click.UsageError("give two releases or more (--release A --release B)")
    baskets = [not _is_table_release(spec) for spec in specs]
    if any(baskets) != all(baskets):
        raise click.UsageError("the releases mix basket publications and tables")
    if all(baskets):
        _basket_composition(specs, m, _sensitive_terms(sensitive_file), as_json)
        return
    if m is not None or sensitive_file is not None:
        raise click.UsageError("--known-terms and --sensitive-terms are for basket releases")
    report = composition([load_table_release(spec) for spec in specs])
    emit(as_json, report.as_dict(), lambda: out.print(
        f"{report.overlapping:,} people in two or more releases, {report.attacked:,} shown in "
        f"two or more: {report.certain_disclosures:,} certain disclosure(s); candidates "
        f"min {report.candidates_min}, median {report.candidates_median}; attacker accuracy "
        f"{report.attacker_accuracy} against {report.baseline_accuracy} for the majority "
        f"value", highlight=False))


def _is_table_release(spec: str) -> bool:
    """``STORE#TABLE``, or a store without a basket publication."""
    return "#" in spec or current_version(open_store(spec)) is None


def _basket_composition(specs: tuple[str, ...], m: int | None, sensitive: tuple[str, ...],
                        as_json: bool) -> None:
    loaded = [load_basket_release(spec, frozenset(sensitive) or None) for spec in specs]
    if len({release.sensitive for release in loaded}) > 1:
        raise click.UsageError("the stores were published with different sensitive terms: "
                               "name the ones that count with --sensitive-terms FILE")
    m = m or max(release.m for release in loaded)
    report = basket_composition(loaded, loaded[0].sensitive, m)
    emit(as_json, report.as_dict(), lambda: out.print(
        f"{report.overlapping:,} people in two or more releases, {report.attacked:,} located "
        f"in two or more by {m} known terms: {report.certain_disclosures:,} certain "
        f"disclosure(s) by composition, {report.disclosed_alone:,} by one release alone, "
        f"{report.misled:,} misled; candidates min {report.candidates_min}, median "
        f"{report.candidates_median}; attacker accuracy {report.attacker_accuracy} against "
        f"{report.baseline_accuracy} for the most common term", highlight=False))


@attack_group.command("rank")
@store_option
@click.option("--name", default="ranking", show_default=True, help="Which ranking.")
@click.option("--victims", type=click.IntRange(1), default=100, show_default=True,
              help="Tuples attacked (spread over the table).")
@click.option("--epsilon", type=click.FloatRange(min=0, min_open=True), default=1.0,
              show_default=True, help="dp rankings: what the attacker spends on each victim's "
              "column, over all its probes.")
@click.option("--sybils", type=click.IntRange(1), default=4, show_default=True,
              help="estt: accounts per victim created before the build, hoping to be its "
              "partner.")
@json_option
@fail_cleanly
def rank_attack_cmd(store_spec: str, name: str, victims: int, epsilon: float, sybils: int,
                    as_json: bool) -> None:
    """Attack a ranking through ranks alone: the differencing attacker (accounts with the
    victim's public values, a probe per private value), the sybil partner (ESTT) and the
    prior-aware attacker; success rate per attacker against chance and the prior alone."""
    report = attack_ranking(open_store(store_spec), name, victims, epsilon, sybils)
    emit(as_json, report.as_dict(), lambda: out.print(
        f"{report.defense} (l={report.l}), {report.victims} victims x "
        f"{len(report.columns)} private columns: "
        + ", ".join(f"{a} {s:.1%} ({report.candidates[a]:.2f} candidates)"
                    for a, s in report.success.items())
        + f"; chance {report.chance:.1%}, prior alone {report.prior_only:.1%}"
        + (f"; sybils partnered {report.partnered:.1%} of victims" if report.partnered
           is not None else "")
        + (f"; dp bound at ε={report.epsilon:g}: {report.dp_bound:.1%}" if report.dp_bound
           else ""),
        highlight=False))

if __name__ == "__main__":  # pragma: no cover
    main()
