"""The multi-release differential attacker of permutation-based table releases.

It links every tuple across releases (the QIs are published unchanged, so a tuple is
recognised wherever it appears) and knows each partition's multiset of S values.  Taking
differences and intersections of partitions across any number of releases, the finest sets
it can isolate are the *atoms*: the tuples that share their partition in every release (and
their absence from the releases before they appeared).  The attacker wins when an atom holds
fewer than k distinct S values or a range below e — the paper's difference and intersection
attacks are the two-partition cases, the notes' union attack (F5) one with three partitions.

This is the strongest such attacker (perfect linking, every value of an atom derivable), so an
audit that finds nothing here finds nothing for any weaker one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .ke import Partitioning, error


@dataclass(frozen=True)
class Finding:
    """A derived set the attacker isolates: its tuples and where it comes from."""

    tuples: frozenset[int]
    sources: tuple[tuple[int, int], ...]  # (release, partition) whose combination gives it
    distinct: int
    range: float

    def describe(self, labels: Sequence[str]) -> str:
        where = " ∩ ".join(f"{labels[r]}#{p}" for r, p in self.sources)
        return (f"{len(self.tuples)} tuple(s) isolated by {where} minus the rest: "
                f"{self.distinct} distinct value(s), range {self.range:g}")


def atoms(releases: Sequence[Partitioning]) -> dict[tuple[int, ...], frozenset[int]]:
    """Tuples grouped by their partition in every release (-1: not in that release)."""
    where: dict[int, list[int]] = defaultdict(lambda: [-1] * len(releases))
    for r, partitions in enumerate(releases):
        for p, members in enumerate(partitions):
            for t in members:
                where[t][r] = p
    grouped: dict[tuple[int, ...], set[int]] = defaultdict(set)
    for t, signature in where.items():
        grouped[tuple(signature)].add(t)
    return {signature: frozenset(ts) for signature, ts in grouped.items()}


def differential_attack(releases: Sequence[Partitioning], values: Mapping[int, float], k: int,
                        e: float) -> list[Finding]:
    """Every atom with fewer than ``k`` distinct values or a range below ``e``."""
    found = []
    for signature, members in sorted(atoms(releases).items()):
        held = [values[t] for t in members]
        distinct, spread = len(set(held)), error(held)
        if distinct < k or spread < e:
            sources = tuple((r, p) for r, p in enumerate(signature) if p >= 0)
            found.append(Finding(members, sources, distinct, spread))
    return found
