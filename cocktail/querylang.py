"""The query language, parsed into plain values.

* A counting query: records holding every term of a conjunction, ``count(a & b & c)``.  A term
  is a bare word (letters, digits and ``_ . : / # @ + -``) or a double-quoted JSON string for
  anything else (``count("air ticket" & beijing)``).  Term order does not matter.
* A linear query: a weighted sum of counting queries, ``2*count(a) - count(b & c) + 0.5*count(d)``.
* A batch: linear queries separated by newlines or ``;`` (``#`` starts a comment line); it is the
  workload matrix W over the distinct counting queries of the batch.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

_BARE = re.compile(r"[\w.:/#@+\-]+", re.UNICODE)
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
_NUMBER = re.compile(r"\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?")


class QuerySyntaxError(ValueError):
    """A malformed query; the message points at the offending column."""


def characters(text: str, source: str = "query") -> str:
    """``text`` if it is all characters: JSON may carry a lone surrogate (``"\\ud800"``),
    which no data holds and no reply can encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise QuerySyntaxError(f"{source}: the text holds a lone surrogate at position "
                               f"{exc.start}, which is not a character") from None
    return text


@dataclass(frozen=True)
class CountQuery:
    terms: tuple[str, ...]  # distinct and sorted: count(a & b) is count(b & a)

    def __post_init__(self) -> None:
        object.__setattr__(self, "terms", tuple(sorted(set(self.terms))))

    def __str__(self) -> str:
        return "count(" + " & ".join(
            t if _BARE.fullmatch(t) else json.dumps(t, ensure_ascii=False) for t in self.terms) + ")"


def _exact_text(number: float) -> str:
    """The short form (``2``, ``0.5``) when it is exact, else the shortest text that parses
    back to the same float: the text is the key stored answers are reused under, so two
    weights must never share one (``:g`` made 1.0000001 and 1.0000002 both ``1``)."""
    short = f"{number:g}"
    return short if float(short) == number else repr(number)


@dataclass(frozen=True)
class LinearQuery:
    parts: tuple[tuple[float, CountQuery], ...]  # (weight, counting query), each query once

    def __str__(self) -> str:
        text = ""
        for weight, query in self.parts:
            sign = "-" if weight < 0 else "+"
            size = abs(weight)
            factor = "" if size == 1 else f"{_exact_text(size)}*"
            text += f" {sign} {factor}{query}" if text else f"{'-' if weight < 0 else ''}{factor}{query}"
        return text


@dataclass(frozen=True)
class Workload:
    """A batch of linear queries as a matrix W (queries x distinct counting queries)."""

    queries: tuple[LinearQuery, ...]

    @property
    def counts(self) -> tuple[CountQuery, ...]:
        return tuple(dict.fromkeys(q for linear in self.queries for _, q in linear.parts))

    def matrix(self) -> list[list[float]]:
        column = {q: j for j, q in enumerate(self.counts)}
        rows = []
        for linear in self.queries:
            row = [0.0] * len(column)
            for weight, query in linear.parts:
                row[column[query]] += weight
            rows.append(row)
        return rows

    @property
    def terms(self) -> tuple[str, ...]:
        return tuple(sorted({t for q in self.counts for t in q.terms}))

    def __str__(self) -> str:
        return "; ".join(map(str, self.queries))


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def error(self, message: str, hint: str = "") -> QuerySyntaxError:
        return QuerySyntaxError(f"{message} at column {self.pos + 1}: {self.text!r}{hint}")

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def literal(self, token: str) -> bool:
        self.skip()
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.literal(token):
            raise self.error(f"expected {token!r}")

    def term(self) -> str:
        self.skip()
        quoted = _QUOTED.match(self.text, self.pos)
        if quoted:
            try:
                value = json.loads(quoted.group())
            except json.JSONDecodeError as exc:  # e.g. an escape JSON does not know: "\ "
                raise self.error(f"bad quoted term ({exc.msg})") from None
            self.pos = quoted.end()
            if not value:
                raise self.error("empty term")
            return value
        bare = _BARE.match(self.text, self.pos)
        if not bare:
            raise self.error("expected a term", self.quote_hint(self.pos))
        self.pos = bare.end()
        return bare.group()

    def at_end(self) -> bool:
        self.skip()
        return self.pos == len(self.text)

    def number(self) -> float | None:
        self.skip()
        found = _NUMBER.match(self.text, self.pos)
        if not found:
            return None
        value = float(found.group())
        if not math.isfinite(value):
            raise self.error(f"the number {found.group()} is too large")
        self.pos = found.end()
        return value

    def count(self) -> CountQuery:
        self.expect("count")
        self.expect("(")
        started = self.pos
        terms = [self.term()]
        while self.literal("&"):
            started = self.pos
            terms.append(self.term())
        if not self.literal(")"):
            raise self.error("expected '&' or ')'", self.quote_hint(started))
        return CountQuery(tuple(terms))

    def quote_hint(self, started: int) -> str:
        """How to write the term begun at ``started`` if it holds a space, a comma or another
        character a bare term cannot: quoted, as JSON, shown in the whole query."""
        end = min((i for i in (self.text.find(c, started) for c in "&)") if i >= 0),
                  default=len(self.text))
        whole = self.text[started:end].strip()
        if not whole or whole.startswith('"'):
            return ""
        at = self.text.index(whole, started)
        fixed = self.text[:at] + json.dumps(whole, ensure_ascii=False) + self.text[at + len(whole):]
        return ("; a term holding a space, a comma or any character but letters, digits and "
                f"_ . : / # @ + - is quoted: {fixed} (in a shell, inside single quotes)")

    def linear(self) -> LinearQuery:
        weights: dict[CountQuery, float] = {}
        sign = -1.0 if self.literal("-") else 1.0
        while True:
            factor = self.number()
            if factor is not None:
                self.expect("*")
            query = self.count()
            weights[query] = weights.get(query, 0.0) + sign * (1.0 if factor is None else factor)
            if self.literal("+"):
                sign = 1.0
            elif self.literal("-"):
                sign = -1.0
            else:
                break
        parts = tuple((w, q) for q, w in weights.items() if w != 0)
        if not parts:
            raise self.error("the weights cancel out: the query is constant")
        return LinearQuery(parts)


def parse_count(text: str) -> CountQuery:
    """Parse ``count(t1 & t2 & ...)``."""
    scanner = _Scanner(text)
    query = scanner.count()
    if not scanner.at_end():
        raise scanner.error("unexpected text after the query")
    return query


def _line_queries(line: str) -> list[LinearQuery]:
    """The ';'-separated linear queries of one line (a ';' inside a quoted term is a term's)."""
    scanner, queries = _Scanner(line), []
    while not scanner.at_end():
        if not scanner.literal(";"):
            queries.append(scanner.linear())
            if not scanner.at_end() and not scanner.literal(";"):
                raise scanner.error("expected ';' or the end of the line")
    return queries


def parse_batch(text: str, source: str = "batch") -> Workload:
    """Linear queries separated by newlines or ';'; '#' starts a comment line."""
    queries = []
    for lineno, line in enumerate(text.split("\n"), 1):  # not splitlines: U+2028 may be in a term
        if line.strip().startswith("#"):
            continue
        try:
            queries.extend(_line_queries(line))
        except QuerySyntaxError as exc:
            raise QuerySyntaxError(f"{source}:{lineno}: {exc}") from None
    if not queries:
        raise QuerySyntaxError(f"{source}: no query in the batch")
    return Workload(tuple(queries))
