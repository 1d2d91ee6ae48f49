"""Mondrian with distinct ℓ-diversity (cocktail.tables.mondrian), checked against hand-worked
tables, a pure-Python reference of the cut rule, and the Adult data set."""

from __future__ import annotations

import csv
import random
from pathlib import Path

import pytest

from cocktail.tables.data import Row
from cocktail.tables.mondrian import generalize, mondrian

ADULT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "adult.csv"
ADULT_NUMERIC = (True, False, False, False)  # age, sex, education, country


def table(*tuples) -> list[Row]:
    """Rows numbered 0, 1, … from (QI values..., sensitive value) tuples."""
    return [Row(i, tuple(str(v) for v in t[:-1]), t[-1]) for i, t in enumerate(tuples)]


def key(row: Row, d: int, numeric) -> float | str:
    return float(row.qi[d]) if numeric[d] else row.qi[d]


def reference_cut(rows: list[Row], d: int, numeric, l: int):
    """The median cut of ``rows`` on dimension d, in plain Python, or None if not allowed:
    sort on the value (floats, or strings lexicographically), take the tuple at (n-1)//2,
    ≤ its value goes left; both halves need ≥ l distinct sensitive values."""
    keys = sorted(key(row, d, numeric) for row in rows)
    if not keys:
        return None
    median = keys[(len(keys) - 1) // 2]
    left = [row for row in rows if key(row, d, numeric) <= median]
    right = [row for row in rows if key(row, d, numeric) > median]
    if len({row.s for row in left}) >= l and len({row.s for row in right}) >= l:
        return left, right
    return None


def reference_mondrian(rows: list[Row], numeric, l: int) -> list[list[int]]:
    """The whole algorithm in plain recursive Python, for comparison on small tables."""
    span = [(min(key(r, d, numeric) for r in rows), max(key(r, d, numeric) for r in rows))
            if numeric[d] else len({r.qi[d] for r in rows}) for d in range(len(numeric))]

    def width(part, d):
        if not numeric[d]:
            return len({r.qi[d] for r in part}) / span[d]
        lo, hi = span[d]
        values = [key(r, d, numeric) for r in part]
        return (max(values) - min(values)) / (hi - lo) if hi > lo else 0.0

    def split(part):
        for d in sorted(range(len(numeric)), key=lambda d: (-width(part, d), d)):
            halves = reference_cut(part, d, numeric, l)
            if halves:
                return split(halves[0]) + split(halves[1])
        return [sorted(r.id for r in part)]

    return sorted(split(rows), key=lambda ec: ec[0])


def check_valid(rows: list[Row], ecs: list[list[int]], numeric, l: int) -> None:
    """Every EC ℓ-diverse, the ECs partition the ids exactly once, and no EC admits a
    further allowable median cut on any dimension."""
    by_id = {row.id: row for row in rows}
    flat = [i for ec in ecs for i in ec]
    assert sorted(flat) == sorted(by_id), "the ECs do not partition the tuple ids"
    assert len(flat) == len(set(flat)), "a tuple id is in two ECs"
    for ec in ecs:
        members = [by_id[i] for i in ec]
        assert len({row.s for row in members}) >= l, f"EC {ec[:5]}… is not {l}-diverse"
        for d in range(len(numeric)):
            assert reference_cut(members, d, numeric, l) is None, \
                f"EC {ec[:5]}… still admits an allowable cut on dimension {d}"


# age (numeric), sex (categorical), diagnosis
HAND = table((25, "M", "flu"), (27, "F", "cold"), (30, "M", "flu"), (33, "F", "hiv"),
             (41, "M", "cold"), (45, "F", "flu"), (52, "M", "hiv"), (60, "F", "cold"))


def test_hand_table_exact_ecs():
    # Root: age and sex both have width 1, the tie goes to column 0 (age): median 33 cuts
    # {0,1,2,3} | {4,5,6,7}.  Left: sex is wider (2/2 vs 8/35) but F|M leaves M = {flu, flu},
    # so the next dimension, age, cuts at 27.  Right: sex (2/2 vs 19/35) cuts F|M.
    assert mondrian(HAND, (True, False), 2) == [[0, 1], [2, 3], [4, 6], [5, 7]]
    # ℓ = 3: only the root cut is allowed (any further half would hold 2 tuples).
    assert mondrian(HAND, (True, False), 3) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    check_valid(HAND, mondrian(HAND, (True, False), 2), (True, False), 2)


def test_result_does_not_depend_on_input_order():
    shuffled = HAND[:]
    random.Random(7).shuffle(shuffled)
    assert mondrian(shuffled, (True, False), 2) == mondrian(HAND, (True, False), 2)


def test_numeric_columns_compare_as_floats():
    # As numbers the median is 10: {9, 10} | {11, 100}.  As strings ("10" < "100" < "11" < "9")
    # the median would be "100" and the left half {10, 100} would hold only "b".
    rows = table((9, "a"), (10, "b"), (100, "b"), (11, "a"))
    assert mondrian(rows, (True,), 2) == [[0, 1], [2, 3]]


def test_numeric_ties_at_the_median_go_left():
    rows = table((30, "a"), (30, "b"), (30, "c"), (40, "d"), (50, "e"), (60, "f"))
    # median tuple (index 2) is 30: all three 30s left; {40, 50, 60} cannot be cut (60 alone).
    assert mondrian(rows, (True,), 2) == [[0, 1, 2], [3, 4, 5]]


def test_categorical_cut_at_the_median_tuple_in_lexicographic_order():
    # Sorted tuples A A A A B C: the median tuple (index 2) is an A, so A | {B, C}; cutting
    # the category list [A, B, C] at its middle category would give {A, B} | C instead.
    rows = table(("C", "y"), ("A", "x"), ("A", "y"), ("B", "x"), ("A", "x"), ("A", "y"))
    assert mondrian(rows, (False,), 2) == [[0, 3], [1, 2, 4, 5]]
    # Lexicographic, not by frequency: with "B" renamed "Z" the tail is {C, Z}, same cut.
    renamed = [Row(r.id, ("Z",) if r.qi == ("B",) else r.qi, r.s) for r in rows]
    assert mondrian(renamed, (False,), 2) == [[0, 3], [1, 2, 4, 5]]


def test_l_larger_than_the_distinct_count_raises():
    with pytest.raises(ValueError, match=r"only 3 distinct sensitive values.*l = 4"):
        mondrian(HAND, (True, False), 4)
    with pytest.raises(ValueError, match="at least 1"):
        mondrian(HAND, (True, False), 0)
    assert mondrian(HAND, (True, False), 3)  # 3 distinct values: ℓ = 3 is feasible


def test_l_one_cuts_down_to_distinct_qi_points():
    ecs = mondrian(HAND, (True, False), 1)
    assert ecs == [[i] for i in range(8)]


def test_bad_input_is_reported():
    with pytest.raises(ValueError, match="not a number"):
        mondrian(table(("x", "a"), (3, "b")), (True,), 1)
    with pytest.raises(ValueError, match="occurs twice"):
        mondrian([Row(0, ("1",), "a"), Row(0, ("2",), "b")], (True,), 1)


def test_generalize_hand_example():
    rows = [HAND[i] for i in (0, 1, 3)]
    assert generalize(rows, (True, False)) == ("25-33", "F|M")
    assert generalize([HAND[4], HAND[6]], (True, False)) == ("41-52", "M")
    assert generalize([HAND[5]], (True, False)) == ("45", "F")
    floats = [Row(0, ("2.0", "b"), 1.0), Row(1, ("1.5", "a"), 2.0), Row(2, ("10", "b"), 3.0)]
    assert generalize(floats, (True, False)) == ("1.5-10", "a|b")
    with pytest.raises(ValueError, match="empty"):
        generalize([], (True,))


@pytest.mark.parametrize("seed", range(40))
def test_random_tables_match_the_reference(seed):
    rng = random.Random(seed)
    n, l = rng.randint(1, 60), rng.randint(1, 4)
    rows = [Row(i, (str(rng.randint(0, 20)), rng.choice("pqrst"), rng.choice("ab")),
                rng.choice("uvwxyz")) for i in rng.sample(range(1000), n)]
    numeric = (True, False, False)
    if len({row.s for row in rows}) < l:
        with pytest.raises(ValueError):
            mondrian(rows, numeric, l)
        return
    ecs = mondrian(rows, numeric, l)
    check_valid(rows, ecs, numeric, l)
    assert ecs == reference_mondrian(rows, numeric, l)


@pytest.fixture(scope="module")
def adult() -> list[Row]:
    if not ADULT.exists():
        pytest.skip(f"{ADULT} is not present (the shared Adult data set lives beside the repo)")
    with ADULT.open(newline="", encoding="utf-8") as f:
        return [Row(i, (r["age"].strip(), r["sex"].strip(), r["education"].strip(),
                        r["country"].strip()), r["occupation"].strip())
                for i, r in enumerate(csv.DictReader(f))]


@pytest.fixture(scope="module")
def adult_ecs(adult) -> dict[int, list[list[int]]]:
    return {l: mondrian(adult, ADULT_NUMERIC, l) for l in (2, 5, 10)}


@pytest.mark.slow
@pytest.mark.parametrize("l", [2, 5, 10])
def test_adult_is_valid(adult, adult_ecs, l):
    check_valid(adult, adult_ecs[l], ADULT_NUMERIC, l)


@pytest.mark.slow
def test_adult_ec_count_decreases_with_l(adult_ecs):
    counts = [len(adult_ecs[l]) for l in (2, 5, 10)]
    assert counts[0] > counts[1] > counts[2] > 1, counts
