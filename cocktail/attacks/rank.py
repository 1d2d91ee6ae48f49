"""Attacks on a ranking, measured through ranks alone (the ranked-retrieval paper's threat: the
adversary knows the scoring function and every public value, creates accounts and queries).

* **Differencing** (Rahman et al., as the notes' F6 probe): for a victim v and a private
  column B, the attacker creates accounts with v's public values and a value c of its choice,
  keeps one that wins v's ties and one that loses them (the tie order is visible on a query
  that asks no private value), and asks (v's public values, B = θ) for every θ.  v above the
  tie-winner means v strictly outscores it: θ is a candidate.  Under no defense the candidates
  are {v[B]} (or none, when v[B] = c: then the guess is c).
* **Sybil partner** (ESTT): one more account with v's public values is created *before* the
  build; if it lands in v's set (it ties v on every query, which the attacker sees), its own
  value is struck from the candidates.
* **Prior-aware** (a domain expert): the differencing candidates, ranked by how common each
  value is among tuples with v's public values (the table itself as the prior).

Success is the expected accuracy of a uniform guess among the candidates left.  Accounts are
inserted the way a rebuild inserts tuples (:func:`cocktail.rank.release.protect` with the
earlier state), so they get sets under the ranking's own rules.  ``dp`` probes are noisy top-k
answers at ``epsilon`` each; its bound e^ε/(1+e^ε) is reported beside.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass

import numpy as np

from ..rank.index import RankIndex
from ..rank.model import Query, RankTable, Schema
from ..rank.release import load_ranking, protect, state_for, table_from_state
from ..store import Store

ATTACKERS = ("differencing", "sybil", "prior")


@dataclass
class RankAttackReport:
    defense: str
    l: int | None
    victims: int
    columns: list[str]
    success: dict[str, float]        # attacker -> mean success over (victim, column)
    candidates: dict[str, float]     # attacker -> mean number of candidates left
    prior_only: float                # the prior's best guess, without any query
    chance: float                    # a uniform guess over the column's domain
    epsilon: float | None            # dp: per probe
    dp_bound: float | None           # dp: e^ε/(1+e^ε) for one probe

    def as_dict(self) -> dict:
        return asdict(self)


def attack_ranking(store: Store, name: str, victims: int = 100,
                   epsilon: float = 0.1) -> RankAttackReport:
    _, _, state = load_ranking(store, name)
    table = table_from_state(Schema.from_dict(state["schema"]), state["tuples"])
    chosen = _victims(table, victims)
    success, sizes = defaultdict(list), defaultdict(list)
    prior = _prior(table)
    for attacker in ATTACKERS:
        if attacker == "sybil" and state["defense"] != "estt":
            continue
        world = _World(table, state, chosen, with_partner=attacker == "sybil")
        for v in chosen:
            for j in range(len(table.schema.private)):
                found = world.candidates(v, j, epsilon)
                if attacker == "sybil" and world.partnered(v):
                    found = (found - {world.partner_value(v, j)}) or found
                if attacker == "prior":
                    found = _most_likely(found, prior[tuple(table.public[v].tolist())][j])
                truth = table.private[v, j]
                success[attacker].append((truth in found) / len(found) if found else 0.0)
                sizes[attacker].append(len(found))
    chance = float(np.mean([1 / len(_values(table, j)) for j in range(table.private.shape[1])]))
    prior_only = float(np.mean([_prior_guess(prior, table, v, j) for v in chosen
                                for j in range(table.private.shape[1])]))
    dp = state["defense"] == "dp"
    return RankAttackReport(
        state["defense"], state["l_sets"], len(chosen), list(table.schema.private),
        {a: round(float(np.mean(s)), 4) for a, s in success.items()},
        {a: round(float(np.mean(s)), 3) for a, s in sizes.items()},
        round(prior_only, 4), round(chance, 4), epsilon if dp else None,
        round(math.exp(epsilon) / (1 + math.exp(epsilon)), 4) if dp else None)


def _victims(table: RankTable, count: int) -> list[int]:
    """Every n/count-th tuple in id order: spread over the table, the same on every run."""
    order = sorted(range(len(table.ids)), key=lambda i: table.ids[i])
    step = max(1, len(order) // max(1, count))
    return order[::step][:count]


def _values(table: RankTable, j: int) -> list[float]:
    return sorted(set(table.private[:, j].tolist()))


def _prior(table: RankTable) -> dict:
    counts: dict = defaultdict(lambda: defaultdict(Counter))
    for pub, priv in zip(table.public.tolist(), table.private.tolist()):
        for j, x in enumerate(priv):
            counts[tuple(pub)][j][x] += 1
    return counts


def _most_likely(found: set[float], prior: Counter) -> set[float]:
    if not found:
        return found
    best = max(prior.get(x, 0) for x in found)
    return {x for x in found if prior.get(x, 0) == best}


def _prior_guess(prior: dict, table: RankTable, v: int, j: int) -> float:
    guess = _most_likely(set(_values(table, j)), prior[tuple(table.public[v].tolist())][j])
    return (table.private[v, j] in guess) / len(guess)


class _World:
    """The ranking after the attacker's accounts joined it (as a rebuild would add them)."""

    TIE_ACCOUNTS = 4  # accounts per victim, so that some win and some lose the victim's ties

    def __init__(self, table: RankTable, state: dict, victims: list[int],
                 with_partner: bool) -> None:
        self.table, self.state, self.defense = table, state, state["defense"]
        base, previous = table, state
        if with_partner:  # one account per victim before the build: fresh sets for everyone
            base = _extended(table, [(v, "partner") for v in victims])
            previous = None
        accounts = [(v, f"tie{t}") for v in victims for t in range(self.TIE_ACCOUNTS)]
        if previous is None:
            made, _ = protect(base, self.defense, state["l"])
            previous = state_for(base, self.defense, state["l"], made.sets, b"")
        world = _extended(base, accounts)
        made, _ = protect(world, self.defense, state["l"], state.get("workload") or None,
                          previous)
        sets = made.sets if self.defense in ("esvt", "estt") else None
        self.world = world
        self.index = RankIndex.build(world, sets, bytes.fromhex(state["tie_key"]),
                                     self.defense)
        self.at = {rid: i for i, rid in enumerate(world.ids)}
        self.set_of = {rid: s for s in (sets or []) for rid in s.real}

    def _id(self, v: int, tag: str) -> str:
        return f"~{tag}~{self.table.ids[v]}"

    def partnered(self, v: int) -> bool:
        s = self.set_of.get(self.table.ids[v])
        return s is not None and self._id(v, "partner") in s.real

    def partner_value(self, v: int, j: int) -> float:
        """The value the attacker gave its partner account (it may have been obfuscated)."""
        return self.world.private[self.at[self._id(v, "partner")], j]

    def _above(self, query: Query, a: int, b: int, epsilon: float) -> bool:
        if self.defense == "dp":
            group = np.flatnonzero((self.index.public == self.index.public[a]).all(axis=1))
            ranked = self.index.noisy_top(query, len(group) + 2, epsilon)
        else:
            ranked = self.index.order(self.index.scores(query), len(self.world.ids))
        position = {row: n for n, row in enumerate(ranked)}
        return position.get(a, math.inf) < position.get(b, math.inf)

    def candidates(self, v: int, j: int, epsilon: float) -> set[float]:
        victim = self.at[self.table.ids[v]]
        public = Query({c: self.index.public[victim, i]
                        for i, c in enumerate(self.table.schema.public)}, {}, "")
        accounts = [self.at[self._id(v, f"tie{t}")] for t in range(self.TIE_ACCOUNTS)]
        winner = next((a for a in accounts if self._above(public, a, victim, epsilon)),
                      accounts[0])
        column = self.table.schema.private[j]
        found = set()
        for theta in _values(self.table, j):
            probe = Query(public.public, {column: theta}, "")
            if self._above(probe, victim, winner, epsilon):
                found.add(theta)
        return found or {self.world.private[winner, j]}  # never above: v has c


def _extended(table: RankTable, accounts: list[tuple[int, str]]) -> RankTable:
    """The table with the attacker's accounts: the victim's public values, and on every
    private column the column's first value (the attacker's fixed choice c)."""
    first = np.array([min(table.private[:, j]) for j in range(table.private.shape[1])])
    ids = [*table.ids, *(f"~{tag}~{table.ids[v]}" for v, tag in accounts)]
    public = np.vstack([table.public, *(table.public[v][None, :] for v, _ in accounts)])
    private = np.vstack([table.private, *(first[None, :] for _ in accounts)])
    return RankTable(table.schema, ids, public, private)

