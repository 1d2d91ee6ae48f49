"""The Spark publish engine (local[2]): the same publication as the single-machine engine, the
same input errors, and files whose metadata groups nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cocktail.audit import audit, audit_term_indexes
from cocktail.dataset import InputError, load, write_fimi
from cocktail.publish import PublishParams, publish
from cocktail.query.view import Publication
from cocktail.releases import read_log
from cocktail.store.local import LocalStore
from cocktail.synthetic import SyntheticSpec, generate

from .conftest import dataset_path
from .test_publication import assert_metadata_reveals_no_clusters

pytestmark = [pytest.mark.xdist_group("spark"), pytest.mark.usefixtures("spark")]


def publish_spark(source, root, k=5, **options):
    from cocktail.publish.spark import SparkSettings, publish_spark as on_spark

    return on_spark(str(source), LocalStore(root), PublishParams(k=k, m=3),
                    SparkSettings("local[2]"), **options)


def content(root):
    """What must not depend on the engine: the tree, the units (clusters), and per chunk its
    unit, zone, term set and subrecords by record position (chunk ids and pseudonyms are
    random)."""
    publication = Publication.open(LocalStore(root))
    chunks = []
    for chunk in publication.chunks.values():
        positions = publication.record_positions(chunk.id)
        subrecords = sorted((positions[p], tuple(sorted(terms)))
                            for p, terms in publication.subrecords(chunk.id))
        chunks.append((chunk.unit, chunk.private, tuple(sorted(chunk.terms)), subrecords))
    manifest = publication.manifest
    index = publication.term_records
    return {"tree": manifest["tree"], "units": manifest["units"], "chunks": sorted(chunks),
            "aggregation": manifest["aggregation"], "records": publication.record_ids,
            "term_index": (index.records, dict(index))}


def logged(root):
    """The release log's entry, but for what is random (chunk ids, files' sha256s)."""
    entry, = read_log(LocalStore(root))
    chunks = sorted((c["unit"], c["terms"], c["subrecords"], c["added"])
                    for c in entry["chunks"].values())
    return chunks, entry["units"]


@pytest.fixture(scope="module")
def synthetic_40k(tmp_path_factory):
    path = tmp_path_factory.mktemp("synthetic") / "s40k.dat"
    write_fimi(generate(SyntheticSpec(records=40_000, seed=1)), path)
    return path


# On the synthetic records the tree's upper levels are split on the cluster, the nodes under
# 8,000 records grown in one task each, and the reports come in several partitions: the path a
# large input takes (LOCAL_SUBTREE = 300,000), at a fifth of the 200,000 records this took (70 s
# of CI).
@pytest.mark.parametrize("source", ["bms-webview-1", "bms-webview-2", "synthetic-40k"])
def test_both_engines_publish_the_same(source, tmp_path, request, monkeypatch):
    from cocktail.publish.spark import run, tree

    levels = []  # tree levels split on the cluster
    choices = tree._choices
    monkeypatch.setattr(tree, "_choices", lambda *a: levels.append(a) or choices(*a))
    if source == "synthetic-40k":
        path = request.getfixturevalue("synthetic_40k")
        monkeypatch.setattr(tree, "LOCAL_SUBTREE", 8_000)
        # five report partitions, read one after another: as millions of records are read
        monkeypatch.setattr(run, "RECORDS_PER_REPORT", 8_000)
    else:
        path = dataset_path(f"{source}.dat")
    on_spark = publish_spark(path, tmp_path / "spark")
    assert source != "synthetic-40k" or len(levels) >= 2, len(levels)
    single = publish(load(path), LocalStore(tmp_path / "single"), PublishParams(k=5, m=3))
    assert on_spark.engine == "spark" and single.engine == "single"
    spark_content, single_content = content(tmp_path / "spark"), content(tmp_path / "single")
    for part in single_content:
        assert spark_content[part] == single_content[part], part
    assert logged(tmp_path / "spark") == logged(tmp_path / "single")
    assert audit(LocalStore(tmp_path / "spark")).ok
    assert audit_term_indexes(LocalStore(tmp_path / "spark")) == []
    for field in ("public_chunks", "private_chunks", "clusters", "aggregated_clusters",
                  "public_subrecords", "private_subrecords", "private_terms",
                  "private_term_share", "private_before_aggregation"):
        assert getattr(on_spark, field) == getattr(single, field), field
    if source == "bms-webview-1":
        assert_metadata_reveals_no_clusters(tmp_path / "spark")


def test_both_engines_aggregate_inside_the_tree_the_same(tmp_path):
    """With pools of 200 subrecords, nodes below the root aggregate too (15 clusters on
    BMS-WebView-1, not just the root's), each from the pools its children and clusters
    passed up: the same clusters and chunks as the single machine's.  (The order within a
    pool does not change them here: pooling children in ascending id passes too.)"""
    from cocktail.publish.spark import SparkSettings, publish_spark as on_spark

    path, params = dataset_path("bms-webview-1.dat"), PublishParams(k=5, m=3,
                                                                    aggregate_volume=200)
    spark = on_spark(str(path), LocalStore(tmp_path / "spark"), params,
                     SparkSettings("local[2]"))
    single = publish(load(path), LocalStore(tmp_path / "single"), params)
    assert spark.aggregated_clusters == single.aggregated_clusters > 5
    assert content(tmp_path / "spark") == content(tmp_path / "single")


# Large nodes split level by level on the cluster, small ones grow their subtree in one task:
# a mix (the root's levels on the cluster) and all in one task give the single-machine tree.
# (Every level on the cluster, threshold 0, passes too, but takes 40 s of CI.)
@pytest.mark.parametrize("local_subtree", [3_000, 10**9])
def test_the_tree_grown_on_spark_is_the_single_machine_tree(local_subtree, spark,
                                                            monkeypatch):
    from cocktail.overlay.layout import cut_clusters
    from cocktail.overlay.tree import SplitSearch, grow_tree
    from cocktail.publish.spark import reading
    from cocktail.publish.spark import tree as engine

    monkeypatch.setattr(engine, "LOCAL_SUBTREE", local_subtree)
    records = load(dataset_path("bms-webview-1.dat")).records[:12_000]
    blocks = reading.driver_input(spark, [f"r{p}" for p in range(len(records))], records).records
    tree, leaf_of, leaves, starts, _ = engine.grow_tree_distributed(
        spark, blocks, tuple(records.names), len(records), 400, SplitSearch())
    single = grow_tree(records, 400)
    assert tree.to_manifest() == [node | {"units": []} for node in single.to_manifest()]
    assert len(single.nodes) > 15  # a tree of several levels
    assert sorted((position, leaf) for block in leaf_of.collect()
                  for position, leaf in zip(block.positions.tolist(), block.node.tolist())) == \
        sorted((p, node.id) for node in single.nodes for p in node.positions)
    assert leaves == {node.id: len(node.positions) for node in single.nodes
                      if not node.children}
    # every leaf grown in a task, so each knows where its clusters start: no counting job
    assert {leaf: first.tolist() for leaf, first in starts.items()} == \
        {node.id: [cluster[0] for cluster in cut_clusters(node.positions, 400)]
         for node in single.nodes if not node.children}


def test_both_engines_cut_the_term_index_into_the_same_parts(tmp_path):
    """With a small --index-shard, Spark's index is in parts of that size, each numbered by
    its own order, as the single engine's: the same bitmaps, answers as brute force."""
    from cocktail.publish.spark import SparkSettings, publish_spark as on_spark
    from cocktail.query import Engine
    from cocktail.query.termindex import layout_from_manifest
    from cocktail.querylang import CountQuery
    from cocktail.synthetic import random_conjunctions

    path = tmp_path / "s.dat"
    records = generate(SyntheticSpec(records=3000, seed=2))
    write_fimi(records, path)
    params = PublishParams(k=5, m=2, index_shard=1000)
    on_spark(str(path), LocalStore(tmp_path / "spark"), params, SparkSettings("local[2]"))
    publish(load(path), LocalStore(tmp_path / "single"), params)
    found = {}
    for engine in ("spark", "single"):
        publication = Publication.open(LocalStore(tmp_path / engine))
        layout = layout_from_manifest(publication.version, publication.manifest["term_index"])
        assert [(p.start, p.stop) for p in layout.parts] == [(0, 1000), (1000, 2000),
                                                             (2000, 3000)]
        found[engine] = dict(publication.term_records)
        queries = [CountQuery(q) for q in random_conjunctions(records, 100, seed=3)]
        assert Engine(publication).counts(queries) == \
            [sum(1 for r in records if set(q.terms) <= r) for q in queries]
        assert audit_term_indexes(LocalStore(tmp_path / engine)) == []
    assert found["spark"] == found["single"]


BAD_INPUTS = {
    "bad.dat": b"1 2 3\n4 \xff 5\n6\n",
    "bad.jsonl": b'{"id": "a", "terms": ["x"]}\n{"id": "b", "terms": ["y"]}\n'
                 b'{"id": "a", "terms": ["z"]}\n',
    "bad.csv": b"record_id,term\nr1,x\nr3,y\nr2,y,z\n",
    "bad.txt": b"@CONVERTED_FROM_TEXT\n@ITEM=1=apple\n1 -1 2 -1 -2\n3 -1 -3 -1 -2\n4 -1 -2\n",
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_lines_are_reported_as_the_loader_does(name, tmp_path):
    path = tmp_path / name
    path.write_bytes(BAD_INPUTS[name])
    with pytest.raises(InputError) as single:
        load(path)
    with pytest.raises(InputError) as on_spark:
        publish_spark(path, tmp_path / "store")
    assert str(on_spark.value) == str(single.value)
    skipped = publish_spark(path, tmp_path / "skipping", k=2, skip_bad_lines=True)
    assert skipped.skipped_lines == load(path, skip_bad_lines=True).skipped_lines
    assert skipped.records == len(load(path, skip_bad_lines=True))


@pytest.mark.parametrize("split", [40, 1 << 20])
def test_fimi_partitions_read_with_arrays_or_by_line_give_the_loaders_records(spark, tmp_path,
                                                                             monkeypatch,
                                                                             split):
    """An ASCII partition of a FIMI file is read with arrays, another line by line (here: its
    non-ASCII terms); with comments, an empty line, CRLF breaks and repeated terms, the ids
    and records are the loader's, whether a local file is read by byte ranges (of ``split``
    bytes: a range may hold no line start) or a URL by Spark's text reader."""
    from cocktail.publish.spark import reading as engine

    monkeypatch.setattr(engine, "INPUT_SPLIT", split)
    ascii_lines = "# a comment\n" + "".join(
        f"{i % 5} {i % 7} {i % 5}" + ("\r\n" if i % 6 == 0 else "\n") for i in range(60))
    text = ascii_lines + "\n%a note\n" + "".join(f"café{i % 3} {i}\n" for i in range(30))
    path = tmp_path / "r.dat"
    path.write_bytes(text.encode("utf-8") + b"1 " * 60 + b"\n")
    loaded = load(path)
    assert len(loaded.ids) == 92  # 60, the empty line, 30, one of 121 bytes
    for source in (str(path), path.as_uri()):
        read = engine.read_records(spark, source, "fimi", False)
        data = engine.collect_dataset(read)
        assert data.ids == loaded.ids
        assert list(data.records) == list(loaded.records)
        assert read.records.getNumPartitions() >= len(path.read_bytes()) // split


def test_a_bad_line_in_a_later_byte_range_is_numbered_in_the_file(spark, tmp_path,
                                                                  monkeypatch):
    """A bad line in a byte range past the first is numbered in the whole file (the lines of
    the ranges before it added), as the loader numbers it; skipped, the ids stay the
    loader's."""
    from cocktail.publish.spark import reading as engine

    monkeypatch.setattr(engine, "INPUT_SPLIT", 16)
    path = tmp_path / "late.dat"
    path.write_bytes(b"".join(f"{i} {i + 1}\n".encode() for i in range(30)) + b"7 \xff 8\n9\n")
    with pytest.raises(InputError) as single:
        load(path)
    with pytest.raises(InputError) as on_spark:
        engine.read_records(spark, str(path), None, False)
    assert str(on_spark.value) == str(single.value)
    assert str(single.value).startswith(f"{path}:31: not valid UTF-8")
    skipped = engine.collect_dataset(engine.read_records(spark, str(path), None,
                                                         True))
    loaded = load(path, skip_bad_lines=True)
    assert (skipped.ids, skipped.skipped_lines) == (loaded.ids, loaded.skipped_lines)


def test_every_input_format_reads_the_same_records(tmp_path):
    """CSV rows grouped by id in order of first appearance (with a header, a record without
    terms and a repeated term), SPMF names applied, JSONL ids: the two engines publish the
    same record ids and records."""
    csv_rows = "".join(f"r{(i * 7) % 30},t{i % 9}\n" for i in range(120))
    files = {
        "r.csv": "record_id,term\n" + csv_rows + "empty,\nr3,t1\n",
        "r.jsonl": "".join(json.dumps({"id": f"r{i}", "terms": [f"t{i % 7}", f"t{i % 3}"]})
                           + "\n" for i in range(40)),
        "r.txt": "@ITEM=1=apple\n" + "".join(f"{i % 5 + 1} -1 {i % 4 + 6} -1 -2\n"
                                             for i in range(40)),
    }
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text)
        data = load(path)
        report = publish_spark(path, tmp_path / f"store-{name}")
        publication = Publication.open(LocalStore(tmp_path / f"store-{name}"))
        assert list(publication.record_ids) == list(data.ids), name
        assert report.records == len(data)


@pytest.mark.parametrize("text, options", [
    ("basket,item\n1,7\n2,8\n", {}),  # refused: its first row looks like a header
    ("basket;item\n1;7\n2;8\n1;9\n", {"delimiter": ";", "header": True}),
    ("o,p,q\n1,a,x\n2,b,y\n1,c\n", {"id_column": "o", "terms_column": "p"}),
    ("record_id,term\nu,a\n", {"header": False}),
    ("u,a\n", {"encoding": "latin-1"}),  # refused on Spark: its text reader reads UTF-8
])
def test_csv_options_read_as_the_loader_reads_them(spark, tmp_path, text, options):
    from cocktail.dataset import InputOptions
    from cocktail.publish.spark import reading
    from cocktail.publish.spark.context import _Borrowed

    path = tmp_path / "r.csv"
    path.write_text(text)
    for skip in (False, True):
        try:
            expected = load(path, skip_bad_lines=skip, **options)
        except InputError as error:
            expected = str(error)
        context = _Borrowed(spark)  # left as found: a later test counts its RDDs
        try:
            found = reading.collect_dataset(reading.read_records(
                context, str(path), None, skip, InputOptions(**options)))
        except InputError as error:
            found = str(error)
        finally:
            context.release()
        if "encoding" in options:
            assert found.endswith("the Spark engine reads text as UTF-8; convert it (iconv -f "
                                  "iso8859-1 -t utf-8) or publish with --engine single")
        elif isinstance(expected, str):
            assert found == expected
        else:
            assert (found.ids, list(found.records), found.skipped_lines) == \
                (expected.ids, list(expected.records), expected.skipped_lines)


def test_the_cli_reports_the_engine_and_its_phases(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "cocktail.cli", "publish", str(dataset_path("bms-webview-1.dat")),
         "--store", str(tmp_path / "s"), "--engine", "spark", "--json"],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    # Spark's and Hadoop's start-up notices and warnings are not the user's concern (the
    # JVM's own notice of the incubator module Spark adds cannot be turned off)
    assert [line for line in done.stderr.splitlines()
            if "incubator" not in line] == [], done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["engine"] == "spark" and report["public_chunks"] > 0
    assert set(report["phase_seconds"]) >= {"load", "tree", "partition", "aggregate", "write",
                                            "commit"}
    refused = subprocess.run(  # an append on Spark keeps the store's parameters too
        [sys.executable, "-m", "cocktail.cli", "publish", str(dataset_path("bms-webview-1.dat")),
         "--store", str(tmp_path / "s"), "--engine", "spark", "--append", "--k", "3"],
        capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2 and "drop --k" in refused.stderr


def test_a_publish_leaves_nothing_of_its_own_in_the_context_it_shares(spark, tmp_path):
    """A publish's job broadcast holds the owner's pseudonym key.  In a context that outlives
    the publish (a notebook's), every broadcast stayed, the key in a file of the driver's
    temporary directory, until the context stopped.  After a publish that context holds no
    file of its own, no file holding the key, and no RDD still persisted."""
    temp = Path(spark._temp_dir)  # where pyspark writes each broadcast's value
    files, persisted = set(temp.iterdir()), set(spark._jsc.getPersistentRDDs().keys())
    publish_spark(dataset_path("bms-webview-1.dat"), tmp_path / "s")
    key = bytes.fromhex((tmp_path / "s" / "private" / "owner.key").read_text().strip())
    assert set(temp.iterdir()) - files == set()
    assert not [path for path in temp.rglob("*") if path.is_file() and key in path.read_bytes()]
    assert set(spark._jsc.getPersistentRDDs().keys()) == persisted  # other tests' stay


def test_the_engines_jvm_runs_with_the_short_lived_flags(spark):
    """The driver's JVM (in local mode, the executors' too) was started with C1 alone and the
    serial collector, and the settings that carry them to a cluster's JVMs are set."""
    from cocktail.jvm import SHORT_LIVED, spark_driver_logging, spark_java_options

    runtime = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert set(SHORT_LIVED) <= set(runtime.getInputArguments())
    conf = spark.getConf()  # Spark puts its own Java 17 options first
    for key, flags in spark_java_options().items():
        assert flags in conf.get(key), (key, conf.get(key))
    assert conf.get("spark.driver.extraJavaOptions").endswith(spark_driver_logging())
    # bound to loopback, and only the JVM's launch saw the setting
    assert spark._jvm.System.getenv("SPARK_LOCAL_IP") == "127.0.0.1"
    assert "SPARK_LOCAL_IP" not in os.environ


def test_the_write_job_joins_its_shuffles_partition_by_partition(spark):
    """The leaves' files and the aggregation's travel in two shuffles with the one carrier
    partitioner: Spark must join them partition by partition (each write task then writes
    both shuffles' files in one keyed order).  Joined end to end instead (a union of 2n
    partitions), the aggregated units' files would all be written after the leaves'."""
    from cocktail.publish.spark.writer import Carrier

    carrier = Carrier(writers=4, readers=2)
    keys = [i.to_bytes(8, "big") for i in range(40)] + list(range(6))
    shuffles = [spark.parallelize([(key, n) for key in keys], 3).partitionBy(
        carrier.partitions, carrier) for n in (1, 2)]
    joined = spark.union(shuffles)
    assert joined.getNumPartitions() == carrier.partitions
    for index, pairs in enumerate(joined.glom().collect()):
        assert sorted(pairs, key=repr) == sorted(((key, n) for key in keys for n in (1, 2)
                                                  if carrier(key) == index), key=repr)
    assert {carrier(key) for key in range(6)} == set(carrier.report_partitions)
