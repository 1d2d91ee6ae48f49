"""ρ-cloned clusters: every cluster a near-copy of the data's sensitive-term frequencies.

The ρ-cloning paper's idea (``docs/composition.md``) carried to set-valued records, as its
notes (§6) propose: with designated sensitive terms 𝒮, the overlay tree — which gathers
*similar* records — would concentrate each sensitive term in a few clusters, and a victim's
cluster would then tell an adversary who composes two publishers' releases much about them.
Instead the records are dealt to the clusters in strata: sorted by their rarest sensitive term
(then the records with none), one to each cluster in turn, so that every cluster gets its share
of every stratum.  No record is invented or dropped: k^m-partitioning runs on each cluster,
with the sensitive terms split apart from the rest (``anonymity.partition``'s ``apart``, so
that no public subrecord ties one to a known term), and what cannot be public stays private.

ρ is measured — max over clusters and sensitive terms of |sup_P(t)/|P| − sup_C(t)/|C|| — and a
publish whose ρ exceeds the owner's ``max_rho`` is refused before anything is written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence


def cloned_clusters(records: Sequence[frozenset[str]], cluster_size: int,
                    sensitive: Iterable[str]) -> list[list[int]]:
    """The records' positions dealt to clusters in strata of the rarest sensitive term."""
    sensitive = frozenset(sensitive)
    support = Counter(t for record in records for t in record & sensitive)
    clusters = max(1, -(-len(records) // cluster_size))

    def stratum(p: int) -> tuple:
        held = records[p] & sensitive
        if not held:
            return (1, 0, "", p)
        rarest = min(held, key=lambda t: (support[t], t))
        return (0, support[rarest], rarest, p)

    order = sorted(range(len(records)), key=stratum)
    return [sorted(order[c::clusters]) for c in range(clusters)]


def checked_rho(records: Sequence[frozenset[str]], clusters: list[list[int]],
                sensitive: Iterable[str], max_rho: float) -> float:
    """The clusters' ρ (rounded), refused above ``max_rho``."""
    rho, term, cluster = cluster_rho(records, clusters, sensitive)
    if rho > max_rho:
        raise ValueError(f"the clusters are ρ-clones only for ρ = {rho:.4f} (term {term!r} in "
                         f"cluster {cluster}), above --max-rho {max_rho:g}: use larger "
                         f"clusters or fewer, more frequent sensitive terms; nothing written")
    return round(rho, 6)


def cluster_rho(records: Sequence[frozenset[str]], clusters: Sequence[Sequence[int]],
                sensitive: Iterable[str]) -> tuple[float, str | None, int | None]:
    """The largest gap between a cluster's and the data's frequency of a sensitive term, with
    the term and the cluster where it occurs (0, None, None without sensitive terms)."""
    sensitive = frozenset(sensitive)
    overall = Counter(t for record in records for t in record & sensitive)
    worst: tuple[float, str | None, int | None] = (0.0, None, None)
    for number, members in enumerate(clusters):
        held = Counter(t for p in members for t in records[p] & sensitive)
        for term in sorted(sensitive):
            gap = abs(overall[term] / len(records) - held[term] / len(members))
            if gap > worst[0]:
                worst = (gap, term, number)
    return worst
