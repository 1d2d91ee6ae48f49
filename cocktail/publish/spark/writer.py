"""A unit's files made and written on the executors, as the single-machine writer makes them
(:mod:`cocktail.publish.writer`): chunk, index and pseudonym-map files under chunk ids drawn
from a keyed hash (a re-run task writes the same names), carried by one shuffle to the tasks
that write them in a random order, and the reports the driver registers in the version."""

from __future__ import annotations

import hashlib
import pickle
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from ... import chunkformat as fmt
from ... import releases
from ...dataset import Records
from ...query.termindex import TermIndexBuilder
from ...store import open_store
from ..writer import Placement, VersionWriter, build_drawn, unit_chunks


@dataclass(frozen=True)
class UnitJob:
    """What an executor needs to partition and write units (broadcast once)."""

    names: tuple[str, ...]
    method: str
    k: int
    m: int
    aggregate: bool
    key: bytes          # the owner's pseudonym key: executors run on private hosts only
    secret: bytes       # this publish's chunk-id and write-order key
    store: str
    staging: str
    mtime: float
    # An append's pool (:class:`SparkClusters`); a first publish leaves them as they are.
    held: frozenset[str] = frozenset()  # kept private in the leaf clusters (promotion)
    pass_up_root: bool = False          # the root's pool goes up whole, unpartitioned
    positions: np.ndarray | None = None  # the records' positions in the publication
    units: int = 0                      # offset of the unit ids in the publication

    def unit(self, unit: int) -> int:
        """A unit's id in the publication."""
        return unit + self.units

    def position(self, position: int) -> int:
        """A record's position in the publication (the run numbers its records from 0)."""
        return position if self.positions is None else int(self.positions[position])

    def placed(self, positions: np.ndarray) -> np.ndarray:
        """The records' positions in the publication, as files and indexes name them."""
        return positions if self.positions is None else self.positions[positions]


def chunk_id_for(secret: bytes, unit: int, rank: int, attempt: int) -> str:
    """A chunk id only this publish can predict, and the same when a task is re-run."""
    digest = hashlib.blake2b(f"{unit}:{rank}:{attempt}".encode(), key=secret,
                             digest_size=fmt.CHUNK_ID_HEX // 2)
    return digest.hexdigest()


def unit_outputs(job: UnitJob, unit: int, kind: str, positions: np.ndarray, ids: list[str],
                 records: Records, chunk_terms: list[frozenset[str]],
                 public: int) -> Iterator[tuple]:
    """A partitioned unit's chunks: ("file", zone, path, bytes, private) for its chunk, index
    and pseudonym-map files and ("chunk", id, manifest entry, release entry or None, pairs)
    for the driver, ("keys", unit, added, public) with its records' names for the release
    log, and ("terms", its term index).  The unit's records: their ``positions`` in the
    publication, ``ids`` and terms."""
    chunks, (pair_rows, pair_terms) = unit_chunks(records, positions, ids, chunk_terms)
    index = TermIndexBuilder()
    index.add_pairs(records.names, pair_terms, positions[pair_rows])
    maps, added, shown = [], [], []
    drawn = build_drawn(job.key, chunks,
                        lambda rank, attempt: chunk_id_for(job.secret, unit, rank, attempt))
    for rank, (chunk_members, built) in enumerate(zip(chunks, drawn)):
        private = rank >= public
        zone = "private" if private else "public"
        for name, data in built.files():
            yield "file", zone, f"{job.staging}/{name}", data, private
        maps.append(built.map_lines(with_ids=private))
        chunk_added = chunk_members.added()
        added.append(chunk_added.keys)
        logged = None
        if not private:
            shown.append(chunk_added.keys)
            logged = releases.chunk_record(unit, chunk_terms[rank], chunk_added,
                                           built.sha256["chunk"])
        yield "chunk", built.chunk_id, built.entry(unit, private, chunk_terms[rank]), logged, \
            chunk_members.subrecords.pair_count()
    yield ("file", "private", f"{job.staging}/{fmt.PSEUDONYM_DIR}/{unit}.tsv",
           b"".join(maps), True)
    yield "keys", unit, kind, _distinct_keys(added), _distinct_keys(shown)
    yield "terms", index.encode_piece()


def _distinct_keys(keys: list[np.ndarray]) -> np.ndarray:
    return np.unique(np.concatenate([np.zeros(0, np.uint64), *keys]))  # none: empty


def reported(items: Iterable[tuple]) -> Iterator[tuple]:
    """What the driver takes of a task's outputs but its files: the units' term indexes
    merged into one piece (fewer, larger pieces for the driver), and the pools (a small share
    of the subrecords) as one pickle, which the driver hands on to the aggregation round
    unread; the rest as it is."""
    merged, pools = TermIndexBuilder(), []
    for item in items:
        if item[0] == "terms":
            merged.add_piece(item[1])
        elif item[0] == "pool":
            pools.append(item)
        else:
            yield item
    if merged.bitmaps:
        yield "terms", merged.encode_piece()
    if pools:
        yield "pools", pickle.dumps(pools, protocol=pickle.HIGHEST_PROTOCOL)


class Carrier:
    """The partitioner of the shuffles that carry a job's outputs (:func:`carried_outputs`):
    a file (keyed by its keyed hash, bytes) to one of the ``writers`` partitions, a task's
    reports (keyed by the task's index) to one of the ``readers`` partitions after them.  A
    publish has one for all its shuffles: Spark joins two shuffles partition by partition
    only when their partitioners are one (pyspark tells them apart by identity)."""

    def __init__(self, writers: int, readers: int) -> None:
        self.writers, self.readers = writers, readers
        self.partitions = writers + readers
        self.report_partitions = range(writers, self.partitions)

    def __call__(self, key: bytes | int) -> int:
        if isinstance(key, int):
            return self.writers + key % self.readers
        return int.from_bytes(key, "big") % self.writers


def carried_outputs(job_b):
    """A task's outputs keyed for their shuffle (:class:`Carrier`): each file by its keyed
    hash (:func:`_order`), the task's reports (:func:`reported`) by the task's index."""

    def run(index: int, items: Iterator[tuple]) -> Iterator[tuple]:
        secret, others = job_b.value.secret, []
        for item in items:
            if item[0] == "file":
                yield _order(secret, item[2]), item
            else:
                others.append(item)
        for report in reported(others):
            yield index, report

    return run


def in_task_order(pairs: Iterator[tuple]) -> list[tuple]:
    """A report partition's reports task by task, each task's in its own order (a stable
    sort: the shuffle hands them over as they arrive)."""
    return [report for _, report in sorted(pairs, key=lambda pair: pair[0])]


def write_files(job_b):
    """A task's share of the files, written in a random order and the public ones stamped
    with the publish's one modification time."""

    def run(items: Iterator) -> Iterator[int]:
        job = job_b.value
        store = open_store(job.store)
        files = sorted(items, key=lambda item: item[0])  # the keyed hash: a random order
        for _, (_, zone, path, data, private) in files:
            store.write(zone, path, data, pri_label=private)
            if zone == "public":
                store.stamp(zone, path, job.mtime)
        yield len(files)

    return run


def _order(secret: bytes, path: str) -> bytes:
    return hashlib.blake2b(path.encode(), key=secret, digest_size=8, person=b"order").digest()


class Collected:
    """The chunks' manifest and release entries, the units' member names and the term index
    pieces, as the executors report them."""

    def __init__(self) -> None:
        self.chunks: dict[str, dict] = {}
        self.logged: dict[str, dict] = {}
        self.keys: list[tuple] = []
        self.pieces: list[bytes] = []  # term index pieces, a task's each
        self.totals = {"public": 0, "private": 0, "public_subrecords": 0,
                       "private_subrecords": 0, "public_pairs": 0, "private_pairs": 0}

    def add(self, item: tuple) -> None:
        if item[0] == "keys":
            self.keys.append(item[1:])
            return
        if item[0] == "terms":
            self.pieces.append(item[1])
            return
        _, chunk_id, entry, logged, pairs = item
        if chunk_id in self.chunks:
            raise RuntimeError(f"two chunks drew the id {chunk_id}: publish again")
        self.chunks[chunk_id] = entry
        kind = "private" if entry["priLabel"] else "public"
        self.totals[kind] += 1
        self.totals[f"{kind}_subrecords"] += entry["subrecords"]
        self.totals[f"{kind}_pairs"] += pairs
        if logged is not None:
            self.logged[chunk_id] = logged

    def into(self, writer: VersionWriter) -> None:
        """Registered as :meth:`VersionWriter.add_chunk` and ``close_unit`` would have."""
        taken = self.chunks.keys() & writer.chunks.keys()
        if taken:
            raise RuntimeError(f"two chunks drew the id {min(taken)}: run it again")
        writer.chunks.update(self.chunks)
        writer.release.chunks.update(self.logged)
        for unit, kind, added, public in self.keys:
            writer.release.add_keys(unit, kind, added, public)
            writer.maps_written.add(unit)
        started = time.perf_counter()
        for piece in self.pieces:
            writer.terms.add_piece(piece)
        writer.index_seconds += time.perf_counter() - started
        self.pieces = []


def units_manifest(summaries: dict[int, dict], where: Placement | None = None) -> list[dict]:
    """As :func:`~.writer.units_manifest`: ``where`` places an append's units."""
    where = where or Placement()
    return [{"id": where.unit(unit), "kind": s["kind"], "node": s["node"] + where.nodes,
             "members": s["members"], "passed_up": s["passed_up"], "notes": s["notes"]}
            for unit, s in sorted(summaries.items())]
