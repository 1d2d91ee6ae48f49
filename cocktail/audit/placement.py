"""Where the private zone's bytes physically are, on a store with blocks (HDFS): every replica
of every private file on a datanode in a private rack.  It reads block locations only,
never the private files."""

from __future__ import annotations

from ..store import Store
from .report import EXAMPLES, AuditReport, Violation


def check_placement(store: Store, report: AuditReport) -> None:
    """Every replica of every private file on a private-rack datanode (block metadata only)."""
    located = store.replicas("private")
    if located is None:
        return
    files = blocks = replicas = 0
    outside: list[tuple[str, int, str]] = []
    for path, racks in located:
        files += 1
        blocks += len(racks)
        for number, block in enumerate(racks):
            replicas += len(block)
            outside += [(path, number, where) for where in block
                        if not where.startswith(store.private_racks)]
    report.placement = {"private_files": files, "blocks": blocks, "replicas": replicas,
                        "replicas_outside_private_racks": len(outside),
                        "private_racks": store.private_racks}
    for path, number, where in outside[:EXAMPLES * 4]:
        report.violations.append(Violation("placement", path,
                                           f"block {number} has a replica on {where}"))
    if len(outside) > EXAMPLES * 4:
        report.violations.append(Violation("placement", "private zone", f"... and "
                                           f"{len(outside) - EXAMPLES * 4} more such replicas"))
