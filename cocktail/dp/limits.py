"""The published limits of one analyst request, checked before any data is touched.

Each limit bounds work the private cloud would otherwise do for free or without end: the text
bounds parsing, distinct terms bound the strategy search (2^u cells) and the sensitivity
enumeration, counting queries bound the map tasks, and weights must be finite and bounded so
that the noise scale is a number.  A request over a limit is refused (HTTP 400) with the name
of the limit; it spends nothing and computes nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..querylang import Workload, characters, parse_batch


class LimitExceeded(ValueError):
    """A request over one of the published limits; ``limit`` names it."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


@dataclass(frozen=True)
class Limits:
    text_bytes: int = 65_536   # the whole request text (UTF-8)
    term_bytes: int = 256      # one term
    queries: int = 64          # linear queries in one batch
    counts: int = 128          # distinct counting queries in one batch
    terms: int = 32            # distinct terms in one batch
    weight: float = 1e6        # |w| of every weight
    search_units: int = 10_000  # work of one new shape's strategy search (dp/optimize.py)
    # A request may spend less than its role's α per query, down to this share of it: each
    # fresh answer is work, and the floor bounds what one unit of budget can buy (100 answers).
    alpha_floor: float = 0.01
    # Previews (dp/preview.py) admitted in any minute: each may make the server search, and
    # reads nothing and charges nothing, so only these bound the work they buy.
    previews_per_minute: int = 2      # a user's
    previews_all_per_minute: int = 3  # the whole server's

    def as_dict(self) -> dict:
        return asdict(self)

    def parse(self, text: str, source: str = "query") -> Workload:
        """Parse ``text`` as a batch, refusing it unparsed if it is too long."""
        size = len(characters(text, source).encode("utf-8"))
        if size > self.text_bytes:
            raise LimitExceeded("text_bytes", f"the request holds {size:,} bytes of queries; "
                                f"the limit is {self.text_bytes:,}")
        return self.check(parse_batch(text, source))

    def check(self, workload: Workload) -> Workload:
        longest = max(len(t.encode("utf-8", "surrogatepass")) for t in workload.terms)
        if longest > self.term_bytes:
            raise LimitExceeded("term_bytes", f"a term of {longest:,} bytes; the limit is "
                                f"{self.term_bytes}")
        for name, value in (("queries", len(workload.queries)), ("counts", len(workload.counts)),
                            ("terms", len(workload.terms))):
            if value > getattr(self, name):
                raise LimitExceeded(name, f"{value} {_NOUNS[name]} in one request; the limit "
                                    f"is {getattr(self, name)}")
        heaviest = max(abs(w) for linear in workload.queries for w, _ in linear.parts)
        if heaviest > self.weight:
            raise LimitExceeded("weight", f"a weight of {heaviest:g}; weights are limited to "
                                f"±{self.weight:g}")
        return workload

    def spend(self, asked: float | None, per_query: float, name: str = "alpha") -> float:
        """What a request spends (an α, or a ρ: ``name``): its own choice, from
        ``alpha_floor`` × ``per_query`` (its role's) up to ``per_query``, or ``per_query``."""
        if asked is None:
            return per_query
        if not self.alpha_floor * per_query <= asked <= per_query:
            raise LimitExceeded(name, f"{name} {asked:g}: your role spends at most "
                                f"{per_query:g} per query and at least {self.alpha_floor:g} "
                                f"of that ({self.alpha_floor * per_query:g})")
        return float(asked)


_NOUNS = {"queries": "linear queries", "counts": "distinct counting queries",
          "terms": "distinct terms"}

LIMITS = Limits()
