"""ρ-cloning (Algorithm 1 of the ρ-cloning paper) and the composition attack it answers:
the worked example, the counterexamples to the paper's bound, and the attack measured."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from cocktail.attacks.composition import GroupRelease, composition
from cocktail.cli import main
from cocktail.tables.data import Row
from cocktail.tables.rho import clone, rho, rounding


def table(counts: dict[str, int]) -> list[Row]:
    rows, i = [], 0
    for value, count in counts.items():
        for _ in range(count):
            rows.append(Row(i, (str(20 + i % 40), "F" if i % 3 else "M"), value))
            i += 1
    return rows


def test_worked_example():
    """Table 3(a): J5 B7 G3 L4 gives b = 3, λ = (2,2,1,1), one counterfeit J, one B and one
    L suppressed, and max ρ = |2/6 − 5/19| = 0.0702."""
    counts = {"J": 5, "B": 7, "G": 3, "L": 4}
    plan = rounding(counts)
    assert plan.b == 3
    assert [plan.lam[v] for v in "JBGL"] == [2, 2, 1, 1]
    assert plan.counterfeit == {"J": 1} and plan.suppress == {"B": 1, "L": 1}
    made = clone(table(counts), [True, False], k=3)
    assert len(made.counterfeit) == 1 and len(made.suppressed) == 2
    assert made.rho == pytest.approx(0.0702, abs=1e-4)
    assert [len(c) for c in made.classes] == [6, 6, 6]
    assert all(Counter(made.counterfeit.get(t) or _value(made, t, counts) for t in c) ==
               Counter({"J": 2, "B": 2, "G": 1, "L": 1}) for c in made.classes)
    assert all(len(s) >= 3 for subs in made.subclasses for s in subs)


def _value(made, t: int, counts: dict[str, int]) -> str:
    rows = {row.id: row.s for row in table(counts)}
    return rows[t]


def test_the_papers_bound_is_false_from_four_values():
    """The paper bounds ρ by 1/(3u − 1) (0.091 for u = 4); counts (5,7,7,8) give 0.1037."""
    counts = {"a": 5, "b": 7, "c": 7, "d": 8}
    assert rho([Counter(rounding(counts).lam)] * 5, counts) == pytest.approx(0.1037, abs=1e-4)
    assert clone(table(counts), [True, False], k=2).rho == pytest.approx(0.1037, abs=1e-4)
    assert 0.1037 > 1 / (3 * 4 - 1)


def test_u10_counterexample():
    counts = {"v0": 100, "v1": 151, **{f"w{i}": 149 for i in range(8)}}
    plan = rounding(counts)
    assert rho([Counter(plan.lam)] * plan.b, counts) == pytest.approx(0.077, abs=1e-3)


def test_exact_clones_have_rho_zero():
    counts = {"a": 4, "b": 8, "c": 12}
    made = clone(table(counts), [True, False], k=2)
    assert made.rho == 0 and not made.counterfeit and not made.suppressed


def test_a_half_is_split_between_suppression_and_counterfeits():
    """Fractions of exactly ½: the first half of the tied values (by name) suppress, the
    rest counterfeit — Python's round-half-even would do neither consistently."""
    plan = rounding({"a": 2, "b": 3, "c": 3, "d": 5, "e": 5})
    assert plan.suppress == {"b": 1, "c": 1} and plan.counterfeit == {"d": 1, "e": 1}


def test_small_classes_merge_whole():
    """k larger than a class: classes merge whole, so every class stays a clone."""
    counts = {"a": 3, "b": 6}
    made = clone(table(counts), [True, False], k=5)
    assert all(len(c) >= 5 for c in made.classes)
    assert made.rho == 0


def test_composition_attack_counts_certain_disclosures():
    """Nancy is in H1 and H2; her groups share only D: one certain disclosure.  Olga's share
    two values; Paul is in one release only."""
    h1 = GroupRelease("H1", [Counter("ABD"), Counter("AC")], {"nancy": 0, "olga": 1},
                      {"nancy": "D", "olga": "A"})
    h2 = GroupRelease("H2", [Counter("DGJ"), Counter("ACJ")], {"nancy": 0, "olga": 1,
                                                              "paul": 1},
                      {"nancy": "D", "olga": "A", "paul": "C"})
    report = composition([h1, h2])
    assert (report.overlapping, report.attacked, report.certain_disclosures) == (2, 2, 1)
    assert report.candidates_min == 1 and report.candidates_median == 1.5
    assert report.attacker_accuracy == 1.0  # Olga: A and C tie at 1/2, A first by name


def test_rho_cloned_publishers_leave_no_certain_disclosure(tmp_path):
    """Two publishers of overlapping people, each ρ-cloning on its own: every class holds
    every value, so no intersection narrows a victim to one."""
    header = ["pid", "age", "sex", "job"]
    jobs = ["Engineer", "Clerk", "Nurse", "Driver"]
    people = [(f"p{i}", str(20 + i % 45), "FM"[i % 2], jobs[(i * 7) % 4]) for i in range(240)]
    stores = []
    for n, share in enumerate((people[:160], people[80:])):
        path = tmp_path / f"pub{n}.csv"
        with path.open("w", newline="") as f:
            csv.writer(f).writerows([header, *share])
        store = str(tmp_path / f"store{n}")
        result = CliRunner().invoke(main, [
            "table", "publish", str(path), "--model", "rho-clone", "--qi", "age,sex",
            "--sensitive", "job", "--class-size", "4", "--id", "pid", "--store", store, "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["rho"] < 0.05
        stores.append(store)
    result = CliRunner().invoke(main, ["attack", "composition", "--release", stores[0],
                                       "--release", stores[1], "--json"])
    report = json.loads(result.output)
    assert report["overlapping"] == 80 and report["attacked"] == 80
    assert report["certain_disclosures"] == 0 and report["candidates_min"] == 4
    public = Path(stores[0], "public")
    assert not any("pid" in p.read_text() for p in public.rglob("*.csv"))


def test_audit_of_cloned_and_diverse_releases(tmp_path):
    """The audit recomputes ρ from the public classes and catches a doctored class."""
    data = tmp_path / "t.csv"
    jobs = ["Engineer", "Clerk", "Nurse"]
    data.write_text("age,sex,job\n" + "".join(f"{20 + i % 30},{'FM'[i % 2]},{jobs[i % 3]}\n"
                                              for i in range(60)))
    for model, extra in (("rho-clone", ["--class-size", "4"]), ("l-diverse", ["--distinct", "2"])):
        store = str(tmp_path / model)
        result = CliRunner().invoke(main, ["table", "publish", str(data), "--model", model,
                                           "--qi", "age,sex", "--sensitive", "job", *extra,
                                           "--store", store, "--json"])
        assert result.exit_code == 0, result.output
        audited = CliRunner().invoke(main, ["table", "audit", "--store", store, "--json"])
        assert audited.exit_code == 0 and json.loads(audited.output)["ok"], audited.output
    held = next(Path(tmp_path, "rho-clone", "public").rglob("sensitive.csv"))
    lines = held.read_text().splitlines()
    lines[1] = lines[1].rsplit(",", 1)[0] + ",99"
    held.write_text("\n".join(lines) + "\n")
    audited = CliRunner().invoke(main, ["table", "audit", "--store",
                                        str(tmp_path / "rho-clone"), "--json"])
    assert audited.exit_code == 1
    assert any("ρ is" in v or "sub-classes hold" in v
               for v in json.loads(audited.output)["violations"])
    query = CliRunner().invoke(main, ["table", "query", "sum", "--store",
                                      str(tmp_path / "rho-clone"), "--json"])
    assert query.exit_code == 2 and "for ke tables" in json.loads(query.output)["error"]


def test_a_class_needing_more_than_eta_tuples_takes_them_all():
    """Counts 1/40/30/29 at k = 5: b = 1 and every λ_j = |W_j|, so Algorithm 1 distorts
    nothing — even though the one class needs 40 tuples of a value and η = 20 (20% of 100)."""
    counts = {"a": 1, "b": 40, "c": 30, "d": 29}
    plan = rounding(counts)
    assert plan.b == 1 and plan.lam == counts and not plan.counterfeit and not plan.suppress
    made = clone(table(counts), [True, False], k=5)
    assert (len(made.counterfeit), len(made.suppressed)) == (0, 0)
    assert made.rho == 0 and sorted(made.classes[0]) == list(range(100))


@pytest.mark.parametrize("eta", [1, 2, 3, None])
def test_distortion_is_exactly_the_roundings_whatever_eta(eta):
    """Counterfeits and suppressions come from rounding λ_j alone (Algorithm 1's δ̃_j), never
    from how many candidates are scanned: checked against the counts computed directly."""
    for counts in ({"a": 3, "b": 10, "c": 5}, {"a": 3, "b": 3, "c": 10, "d": 7},
                   {"x": 4, "y": 17}, {"a": 5, "b": 7, "c": 7, "d": 8}):
        b = min(counts.values())
        lam = {v: int(c / b + 0.5) for v, c in counts.items()}  # no exact halves here
        made = clone(table(counts), [True, False], k=1, eta=eta)
        assert len(made.counterfeit) == sum(max(0, lam[v] * b - c) for v, c in counts.items())
        assert len(made.suppressed) == sum(max(0, c - lam[v] * b) for v, c in counts.items())
        values = {row.id: row.s for row in table(counts)} | made.counterfeit
        assert all(Counter(values[t] for t in c) == Counter(lam) for c in made.classes)
