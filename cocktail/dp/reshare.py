"""Re-sharing a noisy answer along a chain: hop i + 1 gets hop i's answer plus Lap(Δ/α_{i+1}).

Alone, hop i + 1's answer is α_{i+1}-DP (it is hop i's release with fresh noise of that scale);
together with every earlier hop it is post-processing of hop 1's release, so the chain costs
α₁, charged once when hop 1 asked, and a re-share costs nothing.  Two rules keep each hop at
its own level: a hop may not ask for a larger α (less noise) than the hop before, and each
hop's answer is drawn once and stored — re-sharing again returns it, because fresh draws,
averaged, would converge to the hop before.  Only the stored noisy answer is ever read: a
re-share never touches the data.
"""

from __future__ import annotations

import numpy as np

from ..querylang import parse_batch
from .ledger import Ledger, LedgerError, answer_id, parse_answer_id
from .noise import laplace
from .strategies import noq
from .workload import Matrices


def reshare(ledger: Ledger, source_id: str, alpha: float) -> dict:
    """The next hop's answer to the answer ``source_id`` at ``alpha``."""
    hop, role, key, version = parse_answer_id(source_id)
    source = ledger.answer_at(hop, role, key, version)
    if source is None:
        raise LedgerError(f"no answer {source_id!r} in this ledger")
    stored = ledger.answer_at(hop + 1, role, key, version)
    if stored is not None:
        if stored["alpha"] != alpha:
            raise LedgerError(f"hop {hop + 1} of this chain was shared at α = {stored['alpha']:g}; "
                            f"a hop gets one answer")
        return stored | {"reused": True}
    if alpha > source["alpha"]:
        raise LedgerError(f"hop {hop + 1} asks for α = {alpha:g}, more than hop {hop}'s "
                        f"{source['alpha']:g}: a re-share may only add noise")
    scale = answer_sensitivity(source["workload"]) / alpha
    variances = [v + 2 * scale ** 2 for v in source["expected_squared_error"]]
    answer = {"answer_id": answer_id(hop + 1, role, key, version), "hop": hop + 1,
              "source": answer_id(hop, role, key, version), "workload": source["workload"],
              "answers": laplace(source["answers"], scale), "alpha": alpha,
              "expected_squared_error": variances,
              "expected_rms_error": [float(np.sqrt(v)) for v in variances], "charged": 0.0}
    return ledger.store_reshare(hop + 1, role, key, version, alpha, answer) | {"reused": False}


def answer_sensitivity(workload: str) -> float:
    """L1 sensitivity of the workload's answer vector (what NOQ calibrates to)."""
    return noq(Matrices(parse_batch(workload))).sensitivity
