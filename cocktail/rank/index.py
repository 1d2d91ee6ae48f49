"""A built ranking: the published score of every tuple for any query, and its top-k.

The score splits as the hybrid cloud does: the public part (public attributes) can be computed
where the public table lives; the private part reads only each tuple's *published* vectors —
its equivalent set's members, averaged (the notes' §2.0: s'(u|q) = public part +
Σ_j wB_j/|E|·Σ_{x∈E} ρ(q[B_j], x[B_j])).  Ties are broken by a keyed hash of the tuple's id,
never by anything private, and the key stays in the private zone.

``dp`` keeps no sets: each query releases a report-noisy-max top-k over the true scores
(OpenDP's ``make_noisy_top_k``); one tuple's private values move its score by at most the
weights of the private columns the query asks (the L∞ sensitivity), so k picks cost the
caller's α in all.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .defenses import EquivalentSet
from .model import Query, RankTable, Schema, similarity


@dataclass
class RankIndex:
    schema: Schema
    ids: list[str]
    public: np.ndarray    # (n, public columns)
    private: np.ndarray   # (n, private columns): the true values, for dp and for measuring
    members: np.ndarray   # (n, largest set, private columns): published vectors, NaN-padded
    sizes: np.ndarray     # (n,) members per set
    tie: np.ndarray       # (n,) position of each tuple in the keyed-hash order
    defense: str

    @classmethod
    def build(cls, table: RankTable, sets: list[EquivalentSet] | None, key: bytes,
              defense: str) -> RankIndex:
        n, width = len(table.ids), len(table.schema.private)
        if sets is None:  # none and dp: every tuple alone with its true values
            members, sizes = table.private[:, None, :].copy(), np.ones(n)
        else:
            at = {rid: i for i, rid in enumerate(table.ids)}
            largest = max(len(s.vectors) for s in sets)
            members, sizes = np.full((n, largest, width), np.nan), np.zeros(n)
            for s in sets:
                for rid in s.real:
                    members[at[rid], :len(s.vectors)] = np.array(s.vectors, dtype=float)
                    sizes[at[rid]] = len(s.vectors)
            if (sizes == 0).any():
                raise ValueError("a tuple is in no equivalent set")
        digests = [tie_digest(key, rid) for rid in table.ids]
        tie = np.empty(n, dtype=np.int64)
        tie[sorted(range(n), key=digests.__getitem__)] = np.arange(n)
        return cls(table.schema, table.ids, table.public, table.private, members, sizes, tie,
                   defense)

    def public_scores(self, query: Query) -> np.ndarray:
        scores = np.zeros(len(self.ids))
        for column, value in query.public.items():
            j = self.schema.public.index(column)
            scores += self.schema.weight(column) * similarity(self.schema, column, value,
                                                              self.public[:, j])
        return scores

    def private_scores(self, query: Query, true: bool = False) -> np.ndarray:
        """The published private part (``true``: the undefended one, for measuring)."""
        scores = np.zeros(len(self.ids))
        for column, value in query.private.items():
            j = self.schema.private.index(column)
            if true:
                found = similarity(self.schema, column, value, self.private[:, j])
            else:
                found = similarity(self.schema, column, value, self.members[:, :, j]).sum(
                    axis=1) / self.sizes
            scores += self.schema.weight(column) * found
        return scores

    def scores(self, query: Query, true: bool = False) -> np.ndarray:
        return self.public_scores(query) + self.private_scores(query, true)

    def order(self, scores: np.ndarray, k: int) -> list[int]:
        """The k best rows: highest score first, ties by the keyed hash."""
        k = min(k, len(scores))
        if k < len(scores):  # only rows that can make the top k need sorting
            threshold = np.partition(scores, len(scores) - k)[len(scores) - k]
            rows = np.flatnonzero(scores >= threshold)
        else:
            rows = np.arange(len(scores))
        ranked = rows[np.lexsort((self.tie[rows], -scores[rows]))]
        return ranked[:k].tolist()

    def top(self, query: Query, k: int, true: bool = False) -> list[int]:
        if self.defense == "dp" and not true:
            raise ValueError("a dp ranking answers only through noisy_top (it charges a budget)")
        return self.order(self.scores(query, true), k)

    def sensitivity(self, query: Query) -> float:
        """How far one tuple's private values can move its score under ``query``: the weights
        of the private columns it asks (0: the answer depends on no private value)."""
        return sum(self.schema.weight(c) for c in query.private)

    def noisy_top(self, query: Query, k: int, epsilon: float) -> list[int]:
        return self.noisy_sampler(query, k, epsilon)()

    def noisy_sampler(self, query: Query, k: int, epsilon: float) -> Callable[[], list[int]]:
        """Report-noisy-max top-k (OpenDP), ε-DP for a change of one tuple's private values,
        ready to draw: a noise scale that is not a number is refused here, before anything
        is charged.  A query that asks no private column needs no noise."""
        k = min(k, len(self.ids))
        sensitivity = self.sensitivity(query)
        if sensitivity == 0:
            return lambda: self.order(self.scores(query, true=True), k)
        measurement = top_k_measurement(len(self.ids), k, sensitivity, epsilon)
        return lambda: [int(i) for i in measurement(self.scores(query, true=True).tolist())]

    def row(self, i: int) -> dict[str, str]:
        """What a result shows: the id and the public attributes, nothing private."""
        return {"id": self.ids[i], **{c: self.schema.decode(c, self.public[i, j])
                                      for j, c in enumerate(self.schema.public)}}


def tie_digest(key: bytes, rid: str) -> bytes:
    """Where a tuple stands among its ties: lower first.  Keyed, so that nobody without the
    private zone's key can compute it (an attacker only sees it by asking)."""
    return hmac.new(key, rid.encode(), hashlib.sha256).digest()


def top_k_measurement(n: int, k: int, sensitivity: float, epsilon: float):
    """OpenDP's noisy top-k over n scores, its scale set so that the privacy map gives ε.
    Neighbours differ in one tuple's private values, which moves that one score and no other:
    the change is monotonic (every score moves the same way, or not at all), which OpenDP's
    map rewards with half the noise."""
    import opendp.prelude as dp  # here, not above: it would slow every command's start

    dp.enable_features("contrib")

    def make(scale: float):
        return dp.m.make_noisy_top_k(dp.vector_domain(dp.atom_domain(T=float, nan=False), n),
                                     dp.linf_distance(T=float, monotonic=True),
                                     dp.max_divergence(), k=k, scale=scale)
    at_one = make(1.0).map(sensitivity)  # k·Δ: finite under MAX_WEIGHT_SUM
    scale = at_one / epsilon
    if not math.isfinite(scale):
        raise ValueError(f"the noise scale of this top {k} (k·Δ/α = {at_one:g}/{epsilon:g}) is "
                         "larger than any number: ask for fewer results, or lower the weights")
    measurement = make(scale)
    if measurement.map(sensitivity) > epsilon * (1 + 1e-9):
        raise ValueError("noisy top-k: the privacy map exceeds ε")  # OpenDP's map is linear
    return measurement
