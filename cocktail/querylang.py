"""The query language, parsed into plain values.

So far: a counting query over a conjunction of terms, ``count(a & b & c)``.  A term is a bare
word (letters, digits and ``_ . : / # @ + -`` not starting a number's sign) or a double-quoted
JSON string for anything else (``count("air ticket" & beijing)``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_BARE = re.compile(r"[\w.:/#@+\-]+", re.UNICODE)
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')


class QuerySyntaxError(ValueError):
    """A malformed query; the message points at the offending column."""


@dataclass(frozen=True)
class CountQuery:
    terms: tuple[str, ...]  # distinct, in the order written

    def __str__(self) -> str:
        return "count(" + " & ".join(
            t if _BARE.fullmatch(t) else json.dumps(t, ensure_ascii=False) for t in self.terms) + ")"


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def error(self, message: str) -> QuerySyntaxError:
        return QuerySyntaxError(f"{message} at column {self.pos + 1}: {self.text!r}")

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
            self.pos = quoted.end()
            value = json.loads(quoted.group())
            if not value:
                raise self.error("empty term")
            return value
        bare = _BARE.match(self.text, self.pos)
        if not bare:
            raise self.error("expected a term")
        self.pos = bare.end()
        return bare.group()

    def at_end(self) -> bool:
        self.skip()
        return self.pos == len(self.text)


def parse_count(text: str) -> CountQuery:
    """Parse ``count(t1 & t2 & ...)``."""
    scanner = _Scanner(text)
    scanner.expect("count")
    scanner.expect("(")
    terms = [scanner.term()]
    while scanner.literal("&"):
        terms.append(scanner.term())
    scanner.expect(")")
    if not scanner.at_end():
        raise scanner.error("unexpected text after the query")
    return CountQuery(tuple(dict.fromkeys(terms)))
