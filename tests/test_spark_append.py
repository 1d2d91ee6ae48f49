"""Appends on Spark (local[2]): from the same batch and the same starting store, the Spark engine
appends the same release as the single-machine engine (the same overlay trees, clusters, chunk
term sets and subrecords, promotion and buffer; only chunk ids and pseudonyms differ), and the
command line runs it."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from click.testing import CliRunner

import cocktail.publish

from cocktail.audit import audit, audit_releases, audit_term_indexes
from cocktail.cli import main
from cocktail.dataset import Dataset, InputError, load, write_fimi
from cocktail.extras import install_command
from cocktail.publish import PublishParams, publish
from cocktail.publish.append import AppendReport, append
from cocktail.query import Engine, Publication
from cocktail.querylang import CountQuery
from cocktail.store.local import LocalStore
from cocktail.synthetic import SyntheticSpec, generate, random_conjunctions

from .conftest import dataset_path
from .test_spark_publish import content

pytestmark = [pytest.mark.xdist_group("spark"), pytest.mark.usefixtures("spark")]

VARIES = {"store", "seconds"}  # what an AppendReport may differ in between engines


def append_spark(path, root, **options):
    from cocktail.publish.spark import SparkSettings, append_spark as on_spark

    return on_spark(str(path), LocalStore(root), SparkSettings("local[2]"), **options)


def write_jsonl(data: Dataset, path) -> None:
    path.write_text("".join(json.dumps({"id": i, "terms": sorted(r)}) + "\n"
                            for i, r in zip(data.ids, data.records)))


def exact_counts_hold(root, records, seed: int) -> None:
    queries = [CountQuery(q) for q in random_conjunctions(records, 150, seed=seed)]
    assert Engine(Publication.open(LocalStore(root))).counts(queries) == [
        sum(1 for r in records if set(q.terms) <= r) for q in queries]


def both_engines_append(tmp_path, first: Dataset, params: PublishParams, batches: list,
                        min_new: int | None = None) -> list[tuple]:
    """Publish ``first`` (single machine), copy the store, append each batch file with each
    engine to its copy; after each append, the two stores hold the same release, audit
    clean alone and together, and count exactly.  Returns each append's two reports."""
    single, spark = tmp_path / "single", tmp_path / "spark"
    publish(first, LocalStore(single), params)
    shutil.copytree(single, spark)
    records = list(first.records)
    reports = []
    for number, path in enumerate(batches):
        batch = load(path)
        by_single = append(batch, LocalStore(single), min_new)
        on_spark = append_spark(path, spark, min_new=min_new)
        reports.append((by_single, on_spark))
        assert {k: v for k, v in on_spark.as_dict().items() if k not in VARIES} == \
            {k: v for k, v in by_single.as_dict().items() if k not in VARIES}
        single_content, spark_content = content(single), content(spark)
        for part in single_content:
            assert spark_content[part] == single_content[part], (path.name, part)
        records += list(batch.records)
        for root in (single, spark):
            store = LocalStore(root)
            assert audit(store).ok
            assert audit_term_indexes(store) == []
            history = audit_releases(store)
            assert history.ok and history.pinned == [], history.violations[:3]
            exact_counts_hold(root, records, seed=number)
    return reports


def test_both_engines_append_the_same_to_bms_webview_1(tmp_path):
    """The first 60% published, then two appends of 20% (JSON Lines, the file's own ids)."""
    whole = load(dataset_path("bms-webview-1.dat"))
    cuts = [int(len(whole) * share) for share in (0, 0.6, 0.8, 1)]
    parts = [Dataset(whole.ids[a:b], whole.records[a:b], "memory", "jsonl")
             for a, b in zip(cuts, cuts[1:])]
    batches = []
    for number, part in enumerate(parts[1:], 2):
        batches.append(tmp_path / f"day{number}.jsonl")
        write_jsonl(part, batches[-1])
    reports = both_engines_append(tmp_path, parts[0], PublishParams(k=5, m=3), batches)
    for _, on_spark in reports:
        assert on_spark.extended_records > 0 and on_spark.new_clusters > 0
        assert on_spark.promoted_chunks > 0


def test_both_engines_place_a_buffer_and_aggregate_inside_a_new_tree(tmp_path):
    """Small clusters and a small aggregation volume: the first batch waits in the buffer,
    the second forms many new clusters (with the buffered records, which come after the new
    ones in the pool), nodes inside the new tree re-partition their pools, and the held
    terms and the new root's pool go to the promotion."""
    records = list(generate(SyntheticSpec(records=6100, seed=7, items=500)))
    first = Dataset(tuple(f"r{i}" for i in range(3000)), records[:3000], "memory", "jsonl")
    paths = [tmp_path / "small.dat", tmp_path / "large.dat"]
    write_fimi(records[3000:3100], paths[0])
    write_fimi(records[3100:], paths[1])
    params = PublishParams(k=5, m=3, cluster_size=150, aggregate_volume=40)
    (_, waiting), (_, placed) = both_engines_append(tmp_path, first, params, paths,
                                                    min_new=300)
    assert waiting.buffered_records == 100 and waiting.new_clusters == 0
    assert placed.buffered_records == 0 and placed.new_clusters >= 10
    assert placed.promoted_chunks > 0
    before = Publication.open(LocalStore(tmp_path / "spark"), "v000002").head["tree"]
    head = Publication.open(LocalStore(tmp_path / "spark")).head
    tree = head["tree"]
    inside = [u for u in head["units"] if u["kind"] == "aggregate" and u["node"] >= len(before)
              and u["node"] not in head["roots"] and not tree[u["node"]].get("lifted")]
    assert len(inside) >= 2, "no node of the new tree re-partitioned its pool"


def test_append_on_spark_on_the_command_line(tmp_path):
    """On a store published without the overlay tree or aggregation (a flat split, leaves
    that keep their private parts, no promotion): the same release as the single machine."""
    first, second, store = tmp_path / "day1.dat", tmp_path / "day2.dat", tmp_path / "s"
    write_fimi(generate(SyntheticSpec(records=2000, seed=1)), first)
    write_fimi(generate(SyntheticSpec(records=1000, seed=2)), second)
    assert CliRunner().invoke(main, ["publish", str(first), "--store", str(store), "--k", "4",
                                     "--m", "2", "--cluster-size", "300", "--no-overlay",
                                     "--no-aggregate"]).exit_code == 0
    shutil.copytree(store, tmp_path / "single")
    result = CliRunner().invoke(main, ["publish", str(second), "--store", str(store),
                                       "--append", "--engine", "spark", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # one object, the single engine's fields
    assert set(report) == set(AppendReport.__dataclass_fields__)
    assert report["appended_records"] == 1000 and report["version"] == "v000002"
    assert report["new_clusters"] > 0 and report["promoted_chunks"] == 0
    single = append(load(second), LocalStore(tmp_path / "single"))
    assert {k: v for k, v in report.items() if k not in VARIES} == \
        {k: v for k, v in single.as_dict().items() if k not in VARIES}
    assert content(store) == content(tmp_path / "single")
    assert audit(LocalStore(store)).ok and audit_releases(LocalStore(store)).ok
    refused = CliRunner().invoke(main, ["publish", str(second), "--store", str(store),
                                        "--append", "--engine", "spark", "--m", "3"])
    assert refused.exit_code == 2 and "drop --m" in refused.output
    bad = tmp_path / "bad.dat"
    bad.write_bytes(b"1 2 3\n4 \xff 5\n")
    with pytest.raises(InputError) as loader:
        load(bad)
    failed = CliRunner().invoke(main, ["publish", str(bad), "--store", str(store),
                                       "--append", "--engine", "spark", "--json"])
    assert failed.exit_code == 2
    assert json.loads(failed.stdout) == {"error": str(loader.value), "code": 2,
                                         "type": "usage-error"}


def test_a_missing_pyspark_is_one_line_naming_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.delitem(sys.modules, "cocktail.publish.spark", raising=False)
    monkeypatch.delattr(cocktail.publish, "spark", raising=False)  # imported again, and fails
    data = tmp_path / "d.dat"
    data.write_text("1 2\n2 3\n")
    for extra in (["--append"], []):
        result = CliRunner().invoke(main, ["publish", str(data), "--store", str(tmp_path / "s"),
                                           "--engine", "spark", "--json", *extra])
        assert result.exit_code == 2
        assert install_command("spark") in json.loads(result.stdout)["error"]
