"""Tables as input: Parquet files and DataFrames (pandas, polars, Arrow, Spark), in both
shapes (a (record id, term) pair a row; a record a row with a list of terms).  The same
records give the same dataset and the same publication as their FIMI file; a bad row is named
as a bad line is, and nothing is published."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

pa = pytest.importorskip("pyarrow", reason="the [parquet] extra (the test extra installs it)")
pq = pytest.importorskip("pyarrow.parquet")
pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")

from cocktail.cli import main  # noqa: E402
from cocktail.dataset import InputError, from_frame, load, write_fimi, write_parquet  # noqa: E402
from cocktail.publish import PublishParams, publish  # noqa: E402
from cocktail.store.local import LocalStore  # noqa: E402
from cocktail.synthetic import SyntheticSpec, generate  # noqa: E402

from .test_spark_publish import content  # noqa: E402

# An empty record (a FIMI empty line, an empty list, a row with an empty term) among them.
RECORDS = [*generate(SyntheticSpec(records=3000, items=60, seed=4)), frozenset(),
           frozenset({"7", "12"})]


def long_table(records, ids=None) -> dict[str, list]:
    """A (record id, term) pair a row, a record without terms as one row with term ""."""
    ids = ids or [str(n) for n in range(1, len(records) + 1)]
    pairs = [(i, term) for i, record in zip(ids, records) for term in sorted(record) or [""]]
    return {"record_id": [i for i, _ in pairs], "term": [t for _, t in pairs]}


@pytest.fixture(scope="module")
def fimi(tmp_path_factory):
    path = tmp_path_factory.mktemp("frames") / "r.dat"
    write_fimi(RECORDS, path)
    return path


def shapes(root) -> dict[str, object]:
    """The same records in every shape a table takes, ids the FIMI file's line numbers."""
    listed = [sorted(record) for record in RECORDS]
    numbers = list(range(1, len(RECORDS) + 1))
    long = long_table(RECORDS)
    write_parquet(RECORDS, root / "list.parquet")
    pq.write_table(pa.table({"record_id": [int(i) for i in long["record_id"]],
                             "term": long["term"]}), root / "long.parquet",
                   row_group_size=4000)  # several row groups, each its own dictionary
    return {
        "parquet, a list a row": root / "list.parquet",
        "parquet, a pair a row": root / "long.parquet",
        "pandas, a list a row": pd.DataFrame({"basket": listed}),
        "pandas, a pair a row": pd.DataFrame(long),
        "polars, a list a row, ids": pl.DataFrame({"id": numbers, "items": listed}),
        "polars, a pair a row": pl.DataFrame(long),
        "arrow, a list a row": pa.table({"terms": listed}),
    }


def read(source):
    return load(source) if hasattr(source, "suffix") else from_frame(source)


def test_every_shape_reads_the_records_and_ids_of_the_fimi_file(fimi, tmp_path):
    expected = load(fimi)
    for name, source in shapes(tmp_path).items():
        data = read(source)
        assert data.ids == expected.ids, name
        assert data.records == expected.records, name
        assert data.records.names == expected.records.names, name
        assert data.numbered == ("list" in name and "ids" not in name), name


def test_every_shape_publishes_the_fimi_files_publication(fimi, tmp_path):
    """The same tree, clusters, chunks (term sets and subrecords by record), aggregation,
    record ids and term index: only the random chunk ids and pseudonyms differ."""
    params = PublishParams(k=5, m=2, cluster_size=500)
    publish(load(fimi), LocalStore(tmp_path / "fimi"), params)
    for number, (name, source) in enumerate(shapes(tmp_path).items()):
        publish(read(source), LocalStore(tmp_path / f"s{number}"), params)
        assert content(tmp_path / f"s{number}") == content(tmp_path / "fimi"), name


def test_the_cli_publishes_a_generated_parquet_file_as_its_fimi_twin(tmp_path):
    run = CliRunner()
    for name in ("g.dat", "g.parquet"):
        assert run.invoke(main, ["generate", str(tmp_path / name), "--records", "800",
                                 "--seed", "5"]).exit_code == 0
        result = run.invoke(main, ["publish", str(tmp_path / name), "--store",
                                   str(tmp_path / f"store-{name}"), "--k", "3", "--json"])
        assert result.exit_code == 0, result.output
    assert load(tmp_path / "g.parquet").records == load(tmp_path / "g.dat").records
    assert content(tmp_path / "store-g.parquet") == content(tmp_path / "store-g.dat")


@pytest.mark.parametrize("table,row,message", [
    ({"id": ["a", None, "c"], "term": ["x", "y", "z"]}, 2, "null record id"),
    ({"id": ["a", " ", "c"], "term": ["x", "y", "z"]}, 2, "empty record id"),
    ({"id": ["a", "b", "c"], "term": ["x", "y", None]}, 3, "null term"),
    ({"id": ["a", "b", "c"], "terms": [["x"], ["y", None], []]}, 2, "null term"),
    ({"id": ["a", "b", "c"], "terms": [["x"], [" "], []]}, 2, "empty term"),
    ({"id": ["a", "b", "c"], "terms": [["x"], None, []]}, 2, "null list of terms"),
    ({"id": ["a", "b", "a"], "terms": [["x"], ["y"], []]}, 3,
     "duplicate record id 'a' (first on row 1)"),
    ({"terms": [["x"], ["y"], None, ["z", None]]}, 3, "null list of terms"),
])
def test_a_bad_row_is_named_or_skipped(tmp_path, table, row, message):
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table(table), path)
    for source, read_it in ((str(path), lambda **o: load(path, **o)),
                            ("DataFrame", lambda **o: from_frame(pd.DataFrame(table), **o))):
        with pytest.raises(InputError) as bad:
            read_it()
        assert str(bad.value) == f"{source}: row {row}: {message}"
        kept = read_it(skip_bad_lines=True)
        assert kept.skipped_lines >= 1 and len(kept) < len(table["terms" if "terms" in table
                                                               else "term"])


def test_a_value_neither_string_nor_integer_is_named_by_its_row(tmp_path):
    """pandas holds mixed values in an object column: strings beside integers are read as
    JSON Lines reads them, anything else names its row (and is skipped with the rest of it)."""
    frame = pd.DataFrame({"id": ["a", 2, "c"], "terms": [["x", 1], ["y", 2.5], ["z"]]})
    with pytest.raises(InputError, match=r"^DataFrame: row 2: column 'terms' holds 2\.5 "
                                         r"\(float\), not a string or an integer$"):
        from_frame(frame)
    kept = from_frame(frame, skip_bad_lines=True)
    assert (kept.ids, list(map(sorted, kept.records))) == (("a", "c"), [["1", "x"], ["z"]])
    with pytest.raises(InputError, match="terms .column 't'. must be strings or integers, "
                                         "not double .pandas stores integers beside a "
                                         "missing value as floats.$"):
        from_frame(pd.DataFrame({"id": ["a", "b"], "t": [1, None]}))


def test_ids_and_terms_are_stripped_and_repeats_collapse_as_in_csv():
    data = from_frame(pa.table({"id": [" u", "u ", "v", "w"], "term": ["a", " a", "b", ""]}))
    assert data.ids == ("u", "v", "w")
    assert list(map(sorted, data.records)) == [["a"], ["b"], []]
    assert data.duplicate_terms == 1


@pytest.mark.parametrize("columns,options,ids,first", [
    ({"basket": [5, 5, 6], "item": ["a", "b", "c"]}, {}, ("5", "6"), {"a", "b"}),  # id first
    ({"x": ["r"], "ys": [["a", "b"]]}, {}, ("r",), {"a", "b"}),       # the list column
    ({"items": [["a"], ["b"]]}, {}, ("1", "2"), {"a"}),               # row numbers
    ({"when": [3], "id": ["r"], "term": ["a"]}, {}, ("r",), {"a"}),   # by name
    ({"a": ["r"], "b": ["t"], "c": [1]}, {"id_column": "a", "terms_column": "b"}, ("r",),
     {"t"}),
    ({"a": ["r"], "b": ["t"]}, {"id_column": "b"}, ("t",), {"r"}),   # the other of two
])
def test_columns_are_found_by_name_or_shape(columns, options, ids, first):
    data = from_frame(pd.DataFrame(columns), **options)
    assert (data.ids, data.records[0]) == (ids, first)


@pytest.mark.parametrize("columns,options,error", [
    ({"a": ["r"], "b": ["t"], "c": ["u"]}, {}, "which column holds the terms?"),
    ({"a": [["r"]], "b": [["t"]]}, {}, "which column holds the terms?"),
    ({"a": ["r"], "b": ["t"], "term": ["u"]}, {}, "which column holds the record ids?"),
    ({"a": ["r"], "b": ["t"]}, {"terms_column": "c"}, "no column 'c' (its columns: 'a', 'b')"),
])
def test_an_ambiguous_or_missing_column_is_refused(columns, options, error):
    with pytest.raises(InputError, match="^DataFrame: " + error.replace("(", r"\(")
                       .replace(")", r"\)").replace("?", r"\?")):
        from_frame(pd.DataFrame(columns), **options)


def test_a_failed_table_publishes_nothing(tmp_path):
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"record_id": [1, 2, 2], "term": ["a", None, "b"]}), path)
    store = tmp_path / "store"
    result = CliRunner().invoke(main, ["publish", str(path), "--store", str(store), "--json"])
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"] == f"{path}: row 2: null term"
    assert not store.exists()
    result = CliRunner().invoke(main, ["publish", str(path), "--store", str(store), "--k", "2",
                                       "--m", "1", "--skip-bad-lines", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["records"] == 2


def test_options_a_table_has_no_use_for_are_refused(tmp_path):
    path = tmp_path / "t.parquet"
    write_parquet([{"a"}], path)
    for option in (["--delimiter", ";"], ["--header"], ["--encoding", "latin-1"]):
        result = CliRunner().invoke(main, ["publish", str(path), "--store",
                                           str(tmp_path / "s"), "--json", *option])
        assert result.exit_code == 2
        assert json.loads(result.stdout)["error"].startswith(f"{path}: parquet input takes no ")
    result = CliRunner().invoke(main, ["publish", str(tmp_path / "missing.parquet"), "--store",
                                       str(tmp_path / "s"), "--json"])
    assert json.loads(result.stdout)["error"] == f"{tmp_path / 'missing.parquet'}: no such file"
    (tmp_path / "text.parquet").write_text("1 2 3\n")
    with pytest.raises(InputError, match="text.parquet: not a Parquet file"):
        load(tmp_path / "text.parquet")


def test_a_directory_of_parquet_files_is_one_input(tmp_path):
    """As Spark writes a table: part files in a directory, read in name order."""
    (tmp_path / "out.parquet").mkdir()
    write_parquet(RECORDS[:10], tmp_path / "out.parquet" / "part-0.parquet")
    write_parquet(RECORDS[10:20], tmp_path / "out.parquet" / "part-1.parquet")
    assert load(tmp_path / "out.parquet").records == RECORDS[:20]


@pytest.mark.xdist_group("spark")
def test_spark_publishes_a_spark_dataframe_and_a_parquet_file_as_the_fimi_file(
        spark, fimi, tmp_path):
    from pyspark.sql import SparkSession

    from cocktail.publish.spark import SparkSettings, publish_spark

    params = PublishParams(k=5, m=2, cluster_size=500)
    publish(load(fimi), LocalStore(tmp_path / "fimi"), params)
    session = SparkSession.builder.getOrCreate()
    long = long_table(RECORDS)
    frame = session.createDataFrame(list(zip(long["record_id"], long["term"])),
                                    "record_id string, term string")
    write_parquet(RECORDS, tmp_path / "r.parquet")
    for name, source in (("frame", frame), ("parquet", str(tmp_path / "r.parquet")),
                         ("url", (tmp_path / "r.parquet").as_uri())):
        report = publish_spark(source, LocalStore(tmp_path / name), params,
                               SparkSettings("local[2]"))
        assert report.records == len(RECORDS)
        assert content(tmp_path / name) == content(tmp_path / "fimi"), name
