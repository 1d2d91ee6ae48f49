from __future__ import annotations

import re

import pytest

from cocktail.querylang import CountQuery, QuerySyntaxError, parse_batch, parse_count


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
    ("count(a b)", "expected '&' or ')'"),
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


@pytest.mark.parametrize("text,fixed", [
    ("count(air ticket & milk)", 'count("air ticket" & milk)'),
    ("count(milk & new,york)", 'count(milk & "new,york")'),
    ("count(a) - count(b & c d)", 'count(a) - count(b & "c d")'),
])
def test_a_term_that_needs_quotes_is_shown_quoted(text, fixed):
    with pytest.raises(QuerySyntaxError) as info:
        parse_batch(text)
    assert f"is quoted: {fixed}" in str(info.value)
    parse_batch(fixed)  # and the fix parses


def test_round_trip_through_str():
    query = CountQuery(("air ticket", "b", 'q"uote'))
    assert parse_count(str(query)) == query


def test_batch_lines_separators_and_comments():
    workload = parse_batch('# two lines, three queries\ncount(a); 2*count(b) - count(a & c)\n\n'
                           'count("x;y" & z)\n')
    assert [str(q) for q in workload.queries] == ["count(a)", "2*count(b) - count(a & c)",
                                                  'count("x;y" & z)']
    assert workload.matrix() == [[1, 0, 0, 0], [0, 2, -1, 0], [0, 0, 0, 1]]


def test_a_batch_breaks_lines_only_at_newlines():
    workload = parse_batch('count("a\u2028b" & "c\u0085d")\r\ncount("e\u2029f")\n')
    assert [str(q) for q in workload.queries] == ['count("a\u2028b" & "c\u0085d")',
                                                  'count("e\u2029f")']


@pytest.mark.parametrize("text,fragment", [
    ("count(a)\ncount(b) count(c)", "w:2: expected ';' or the end of the line at column 10"),
    ("count(a) - count(a)", "w:1: the weights cancel out"),
    ("# nothing\n\n", "w: no query in the batch"),
    ("count(a); + count(b)", "w:1: expected 'count' at column 11"),
    ('count("\\ " & b)', "w:1: bad quoted term (Invalid \\escape) at column 7"),
])
def test_batch_errors_name_line_and_column(text, fragment):
    with pytest.raises(QuerySyntaxError, match=re.escape(fragment)):
        parse_batch(text, "w")


@pytest.mark.parametrize("weights", [(1.0000001, 1.0000002), (123456.7, 123456.8),
                                     (1e-7, 1.0000000000000002e-7)])
def test_the_workload_key_keeps_every_weight_to_full_precision(weights):
    """The key a stored answer is reused under is the workload's text: two weights that differ
    anywhere must give two texts, each parsing back to its own matrix."""
    texts = [str(parse_batch(f"{w}*count(a) - count(b)")) for w in weights]
    assert texts[0] != texts[1]
    for weight, text in zip(weights, texts):
        assert parse_batch(text).matrix() == [[weight, -1.0]]
    assert str(parse_batch("2*count(a) - 0.5*count(b)")) == "2*count(a) - 0.5*count(b)"
