"""The release log: what each release showed the public cloud, kept for good in the private zone.

The public cloud keeps every public file it ever held, so a pruned version is not an unseen one.
Every committed version is a *release*, and the log keeps, per release, what the auditor needs
to check all of them together long after their files are gone (``docs/releases.md``):

* per public chunk: its cluster (unit), term set, subrecord count, file checksum, the checksum
  of the lines it carried over from the previous release, and the multiset of the subrecords
  this release *added* (all of them for a new chunk) — the residual the rule is about;
* per unit: its kind, the hashes of the records it gained, and how many of its records hold a
  published term (the size a joint-view attacker is assumed to know).

One JSON file per release, ``releases/<version>.json``, written after the version's files and
before the commit point; a version that never became current loses its entry with its files.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from .. import chunkformat as fmt
from ..store import Store
from .layout import Refused

LOG_DIR = "releases"
KINDS = ("fresh", "append", "rebase", "imported", "derived", "forget", "retract")
ERASURES = ("forget", "retract")  # releases that take records back (publish.forget)


DIGEST = np.dtype((np.void, 16))  # a record id's digest: the first 128 bits of its SHA-256


def _digest(record_id: str) -> bytes:
    return hashlib.sha256(record_id.encode("utf-8", "surrogatepass")).digest()[:16]


@lru_cache(maxsize=1 << 16)  # a record is a member of each of its cluster's chunks
def member_key(record_id: str) -> int:
    """A record's name in the log (the log never needs the id itself), as a number: the first
    64 bits of SHA-256(record id)."""
    return int.from_bytes(_digest(record_id)[:8], "big")


def record_digests(record_ids: Iterable[str]) -> np.ndarray:
    """Each record id's digest (:data:`DIGEST`), hashed once for both of its uses: the log's
    name for it (:func:`keys_of`) and what its pseudonyms encrypt (``publish.writer``)."""
    sha256 = hashlib.sha256  # inline, whole digests cut at once: a million ids, 0.1 s less
    digests = np.frombuffer(b"".join([sha256(record_id.encode("utf-8", "surrogatepass")).digest()
                                      for record_id in record_ids]), dtype=np.uint8)
    return np.ascontiguousarray(digests.reshape(-1, 32)[:, :16]).view(DIGEST).reshape(-1)


def keys_of(digests: np.ndarray) -> np.ndarray:
    """:func:`member_key` of each digest, as 64-bit numbers (no Python int per record)."""
    return np.frombuffer(digests.tobytes(), dtype=">u8")[::2].astype(np.uint64)


def member_keys(record_ids: Iterable[str]) -> np.ndarray:
    """:func:`member_key` of each record."""
    return keys_of(record_digests(record_ids))


def member_hash(record_id: str) -> str:
    """The same name as the log writes it: 16 hex digits."""
    return f"{member_key(record_id):016x}"


def entry_path(version: str) -> str:
    return f"{LOG_DIR}/{version}.json"


def write_entry(store: Store, entry: dict) -> None:
    """The entry as compact JSON.  A basket release's is spooled to a private temporary file
    unit by unit: its member names are 16 bytes a record as arrays and would be ~80 as a list
    of strings."""
    if "units" not in entry:
        store.write("private", entry_path(entry["version"]), fmt.encode_json(entry, compact=True),
                    pri_label=True)
        return
    with tempfile.TemporaryFile() as spool:
        units = entry["units"]
        head = fmt.encode_json({k: v for k, v in entry.items() if k != "units"}, compact=True)
        spool.write(head.rstrip()[:-1] + b',"units":{')
        for number, (unit, record) in enumerate(units.items()):
            spool.write(b"%s\"%s\":{\"added_members\":[" % (b"," if number else b"",
                                                             unit.encode()))
            spool.write(_hex_list(record["added_members"]))
            rest = fmt.encode_json({k: v for k, v in record.items() if k != "added_members"},
                                   compact=True)
            spool.write(b"]," + rest.rstrip()[1:])
        spool.write(b"}}\n")
        store.write("private", entry_path(entry["version"]), spool, pri_label=True)


def forget_members(store: Store, keys: Iterable[int]) -> int:
    """Take the member names ``keys`` out of every entry of the log (an erasure: the log keeps
    no name of an erased record); each entry is replaced whole.  Returns the entries changed."""
    names = [f'"{key:016x}"'.encode("ascii") for key in keys]
    changed = 0
    for name in sorted(n for n in store.list("private", LOG_DIR) if n.endswith(".json")):
        path = f"{LOG_DIR}/{name}"
        data = store.read("private", path)
        if len(names) <= 64:
            kept = data
            for hexed in names:  # a list's element: before a comma, last, or alone
                kept = kept.replace(hexed + b",", b"").replace(b"," + hexed + b"]", b"]") \
                    .replace(b"[" + hexed + b"]", b"[]")
        else:
            entry, gone = fmt.decode_json(data, path), {n.decode()[1:-1] for n in names}
            for unit in entry.get("units", {}).values():
                unit["added_members"] = [m for m in unit["added_members"] if m not in gone]
            kept = fmt.encode_json(entry, compact=True)
        if kept != data:
            store.write("private", path + ".tmp", kept, pri_label=True)
            store.rename("private", path + ".tmp", path)
            changed += 1
    return changed


def _hex_list(keys: np.ndarray) -> bytes:
    """``"<16 hex digits>",...`` for 64-bit keys, without a Python string per key."""
    if not len(keys):
        return b""
    digits = np.frombuffer(keys.astype(">u8").tobytes().hex().encode(), dtype=np.uint8)
    out = np.empty((len(keys), 19), dtype=np.uint8)
    out[:, 0] = out[:, 17] = ord('"')
    out[:, 1:17] = digits.reshape(-1, 16)
    out[:, 18] = ord(",")
    return out.tobytes()[:-1]


def read_log(store: Store, up_to: str | None = None) -> list[dict]:
    """The entries of every release, oldest first (up to and including ``up_to``), each
    whole: an append's entry lists what it added and ``carries`` the rest of the entry
    before it, which this fills in (a carried chunk added nothing, nor did a carried unit)."""
    names = sorted(n for n in store.list("private", LOG_DIR) if n.endswith(".json"))
    whole: list[dict] = []
    for name in names:
        if up_to is not None and name.removesuffix(".json") > up_to:
            continue
        entry = fmt.decode_json(store.read("private", f"{LOG_DIR}/{name}"), f"{LOG_DIR}/{name}")
        if whole and entry.get("carries") == whole[-1]["version"]:
            entry = _filled(whole[-1], entry)
        whole.append(entry)
    return whole


def _filled(before: dict, entry: dict) -> dict:
    retired = set(entry.get("retired", ()))  # an erasure's: they left the public zone
    chunks = {c: chunk | {"carried_sha256": chunk["sha256"], "added": []}
              for c, chunk in before["chunks"].items() if c not in retired}
    units = {u: unit | {"added_members": []} for u, unit in before["units"].items()}
    return entry | {"chunks": chunks | entry["chunks"], "units": units | entry["units"]}


def has_entry(store: Store, version: str) -> bool:
    return store.exists("private", entry_path(version))


def sweep_log(store: Store, current: str) -> None:
    """Drop the entries of versions that never became current (a publish that crashed)."""
    for name in store.list("private", LOG_DIR):
        if name.removesuffix(".json") > current:
            store.remove("private", f"{LOG_DIR}/{name}")


class RebaseRefused(Refused):
    """A fresh partition of a store whose records the public cloud has already seen."""


def refuse_rebase(store: Store, current: str) -> RebaseRefused:
    return RebaseRefused(
        f"{store.url} already published {current}, and the public cloud keeps what it saw. A "
        "fresh partition of the same records would compose with it: two chunkings that are "
        "each k^m-anonymous can together pin an itemset's support below k (docs/releases.md). "
        "Add new records with `cocktail publish FILE --append`, or accept the risk with "
        "--rebase (recorded in the release log)")


def encode_multiset(subrecords: Counter) -> list[list]:
    return [[list(terms), count] for terms, count in sorted(subrecords.items())]


def decode_multiset(encoded: Iterable[Sequence]) -> Counter:
    return Counter({tuple(terms): count for terms, count in encoded})


_NO_KEYS = np.zeros(0, dtype=np.uint64)


@dataclass(frozen=True, eq=False)  # numpy fields: compared by identity
class Added:
    """What a release adds to a chunk: its members' names (:func:`member_keys`) and the
    multiset of their subrecords (terms sorted)."""

    keys: np.ndarray
    subrecords: Counter

    @classmethod
    def of(cls, members: Sequence[tuple[str, Sequence[str]]] | Added) -> Added:
        """``members``: (record id, subrecord), or what they add, already counted."""
        if isinstance(members, Added):
            return members
        return cls(member_keys([record_id for record_id, _ in members]),
                   count_subrecords(members))


def count_subrecords(members: Sequence[tuple[str, Sequence[str]]]) -> Counter:
    """The multiset of the members' subrecords, each as its sorted terms."""
    return Counter(tuple(sorted(sub)) for _, sub in members)


def chunk_record(unit: int, terms: Iterable[str],
                 members: Sequence[tuple[str, Sequence[str]]] | Added,
                 sha256: str, carried_sha256: str | None = None,
                 carried_subrecords: int = 0) -> dict:
    """A public chunk's entry in the log; ``members``: (record id, subrecord) it adds, or
    their :class:`Added`."""
    added = members.subrecords if isinstance(members, Added) else count_subrecords(members)
    return {"unit": unit, "terms": sorted(terms),
            "subrecords": carried_subrecords + sum(added.values()), "sha256": sha256,
            "carried_sha256": carried_sha256, "added": encode_multiset(added)}


@dataclass
class ReleaseBuilder:
    """Collects one release's entry while its chunks are written.  A unit's member names are
    gathered chunk by chunk while its chunks are added, then kept as sorted 64-bit arrays
    without repeats (:meth:`settle`): 16 bytes a record rather than two hex strings."""

    kind: str
    chunks: dict[str, dict] = field(default_factory=dict)
    units: dict[int, dict] = field(default_factory=dict)

    def unit(self, unit: int, kind: str) -> dict:
        return self.units.setdefault(unit, {"kind": kind, "added": [], "public": [],
                                            "added_keys": _NO_KEYS, "public_keys": _NO_KEYS,
                                            "carried_public": 0})

    def settle(self, unit: int) -> None:
        """The unit's names gathered so far, into its arrays."""
        record = self.units.get(unit)
        if record is None:
            return
        for name in ("added", "public"):
            if record[name]:
                record[f"{name}_keys"] = np.union1d(record[f"{name}_keys"],
                                                   np.concatenate(record[name]))
                record[name] = []

    def add_chunk(self, chunk_id: str, unit: int, unit_kind: str, private: bool,
                  terms: Iterable[str], members: Sequence[tuple[str, Sequence[str]]] | Added,
                  sha256: str, carried_sha256: str | None = None,
                  carried_subrecords: int = 0) -> None:
        """``members``: (record id, subrecord) this release adds to the chunk, or their
        :class:`Added`; for a chunk of an earlier release, ``carried_*`` describe the lines it
        keeps."""
        record = self.unit(unit, unit_kind)
        added = Added.of(members)
        record["added"].append(added.keys)
        if private:
            return
        record["public"].append(added.keys)
        self.chunks[chunk_id] = chunk_record(unit, terms, added, sha256, carried_sha256,
                                             carried_subrecords)

    def add_keys(self, unit: int, kind: str, added: np.ndarray, public: np.ndarray) -> None:
        """A unit's member names, gathered elsewhere (by the Spark engine's executors)."""
        record = self.unit(unit, kind)
        record["added_keys"] = np.union1d(record["added_keys"], added)
        record["public_keys"] = np.union1d(record["public_keys"], public)

    def carry(self, unit: int, kind: str, public_records: int) -> None:
        """A unit of the previous release that this one changes: how many of its records held
        a published term before (its public chunks this release leaves alone are carried
        by the entry's ``carries``)."""
        self.unit(unit, kind)["carried_public"] = public_records

    def entry(self, version: str, created: str, k: int, m: int, **extra) -> dict:
        for unit in self.units:
            self.settle(unit)
        return {"format": 1, "version": version, "kind": self.kind, "created": created,
                "k": k, "m": m, **extra, "chunks": self.chunks,
                "units": {str(u): {"kind": v["kind"], "added_members": v["added_keys"],
                                   "public_records": v["carried_public"] + len(v["public_keys"])}
                          for u, v in sorted(self.units.items())}}
