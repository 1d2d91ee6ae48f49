"""``cocktail generate`` and ``cocktail publish``: synthetic data, and a new version or release of
a store."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import click

from ..anonymity import METHODS
from ..dataset import (FORMATS, InputOptions, format_by_name, load, skipped_text, write_fimi,
                       write_parquet)
from ..publish import DEFAULT_KEEP, PublishParams, publish, timed_from
from ..store import open_store
from ..synthetic import SyntheticSpec, generate
from ..extras import require
from .contract import confirm, plural, warn
from .options import json_option, progress_bars, store_option


@click.command("generate")
@click.argument("output", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--records", default=SyntheticSpec.records, show_default=True,
              type=click.IntRange(1))
@click.option("--items", default=SyntheticSpec.items, show_default=True, type=click.IntRange(1))
@click.option("--avg-len", default=SyntheticSpec.avg_record_len, show_default=True,
              type=click.FloatRange(min=1.0), help="Average record length.")
@click.option("--patterns", default=SyntheticSpec.patterns, show_default=True,
              type=click.IntRange(1), help="Number of correlated patterns.")
@click.option("--seed", default=SyntheticSpec.seed, show_default=True, type=int)
@click.option("--format", "output_format", type=click.Choice(["fimi", "parquet"]),
              help="FIMI, or Parquet (a list column `terms`, a row per record; the [parquet] "
              "extra). Default: Parquet for a .parquet or .pq OUTPUT, else FIMI.")
@json_option
def generate_cmd(output: Path, records: int, items: int, avg_len: float, patterns: int,
                 seed: int, output_format: str | None, as_json: bool) -> None:
    """Write a synthetic IBM Quest-style basket dataset to OUTPUT (FIMI or Parquet: the same
    records, with the same ids, line or row numbers)."""
    spec = SyntheticSpec(records=records, items=items, avg_record_len=avg_len,
                         patterns=patterns, seed=seed)
    data = generate(spec)
    parquet = (output_format or format_by_name(output)) == "parquet"
    (write_parquet if parquet else write_fimi)(data, output)
    confirm(as_json, {"output": str(output), "records": len(data), "seed": seed},
            f"wrote {len(data):,} records to {output}")


@click.command("publish")
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
              help="Skip malformed input lines (a table's bad rows; reported) instead of "
              "stopping at the first.")
@click.option("--id-column", metavar="NAME", help="The column of record ids: a Parquet "
              "column, or a name in a CSV file's header (default: record_id or id, else by "
              "shape; docs/cli.md, Input).")
@click.option("--terms-column", metavar="NAME", help="The column of terms: a Parquet column "
              "(a term a row, or a list of them), or a name in a CSV file's header (default: "
              "the list column, terms or term, else by shape).")
@click.option("--delimiter", default=",", show_default=True,
              help="CSV: the field delimiter, one character (\\t: a tab).")
@click.option("--header/--no-header", default=None, help="CSV: the first row is a header "
              "(skipped; it names the columns) or a record. Default: record_id,term is a "
              "header, and a first row that looks like one is refused.")
@click.option("--encoding", default="utf-8", show_default=True,
              help="The encoding of a text input (FIMI, SPMF, CSV, JSON Lines).")
@click.option("--keep", default=DEFAULT_KEEP, show_default=True, type=click.IntRange(1),
              help="Committed versions to keep, the new one included. Pruning frees space; it "
              "does not make a version unseen (the release log keeps every release).")
@click.option("--append", "appending", is_flag=True,
              help="Add INPUT's records to the store's current release as a new release that "
              "cannot compose with the earlier ones (docs/releases.md); keeps the store's k, "
              "m, method and cluster size.")
@click.option("--min-new", type=click.IntRange(1),
              help="With --append: records needed to form new clusters; fewer wait in the "
              "private buffer (default: k).")
@click.option("--allow-duplicate", is_flag=True,
              help="With --append: accept a FIMI or SPMF batch whose content an earlier "
              "release added already (refused otherwise, exit status 3: its records would be "
              "counted twice).")
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
def publish_cmd(input_path: str, store_spec: str, k: int, m: int, method: str,
                cluster_size: int, input_format: str | None, skip_bad_lines: bool,
                id_column: str | None, terms_column: str | None, delimiter: str,
                header: bool | None, encoding: str, keep: int,
                appending: bool, min_new: int | None, allow_duplicate: bool, rebase: bool,
                workers: int,
                engine: str, master: str, spark_conf: tuple[str, ...],
                overlay: bool, aggregate: bool, aggregate_volume: int, sensitive_file,
                index_shard: int, max_rho: float, as_json: bool) -> None:
    """Partition INPUT and publish it as a new version of the store (owner command).

    INPUT is FIMI/SPMF (.dat, .txt), CSV of record_id,term pairs (.csv), JSON Lines
    ({"id":..., "terms":[...]}, .jsonl) or Parquet (.parquet: a (record id, term) pair a
    row, or a record a row with a list of terms; the [parquet] extra); with --engine spark
    also an hdfs:// URL. The first publish of a store is its first release; later ones
    --append (a second fresh partition is refused unless --rebase).
    """
    context = click.get_current_context()
    explicit = {name for name in ("master", "spark_conf", "workers")
                if context.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE}
    if min_new is not None and not appending:
        raise click.UsageError("--min-new goes with --append")
    if allow_duplicate and not appending:
        raise click.UsageError("--allow-duplicate goes with --append")
    if engine == "single" and explicit & {"master", "spark_conf"}:
        raise click.UsageError("--master and --spark-conf go with --engine spark")
    if engine == "spark" and "workers" in explicit:
        raise click.UsageError("--workers is the single-machine engine's; on Spark, the "
                               "master says how many executors (e.g. --master local[4])")
    options = InputOptions(encoding, delimiter.replace("\\t", "\t"), header, id_column,
                           terms_column)
    sensitive = sensitive_terms(sensitive_file)
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
    started = time.perf_counter()  # the seconds reported count the input's load too
    if engine == "spark" and appending:
        _print_appended(timed_from(_append_on_spark(input_path, store_spec, master, spark_conf,
                                         input_format, skip_bad_lines, options, min_new,
                                         allow_duplicate, as_json), started), as_json)
        return
    if engine == "spark":
        report = timed_from(_publish_on_spark(input_path, store_spec, params, master,
                                              spark_conf, input_format, skip_bad_lines,
                                              options, rebase, as_json), started)
        _print_published(report, report.as_dict(), as_json)
        return
    with progress_bars("append" if appending else "publish", True, not as_json) as update:
        dataset = load(Path(input_path), input_format, skip_bad_lines=skip_bad_lines,
                       progress=update, **asdict(options))
        loading = round(time.perf_counter() - started, 3)
        if appending:
            from ..publish.append import append  # here: a first publish does not need it

            added = append(dataset, open_store(store_spec), min_new, progress=update,
                           allow_duplicate=allow_duplicate)
        else:
            report = publish(dataset, open_store(store_spec), params, progress=update,
                             rebase=rebase)
    _report_skipped(dataset)
    if appending:
        _print_appended(timed_from(added, started), as_json)
        return
    report = timed_from(report, started)
    payload = report.as_dict()
    payload["phase_seconds"] = {"load": loading, **report.phase_seconds}
    _print_published(report, payload, as_json)


def _report_skipped(dataset) -> None:
    """What --skip-bad-lines left out of the input: how many, and the first few, where and
    why (on stderr: a warning, whatever the output)."""
    if dataset.skipped_lines:
        unit = "row" if dataset.format in ("parquet", "dataframe") else "line"
        warn(f"skipped {skipped_text(dataset.skipped_lines, dataset.skipped_examples, unit)} "
             f"of {dataset.source}")


def sensitive_terms(stream) -> tuple[str, ...]:
    if stream is None:
        return ()
    terms = tuple(sorted({line.strip() for line in stream
                          if line.strip() and not line.lstrip().startswith("#")}))
    if not terms:
        raise click.BadParameter(f"{stream.name} names no term", param_hint="--sensitive-terms")
    return terms


def _spark_engine(master: str, spark_conf: tuple[str, ...]):
    """The Spark engine's module and settings; pyspark loads only when asked, and its absence
    is one line naming the extra to install."""
    settings = []
    for item in spark_conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}",
                                     param_hint="--spark-conf")
        settings.append((key.strip(), value))
    require("pyspark")  # the Spark engine (and a Java runtime); or --engine single
    from ..publish import spark
    return spark, spark.SparkSettings(master, tuple(settings))


def _publish_on_spark(source: str, store_spec: str, params: PublishParams, master: str,
                      spark_conf: tuple[str, ...], input_format: str | None,
                      skip_bad_lines: bool, options: InputOptions, rebase: bool,
                      as_json: bool):
    spark, settings = _spark_engine(master, spark_conf)
    store = open_store(store_spec)
    with progress_bars("publish", True, not as_json) as update:
        return spark.publish_spark(source, store, params, settings,
                                   data_format=input_format, skip_bad_lines=skip_bad_lines,
                                   options=options, rebase=rebase, progress=update)


def _append_on_spark(source: str, store_spec: str, master: str, spark_conf: tuple[str, ...],
                     input_format: str | None, skip_bad_lines: bool, options: InputOptions,
                     min_new: int | None, allow_duplicate: bool, as_json: bool):
    spark, settings = _spark_engine(master, spark_conf)
    store = open_store(store_spec)

    with progress_bars("append", True, not as_json) as update:
        return spark.append_spark(source, store, settings, data_format=input_format,
                                  skip_bad_lines=skip_bad_lines, options=options,
                                  min_new=min_new, progress=update, loaded=_report_skipped,
                                  allow_duplicate=allow_duplicate)


def _print_appended(added, as_json: bool) -> None:
    confirm(as_json, added.as_dict(), (
        f"appended {plural(added.appended_records, 'record')} as {added.version} to "
        f"{added.store}: {added.extended_records:,} extend "
        f"{plural(added.extended_clusters, 'cluster')}, {added.new_cluster_records:,} form "
        f"{plural(added.new_clusters, 'new cluster')}, {added.buffered_records:,} wait in the "
        f"private buffer; {plural(added.promoted_pairs, 'private (record, term) pair')} "
        f"promoted into {plural(added.promoted_chunks, 'new public chunk')}"
        f"{_waiting(added)}; {plural(added.public_chunks, 'public chunk')}, public coverage "
        f"{(added.public_coverage or 0):.2%}; "
        f"{added.seconds:.1f}s"))


def _waiting(added) -> str:
    """What the promotion kept private: the tails, each term's occurrences since it last
    went public, waiting for k of them to meet (docs/releases.md)."""
    if not added.private_pool_pairs:
        return ""
    return (f", {plural(added.private_pool_pairs, 'pair')} of "
            f"{plural(added.private_pool_terms, 'term')} wait for k of their term to meet")


def _print_published(report, payload: dict, as_json: bool) -> None:
    before = report.private_before_aggregation
    if report.skipped_lines and report.engine == "spark":
        warn(f"skipped {plural(report.skipped_lines, 'malformed line')}")
    confirm(as_json, payload, (
        f"published {report.version} to {report.store}: {plural(report.records, 'record')} in "
        f"{plural(report.clusters, 'cluster')} (+{report.aggregated_clusters} aggregated) -> "
        f"{plural(report.public_chunks, 'public chunk')}, "
        f"{plural(report.private_chunks, 'private chunk')}; "
        f"private subrecords {before['private_subrecords']:,} -> {report.private_subrecords:,}, "
        f"private terms {before['private_terms']:,} -> {report.private_terms:,} after "
        f"aggregation; {report.seconds:.1f}s"
        + (f"; clusters ρ-cloned, ρ = {report.rho:.4f}" if report.rho is not None else "")))
