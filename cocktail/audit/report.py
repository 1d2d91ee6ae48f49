"""What an audit finds: a violation, one version's report, and the limits every check
shares."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from ..releases.signing import Provenance

DEFAULT_MAX_ITEMSETS = 20_000_000  # combinations enumerated per chunk before giving up
EXAMPLES = 5                        # violating itemsets reported per chunk


@dataclass(frozen=True)
class Violation:
    kind: str  # km-anonymity, linkable-pseudonym, private-data, integrity, unverifiable,
    # placement, signature
    where: str
    detail: str


VIOLATION_COLUMNS = ["kind", "where", "detail"]


def violations_frame(violations: Sequence[Violation]):
    """Violations as a DataFrame (the ``frames`` extra), one row each."""
    from ..frames import to_frame

    return to_frame(map(asdict, violations), VIOLATION_COLUMNS)


@dataclass
class AuditReport:
    store: str
    version: str | None
    k: int | None = None
    m: int | None = None
    chunks: int = 0
    subrecords: int = 0
    itemsets_checked: int = 0
    placement: dict | None = None  # block placement of the private zone, where there are blocks
    provenance: Provenance | None = None  # the version's signature, checked
    violations: list[Violation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_dict(self) -> dict:
        return {"ok": self.ok, "store": self.store, "version": self.version, "k": self.k,
                "m": self.m, "chunks": self.chunks, "subrecords": self.subrecords,
                "itemsets_checked": self.itemsets_checked, "placement": self.placement,
                "signature": self.provenance.as_dict() if self.provenance else None,
                "violations": [v.__dict__ for v in self.violations]}

    def to_pandas(self):
        """The violations, a row each (kind, where, detail): empty when the audit passed."""
        return violations_frame(self.violations)
