"""A chain of releases on files: ``cocktail table chain`` and ``cocktail table audit --chain``.

The owner runs the whole chain to plan and measure it, but each hop is computed from the
previous hop's *published file content* only (rows round-trip through what is shipped).
What is written to ``--out DIR``:

* ``hop1.csv`` … ``hopL.csv`` — what hop i receives: the QI columns mean-recoded, the sensitive
  column, one row per tuple, classes and rows in content order (never input order);
* ``chain.json`` — the public parameters every hop shares (QIs, sensitive column, W, the QI
  scales, L, δ, strategy) and the measured P, threshold and utility loss per hop;
* ``owner/membership.csv`` — the owner's record of which class each tuple is in at every hop,
  for the audit's nestedness and colluders' checks.  Private: never ship it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations
from pathlib import Path

from ..dataset import InputError
from ..extras import require
from .data import Table, finite
from .propagation import Atom, Classes, Space, canonical, merged, next_hop

PARAMS = "chain.json"
MEMBERSHIP = "owner/membership.csv"


def hop_file(hop: int) -> str:
    return f"hop{hop}.csv"


@dataclass
class Hop:
    hop: int
    threshold: float
    privacy: float          # P(T_i), bits
    utility_loss: float     # 1 − U(T_i)/U(T_0)
    cell_loss: float        # Σ weights of the cells whose class holds several values
    classes: int
    seconds: float


@dataclass
class ChainReport:
    hops: list[Hop]
    strategy: str
    delta: float
    weights: list[float]
    out: str
    sum_utility_loss: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


MEAN_RECODED = "a chain mean-recodes its quasi-identifiers"


def numeric_qis(table: Table) -> list[tuple[float, ...]]:
    return [tuple(finite(v, f"tuple {row.id}", name, MEAN_RECODED)
                  for name, v in zip(table.qi, row.qi)) for row in table.rows]


def check_weights(weights: Sequence[float], qi: Sequence[str]) -> list[float]:
    if len(weights) != len(qi):
        raise InputError(f"{len(weights)} weight(s) for {len(qi)} quasi-identifier(s)")
    if not all(math.isfinite(w) and w >= 0 for w in weights) or sum(weights) <= 0:
        raise InputError("weights must be finite, non-negative and not all zero")
    return [w / sum(weights) for w in weights]


def run_chain(table: Table, weights: Sequence[float], hops: int, delta: float,
              strategy: str, out: Path, min_size: int = 1) -> ChainReport:
    """Hop after hop, each from the previous hop's file content; writes every file."""
    if hops < 1 or delta <= 0:
        raise InputError(f"need at least one hop and δ > 0 (got {hops}, {delta})")
    qis = numeric_qis(table)
    weights = check_weights(weights, table.qi)
    scales = [max(c) - min(c) for c in zip(*qis)]
    atoms = [Atom(q, ((str(row.s), 1),)) for q, row in zip(qis, table.rows)]
    if min_size > len(atoms):
        raise InputError(f"classes of at least {min_size} tuples cannot be made from "
                         f"{len(atoms)}")
    space = Space.of(atoms, weights, scales, min_size)
    members = [[row.id] for row in table.rows]      # the owner's: atom -> tuple ids
    base_utility = space.utility([[a] for a in atoms])
    original = {row.id: q for row, q in zip(table.rows, qis)}
    texts = []
    report = ChainReport([], strategy, delta, weights, str(out))
    membership: dict[int, list[int]] = {row.id: [] for row in table.rows}
    for hop in range(1, hops + 1):
        started = time.perf_counter()
        classes = canonical(next_hop(space, atoms, delta, hop, hops, strategy))
        seconds = time.perf_counter() - started
        index = {id(a): i for i, a in enumerate(atoms)}
        tuples = [[t for a in c for t in members[index[id(a)]]] for c in classes]
        for number, ids in enumerate(tuples):
            for t in ids:
                membership[t].append(number)
        text = hop_csv(table, classes)
        texts.append(text)
        report.hops.append(Hop(
            hop, (hops - hop + 1) * delta, round(space.privacy(classes), 6),
            round(1 - space.utility(classes) / base_utility, 6) if base_utility else 0.0,
            cell_loss([[original[t] for t in ids] for ids in tuples], weights),
            len(classes), round(seconds, 4)))
        atoms, members = received(text, table.qi, table.sensitive, tuples, classes)
    report.sum_utility_loss = round(sum(h.utility_loss for h in report.hops), 6)
    write_chain(out, texts, membership, {
        "qi": list(table.qi), "sensitive": table.sensitive, "weights": weights,
        "scales": scales, "hops": hops, "delta": delta, "strategy": strategy,
        "min_size": min_size, "measured": [asdict(h) for h in report.hops]})
    return report


def write_chain(out: Path, texts: Sequence[str], membership: dict[int, list[int]],
                params: dict) -> list[Path]:
    """Every file of a chain, once all are made: a refusal leaves nothing half-written.
    chain.json is strict JSON (a NaN is refused, not written as bare ``NaN``)."""
    encoded = json.dumps(params, indent=2, allow_nan=False) + "\n"
    (out / "owner").mkdir(parents=True, exist_ok=True)
    files = [out / hop_file(hop) for hop in range(1, len(texts) + 1)]
    for path, text in zip(files, texts):
        path.write_text(text)
    write_membership(out / MEMBERSHIP, membership, len(texts))
    (out / PARAMS).write_text(encoded)
    return files


def hop_csv(table: Table, classes: Classes) -> str:
    """The shipped table: each class's mean-recoded QIs with its sorted sensitive values."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*table.qi, table.sensitive])
    for atom in merged(canonical(classes)):
        for value, count in atom.values:
            writer.writerows([[*map(_number, atom.qi), value]] * count)
    return buffer.getvalue()


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def read_hop(text: str, qi: Sequence[str], sensitive: str) -> list[Atom]:
    """What a hop received: one atom per distinct QI vector (an equivalence class)."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader)
    if header != [*qi, sensitive]:
        raise InputError(f"a hop file has columns {header}, expected {[*qi, sensitive]}")
    groups: dict[tuple[float, ...], Counter] = {}
    for fields in reader:
        groups.setdefault(tuple(float(x) for x in fields[:-1]), Counter())[fields[-1]] += 1
    return [Atom(q, tuple(sorted(v.items()))) for q, v in sorted(groups.items())]


def received(text: str, qi: Sequence[str], sensitive: str, tuples: list[list[int]],
             classes: Classes) -> tuple[list[Atom], list[list[int]]]:
    """The next hop's atoms, read back from the file, and (the owner's) their tuple ids."""
    atoms = read_hop(text, qi, sensitive)
    ids: dict[tuple[float, ...], list[int]] = {}
    for atom, members in zip(merged(classes), tuples):
        ids.setdefault(atom.qi, []).extend(members)
    return atoms, [sorted(ids[a.qi]) for a in atoms]


def cell_loss(classes: Sequence[Sequence[tuple[float, ...]]], weights: Sequence[float]) -> float:
    """The worked example's cost: a cell is lost when its class holds several values of its
    attribute (each costs the attribute's weight)."""
    return round(sum(len(c) * w for c in classes
                     for k, w in enumerate(weights) if len({q[k] for q in c}) > 1), 6)


def write_hops(out: Path, table: Table, partitions: Sequence[Sequence[Sequence[int]]],
               params: dict) -> list[Path]:
    """Hop files, membership and parameters for chains built elsewhere (baselines, fixtures):
    each hop a partition of the table's row positions, all computed from T_0."""
    atoms = [Atom(q, ((str(row.s), 1),)) for q, row in zip(numeric_qis(table), table.rows)]
    texts, membership = [], {row.id: [] for row in table.rows}
    for parts in partitions:
        classes = canonical([[atoms[i] for i in part] for part in parts])
        number = {id(a): n for n, c in enumerate(classes) for a in c}
        for row, atom in zip(table.rows, atoms):
            membership[row.id].append(number[id(atom)])
        texts.append(hop_csv(table, classes))
    return write_chain(out, texts, membership,
                       {"qi": list(table.qi), "sensitive": table.sensitive, **params})


def write_membership(path: Path, membership: dict[int, list[int]], hops: int) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["tuple", *(f"hop{h}" for h in range(1, hops + 1))])
    writer.writerows([t, *classes] for t, classes in sorted(membership.items()))
    path.write_text(buffer.getvalue())


# the audit

@dataclass
class PairFinding:
    hops: tuple[int, int]
    nested: bool
    disclosed: int   # tuples whose value only the pair pins down (one candidate left)
    narrowed: int    # tuples whose candidate values the pair narrows below either hop's


@dataclass
class ChainAudit:
    ok: bool
    thresholds: list[dict] = field(default_factory=list)  # hop, P, threshold, ok
    nested: list[dict] = field(default_factory=list)      # hop, ok, offending class
    colluders: list[PairFinding] = field(default_factory=list)
    membership: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def audit_chain(files: Sequence[Path], delta: float | None = None,
                membership: Path | None = None) -> ChainAudit:
    """Thresholds from the files and ``chain.json``; nestedness and the colluders' attack
    from the owner's membership file (beside them under ``owner/``, or given) — without it,
    nestedness as far as the files alone decide it (:func:`coarsens`)."""
    params = _params(files[0].parent)
    delta = delta if delta is not None else params.get("delta")
    if delta is None:
        raise InputError("give --delta (no chain.json beside the hop files)")
    qi, sensitive = params.get("qi"), params.get("sensitive")
    texts = [f.read_text() for f in files]
    if qi is None:
        header = next(csv.reader(io.StringIO(texts[0])))
        qi, sensitive = header[:-1], header[-1]
    hops = [read_hop(t, qi, sensitive) for t in texts]
    space = Space.of(hops[0], params.get("weights") or [1.0] * len(qi),
                     params.get("scales") or [1.0] * len(qi))
    report = ChainAudit(True)
    floor = params.get("min_size", 1)
    for i, atoms in enumerate(hops, start=1):
        threshold = (len(hops) - i + 1) * delta
        privacy = space.privacy([[a] for a in atoms])
        smallest = min(a.size for a in atoms)
        report.thresholds.append({"hop": i, "privacy": round(privacy, 6),
                                  "threshold": threshold, "smallest_class": smallest,
                                  "min_size": floor,
                                  "ok": privacy < threshold and smallest >= floor})
    membership = membership or files[0].parent / MEMBERSHIP
    if membership.exists():
        report.membership = str(membership)
        classes = _read_membership(membership, len(files))
        report.nested = [_nested(classes, i) for i in range(1, len(files))]
        supports = [_supports(files[i].read_text(), classes, i) for i in range(len(files))]
        for i, j in combinations(range(len(files)), 2):
            nested = all(n["ok"] for n in report.nested[i:j])
            report.colluders.append(PairFinding((i + 1, j + 1), nested,
                                                *_composed(supports[i], supports[j])))
    else:
        report.nested = [coarsens(hops[i - 1], hops[i], i) for i in range(1, len(hops))]
    # a check the files cannot decide (ok None) refutes nothing
    report.ok = all(t["ok"] for t in report.thresholds) and \
        all(n["ok"] is not False for n in report.nested)
    return report


def coarsens(finer: Sequence[Atom], coarser: Sequence[Atom], hop: int,
             seconds: float = 20.0) -> dict:
    """Whether hop ``hop + 1`` (``coarser``) can be a coarsening of hop ``hop`` from the two
    files alone: each of its classes the union of whole classes of hop ``hop`` — their
    sensitive multisets adding up to its own and their size-weighted QI means to its mean
    (to the files' 6 decimals).  ``ok`` False names a class no union of finer ones can make
    (``offending_class``: its QI means; None when only the classes together cannot be
    made), None when the solver did not decide within ``seconds``."""
    found = {"hop": hop + 1, "of_hop": hop, "from": "files"}
    made = _cover(finer, coarser, seconds, whole=True)
    if made is not False:
        return {**found, "ok": made}
    culprit = next((c for c in coarser if _cover(finer, [c], seconds, whole=False) is False),
                   None)
    return {**found, "ok": False,
            "offending_class": list(culprit.qi) if culprit else None,
            "offending_size": culprit.size if culprit else None}


def _cover(atoms: Sequence[Atom], targets: Sequence[Atom], seconds: float,
           whole: bool) -> bool | None:
    """Can the ``targets`` be made of the ``atoms``, each atom in one target at most (exactly
    one if ``whole``)?  An exact model (CP-SAT): per target, the atoms' sensitive counts sum to
    its own and Σ size·mean to size·mean, in millionths, within the files' rounding (half a
    millionth per tuple, at this hop and the one before).  None: undecided in ``seconds``."""
    cp_model = require("ortools.sat.python.cp_model")  # heavy; loaded only when asked for

    def scaled(atom: Atom) -> list[int]:
        return [round(q * 1_000_000) * atom.size for q in atom.qi]

    model = cp_model.CpModel()
    held = [dict(t.values) for t in targets]
    choices: dict[int, list] = {i: [] for i in range(len(atoms))}
    parts: dict[int, list] = {j: [] for j in range(len(targets))}
    for i, atom in enumerate(atoms):
        for j in range(len(targets)):
            if all(held[j].get(v, 0) >= n for v, n in atom.values):
                x = model.new_bool_var(f"x{i}_{j}")
                choices[i].append(x)
                parts[j].append((atom, x))
    for xs in choices.values():
        model.add(sum(xs) == 1 if whole else sum(xs) <= 1)
    for j, target in enumerate(targets):
        for value, count in held[j].items():
            model.add(sum(dict(a.values).get(value, 0) * x for a, x in parts[j]) == count)
        for k, total in enumerate(scaled(target)):
            got = sum(scaled(a)[k] * x for a, x in parts[j])
            model.add(got <= total + target.size)
            model.add(got >= total - target.size)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.num_workers = 1
    status = solver.solve(model)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return True
    return False if status == cp_model.INFEASIBLE else None


def _params(directory: Path) -> dict:
    path = directory / PARAMS
    return json.loads(path.read_text()) if path.exists() else {}


def _read_membership(path: Path, hops: int) -> dict[int, list[int]]:
    rows = list(csv.reader(io.StringIO(path.read_text())))
    if len(rows[0]) != hops + 1:
        raise InputError(f"{path} records {len(rows[0]) - 1} hops, {hops} files given")
    return {int(r[0]): [int(c) for c in r[1:]] for r in rows[1:]}


def _nested(classes: dict[int, list[int]], hop: int) -> dict:
    """Hop ``hop + 1`` coarsens hop ``hop``: each class of hop ``hop`` lies in one class."""
    parent: dict[int, int] = {}
    for path in classes.values():
        if parent.setdefault(path[hop - 1], path[hop]) != path[hop]:
            return {"hop": hop + 1, "ok": False,
                    "offending_class": path[hop - 1], "of_hop": hop}
    return {"hop": hop + 1, "ok": True}


def _supports(text: str, classes: dict[int, list[int]], hop: int) -> dict[int, frozenset[str]]:
    """Tuple -> the sensitive values its class shows at this hop."""
    shown = list(csv.reader(io.StringIO(text)))[1:]
    counts = Counter(path[hop] for path in classes.values())
    values, at = [], 0
    for number in range(len(counts)):
        values.append(frozenset(r[-1] for r in shown[at:at + counts[number]]))
        at += counts[number]
    return {t: values[path[hop]] for t, path in classes.items()}


def _composed(a: dict[int, frozenset[str]], b: dict[int, frozenset[str]]) -> tuple[int, int]:
    """Colluding recipients intersect a victim's classes' values (Ganta et al.): the tuples
    pinned to one value though neither hop alone pins them, and those narrowed at all.  In a
    nested pair the finer class's values are a subset of the coarser's: nothing narrows."""
    pinned = sum(len(a[t] & b[t]) == 1 and len(a[t]) > 1 and len(b[t]) > 1 for t in a)
    narrowed = sum(len(a[t] & b[t]) < min(len(a[t]), len(b[t])) for t in a)
    return pinned, narrowed
