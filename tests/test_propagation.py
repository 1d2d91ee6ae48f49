"""Re-sharing along a chain (the propagation paper): the worked example of Fig. 2, the
colluders' composition attack on non-nested tables, BUA's endless loop and its fix, and
chains whose every hop is computed from the previous hop's file alone."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cocktail.cli import main
from cocktail.tables.chain import audit_chain, cell_loss, hop_csv, read_hop
from cocktail.tables.chain import write_hops as chain_files
from cocktail.tables.data import Row, Table
from cocktail.tables.propagation import STRATEGIES, Atom, Space, canonical, js_bits, \
    merge_failing, merged, next_hop

# Fig. 2(a): Ashley, Brooke, Charish, Dave, Ellen, Frank
FIG2 = [(23, 19024, "Hepatitis"), (23, 19024, "Bronchitis"), (28, 19024, "Flu"),
        (28, 19122, "Cancer"), (29, 19122, "Hepatitis"), (24, 19122, "Bronchitis")]
B = [[0, 1], [2, 3], [4, 5]]   # T_1, 2-diverse
C = [[0, 1, 2], [3, 4, 5]]     # 3-diverse, from T_0
D = [[0, 1, 2, 3, 4, 5]]       # 3-diverse, from T_1


def fig2() -> tuple[Space, list[Atom]]:
    atoms = [Atom((float(a), float(z)), ((s, 1),)) for a, z, s in FIG2]
    return Space.of(atoms, [0.5, 0.5], [6, 98]), atoms


def classes_of(atoms: list[Atom], parts: list[list[int]]) -> list[list[Atom]]:
    return [[atoms[i] for i in part] for part in parts]


def test_worked_example_privacy():
    space, atoms = fig2()
    assert space.privacy(classes_of(atoms, B)) == pytest.approx(0.459, abs=1e-3)
    assert space.privacy(classes_of(atoms, C)) == pytest.approx(0.104, abs=1e-3)
    assert space.privacy(classes_of(atoms, D)) == pytest.approx(0.0, abs=1e-12)


def test_js_is_the_textbook_formula():
    p, q = np.array([0.5, 0.5, 0.0]), np.array([0.0, 0.5, 0.5])
    m = (p + q) / 2
    kl = lambda a, b: sum(x * np.log2(x / y) for x, y in zip(a, b) if x > 0)  # noqa: E731
    assert js_bits(p, q) == pytest.approx((kl(p, m) + kl(q, m)) / 2)
    assert js_bits(p, p) == 0


def test_worked_example_losses():
    """Option I sends (c) on both hops, option II (b) then (d): 12 / 16 cells at unit cost,
    30 / 28 with age 2.5 and zip 1 — the better chain depends on W."""
    rows = [(a, z) for a, z, _ in FIG2]

    def loss(parts, weights):
        return cell_loss([[rows[i] for i in part] for part in parts], weights)
    assert loss(C, [1, 1]) + loss(C, [1, 1]) == 12
    assert loss(B, [1, 1]) + loss(D, [1, 1]) == 16
    assert loss(C, [2.5, 1]) + loss(C, [2.5, 1]) == 30
    assert loss(B, [2.5, 1]) + loss(D, [2.5, 1]) == 28


def fig2_table() -> Table:
    return Table(("age", "zip"), "disease",
                 [Row(i, (str(a), str(z)), s) for i, (a, z, s) in enumerate(FIG2)])


def write_hops(tmp_path: Path, partitions: list[list[list[int]]], delta: float) -> list[Path]:
    return chain_files(tmp_path, fig2_table(), partitions,
                       {"weights": [0.5, 0.5], "scales": [6, 98], "delta": delta})


def test_colluders_pin_charish_and_dave_with_non_nested_tables(tmp_path):
    """(b) to one recipient and (c) to another: Charish (28, 19024) is in {Flu, Cancer} and
    in {Hepatitis, Bronchitis, Flu} — Flu; Dave likewise gets Cancer."""
    report = audit_chain(write_hops(tmp_path, [B, C], 0.25))
    assert [t["ok"] for t in report.thresholds] == [True, True]  # each table alone passes
    # classes in content order: (23, 19024) ×2, (24|29, 19122), (28, 19024|19122) — the last,
    # Charish and Dave's, is split
    assert report.nested == [{"hop": 2, "ok": False, "offending_class": 2, "of_hop": 1}]
    (pair,) = report.colluders
    assert not pair.nested and pair.disclosed == 2
    assert pair.narrowed == 2  # Ashley, Brooke, Ellen, Frank keep {Hepatitis, Bronchitis}
    assert not report.ok


def test_a_nested_chain_gives_colluders_nothing(tmp_path):
    report = audit_chain(write_hops(tmp_path, [B, D], 0.25))
    assert report.ok and report.nested == [{"hop": 2, "ok": True}]
    assert report.colluders[0].nested and report.colluders[0].disclosed == 0
    assert report.colluders[0].narrowed == 0


def without_membership(files: list[Path]) -> list[Path]:
    (files[0].parent / "owner" / "membership.csv").unlink()
    return files


def test_the_files_alone_refute_the_colluders_pair(tmp_path):
    """Without the owner's membership file, (b) then (c) is still refuted: (c)'s class of
    three at (24.67, 19024) is no union of (b)'s classes of two."""
    files = without_membership(write_hops(tmp_path, [B, C], 0.25))
    report = audit_chain(files)
    assert report.membership is None and report.colluders == []
    assert report.nested == [{"hop": 2, "of_hop": 1, "from": "files", "ok": False,
                              "offending_class": [pytest.approx(74 / 3), 19024],
                              "offending_size": 3}]
    assert not report.ok
    result = CliRunner().invoke(main, ["table", "audit", "--chain", *map(str, files)])
    assert result.exit_code == 1
    assert "hop 2 is not a coarsening of hop 1: its class of 3 at (24.666667, 19024) is " \
        "no union of hop 1's classes" in result.output


def test_the_files_alone_accept_a_nested_pair(tmp_path):
    report = audit_chain(without_membership(write_hops(tmp_path, [B, D], 0.25)))
    assert report.ok and report.nested == [{"hop": 2, "of_hop": 1, "from": "files",
                                            "ok": True}]


def test_the_means_refute_what_the_multisets_allow(tmp_path):
    """{Ashley, Frank}, {Brooke, Ellen}, {Charish, Dave}: the same three multisets as (b),
    but means no union of (b)'s classes has."""
    report = audit_chain(without_membership(write_hops(tmp_path, [B, [[0, 5], [1, 4], [2, 3]]],
                                                       0.25)))
    (nested,) = report.nested
    assert nested["ok"] is False and nested["offending_size"] == 2 and not report.ok


def paper_merge_round(space: Space, groups: list[list[Atom]], delta: float):
    """The paper's BUA phase II step: the first group with P > δ merges with the nearest
    partner whose union lowers its P, if any."""
    for i, g in enumerate(groups):
        if space.divergence(g) > delta:
            centre = space.mean(g)
            for j in sorted((j for j in range(len(groups)) if j != i),
                            key=lambda j: space.distance(space.mean(groups[j]), centre)):
                if space.divergence(g + groups[j]) < space.divergence(g):
                    rest = [x for n, x in enumerate(groups) if n not in (i, j)]
                    return rest + [g + groups[j]]
            return groups
    return groups


def test_bua_phase_two_loops_in_the_paper_and_ends_when_fixed():
    """Notes §4: 15 A / 12 B; g1 = (3A, 2B), g2 = (0A, 10B), g3 = (12A, 0B), δ = 0.001.  No
    merge lowers P(g1), so the paper's `while` picks g1 for ever."""
    def group(a: int, b: int, x: float) -> list[Atom]:
        return [Atom((x + i,), (("A", 1),)) for i in range(a)] + \
            [Atom((x + i,), (("B", 1),)) for i in range(b)]
    groups = [group(3, 2, 0), group(0, 10, 10), group(12, 0, 30)]
    space = Space.of([a for g in groups for a in g], [1.0], [45])
    assert space.divergence(groups[0]) == pytest.approx(0.0015, abs=1e-4)
    assert space.divergence(groups[0] + groups[1]) == pytest.approx(0.0999, abs=1e-4)
    assert space.divergence(groups[0] + groups[2]) == pytest.approx(0.1001, abs=1e-4)
    assert paper_merge_round(space, groups, 0.001) is groups  # no progress, g1 still fails
    fixed = merge_failing(space, groups, 0.001)
    assert all(space.divergence(g) < 0.001 for g in fixed)
    assert len(fixed) >= 1 and sorted(a.key for g in fixed for a in g) == \
        sorted(a.key for g in groups for a in g)


def synthetic(n: int = 120, seed: int = 5) -> list[tuple[int, int, str]]:
    rng = random.Random(seed)
    return [(rng.randint(18, 70), rng.randint(1, 40),
             rng.choices("ABCD", weights=(5, 3, 2, 1))[0]) for _ in range(n)]


def write_csv(path: Path, rows) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["age", "months", "purpose"])
        writer.writerows(rows)
    return path


def chain(tmp_path: Path, source: Path, strategy: str, name: str, *extra: str) -> dict:
    result = CliRunner().invoke(main, [
        "table", "chain", str(source), "--qi", "age,months", "--sensitive", "purpose",
        "--hops", "3", "--delta", "0.03", "--weights", "2,1", "--strategy", strategy,
        "--out", str(tmp_path / name), "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_hop_stricter_nested_and_from_the_previous_file_alone(tmp_path, strategy):
    rows = synthetic()
    report = chain(tmp_path, write_csv(tmp_path / "t.csv", rows), strategy, "out")
    out = tmp_path / "out"
    for hop in report["hops"]:
        assert hop["privacy"] < hop["threshold"] == pytest.approx((4 - hop["hop"]) * 0.03)
    losses = [h["utility_loss"] for h in report["hops"]]
    assert losses == sorted(losses) and 0 <= losses[0] and losses[-1] <= 1
    files = [out / f"hop{h}.csv" for h in (1, 2, 3)]
    audited = CliRunner().invoke(main, ["table", "audit", "--chain", *map(str, files),
                                        "--json"])
    assert audited.exit_code == 0, audited.output
    audit = json.loads(audited.output)
    assert audit["ok"] and all(n["ok"] for n in audit["nested"])
    assert all(p["disclosed"] == p["narrowed"] == 0 for p in audit["colluders"])
    (out / "owner" / "membership.csv").rename(tmp_path / "kept.csv")
    alone = audit_chain(files)  # the recipients' view: the files are seen to nest
    assert alone.ok and [n["ok"] for n in alone.nested] == [True, True]
    (tmp_path / "kept.csv").rename(out / "owner" / "membership.csv")
    params = json.loads((out / "chain.json").read_text())
    for hop in (1, 2):  # the next hop again, from the file and the public parameters only
        atoms = read_hop(files[hop - 1].read_text(), params["qi"], params["sensitive"])
        space = Space.of(atoms, params["weights"], params["scales"], params["min_size"])
        again = next_hop(space, atoms, params["delta"], hop + 1, 3, strategy)
        table = Table(("age", "months"), "purpose", [])
        assert hop_csv(table, canonical(again)) == files[hop].read_text()
    shuffled = rows[:]
    random.Random(9).shuffle(shuffled)  # input order must not show
    chain(tmp_path, write_csv(tmp_path / "s.csv", shuffled), strategy, "again")
    for h in (1, 2, 3):
        assert (tmp_path / "again" / f"hop{h}.csv").read_text() == files[h - 1].read_text()


def test_classes_hold_at_least_min_size(tmp_path):
    source = write_csv(tmp_path / "t.csv", synthetic())
    chain(tmp_path, source, "tda", "floor", "--min-size", "6")
    for h in (1, 2, 3):
        atoms = read_hop((tmp_path / "floor" / f"hop{h}.csv").read_text(), ["age", "months"],
                         "purpose")
        assert min(a.size for a in atoms) >= 6


def test_merged_atoms_carry_size_weighted_means():
    a, b = Atom((0.0,), (("x", 3),)), Atom((4.0,), (("y", 1),))
    (m,) = merged([[a, b]])
    assert m.qi == (1.0,) and m.values == (("x", 3), ("y", 1))


def test_bad_input(tmp_path):
    runner = CliRunner()
    words = tmp_path / "w.csv"
    words.write_text("age,city,purpose\n30,Paris,A\n40,Rome,B\n")
    bad = runner.invoke(main, ["table", "chain", str(words), "--qi", "age,city",
                               "--sensitive", "purpose", "--hops", "2", "--delta", "0.1",
                               "--out", str(tmp_path / "o"), "--json"])
    assert bad.exit_code == 2 and "w.csv:2: column 'city' is 'Paris', not a number" in \
        json.loads(bad.output)["error"]
    source = write_csv(tmp_path / "t.csv", synthetic(10))
    weights = runner.invoke(main, ["table", "chain", str(source), "--qi", "age,months",
                                   "--sensitive", "purpose", "--hops", "2", "--delta", "0.1",
                                   "--weights", "1", "--out", str(tmp_path / "o2")])
    assert weights.exit_code != 0 and "1 weight(s) for 2" in weights.output
    for given in ("nan,1", "inf,1"):
        odd = runner.invoke(main, ["table", "chain", str(source), "--qi", "age,months",
                                   "--sensitive", "purpose", "--hops", "2", "--delta", "0.1",
                                   "--weights", given, "--out", str(tmp_path / "o4")])
        assert odd.exit_code == 2 and "finite" in odd.output
        assert not (tmp_path / "o4").exists()
    floor = runner.invoke(main, ["table", "chain", str(source), "--qi", "age,months",
                                 "--sensitive", "purpose", "--hops", "2", "--delta", "0.1",
                                 "--min-size", "11", "--out", str(tmp_path / "o3")])
    assert floor.exit_code != 0 and "cannot be made from 10" in floor.output
    alone = runner.invoke(main, ["table", "audit", "--chain"])
    assert alone.exit_code == 2 and "hop files" in alone.output


@pytest.mark.parametrize("cell", ["nan", "inf", "-Infinity"])
def test_a_non_finite_qi_is_refused_and_nothing_written(tmp_path, cell):
    """float() reads 'nan' and 'inf'; a chain mean-recodes QIs, so one such cell would poison
    every mean (and chain.json, as bare NaN, is not JSON)."""
    rows = [list(r) for r in synthetic(20)]
    rows[13][1] = cell
    source = write_csv(tmp_path / "t.csv", rows)
    result = CliRunner().invoke(main, [
        "table", "chain", str(source), "--qi", "age,months", "--sensitive", "purpose",
        "--hops", "2", "--delta", "0.1", "--out", str(tmp_path / "out"), "--json"])
    assert result.exit_code == 2, result.output
    assert f"t.csv:15: column 'months' is {cell!r}, not a finite number" in \
        json.loads(result.output)["error"]
    assert not (tmp_path / "out").exists()


def test_chain_json_is_strict_json(tmp_path):
    """The writers refuse NaN rather than write it: chain.json parses as strict JSON."""
    chain(tmp_path, write_csv(tmp_path / "t.csv", synthetic(30)), "tda", "out")
    json.loads((tmp_path / "out" / "chain.json").read_text(),
               parse_constant=lambda c: pytest.fail(f"{c} in chain.json"))
    with pytest.raises(ValueError):
        chain_files(tmp_path / "bad", fig2_table(), [B], {"delta": float("nan")})
    assert not (tmp_path / "bad").exists()
