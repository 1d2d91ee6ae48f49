from __future__ import annotations

import pytest

from cocktail.querylang import CountQuery, QuerySyntaxError, parse_count


@pytest.mark.parametrize("text,terms", [
    ("count(a)", ("a",)),
    ("count(a & b & c)", ("a", "b", "c")),
    ("  count ( 12345&678 ) ", ("12345", "678")),
    ('count("air ticket" & beijing)', ("air ticket", "beijing")),
    ('count("tab\\there" & x)', ("tab\there", "x")),
    ("count(a & a & b)", ("a", "b")),
    ("count(-1 & naïve)", ("-1", "naïve")),
])
def test_parses(text, terms):
    assert parse_count(text).terms == terms


@pytest.mark.parametrize("text,fragment", [
    ("", "expected 'count'"),
    ("count a", "expected '('"),
    ("count()", "expected a term"),
    ("count(a &)", "expected a term"),
    ("count(a b)", "expected ')'"),
    ("count(a) extra", "unexpected text"),
    ('count("")', "empty term"),
    ("sum(a)", "expected 'count'"),
])
def test_errors_point_at_the_problem(text, fragment):
    with pytest.raises(QuerySyntaxError, match="column"):
        parse_count(text)
    with pytest.raises(QuerySyntaxError) as info:
        parse_count(text)
    assert fragment in str(info.value)


def test_round_trip_through_str():
    query = CountQuery(("air ticket", "b", 'q"uote'))
    assert parse_count(str(query)) == query
