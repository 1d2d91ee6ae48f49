"""``cocktail table`` end to end: (k,e) releases of Adult, appends, audits, interval queries,
bad input, and the attacks the audit must catch."""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

from cocktail.cli import main
from cocktail.store import open_store
from cocktail.tables import ke
from cocktail.tables.attack import differential_attack
from cocktail.tables.query import interval
from cocktail.tables.release import read_log, table_store

ADULT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "adult.csv"
QI = "age,sex,education,marital,race,country"


def run(*args: str, code: int = 0) -> dict:
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == code, result.output
    return json.loads(result.output)


@pytest.fixture(scope="module")
def adult_parts(tmp_path_factory) -> list[Path]:
    """The paper's 1,427 tuples (capital_loss > 0): a first half and ten increments."""
    if not ADULT.exists():
        pytest.skip(f"{ADULT} is missing (the shared datasets are not mounted)")
    with ADULT.open() as f:
        rows = list(csv.reader(f))
    header, data = rows[0], [r for r in rows[1:] if int(r[11]) > 0]
    assert len(data) == 1427
    out = tmp_path_factory.mktemp("adult")
    cuts = [0, 713] + [713 + 71 * i for i in range(1, 10)] + [len(data)]
    parts = []
    for number, (start, stop) in enumerate(zip(cuts, cuts[1:])):
        path = out / f"part{number:02d}.csv"
        with path.open("w", newline="") as f:
            csv.writer(f).writerows([header, *data[start:stop]])
        parts.append(path)
    return parts


@pytest.fixture(scope="module")
def adult_store(adult_parts, tmp_path_factory) -> str:
    store = str(tmp_path_factory.mktemp("tables") / "store")
    first = run("table", "publish", str(adult_parts[0]), "--qi", QI, "--sensitive",
                "capital_loss", "--distinct", "5", "--range", "100", "--store", store)
    assert (first["kind"], first["tuples"], first["buffered"]) == ("fresh", 713, 0)
    for part in adult_parts[1:]:
        report = run("table", "publish", "--append", str(part), "--store", store)
        assert report["kind"] == "append"
    return store


def _public_rows(store: str) -> list[dict]:
    tstore = table_store(open_store(store), "table")
    version = tstore.read("public", "CURRENT").decode().strip()
    text = tstore.read("public", f"{version}/table.csv").decode()
    return list(csv.DictReader(text.splitlines()))


def test_adult_end_to_end_audit_passes(adult_store):
    report = run("table", "audit", "--releases", "--store", adult_store)
    assert report["ok"], report["violations"]
    assert report["releases"] == 11 and report["pairwise_breaches"] == 0
    log = read_log(table_store(open_store(adult_store), "table"))
    published = sum(len(p) for p in log[-1]["partitions"])
    assert report["tuples"] == published
    assert published + len(log[-1]["buffered"]) == 1427  # nothing lost


def test_every_partition_is_ke_valid_in_every_release(adult_store):
    log = read_log(table_store(open_store(adult_store), "table"))
    values = _adult_values(adult_store)
    for entry in log:
        for members in entry["partitions"]:
            held = [values[t] for t in members]
            assert len(set(held)) >= 5 and max(held) - min(held) >= 100


def _adult_values(store: str) -> dict[int, float]:
    tstore = table_store(open_store(store), "table")
    version = tstore.read("public", "CURRENT").decode().strip()
    rows = csv.DictReader(tstore.read("private", f"{version}/tuples.csv").decode().splitlines())
    return {int(r["id"]): float(r["capital_loss"]) for r in rows}


@pytest.mark.parametrize("aggregate,where", [
    ("sum", "sex=Male,age>=40"), ("avg", "sex=Female"), ("min", "race=White"),
    ("max", "education=Bachelors"), ("count", "age<30"), ("sum", "")])
def test_interval_queries_contain_the_brute_force_answer(adult_store, adult_parts, aggregate,
                                                         where):
    answer = run("table", "query", aggregate, "--where", where, "--exact",
                 "--store", adult_store)
    truth = _brute_force(adult_parts, aggregate, where)
    assert answer["exact"] == pytest.approx(truth)
    assert answer["low"] - 1e-6 <= truth <= answer["high"] + 1e-6
    if truth:
        assert answer["relative_error"] == pytest.approx(
            abs((answer["low"] + answer["high"]) / 2 - truth) / abs(truth), abs=1e-5)


def _brute_force(parts: list[Path], aggregate: str, where: str) -> float:
    values = []
    for part in parts:
        with part.open() as f:
            for row in csv.DictReader(f):
                if all(_holds(row, condition) for condition in filter(None, where.split(","))):
                    values.append(float(row["capital_loss"]))
    return {"sum": sum, "count": len, "min": min, "max": max,
            "avg": lambda v: sum(v) / len(v)}[aggregate](values)


def _holds(row: dict, condition: str) -> bool:
    for op in ("<=", ">=", "=", "<", ">"):
        if op in condition:
            column, value = condition.split(op)
            cell = row[column]
            left, right = (float(cell), float(value)) if op != "=" else (cell, value)
            return {"<=": left <= right, ">=": left >= right, "=": left == right,
                    "<": left < right, ">": left > right}[op]
    raise AssertionError(condition)


def test_interval_bounds_are_tight():
    # one partition {1, 5, 9}, two tuples selected: SUM in [1+5, 5+9], MIN in [1, 5], MAX in [5, 9]
    groups = [([1.0, 5.0, 9.0], 2)]
    assert interval("sum", groups) == (6.0, 14.0)
    assert interval("min", groups) == (1.0, 5.0)
    assert interval("max", groups) == (5.0, 9.0)
    assert interval("avg", groups) == (3.0, 7.0)


def test_public_table_hides_input_order_and_private_columns(adult_store):
    rows = _public_rows(adult_store)
    assert list(rows[0]) == ["partition", *QI.split(","), "capital_loss"]
    keys = [(int(r["partition"]), *[r[c] for c in QI.split(",")]) for r in rows]
    assert keys == sorted(keys, key=lambda k: (k[0], *k[1:]))  # content order only
    public = Path(adult_store, "public")
    assert not any(p.name in ("tuples.csv", "state.json") for p in public.rglob("*"))


def test_shuffle_is_uniform(tmp_path):
    """Who gets which value inside a partition: each of 3 values lands on a given tuple
    a third of the time (chi-square over 300 releases, p > 0.001)."""
    data = tmp_path / "t.csv"
    data.write_text("q,s\na,10\nb,20\nc,30\n")
    seen = Counter()
    for trial in range(300):
        store = str(tmp_path / f"s{trial}")
        run("table", "publish", str(data), "--qi", "q", "--sensitive", "s", "--distinct", "3",
            "--range", "5", "--store", store)
        seen[next(r["s"] for r in _public_rows(store) if r["q"] == "a")] += 1
    expected = 100
    chi2 = sum((seen[v] - expected) ** 2 / expected for v in ("10", "20", "30"))
    assert set(seen) == {"10", "20", "30"}
    assert chi2 < 13.8, seen  # 2 degrees of freedom, p = 0.001


def test_infeasible_increment_is_buffered_then_placed(tmp_path):
    first, small, more = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    first.write_text("q,s\nA,1000\nB,3000\nC,5000\n")
    small.write_text("q,s\nG,4000\n")           # F6: G alone would be isolated
    more.write_text("q,s\nH,8000\nI,12000\n")   # with G: 3 distinct values, range 8000
    store = str(tmp_path / "store")
    run("table", "publish", str(first), "--qi", "q", "--sensitive", "s", "--distinct", "3",
        "--range", "2000", "--store", store)
    waiting = run("table", "publish", "--append", str(small), "--store", store)
    assert (waiting["tuples"], waiting["buffered"]) == (3, 1)
    placed = run("table", "publish", "--append", str(more), "--store", store)
    assert (placed["tuples"], placed["buffered"]) == (6, 0)
    assert run("table", "audit", "--releases", "--store", store)["ok"]
    human = CliRunner().invoke(main, ["table", "audit", "--releases", "--store", store])
    assert human.exit_code == 0 and "each checked by the differential attack" in human.stdout


def test_audit_catches_a_release_that_breaks_the_laminar_rule(tmp_path):
    """Rewrite the log as if the second release had been re-partitioned from scratch (the
    paper's Fig. 2): the differential attacker isolates Bob's salary."""
    first, second = tmp_path / "t1.csv", tmp_path / "t2.csv"
    first.write_text("name,s\nCarl,80000\nDave,81000\nBob,84000\nAlice,88000\nHank,89000\n"
                     "Ivy,92000\n")
    second.write_text("name,s\nGus,82000\nFay,93000\nEd,96000\n")
    store = str(tmp_path / "store")
    run("table", "publish", str(first), "--qi", "name", "--sensitive", "s", "--distinct", "3",
        "--range", "2000", "--store", store)
    run("table", "publish", "--append", str(second), "--store", store)
    assert run("table", "audit", "--releases", "--store", store)["ok"]
    tstore = table_store(open_store(store), "table")
    values = {0: 80000, 1: 81000, 2: 84000, 3: 88000, 4: 89000, 5: 92000, 6: 82000,
              7: 93000, 8: 96000}
    fresh = ke.static_ke(values, 3, 2000)   # what a history-blind publisher would release
    entry = json.loads(tstore.read("private", "releases/v000002.json"))
    entry["partitions"] = [sorted(p) for p in fresh]
    tstore.write("private", "releases/v000002.json", json.dumps(entry).encode(), pri_label=True)
    report = run("table", "audit", "--releases", "--store", store, code=1)
    assert any("differential attack" in v and "1 distinct" in v for v in report["violations"])
    assert any("splits or drops" in v for v in report["violations"])
    found = differential_attack([ke.static_ke({t: values[t] for t in range(6)}, 3, 2000),
                                 fresh], values, 3, 2000)
    assert frozenset({2}) in {f.tuples for f in found}  # Bob, alone


@pytest.mark.parametrize("content,args,message", [
    ("q,s\na,x\n", ["--distinct", "2", "--range", "0"],
     "t.csv:2: column 's' is 'x', not a number"),
    ("q,s\na,nan\n", ["--distinct", "2", "--range", "0"], "not a finite number"),
    ("q,t\na,1\n", ["--distinct", "2", "--range", "0"], "no column 's'"),
    ("q,s\na,1\nb,1\n", ["--distinct", "2", "--range", "0"], "1 distinct sensitive values"),
    ("q,s\na,1\nb,2\n", ["--distinct", "0", "--range", "0"], "k must be at least 1"),
    ("q,s\na,1\nb,2\n", ["--distinct", "2", "--range", "-1"], "e must be at least 0"),
    ("q,s\na,1,3\n", ["--distinct", "2", "--range", "0"], "t.csv:2: 3 fields, the header has 2"),
    ("", ["--distinct", "2", "--range", "0"], "empty file"),
    ("q,s,q\na,1,b\n", ["--distinct", "2", "--range", "0"], "t.csv: column 'q' appears twice"),
])
def test_bad_input_is_named_and_nothing_is_written(tmp_path, content, args, message):
    data = tmp_path / "t.csv"
    data.write_text(content)
    store = tmp_path / "store"
    report = run("table", "publish", str(data), "--qi", "q", "--sensitive", "s", *args,
                 "--store", str(store), code=2)
    assert message in report["error"]
    assert not any(p.is_file() for p in store.rglob("*")) if store.exists() else True


def test_a_second_fresh_publish_is_refused(tmp_path):
    data = tmp_path / "t.csv"
    data.write_text("q,s\na,1\nb,5\n")
    store = str(tmp_path / "store")
    args = ["table", "publish", str(data), "--qi", "q", "--sensitive", "s", "--distinct", "2",
            "--range", "1", "--store", store]
    run(*args)
    assert "--append" in run(*args, code=3)["error"]


def test_append_with_other_columns_names_them(tmp_path):
    data, other = tmp_path / "t.csv", tmp_path / "u.csv"
    data.write_text("q,s\na,1\nb,5\n")
    other.write_text("q,salary\nc,9\n")
    store = str(tmp_path / "store")
    run("table", "publish", str(data), "--qi", "q", "--sensitive", "s", "--distinct", "2",
        "--range", "1", "--store", store)
    assert "no column 's'" in run("table", "publish", "--append", str(other), "--store", store,
                                  code=2)["error"]


def test_query_conditions_must_name_quasi_identifiers(adult_store):
    error = run("table", "query", "sum", "--where", "income=>50K", "--store", adult_store,
                code=2)["error"]
    assert "not a quasi-identifier" in error


def test_tables_live_beside_a_basket_publication(tmp_path):
    store = str(tmp_path / "store")
    baskets = tmp_path / "b.dat"
    baskets.write_text("".join(f"{i % 7} {i % 5 + 10}\n" for i in range(200)))
    CliRunner().invoke(main, ["publish", str(baskets), "--store", store, "--json"])
    data = tmp_path / "t.csv"
    data.write_text("q,s\na,1\nb,5\nc,9\n")
    run("table", "publish", str(data), "--qi", "q", "--sensitive", "s", "--distinct", "2",
        "--range", "1", "--store", store)
    assert run("audit", "--store", store)["ok"]
    assert run("table", "audit", "--store", store)["ok"]
    assert math.isclose(run("table", "query", "sum", "--store", store)["low"], 15)


def test_a_byte_order_mark_is_stripped(tmp_path):
    """Spreadsheets save UTF-8 with a BOM; the first column's name must still be found."""
    data = tmp_path / "t.csv"
    data.write_bytes("q,s\na,1\nb,5\n".encode("utf-8-sig"))
    report = run("table", "publish", str(data), "--qi", "q", "--sensitive", "s", "--distinct", "2",
                 "--range", "4", "--store", str(tmp_path / "store"))
    assert report["tuples"] == 2
    assert _public_rows(str(tmp_path / "store"))[0].keys() == {"partition", "q", "s"}


@pytest.mark.parametrize("content,person,message", [
    ("pid,q,s\np1,a,X\np2,b,Y\np1,c,X\n", "pid", "t.csv:4: column 'pid' is 'p1' again (line 2)"),
    ("pid,q,s\np1,a,X\n,b,Y\n", "pid", "t.csv:3: column 'pid' is empty"),
    ("pid,q,s\np1,a,X\np2,b,Y\n", "q", "'q' is a quasi-identifier"),
    ("pid,q,s\np1,a,X\np2,b,Y\n", " ", "--id needs a column name"),
])
@pytest.mark.parametrize("model", [["--model", "rho-clone", "--class-size", "1"],
                                   ["--model", "l-diverse", "--distinct", "2"]])
def test_a_bad_person_column_is_refused(tmp_path, content, person, message, model):
    """--id names each individual once: a repeated or empty id would merge people in the
    composition attack (one person, two truths)."""
    data = tmp_path / "t.csv"
    data.write_text(content)
    store = tmp_path / "store"
    report = run("table", "publish", str(data), "--qi", "q", "--sensitive", "s", *model,
                 "--id", person, "--store", str(store), code=2)
    assert message in report["error"]
    assert not store.exists() or not any(p.is_file() for p in store.rglob("*"))


def test_options_a_model_does_not_use_are_reported_ignored(tmp_path):
    data = tmp_path / "t.csv"
    data.write_text("pid,q,s\np1,a,1\np2,b,5\n")
    result = CliRunner().invoke(main, [
        "table", "publish", str(data), "--qi", "q", "--sensitive", "s", "--distinct", "2",
        "--range", "4", "--id", "pid", "--store", str(tmp_path / "store"), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["tuples"] == 2
    assert "--model ke ignores --id" in result.stderr
    quiet = CliRunner().invoke(main, [
        "table", "publish", str(data), "--qi", "q", "--sensitive", "s", "--distinct", "2",
        "--range", "4", "--store", str(tmp_path / "other"), "--json"])
    assert quiet.exit_code == 0 and quiet.stderr == ""


def small_store(tmp_path: Path, values: list[int], e: int) -> str:
    data = tmp_path / "t.csv"
    data.write_text("q,s\n" + "".join(f"{chr(97 + i)},{v}\n" for i, v in enumerate(values)))
    store = str(tmp_path / "store")
    run("table", "publish", str(data), "--qi", "q", "--sensitive", "s", "--distinct", "3",
        "--range", str(e), "--store", store)
    return store


def test_interval_bounds_round_outwards(tmp_path):
    """Every tuple selected: AVG is exactly 809000/9 = 89888.888…; rounded to the nearest
    millionth, [89888.888889, 89888.888889] would exclude it."""
    values = [85000, 86000, 87000, 88000, 89000, 90000, 91000, 92000, 101000]
    store = small_store(tmp_path, values, 5000)
    truth = Fraction(sum(values), len(values))
    answer = run("table", "query", "avg", "--exact", "--store", store)
    assert Fraction(answer["low"]) <= truth <= Fraction(answer["high"])
    assert answer["high"] - answer["low"] <= 2e-6
    for aggregate, exact in (("sum", sum(values)), ("min", min(values)), ("max", max(values))):
        got = run("table", "query", aggregate, "--store", store)
        assert Fraction(got["low"]) <= exact <= Fraction(got["high"])


def test_count_of_an_empty_selection_is_zero(tmp_path):
    store = small_store(tmp_path, [0, 10000, 20000], 20000)
    answer = run("table", "query", "count", "--where", "q=zzz", "--exact", "--store", store)
    assert (answer["selected"], answer["low"], answer["high"], answer["exact"]) == (0, 0, 0, 0)
    assert run("table", "query", "avg", "--where", "q=zzz", "--store", store)["low"] is None
    text = CliRunner().invoke(main, ["table", "query", "count", "--where", "q=zzz", "--store",
                                     store])
    assert "count over 0 tuples: [0, 0]" in text.output
