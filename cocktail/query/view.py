"""One version of a publication as the private cloud reads it: manifests, the overlay tree,
record ids, the private pseudonym maps, and, for the fast path, one bitmap per term.

Everything is read when first needed: an exact count on the fast path reads the version's
term index (:mod:`.termindex`) and nothing else."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from pyroaring import FrozenBitMap

from .. import chunkformat as fmt
from ..overlay.planner import term_locations
from ..overlay.tree import Tree
from ..releases import committed_versions, current_version
from ..store import Store, StoreError
from .termindex import (IndexLayout, ResolvedIndex, TermIndex, build_term_index, index_order,
                        read_term_index, record_numbering, stored_layout)


@dataclass(frozen=True)
class ChunkInfo:
    id: str
    unit: int
    private: bool
    terms: frozenset[str]


class Publication:
    """One version of a publication, as the private cloud sees it (it holds the maps)."""

    def __init__(self, store: Store, version: str) -> None:
        self.store, self.version = store, version
        self._maps: dict[int, dict[str, dict[str, int]]] = {}
        self._index_bytes: dict[str, bytes] = {}  # read to find the index's layout, not yet used

    @cached_property
    def manifest(self) -> dict:
        return fmt.decode_json(self.store.read("private", fmt.manifest_path(self.version)),
                               f"private/{fmt.manifest_path(self.version)}")

    @cached_property
    def chunks(self) -> dict[str, ChunkInfo]:
        return {cid: ChunkInfo(cid, c["unit"], c["priLabel"], frozenset(c["terms"]))
                for cid, c in self.manifest["chunks"].items()}

    @cached_property
    def tree(self) -> Tree:
        return Tree.from_manifest(self.manifest["tree"], self.manifest.get("roots"))

    @property
    def units(self) -> list[dict]:
        return self.manifest["units"]

    @classmethod
    def open(cls, store: Store, version: str | None = None) -> Publication:
        version = version or current_version(store)
        if version is None:
            raise StoreError(f"{store.url} holds no publication yet (run `cocktail publish`)")
        if version not in committed_versions(store):
            raise StoreError(f"{store.url} has no version {version}")
        return cls(store, version)

    @property
    def k(self) -> int:
        return self.manifest["params"]["k"]

    @property
    def m(self) -> int:
        return self.manifest["params"]["m"]

    @cached_property
    def _records(self) -> list[list]:
        data = self.store.read("private", f"{self.version}/{fmt.RECORDS}")
        return [json.loads(line) for _, line in fmt.lines(data)]

    @cached_property
    def record_ids(self) -> list[str]:
        return [rid for rid, _ in self._records]

    @cached_property
    def cluster_of(self) -> list[int]:
        """The leaf cluster (unit id) of each record position."""
        return [unit for _, unit in self._records]

    @cached_property
    def _members(self) -> dict[int, frozenset[int]]:
        grouped: dict[int, list[int]] = {}
        for position, unit in enumerate(self.cluster_of):
            grouped.setdefault(unit, []).append(position)
        return {unit: frozenset(positions) for unit, positions in grouped.items()}

    def cluster_members(self, unit: int) -> frozenset[int]:
        """Record positions of a leaf cluster."""
        return self._members.get(unit, frozenset())

    def owner_records(self) -> list[frozenset[str]]:
        """Every record's terms, by position, joined from all its chunks: the owner's data."""
        held: list[set[str]] = [set() for _ in self.record_ids]
        for chunk_id in self.chunks:
            positions = self.record_positions(chunk_id)
            for pseudonym, terms in self.subrecords(chunk_id):
                held[positions[pseudonym]].update(terms)
        return [frozenset(terms) for terms in held]

    @cached_property
    def record_count(self) -> int:
        """Records in the version: the term index's layout says (its parts list, not a part),
        or else the record ids."""
        layout = self.index_layout
        return len(self.record_ids) if layout is None else layout.records

    @cached_property
    def index_layout(self) -> IndexLayout | None:
        """The term index's parts (``terms/parts.json``; an index written before parts is one
        part, known from its first shard's header), None for a version written before there
        was an index: what a job over the parts needs on the driver."""
        return stored_layout(self.store, self.version, self._read_index_file)

    def _read_index_file(self, path: str) -> bytes:
        """A private file of the index, read once: kept when the layout is read from it (an
        old index's first shard) until the index itself is."""
        data = self._index_bytes.pop(path, None)
        if data is None:
            data = self.store.read("private", path)
            if "index_layout" not in self.__dict__ and path.endswith(fmt.TERM_INDEX):
                self._index_bytes[path] = data
        return data

    def warm(self, reads: str = "index") -> Publication:
        """Read now what queries would read lazily, so no query pays for a cold read or is
        timed by one, and concurrent readers find nothing left to fill in: what a backend
        ``reads`` (its ``READS``): every term's records (``index``), the record count alone
        (``count``: the job reads the shards), or the planner's view and the maps (``plans``)."""
        if reads not in ("index", "count", "plans"):
            raise ValueError(f"unknown reads {reads!r}")
        if reads == "index":
            for term in self.term_records:
                self.term_records[term]
        self.record_count
        if reads == "plans":
            for attribute in ("record_ids", "cluster_of", "_members", "locations",
                              "term_units", "split_terms"):
                getattr(self, attribute)
            for chunk in self.chunks:
                self.record_positions(chunk)
        return self

    def chunk_unit(self, chunk_id: str) -> int:
        return self.chunks[chunk_id].unit

    @cached_property
    def unit_chunks(self) -> dict[int, dict[str, str]]:
        """unit -> term -> the stored chunk of that unit holding the term."""
        where: dict[int, dict[str, str]] = {}
        for chunk in self.chunks.values():
            for term in chunk.terms:
                where.setdefault(chunk.unit, {})[term] = chunk.id
        return where

    @cached_property
    def locations(self) -> dict[int, dict[str, str]]:
        """Leaf cluster -> term -> the chunk holding it for the cluster's records."""
        return term_locations(self.tree, self.unit_chunks,
                              [frozenset(u["passed_up"]) for u in self.units])

    @cached_property
    def split_terms(self) -> frozenset[str]:
        return frozenset(t for node in self.tree.nodes for t in node.split)

    @cached_property
    def term_units(self) -> dict[str, frozenset[int]]:
        """Term -> the leaf clusters with a record holding it."""
        units: dict[str, set[int]] = {}
        for unit, where in self.locations.items():
            for term in where:
                units.setdefault(term, set()).add(unit)
        return {term: frozenset(us) for term, us in units.items()}

    def is_private(self, chunk_id: str) -> bool:
        return self.chunks[chunk_id].private

    def _zone(self, chunk_id: str) -> str:
        return "private" if self.is_private(chunk_id) else "public"

    @cached_property
    def term_records(self) -> Mapping[str, FrozenBitMap]:
        """Term -> the index positions of every record holding it, as a roaring bitmap: what
        the fast path intersects.  Read from the version's term index (its parts); a version
        written before there was one gets it resolved from its chunks and the private maps,
        in memory (numbered by record position)."""
        layout = self.index_layout
        if layout is None:
            return self.resolved_term_records()
        return read_term_index(self.store, layout, self._read_index_file)

    def term_record_positions(self) -> dict[str, FrozenBitMap]:
        """The stored index with records numbered by their positions (``records.jsonl``'s),
        not in the parts' own orders: what the audit compares with the chunks."""
        records = self.term_records
        if not isinstance(records, TermIndex):
            return records
        return record_numbering(records, self.index_order())

    def index_order(self) -> np.ndarray | None:
        """The record position at each index position (the parts' orders end to end), None
        for an index in record order (written before there was an order)."""
        layout = self.index_layout
        return None if layout is None else index_order(self.store, layout)

    def resolved_term_records(self) -> ResolvedIndex:
        """The term index as the chunks' indexes and the private maps say it is."""
        return build_term_index((self.record_positions(chunk_id), self.postings(chunk_id))
                                for chunk_id in self.chunks)

    def postings(self, chunk_id: str) -> Iterator[tuple[str, list[str]]]:
        """(term, pseudonyms holding it) of one chunk, from its index file."""
        path = fmt.index_path(self.version, chunk_id)
        return fmt.decode_index(self.store.read(self._zone(chunk_id), path), chunk_id, path)

    def index_location(self, chunk_id: str) -> str:
        return self.store.location(self._zone(chunk_id), fmt.index_path(self.version, chunk_id))

    def subrecords(self, chunk_id: str) -> Iterator[tuple[str, list[str]]]:
        path = fmt.chunk_path(self.version, chunk_id)
        return fmt.decode_chunk(self.store.read(self._zone(chunk_id), path), path)

    def record_positions(self, chunk_id: str) -> dict[str, int]:
        """pseudonym -> record position, for one chunk (the private map, read per unit)."""
        unit = self.chunks[chunk_id].unit
        if unit not in self._maps:
            path = fmt.pseudonym_map_path(self.version, unit)
            self._maps[unit] = fmt.decode_pseudonym_map(self.store.read("private", path), path)
        return self._maps[unit][chunk_id]
