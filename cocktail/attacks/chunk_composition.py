"""The composition attack on Cocktail publications: two or more owners publish overlapping
baskets, each release k^m-anonymous, and an adversary intersects what they say of one victim.

The adversary knows m of a victim's terms Q (not sensitive ones) and that the victim is in
every release.  In each release, the *candidates* are the public subrecords that contain all of
Q (k^m: at least k of them, or none); each candidate shows the sensitive terms of its chunk that
it holds — a content c over the chunk's sensitive domain D.  Chunks are unlinked, so nothing
else is tied to Q.  The victim's true sensitive set T must agree with one candidate of every
release: c = T ∩ D.  A *world* is one candidate per release, pairwise consistent (each two agree
on the terms both domains cover); a sensitive term present in every world is *certain*.

A term certain from one release alone is an attribute disclosure k^m never promised to stop;
one certain only when the releases are combined is the composition leak.  Both are reported,
against the truth, for the worst Q: every m-subset of the victim's (rarest
``MAX_KNOWN``) non-sensitive terms.  The adversary's best guess — the sensitive term held in the
largest share of worlds, each weighted by its candidates' multiplicity — is scored against
guessing the term most common in the public chunks.

It reads the private zones (record ids and the pseudonym maps): it is the owners' measurement.
People are matched across releases by record id, so the stores must be published from inputs
that carry ids (CSV or JSON Lines).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import reduce
from itertools import combinations, product
from statistics import median

from ..query.view import Publication
from ..store import StoreError, open_store

MAX_KNOWN = 12  # a victim's rarest non-sensitive terms tried as background knowledge


@dataclass(frozen=True)
class Candidate:
    domain: frozenset[str]    # the sensitive terms of the candidate's chunk
    content: frozenset[str]   # those the candidate holds


@dataclass
class BasketRelease:
    """One release's public chunks as the adversary sees them, with the truth."""

    label: str
    m: int                                          # the m it was published with
    sensitive: frozenset[str]                       # the terms whose disclosure counts
    rows: list[tuple[Candidate, frozenset[str]]]   # public subrecords: sensitive part, terms
    postings: dict[str, set[int]]                   # term -> rows holding it
    records: dict[str, frozenset[str]]              # person -> whole record (truth)

    def candidates(self, known: frozenset[str]) -> Counter:
        """The public subrecords holding every known term, by sensitive content."""
        sets = sorted((self.postings.get(t, set()) for t in known), key=len)
        rows = reduce(set.intersection, sets[1:], set(sets[0])) if sets else set()
        return Counter(self.rows[r][0] for r in rows)


    @classmethod
    def from_chunks(cls, label: str, m: int, sensitive: frozenset[str],
                    chunks: Iterable[tuple[frozenset[str], Iterable[frozenset[str]]]],
                    records: dict[str, frozenset[str]]) -> BasketRelease:
        """``chunks``: each public chunk's terms and subrecords."""
        rows, postings = [], defaultdict(set)
        for terms, subrecords in chunks:
            domain = terms & sensitive
            for sub in subrecords:
                for term in sub:
                    postings[term].add(len(rows))
                rows.append((Candidate(domain, sub & sensitive), sub))
        return cls(label, m, sensitive, rows, dict(postings), records)


def load_basket_release(where: str, sensitive: frozenset[str] | None) -> BasketRelease:
    """The current version of a store's basket publication, with ``sensitive`` terms, else
    those it was published with."""
    publication = Publication.open(open_store(where))
    terms = sensitive if sensitive is not None else \
        frozenset(publication.manifest["params"].get("sensitive") or ())
    if not terms:
        raise StoreError(f"{where} was published without --sensitive-terms: name the terms "
                         f"whose disclosure counts with --sensitive-terms FILE")
    public = [(chunk.terms, [frozenset(sub) for _, sub in publication.subrecords(chunk.id)])
              for chunk in publication.chunks.values() if not chunk.private]
    records = dict(zip(publication.record_ids, publication.owner_records()))
    return BasketRelease.from_chunks(where, publication.m, terms, public, records)


def compose_stores(specs: Sequence[str], m: int | None,
                   sensitive: frozenset[str] | None) -> BasketCompositionReport:
    """The attack on the stores' current basket publications: with ``sensitive`` terms, else
    those they were all published with; ``m`` known terms, else the largest m of the stores."""
    loaded = [load_basket_release(spec, sensitive or None) for spec in specs]
    if len({release.sensitive for release in loaded}) > 1:
        raise ValueError("the stores were published with different sensitive terms: name the "
                         "ones that count with --sensitive-terms FILE")
    return basket_composition(loaded, loaded[0].sensitive,
                              m or max(release.m for release in loaded))


@dataclass
class BasketCompositionReport:
    releases: list[str]
    sensitive_terms: int
    known_terms: int            # m: how many of a victim's terms the adversary knows
    overlapping: int            # people in two or more releases
    attacked: int               # of them, with a known-term set located in two or more
    disclosed_alone: int        # a true sensitive term certain from one release
    certain_disclosures: int    # a true sensitive term certain only by composing
    misled: int                 # a term certain but false (the victim was not a candidate)
    candidates_min: int | None  # matching public subrecords per release
    candidates_median: float | None
    worlds_median: float | None  # distinct joint sensitive contents left
    attacker_accuracy: float | None  # best guess held, among attacked holders of a term
    baseline_accuracy: float | None  # the most common public sensitive term held

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Outcome:
    """What one known-term set tells of a victim, across the releases that locate it."""

    certain_alone: frozenset[str]
    certain_joint: frozenset[str]
    sizes: list[int]
    worlds: Counter  # joint content -> weight


def _consistent(combo: Sequence[Candidate]) -> bool:
    return all(a.content & b.domain == b.content & a.domain
               for a, b in combinations(combo, 2))


def _certain(contents: Sequence[frozenset[str]]) -> frozenset[str]:
    return frozenset.intersection(*contents) if contents else frozenset()


def attack_victim(located: Sequence[Counter]) -> Outcome | None:
    """``located``: per release, the candidates of one known-term set (none empty).  None
    when no world is consistent: the victim is not among some release's candidates."""
    alone = frozenset().union(*(_certain([c.content for c in cands]) for cands in located))
    worlds: Counter = Counter()
    for combo in product(*(cands.items() for cands in located)):
        candidates = [c for c, _ in combo]
        if _consistent(candidates):
            weight = 1
            for _, n in combo:
                weight *= n
            worlds[frozenset().union(*(c.content for c in candidates))] += weight
    if not worlds:
        return None
    return Outcome(alone, frozenset.intersection(*worlds), [sum(c.values()) for c in located],
                    worlds)


def _guess(worlds: Counter) -> str | None:
    share = Counter()
    for content, weight in worlds.items():
        share.update(dict.fromkeys(content, weight))
    return min(share, key=lambda t: (-share[t], t)) if share else None


def basket_composition(releases: Sequence[BasketRelease], sensitive: frozenset[str],
                       m: int) -> BasketCompositionReport:
    if len(releases) < 2:
        raise ValueError("the composition attack needs two releases or more")
    if m < 1:
        raise ValueError(f"the adversary must know at least one term (got m={m})")
    shown = Counter(p for release in releases for p in release.records)
    overlapping = sorted(p for p, n in shown.items() if n >= 2)
    support = Counter(t for r in releases for row in r.rows for t in row[1])
    public_sensitive = Counter(t for r in releases for c, _ in r.rows for t in c.content)
    common = min(public_sensitive, key=lambda t: (-public_sensitive[t], t)) \
        if public_sensitive else None
    counts = Counter()
    sizes, worlds_left = [], []
    guesses = []
    for person in overlapping:
        holding = [r for r in releases if person in r.records]
        truth = holding[0].records[person]
        known = reduce(frozenset.intersection, (r.records[person] for r in holding)) - sensitive
        known = sorted(known, key=lambda t: (support[t], t))[:MAX_KNOWN]
        outcomes = []
        for q in combinations(known, min(m, len(known))):
            located = [c for c in (r.candidates(frozenset(q)) for r in holding) if c]
            if len(located) >= 2 and (outcome := attack_victim(located)):
                outcomes.append(outcome)
        if not outcomes:
            continue
        counts["attacked"] += 1
        alone = frozenset().union(*(o.certain_alone for o in outcomes))
        joint = frozenset().union(*(o.certain_joint for o in outcomes))
        counts["alone"] += bool(alone & truth)
        counts["joint"] += bool((joint - alone) & truth)
        counts["misled"] += bool((joint | alone) - truth)
        sizes.extend(s for o in outcomes for s in o.sizes)
        sharpest = min(outcomes, key=lambda o: len(o.worlds))
        worlds_left.append(len(sharpest.worlds))
        if truth & sensitive:
            informed = [o for o in outcomes if _guess(o.worlds)]
            guess = _guess(min(informed, key=lambda o: len(o.worlds)).worlds) if informed \
                else common  # nothing linked to Q: the adversary falls back on the baseline
            guesses.append((guess in truth, common in truth))
    n = len(guesses)
    return BasketCompositionReport(
        releases=[r.label for r in releases], sensitive_terms=len(sensitive), known_terms=m,
        overlapping=len(overlapping), attacked=counts["attacked"],
        disclosed_alone=counts["alone"], certain_disclosures=counts["joint"],
        misled=counts["misled"], candidates_min=min(sizes) if sizes else None,
        candidates_median=median(sizes) if sizes else None,
        worlds_median=median(worlds_left) if worlds_left else None,
        attacker_accuracy=round(sum(g for g, _ in guesses) / n, 6) if n else None,
        baseline_accuracy=round(sum(b for _, b in guesses) / n, 6) if n else None)
