"""The library's front door (``import cocktail``): lazy and documented; the owner's store
publishing from a path and from memory alike; append, audit, exact counts (against brute
force), versions and the report; and every failure's exit status, the CLI's for the same
failure."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import cocktail
from cocktail.cli import main
from cocktail.cli.contract import classify
from cocktail.dataset import Dataset, load, write_fimi
from cocktail.errors import ExitCode
from cocktail.extras import install_command
from cocktail.query import Publication
from cocktail.synthetic import SyntheticSpec, generate, random_conjunctions

from .test_spark_publish import content

REPO = Path(__file__).resolve().parents[1]
K, M = 5, 3


def cli(*args) -> int:
    return CliRunner().invoke(main, [str(a) for a in args]).exit_code


@pytest.fixture(scope="module")
def records() -> list[frozenset[str]]:
    return generate(SyntheticSpec(records=2_000, seed=1))


@pytest.fixture(scope="module")
def files(records, tmp_path_factory) -> dict[str, Path]:
    """The records as FIMI (ids 1, 2, ...) and as CSV (ids r1, r2, ...)."""
    root = tmp_path_factory.mktemp("inputs")
    write_fimi(records, root / "baskets.dat")
    rows = [f"r{n},{term}" for n, record in enumerate(records, 1)
            for term in sorted(record) or [""]]
    (root / "baskets.csv").write_text("record_id,term\n" + "\n".join(rows) + "\n")
    return {"fimi": root / "baskets.dat", "csv": root / "baskets.csv"}


def test_import_cocktail_is_cheap_and_says_where_to_start():
    """`import cocktail` loads nothing but itself; dir() and help() show the front door."""
    code = ("import sys, cocktail; print(sorted(m for m in sys.modules if m.startswith('cocktail')"
            " or m in ('numpy', 'click', 'pandas')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=REPO).stdout
    assert loaded.strip() == "['cocktail']"
    assert {"OwnerStore", "Client", "exit_status", "ExitCode"} <= set(dir(cocktail))
    assert "OwnerStore" in cocktail.__doc__ and "docs/python-api.md" in cocktail.__doc__
    for name in set(cocktail.__all__) - {"Client"}:  # Client: the analysts' side, elsewhere
        value = getattr(cocktail, name)
        assert value.__doc__, name
        assert value.__module__.startswith("cocktail."), name
    with pytest.raises(AttributeError):
        cocktail.no_such_name  # noqa: B018


def test_every_public_name_has_an_executed_example():
    """docs/python-api.md runs its python blocks (tests/test_docs.py): each name the front
    door exports and each public method of OwnerStore is used in one."""
    from .test_docs import fenced_blocks

    code = "\n".join(b.text for b in fenced_blocks(REPO / "docs" / "python-api.md")
                     if b.tag == "python")
    methods = [n for n in vars(cocktail.OwnerStore) if not n.startswith("_")]
    missing = [n for n in [*cocktail.__all__, *methods] if n != "Client"
               and not re.search(rf"\b{n}\b", code)]
    assert not missing, missing
    assert all(getattr(cocktail.OwnerStore, n).__doc__ for n in methods)


def same_records(path: Path, data, tmp_path: Path) -> None:
    """Publishing the file and ``data`` (the same records in memory) gives the same
    publication: the tree, the clusters, every chunk's terms and subrecords by record, the
    record ids and the term index (chunk ids and pseudonyms are random)."""
    from_file = cocktail.OwnerStore(tmp_path / "file", create=True)
    from_memory = cocktail.OwnerStore(tmp_path / "memory", create=True)
    file_report = from_file.publish(path, k=K, m=M, workers=1)
    memory_report = from_memory.publish(data, k=K, m=M, workers=1)
    assert memory_report.records == file_report.records
    assert content(tmp_path / "memory") == content(tmp_path / "file")
    assert from_memory.audit().ok


def test_a_list_of_records_publishes_as_the_fimi_file(records, files, tmp_path):
    same_records(files["fimi"], [sorted(r) for r in records], tmp_path)


def test_a_mapping_publishes_as_the_csv_file(records, files, tmp_path):
    same_records(files["csv"], {f"r{n}": r for n, r in enumerate(records, 1)}, tmp_path)


def test_a_dataframe_publishes_as_the_csv_file(records, files, tmp_path):
    pandas = pytest.importorskip("pandas")
    long = pandas.read_csv(files["csv"], dtype=str, keep_default_na=False)
    same_records(files["csv"], long, tmp_path / "long")
    lists = pandas.DataFrame({"record_id": [f"r{n}" for n in range(1, len(records) + 1)],
                              "terms": [sorted(r) for r in records]})
    same_records(files["csv"], lists, tmp_path / "lists")


def test_a_dataset_publishes_as_its_file(files, tmp_path):
    same_records(files["fimi"], load(files["fimi"]), tmp_path)


@pytest.fixture(scope="module")
def appended(records, files, tmp_path_factory):
    """A store published from the FIMI file, then appended records from memory."""
    store = cocktail.OwnerStore(tmp_path_factory.mktemp("owner") / "store", create=True)
    store.publish(files["fimi"], k=K, m=M)
    more = generate(SyntheticSpec(records=400, seed=2))
    report = store.append(more)
    return store, [*records, *more], report


def test_append_then_audit_every_release(appended):
    store, everything, report = appended
    assert report.version == "v000002" and report.appended_records == 400
    assert report.records == len(everything)
    assert store.audit().ok
    history = store.audit(releases=True)
    assert history.ok and [r["kind"] for r in history.releases] == ["fresh", "append"]


def test_exact_counts_equal_brute_force(appended):
    store, everything, _ = appended
    truth = Dataset(tuple(map(str, range(len(everything)))), everything, "truth", "memory")
    queries = random_conjunctions(everything, 60, seed=3)
    texts = ["count(" + " & ".join(q) + ")" for q in queries]
    answers = store.exact_batch(texts)
    assert answers.answers == [truth.count_containing(q) for q in queries]
    assert answers.version == "v000002" and len(answers.queries) == len(texts)
    a, b = queries[0][0], queries[1][0]
    assert store.exact(f"2*count({a}) - count({b})") == \
        2 * truth.count_containing([a]) - truth.count_containing([b])


def test_versions_report_and_tables(appended, tmp_path):
    store, _, _ = appended
    versions = store.versions()
    assert versions.current == store.current_version == "v000002"
    assert versions.kept == ["v000001", "v000002"]
    pytest.importorskip("pandas")
    table = versions.to_pandas()
    assert table["version"].tolist() == ["v000001", "v000002"]
    assert table["kind"].tolist() == ["fresh", "append"]
    assert table["current"].tolist() == [False, True]
    assert store.exact_batch("count(1)\ncount(2)").to_pandas().columns.tolist() == \
        ["query", "answer"]
    assert store.audit().to_pandas().columns.tolist() == ["part", "kind", "where", "detail"]
    assert store.audit(releases=True).to_pandas().empty
    pytest.importorskip("plotly")
    written = store.report(tmp_path / "report.html")
    assert written.read_text().lstrip().lower().startswith("<!doctype html")


def test_a_table_without_pandas_names_its_extra(appended, monkeypatch):
    store, _, _ = appended
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if it were not installed
    with pytest.raises(cocktail.MissingExtra, match=re.escape(install_command("frames"))
                       ) as raised:
        store.versions().to_pandas()
    assert raised.value.extra == "frames"
    assert cocktail.exit_status(raised.value) == ExitCode.USAGE


@pytest.mark.parametrize("data,message", [
    ([["a", "b"], "ab"], "records in memory: record 2: expected a collection of terms, got str"),
    ([["a", " "]], "record 1: empty term"),
    ([["a", 1.5]], "record 1: a term must be a string or an integer, got float"),
    ({"x": ["a"], " x ": ["b"]}, "record 2: duplicate record id 'x' (first at record 1)"),
    ([], "records in memory: no records"),
    (3, "cannot publish a int"),
])
def test_bad_records_in_memory_are_named_and_nothing_is_published(data, message, tmp_path):
    store = cocktail.OwnerStore(tmp_path / "s", create=True)
    with pytest.raises(cocktail.InputError) as raised:
        store.publish(data, k=2)
    assert message in str(raised.value)
    assert cocktail.exit_status(raised.value) == ExitCode.USAGE
    assert store.current_version is None


def test_bad_dataframes_are_named(tmp_path):
    """A DataFrame goes through cocktail.dataset.from_frame, the Parquet reader's checks: the
    bad row named, nothing published."""
    pandas = pytest.importorskip("pandas")
    store = cocktail.OwnerStore(tmp_path / "s", create=True)
    for frame, message in [
            (pandas.DataFrame({"a": [1], "b": ["a"], "c": [1]}), "which column holds the terms"),
            (pandas.DataFrame({"record_id": ["a", None], "term": ["x", "y"]}),
             "row 2: null record id"),
            (pandas.DataFrame({"record_id": [1, 1, 2], "term": [7, 8, None]}),
             "integers beside a missing value as floats"),
            (pandas.DataFrame({"terms": [["x"], None]}), "row 2: null list of terms")]:
        with pytest.raises(cocktail.InputError, match=message):
            store.publish(frame, k=2)
    assert store.current_version is None


def test_a_long_dataframe_keeps_its_ids_and_integer_terms():
    """Integer terms read as their text, ids as given, a term repeated in a record counted."""
    pandas = pytest.importorskip("pandas")
    from cocktail.inputs import as_dataset

    frame = pandas.DataFrame({"record_id": [1, 1, 2, 3, 3],
                              "term": pandas.array([7, 8, 9, 7, 7], dtype="Int64")})
    dataset = as_dataset(frame)
    assert dataset.ids == ("1", "2", "3") and not dataset.numbered
    assert list(dataset.records) == [{"7", "8"}, {"9"}, {"7"}]
    assert dataset.duplicate_terms == 1


def test_records_with_ids_append_with_their_ids(files, tmp_path):
    """A mapping or DataFrame carries its records' ids, as CSV does: an append keeps them,
    and refuses one already published."""
    store = cocktail.OwnerStore(tmp_path / "s", create=True)
    store.publish(files["csv"], k=K)
    store.append({"new1": ["1", "2"], "new2": ["2"]})
    ids = Publication.open(store.backend).record_ids
    assert ids[-2:] == ["new1", "new2"]
    with pytest.raises(ValueError, match="record id 'r7' is already published") as raised:
        store.append({"r7": ["1"]})
    assert cocktail.exit_status(raised.value) == ExitCode.USAGE


# -- failures: the front door's exception and the CLI's exit status for the same failure ----

def test_every_exported_exception_maps_as_the_cli_classifies_it():
    """One table: the library's exit_status of each exception the front door exports (and
    of the ones the CLI's own test names) equals the CLI's classification, and none of them
    is an internal error."""
    from concurrent.futures.process import BrokenProcessPool

    from cocktail.dp.ledger import BudgetExhausted, Forbidden, LedgerError, Unauthorized
    from cocktail.releases import RebaseRefused
    from cocktail.store import StoreUnavailable

    exported = [getattr(cocktail, n) for n in cocktail.__all__ if n != "Client"]
    classes = [c for c in exported if isinstance(c, type) and issubclass(c, BaseException)]
    assert len(classes) == 6
    failures = [c("x") if c is not cocktail.MissingExtra else c("pandas", "frames")
                for c in classes]
    failures += [e("x") for e in (RebaseRefused, StoreUnavailable, BudgetExhausted, Forbidden,
                                  Unauthorized, LedgerError, BrokenProcessPool, ValueError,
                                  FileNotFoundError, PermissionError)]
    for failure in failures:
        assert cocktail.exit_status(failure) == classify(failure)[0], failure
        assert cocktail.exit_status(failure) != ExitCode.INTERNAL, failure
    assert cocktail.exit_status(RuntimeError("a bug")) == ExitCode.INTERNAL


def test_a_store_without_publication_is_2_here_and_there(tmp_path):
    typo = tmp_path / "typo"
    with pytest.raises(cocktail.NoPublication) as raised:
        cocktail.OwnerStore(typo)
    assert "create=True" in str(raised.value) and not typo.exists()
    assert cocktail.exit_status(raised.value) == ExitCode.USAGE == cli("report", "--store", typo)
    assert cli("query", "--exact", "count(1)", "--store", typo) == ExitCode.USAGE
    (tmp_path / "d.dat").write_text("a b\n")
    empty = cocktail.OwnerStore(typo, create=True)
    with pytest.raises(cocktail.StoreError, match="holds no publication yet") as raised:
        empty.append(tmp_path / "d.dat")
    assert cocktail.exit_status(raised.value) == ExitCode.USAGE == \
        cli("publish", tmp_path / "d.dat", "--append", "--store", typo)


def test_a_second_fresh_partition_is_refused_3_here_and_there(files, tmp_path):
    store = cocktail.OwnerStore(tmp_path / "s", create=True)
    store.publish(files["fimi"], k=K)
    with pytest.raises(cocktail.Refused) as raised:
        store.publish(files["fimi"], k=K)
    assert cocktail.exit_status(raised.value) == ExitCode.REFUSED == \
        cli("publish", files["fimi"], "--store", tmp_path / "s", "--k", K)
    assert store.versions().kept == ["v000001"]


def test_bad_input_query_and_audit_are_2_here_and_there(files, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "terms": ["a"]}\n{"id": 2}\n')
    store = cocktail.OwnerStore(tmp_path / "s", create=True)
    failures = [(lambda: store.publish(bad), ["publish", bad, "--store", tmp_path / "s"])]
    store.publish(files["fimi"], k=K)
    where = ["--store", tmp_path / "s"]
    failures += [(lambda: store.exact("count(a &"), ["query", "--exact", "count(a &", *where]),
                 (lambda: store.audit(k=2), ["audit", "--k", 2, *where]),
                 (lambda: store.exact("count(1)", runner="nope"),
                  ["query", "--exact", "count(1)", "--runner", "nope", *where])]
    for call, args in failures:
        with pytest.raises(Exception) as raised:  # noqa: PT011 - each its own type
            call()
        assert cocktail.exit_status(raised.value) == ExitCode.USAGE == cli(*args), args
    failure = json.loads(CliRunner().invoke(main, ["audit", "--k", "2", *map(str, where),
                                                   "--json"]).stdout)
    assert failure["code"] == ExitCode.USAGE and "weaker" in failure["error"]
