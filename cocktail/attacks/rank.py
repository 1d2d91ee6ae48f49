"""Attacks on a ranking, measured through ranks alone (the ranked-retrieval paper's threat: the
adversary knows the scoring function and every public value, creates accounts and queries).

* **Differencing** (Rahman et al., as the notes' F6 probe): for a victim v and a private
  column B, the attacker creates accounts with v's public values and private values of its
  choice; those that win v's ties (the tie order shows on a query that asks no private value)
  are its references.  It asks (v's public values, B = θ) for every θ: v above a reference
  means v strictly outscores it, so θ is a candidate.  Under no defense the candidates are
  exactly {v[B]}; under ESVT/ESTT, the values v's set shows.
* **Sybil partner** (ESTT): ``sybils`` more accounts with v's public values are created
  *before* the build; if one lands in v's set (it ties v on every query, which the attacker
  sees), its own value is struck from the candidates.
* **Prior-aware** (a domain expert): the candidates, narrowed to the values most common among
  the *other* tuples with v's public values (the table itself, without v, as the prior).
* **dp**: no comparison is exact, so the attacker asks each probe for the noisy top of v's
  public group and guesses the θ where v came before the most of its references; it spends
  ``alpha`` (the privacy parameter α) per victim and column, split over the probes.  No
  attacker with a uniform prior over d values can beat e^α/(e^α + d − 1) (e^α/(1 + e^α) for
  d = 2), reported beside.

Success is the expected accuracy of a uniform guess among the candidates left.  Accounts are
inserted the way a rebuild inserts tuples (:func:`cocktail.rank.release.protect` with the
earlier state), so they get sets under the ranking's own rules.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass

import numpy as np

from ..rank.index import RankIndex, tie_digest
from ..rank.model import Query, RankTable, Schema
from ..rank.release import load_ranking, protect, state_for, table_from_state
from ..store import Store

ATTACKERS = ("differencing", "sybil", "prior")
REFERENCES = 16         # accounts per victim that win its ties
# Accounts an attacker creates at most to find them: a victim whose tie digest is a share p
# of the range needs REFERENCES/p tries: 10,000 left a rare victim (about one in a thousand)
# with fewer references than a column has values, a column it then never differenced.  A
# million costs ~2 s for such a victim and nothing for the others.
ACCOUNTS_TRIED = 1_000_000
MAX_GROUP = 100     # dp probes ask for at most this many results


@dataclass
class RankAttackReport:
    defense: str
    l: int | None
    victims: int
    columns: list[str]
    success: dict[str, float]        # attacker -> mean success over (victim, column)
    candidates: dict[str, float]     # attacker -> mean number of candidates left
    partnered: float | None          # sybil: share of victims whose set took a sybil account
    prior_only: float                # the prior's best guess, without any query
    chance: float                    # a uniform guess over the column's domain
    alpha: float | None            # dp: spent per victim and column, over all its probes
    dp_bound: float | None           # dp: mean over columns of e^α/(e^α + d − 1)
    dp_bound_binary: float | None    # dp: e^α/(1 + e^α)
    probes: int                      # ranking queries the attackers asked
    seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def attack_ranking(store: Store, name: str, victims: int = 100, alpha: float = 1.0,
                   sybils: int = 4) -> RankAttackReport:
    started = time.perf_counter()
    _, _, state = load_ranking(store, name)
    table = table_from_state(Schema.from_dict(state["schema"]), state["tuples"])
    chosen = _victims(table, victims)
    width = len(table.schema.private)
    priors = {v: _prior(table, v) for v in chosen}
    success, sizes = defaultdict(list), defaultdict(list)
    partnered, probes = None, 0
    for attacker in ATTACKERS:
        if attacker == "sybil" and state["defense"] != "estt":
            continue
        world = _World(table, state, chosen, sybils if attacker == "sybil" else 0)
        for v in chosen:
            for j in range(width):
                found = world.candidates(v, j, alpha)
                if attacker == "sybil":
                    struck = found - world.sybil_values(v, j)
                    found = struck or found
                if attacker == "prior":
                    found = _most_likely(found, priors[v][j])
                truth = table.private[v, j]
                success[attacker].append((truth in found) / len(found))
                sizes[attacker].append(len(found))
        if attacker == "sybil":
            partnered = round(float(np.mean([world.partnered(v) for v in chosen])), 4)
        probes += world.probes
    domains = [len(_values(table, j)) for j in range(width)]
    guesses = [(table.private[v, j], _most_likely(set(_values(table, j)), priors[v][j]))
               for v in chosen for j in range(width)]
    prior_only = float(np.mean([(truth in guess) / len(guess) for truth, guess in guesses]))
    dp = state["defense"] == "dp"
    return RankAttackReport(
        state["defense"], state["l_sets"], len(chosen), list(table.schema.private),
        {a: round(float(np.mean(s)), 4) for a, s in success.items()},
        {a: round(float(np.mean(s)), 3) for a, s in sizes.items()}, partnered,
        round(prior_only, 4), round(float(np.mean([1 / d for d in domains])), 4),
        alpha if dp else None,
        round(float(np.mean([1 / (1 + (d - 1) * math.exp(-alpha)) for d in domains])), 4)
        if dp else None,
        round(1 / (1 + math.exp(-alpha)), 4) if dp else None,
        probes, round(time.perf_counter() - started, 2))


def _victims(table: RankTable, count: int) -> list[int]:
    """Every n/count-th tuple in id order: spread over the table, the same on every run."""
    order = sorted(range(len(table.ids)), key=lambda i: table.ids[i])
    step = max(1, len(order) // max(1, count))
    return order[::step][:count]


def _values(table: RankTable, j: int) -> list[float]:
    return sorted(set(table.private[:, j].tolist()))


def _prior(table: RankTable, v: int) -> list[Counter]:
    """Per private column, the values of the other tuples that share v's public values."""
    alike = (table.public == table.public[v]).all(axis=1)
    alike[v] = False
    return [Counter(table.private[alike, j].tolist()) for j in range(table.private.shape[1])]


def _most_likely(found: set[float], prior: Counter) -> set[float]:
    best = max(prior.get(x, 0) for x in found)
    return {x for x in found if prior.get(x, 0) == best}


class _World:
    """The ranking after the attacker's accounts joined it (as a rebuild would add them)."""

    def __init__(self, table: RankTable, state: dict, victims: list[int], sybils: int) -> None:
        self.table, self.defense, self.probes = table, state["defense"], 0
        key = bytes.fromhex(state["tie_key"])
        base, previous = table, state
        self.sybils = {v: [f"~sybil{n}~{table.ids[v]}" for n in range(sybils)] for v in victims}
        if sybils:  # accounts before the build, all alike (so never paired with each other)
            base = _extended(table, [(v, rid, 0) for v in victims for rid in self.sybils[v]])
            previous = None
        self.references = {v: _tie_winners(key, table.ids[v]) for v in victims}
        accounts = [(v, rid, n) for v, ids in self.references.items()
                    for n, rid in enumerate(ids)]
        if previous is None:
            made, _ = protect(base, self.defense, state["l"])
            previous = state_for(base, self.defense, state["l"], made.sets, b"")
        world = _extended(base, accounts)
        made, _ = protect(world, self.defense, state["l"], state.get("workload") or None,
                          previous)
        sets = made.sets if self.defense in ("esvt", "estt") else None
        self.world = world
        self.index = RankIndex.build(world, sets, key, self.defense)
        self.at = {rid: i for i, rid in enumerate(world.ids)}
        self.set_of = {rid: s for s in (sets or []) for rid in s.real}

    def _sybils_in_set(self, v: int) -> list[int]:
        s = self.set_of.get(self.table.ids[v])
        return [self.at[rid] for rid in (s.real if s else ()) if rid in self.sybils[v]]

    def partnered(self, v: int) -> bool:
        return bool(self._sybils_in_set(v))

    def sybil_values(self, v: int, j: int) -> set[float]:
        """The values the attacker gave the accounts in v's set (obfuscation may have changed
        them: the attacker cannot tell)."""
        return {self.world.private[row, j] for row in self._sybils_in_set(v)}

    def _outranks(self, query: Query, row: int, others: list[int]) -> bool:
        """Whether ``row`` comes before any of ``others`` in the query's answer (they share
        its public values, so all of them are in one top-k list)."""
        self.probes += 1
        scores, tie = self.index.scores(query), self.index.tie
        return any(scores[row] > scores[o] or (scores[row] == scores[o] and tie[row] < tie[o])
                   for o in others)

    def candidates(self, v: int, j: int, alpha: float) -> set[float]:
        victim = self.at[self.table.ids[v]]
        schema = self.table.schema
        values = _values(self.table, j)
        public = {c: self.index.public[victim, i] for i, c in enumerate(schema.public)}
        probes = [Query(public, {schema.private[j]: theta}, "") for theta in values]
        references = [self.at[rid] for rid in self.references[v]]
        if not references:  # no account could win v's ties: no strict comparison, guess
            return set(values)
        if self.defense == "dp":
            return self._most_beaten(victim, references, values, probes, alpha / len(values))
        # v before a reference that wins its ties: v outscores it strictly
        found = {theta for theta, probe in zip(values, probes)
                 if self._outranks(probe, victim, references)}
        return found or set(values)

    def _most_beaten(self, victim: int, references: list[int], values: list[float],
                     probes: list[Query], alpha: float) -> set[float]:
        """dp: the θ at which v came before the most references in the noisy top of its
        public group (without noise: exactly v's value)."""
        group = int((self.index.public == self.index.public[victim]).all(axis=1).sum())
        beaten = []
        for probe in probes:
            self.probes += 1
            ranked = self.index.noisy_top(probe, min(group, MAX_GROUP), alpha)
            place = {row: n for n, row in enumerate(ranked)}
            mine = place.get(victim, len(ranked))
            beaten.append(sum(mine < place.get(r, len(ranked)) for r in references))
        return {theta for theta, b in zip(values, beaten) if b == max(beaten)}

def _tie_winners(key: bytes, victim: str) -> list[str]:
    """The accounts an attacker keeps: it creates accounts with the victim's public values
    and keeps those that rank before the victim on a query asking no private value (the
    others it deletes), up to ``REFERENCES`` of them or ``ACCOUNTS_TRIED`` tries."""
    target = tie_digest(key, victim)
    names = (f"~tie{n}~{victim}" for n in range(ACCOUNTS_TRIED))
    return list(itertools.islice((rid for rid in names if tie_digest(key, rid) < target),
                                 REFERENCES))


def _extended(table: RankTable, accounts: list[tuple[int, str, int]]) -> RankTable:
    """The table with the attacker's accounts (victim, id, choice): the victim's public
    values, and on every private column the choice-th value of its domain (cyclically), so
    that the references show every value and some reference's set lacks any given θ."""
    if not accounts:
        return table
    domains = [_values(table, j) for j in range(table.private.shape[1])]
    ids = [*table.ids, *(rid for _, rid, _ in accounts)]
    public = np.vstack([table.public, table.public[[v for v, _, _ in accounts]]])
    private = np.vstack([table.private, np.array(
        [[values[n % len(values)] for values in domains] for _, _, n in accounts])])
    return RankTable(table.schema, ids, public, private)
