"""A chain of re-shared views (`cocktail audit --chain`): each hop sound on its own, none laxer
than the hop before, each nested in it, and each signed as derived from it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from ..store import Store
from .public import audit
from .views import _audited_view


@dataclass
class ChainAuditReport:
    ok: bool
    hops: list[dict]          # store, version, k, m, k^m ok, violations
    violations: list[str]     # laxer hops, chunks that are no projection, shared pseudonyms

    def as_dict(self) -> dict:
        return asdict(self)


def audit_chain(stores: Sequence[Store], trust: str | None = None) -> ChainAuditReport:
    """Each hop k^m-anonymous at its own (k, m) and its signature sound (every signer chain
    starting at ``trust`` when one is pinned), no laxer than the hop before, nested in it
    (every chunk the projection of one chunk of the hop before; no pseudonym shared), and a
    hop signed as a re-share naming the hop before's current version as its source."""
    hops, views, signed, violations = [], [], [], []
    for store in stores:
        report = audit(store, trust=trust)
        hops.append({"store": store.url, "version": report.version, "k": report.k,
                     "m": report.m, "ok": report.ok, "violations": len(report.violations),
                     "signature": report.provenance.as_dict() if report.provenance else None})
        views.append(_audited_view(store, report)[2] if report.ok else None)  # else: altered
        signed.append(report.provenance if report.ok else None)
    for (before, after), (a, b), (was, now) in zip(zip(hops, hops[1:]), zip(views, views[1:]),
                                                    zip(signed, signed[1:])):
        if after["k"] < before["k"] or after["m"] < before["m"]:
            violations.append(f"{after['store']}: k={after['k']}, m={after['m']} is laxer than "
                              f"the hop before (k={before['k']}, m={before['m']})")
        received = now.hops[-1]["statement"]["received"] if now and now.hops else None
        if was and received is not None and received != was.received():
            violations.append(f"{after['store']}: signed as derived from {received['version']} "
                              f"(manifest sha256 {received['manifest_sha256']}, signer "
                              f"{received['signer']}), not from {before['store']}'s "
                              f"{was.version}")
        if a is None or b is None:
            continue
        for chunk_id, terms, rows in b:
            shown = Counter(frozenset(sub) for _, sub in rows)
            if not any(terms <= t and Counter(frozenset(terms.intersection(sub))
                                              for _, sub in r if terms.intersection(sub))
                       == shown for _, t, r in a):
                violations.append(f"{after['store']}: chunk {chunk_id} is not a projection of "
                                  f"any chunk of {before['store']} (not nested)")
        names = {n for _, _, r in a for n, _ in r} & {n for _, _, r in b for n, _ in r}
        if names:
            violations.append(f"{after['store']}: {len(names)} pseudonym(s) shared with the hop "
                              f"before (rows linkable across hops)")
    return ChainAuditReport(all(h["ok"] for h in hops) and not violations, hops, violations)
