"""Where a ranking lives and how a rebuild keeps its secrets stable.

A ranking named N keeps its versions under ``ranks/N/`` in both zones (the table releases'
rules: staged, committed by one pointer swap, older versions pruned).

* Public zone: ``public.csv`` (id and public attributes: what the public cloud scores) and
  ``manifest.json`` (public columns, defense, l).
* Private zone: ``state.json`` — the schema, every tuple's private values, the equivalent sets
  (virtual tuples, pairings, obfuscated values), the obfuscation log and the tie-break key.

**Stable across rebuilds** (regenerating the sets would let an attacker intersect a victim's
candidates across versions): a tuple whose values did not change keeps its set.  An ESVT set
is kept whole.  An ESTT set keeps its remaining members, and a member that left or changed
stays in it as a *virtual* vector, so the candidates it showed are still shown; new and changed
tuples form new sets, their leftovers may join the kept ones.  The tie-break key is kept too.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .. import chunkformat as fmt
from ..dataset import InputError
from ..releases import Staged, commit_release, current_version
from ..releases.layout import RANKS, named_store
from ..store import Prefixed, Store, StoreError
from ..tables.data import encode_csv
from ..tables.release import read_json
from . import defenses
from .defenses import DEFENSES, EquivalentSet, Protection
from .index import RankIndex
from .model import RankTable, Schema, parse_query, read_rank_table

KEEP = 3


def rank_store(store: Store, name: str) -> Prefixed:
    return named_store(store, RANKS, name)


@dataclass
class BuildReport:
    store: str
    name: str
    version: str
    defense: str
    l: int | None        # esvt/estt only
    tuples: int
    sets: int
    virtual: int
    obfuscated: int
    suppressed: int
    kept_sets: int       # sets carried over from the previous version
    seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def protect(table: RankTable, defense: str, l: int, workload=None,
            previous: dict | None = None) -> tuple[Protection, int]:
    """The defense's sets for ``table``, keeping what ``previous`` (an earlier state) had for
    unchanged tuples; returns them and how many sets were kept."""
    if defense not in DEFENSES:
        raise ValueError(f"unknown defense {defense!r}; choose one of {', '.join(DEFENSES)}")
    if defense in ("none", "dp"):
        return Protection(), 0
    defenses.check_l(table.schema, table, l)
    kept, fresh = _carried(table, defense, previous)
    if defense == "esvt":
        if workload and l != 2:
            raise ValueError("the workload-aware generator (Algorithm 1) builds sets of 2; "
                             "use --l 2 or drop --workload")
        shown = {s.vectors[0]: s.vectors for s in kept}  # a new copy shows what its copies do
        made = defenses.esvt_workload(table, workload, fresh, shown) if workload else \
            defenses.esvt_random(table, l, fresh, shown)
        made.sets = kept + made.sets
        return made, len(kept)
    return defenses.estt(table, l, fresh, kept), len(kept)


def _carried(table: RankTable, defense: str,
             previous: dict | None) -> tuple[list[EquivalentSet], list[int]]:
    if not previous or previous["defense"] != defense or previous["l_sets"] is None:
        return [], list(range(len(table.ids)))
    old = Schema.from_dict(previous["schema"])
    if (old.public, old.private) != (table.schema.public, table.schema.private):
        return [], list(range(len(table.ids)))
    now = {rid: _decoded(table.schema, table, i) for i, rid in enumerate(table.ids)}
    before = {rid: (tuple(p), tuple(q)) for rid, p, q in previous["tuples"]}
    unchanged = {rid for rid in now if before.get(rid) == now[rid]}
    kept = []
    for entry in previous["sets"]:
        real = [rid for rid in entry["real"] if rid in unchanged]
        if not real:
            continue
        vectors = [_encode_vector(table.schema, v) for v in entry["vectors"]]
        stay = [vectors[entry["real"].index(rid)] for rid in real]
        ghosts = [v for rid, v in zip(entry["real"], vectors) if rid not in unchanged]
        kept.append(EquivalentSet(real, stay + ghosts + vectors[len(entry["real"]):]))
    held = {rid for s in kept for rid in s.real}
    return kept, [i for i, rid in enumerate(table.ids) if rid not in held]


def _decoded(schema: Schema, table: RankTable, i: int) -> tuple[tuple, tuple]:
    return (tuple(schema.decode(c, table.public[i, j]) for j, c in enumerate(schema.public)),
            tuple(schema.decode(c, table.private[i, j]) for j, c in enumerate(schema.private)))


def _encode_vector(schema: Schema, values: list) -> tuple[float, ...]:
    return tuple(math.nan if v is None else schema.encode(c, v)
                 for c, v in zip(schema.private, values))


def _decode_vector(schema: Schema, vector) -> list:
    return [None if math.isnan(x) else schema.decode(c, x) for c, x in zip(schema.private, vector)]


def previous_state(store: Store, name: str) -> dict | None:
    rstore = rank_store(store, name)
    current = current_version(rstore)
    return read_json(rstore, "private", current, "state.json") if current else None


def build_from_file(store: Store, name: str, path: str | Path, public: Sequence[str],
                    private: Sequence[str], defense: str, l: int, *,
                    id_column: str | None = None, numeric: Sequence[str] = (),
                    weights: Mapping[str, float] | None = None,
                    workload: Iterable[str] | None = None) -> BuildReport:
    """Build ranking ``name`` from a CSV file, keeping the sets of the previous version's
    unchanged tuples; ``workload`` (query lines) drives esvt's workload-aware generator."""
    if workload is not None and defense != "esvt":
        raise InputError(f"--workload is for --defense esvt (the paper's Algorithm 1), not "
                         f"{defense}")
    previous = previous_state(store, name)
    table = read_rank_table(path, public, private, id_column, numeric, weights,
                            previous["schema"]["domains"] if previous else None)
    asked = None
    if workload is not None:
        queries = [parse_query(table.schema, line) for line in workload if line.strip()]
        asked = [{table.schema.private.index(c): v for c, v in q.private.items()}
                 for q in queries]
    return build_ranking(store, name, table, defense, l, asked, previous)


def build_ranking(store: Store, name: str, table: RankTable, defense: str, l: int,
                  workload=None, previous: dict | None = None) -> BuildReport:
    """Build and commit the next version; ``previous`` is :func:`previous_state` (read before
    the table, whose categories must include the earlier ones)."""
    started = time.perf_counter()
    rstore = rank_store(store, name)
    protection, kept = protect(table, defense, l, workload, previous)
    key = bytes.fromhex(previous["tie_key"]) if previous else secrets.token_bytes(32)
    RankIndex.build(table, protection.sets if defense in ("esvt", "estt") else None, key,
                    defense)  # checks every tuple is in one set before anything is written
    schema = table.schema
    state = state_for(table, defense, l, protection.sets, key) | {
        "workload": workload or [], "log": [_decoded_log(schema, e) for e in protection.log]}
    public_rows = [[rid, *_decoded(schema, table, i)[0]] for i, rid in enumerate(table.ids)]
    public_rows.sort()  # id order: the input's row order says nothing
    manifest = {"format": 1, "public": list(schema.public), "defense": defense,
                "l": l if defense in ("esvt", "estt") else None, "tuples": len(table.ids)}

    def build(_current, version, created) -> Staged:
        return Staged({"public.csv": encode_csv(["id", *schema.public], public_rows),
                       "manifest.json": fmt.encode_json(manifest | {"version": version,
                                                                     "created": created})},
                      {"state.json": fmt.encode_json(state, compact=True)},
                      {"kind": "rank", "defense": defense, "tuples": len(table.ids)})

    version = commit_release(rstore, build, KEEP)
    counts = protection.counts()
    return BuildReport(store.url, name, version, defense, manifest["l"], len(table.ids),
                       counts["sets"],
                       counts["virtual"], counts["obfuscated"], counts["suppressed"], kept,
                       round(time.perf_counter() - started, 3))


def state_for(table: RankTable, defense: str, l: int, sets: list[EquivalentSet],
              key: bytes) -> dict:
    """What the private zone keeps of a build (values decoded, so a later build with more
    categories reads them right)."""
    schema = table.schema
    return {"defense": defense, "l": l, "l_sets": l if defense in ("esvt", "estt") else None,
            "schema": schema.as_dict(), "tie_key": key.hex(),
            "tuples": [[rid, *map(list, _decoded(schema, table, i))]
                       for i, rid in enumerate(table.ids)],
            "sets": [{"real": s.real, "vectors": [_decode_vector(schema, v) for v in s.vectors]}
                     for s in sets]}


def _decoded_log(schema: Schema, entry: dict) -> dict:
    if entry["kind"] != "obfuscated":
        return entry
    column = schema.private[entry["column"]]
    return entry | {"column": column, "old": schema.decode(column, entry["old"]),
                    "new": schema.decode(column, entry["new"])}


def load_ranking(store: Store, name: str) -> tuple[str, RankIndex, dict]:
    """The current version of ranking ``name``: its version, index and private state."""
    rstore = rank_store(store, name)
    version = current_version(rstore)
    if version is None:
        raise StoreError(f"{store.url}: no ranking {name!r} (run `cocktail rank build`)")
    state = read_json(rstore, "private", version, "state.json")
    schema = Schema.from_dict(state["schema"])
    table = table_from_state(schema, state["tuples"])
    sets = None if state["l_sets"] is None else [
        EquivalentSet(s["real"], [_encode_vector(schema, v) for v in s["vectors"]])
        for s in state["sets"]]
    return version, RankIndex.build(table, sets, bytes.fromhex(state["tie_key"]),
                                    state["defense"]), state


def table_from_state(schema: Schema, tuples: list) -> RankTable:
    public = np.array([[schema.encode(c, v) for c, v in zip(schema.public, p)]
                       for _, p, _ in tuples], dtype=float).reshape(len(tuples), -1)
    private = np.array([[schema.encode(c, v) for c, v in zip(schema.private, q)]
                        for _, _, q in tuples], dtype=float).reshape(len(tuples), -1)
    return RankTable(schema, [rid for rid, _, _ in tuples], public, private)
