"""One version of a publication as the private cloud reads it: manifests, the overlay tree,
record ids, the private pseudonym maps, and, for the fast path, one bitmap per term.

Everything is read when first needed: an exact count on the fast path reads the version's
term index (:mod:`.termindex`) and nothing else."""

from __future__ import annotations

import sys
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from pyroaring import FrozenBitMap

from .. import chunkformat as fmt
from ..overlay.planner import aggregates_above, term_locations
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
    home: str  # the version whose directory holds the chunk's files (it may be an earlier one)


class PublicTerms:
    """The terms that occur in a version's public chunks, in order: what the public cloud
    holds already, so public by construction, and never a term that only private chunks hold
    (``GET /v1/terms`` lists them; a query naming another is refused unless asked for,
    docs/dp.md "Unlisted terms")."""

    def __init__(self, terms: Iterable[str]) -> None:
        self.terms = tuple(sorted(set(terms)))  # sorted: found by bisection, paged in order

    def __contains__(self, term: object) -> bool:
        at = bisect_left(self.terms, term)
        return at < len(self.terms) and self.terms[at] == term

    def __len__(self) -> int:
        return len(self.terms)

    def page(self, prefix: str = "", after: str = "", limit: int = 1000
             ) -> tuple[list[str], bool]:
        """Up to ``limit`` terms that start with ``prefix``, in order, each after ``after``
        (the last term of the page before), and whether more follow."""
        start = max(bisect_left(self.terms, prefix), bisect_right(self.terms, after))
        found = []
        for term in self.terms[start:start + limit + 1]:
            if not term.startswith(prefix):  # those with the prefix are one run from it
                break
            found.append(term)
        return found[:limit], len(found) > limit


class Publication:
    """One version of a publication, as the private cloud sees it (it holds the maps)."""

    def __init__(self, store: Store, version: str) -> None:
        self.store, self.version = store, version
        self._maps: dict[int, dict[str, dict[str, int]]] = {}
        self._infos: dict[str, ChunkInfo] = {}  # chunks parsed one by one (an append's)
        self._numbers: dict[str, int] = {}  # chunk id -> its line, for the units read so far
        self._unit_terms: dict[int, dict[str, str]] = {}
        self._locations: dict[int, dict[str, str]] = {}
        self._index_bytes: dict[str, bytes] = {}  # read to find the index's layout, not yet used

    @cached_property
    def _split(self) -> tuple[dict, list[bytes]]:
        return self._read_split()

    def _read_split(self) -> tuple[dict, list[bytes]]:
        """The private manifest's head, and its chunk entries as unparsed lines.  The terms
        the units pass up are interned: the same few thousand recur in every cluster (at 10M
        records, 0.6M of them: 46 MB as parsed, 17 MB shared)."""
        path = fmt.manifest_path(self.version)
        head, lines = fmt.split_manifest(self.store.read("private", path), f"private/{path}")
        for unit in head.get("units", ()):
            unit["passed_up"] = list(map(sys.intern, unit["passed_up"]))
        return head, lines

    @property
    def head(self) -> dict:
        """The private manifest without its chunk entries: all an append reads whole."""
        return self._split[0]

    @property
    def chunk_lines(self) -> list[bytes]:
        """The private manifest's chunk entries, one unparsed line each."""
        return self._split[1]

    @cached_property
    def manifest(self) -> dict:
        """The whole private manifest, every chunk entry parsed."""
        return self.head | {"chunks": dict(map(fmt.line_entry, self.chunk_lines))}

    @cached_property
    def public_terms(self) -> PublicTerms:
        """The terms of the public chunks, from the private manifest's entries, each parsed
        and dropped: a server that has not read the manifest keeps none of it."""
        terms: set[str] = set()
        for line in (self.__dict__.get("_split") or self._read_split())[1]:
            entry = fmt.line_entry(line)[1]
            if not entry["priLabel"]:
                terms.update(entry["terms"])
        return PublicTerms(terms)

    @cached_property
    def chunks(self) -> dict[str, ChunkInfo]:
        return {cid: self._info(cid, c) for cid, c in self.manifest["chunks"].items()}

    def _info(self, chunk_id: str, entry: dict) -> ChunkInfo:
        return ChunkInfo(chunk_id, entry["unit"], entry["priLabel"], frozenset(entry["terms"]),
                         entry.get("home", self.version))

    @property
    def lines_by_unit(self) -> bool:
        """Whether the private manifest lists each unit's entries together, in unit order,
        each naming its home, and the head gives each unit's count: how versions are written
        since appends stopped reading every line.  The mark is a field of the head that a
        writer from before does not carry, so a version it appends falls back to the scan."""
        return self.head.get("chunk_order") == "unit"

    @cached_property
    def _lines_of_unit(self) -> dict[int, Sequence[int]]:
        """unit -> the indexes of its chunks' lines: ranges from the head's counts, or, in a
        manifest written before them, found by reading each line's unit."""
        found: dict[int, Sequence[int]] = {}
        if self.lines_by_unit:
            start = 0
            for unit in self.units:
                found[unit["id"]] = range(start, start + unit["chunk_count"])
                start += unit["chunk_count"]
            return found
        for number, line in enumerate(self.chunk_lines):
            found.setdefault(fmt.line_unit(line), []).append(number)  # type: ignore[union-attr]
        return found

    @cached_property
    def _line_of_chunk(self) -> dict[str, int]:
        """chunk id -> its line, for every chunk: read only for a chunk whose unit's lines
        were not read (:meth:`_line_number`)."""
        return {fmt.line_chunk_id(line): n for n, line in enumerate(self.chunk_lines)}

    def _line_number(self, chunk_id: str) -> int:
        number = self._numbers.get(chunk_id)
        return self._line_of_chunk[chunk_id] if number is None else number

    def chunk_info(self, chunk_id: str) -> ChunkInfo:
        """One chunk's entry, without parsing the others unless they were already."""
        if "chunks" in self.__dict__:
            return self.chunks[chunk_id]
        if chunk_id not in self._infos:
            found = fmt.line_entry(self.chunk_lines[self._line_number(chunk_id)])
            self._infos[chunk_id] = self._info(*found)
        return self._infos[chunk_id]

    def chunk_entry(self, chunk_id: str) -> dict:
        """One chunk's manifest entry, as written."""
        return fmt.line_entry(self.chunk_lines[self._line_number(chunk_id)])[1]

    def unit_lines(self, unit: int) -> list[bytes]:
        """The private manifest lines of one unit's chunks, unparsed."""
        numbers = self._lines_of_unit.get(unit, ())
        if isinstance(numbers, range):
            return self.chunk_lines[numbers.start:numbers.stop]
        return [self.chunk_lines[n] for n in numbers]

    def unit_chunk_infos(self, unit: int) -> list[ChunkInfo]:
        """The chunks of one unit, parsing only their lines (and noting where each is)."""
        ids = []
        for number in self._lines_of_unit.get(unit, ()):
            chunk_id = fmt.line_chunk_id(self.chunk_lines[number])
            self._numbers[chunk_id] = number
            ids.append(chunk_id)
        return [self.chunk_info(chunk_id) for chunk_id in ids]

    def unit_terms(self, unit: int) -> dict[str, str]:
        """term -> the stored chunk of that unit holding it (one unit's part of
        :attr:`unit_chunks`)."""
        if "unit_chunks" in self.__dict__:
            return self.unit_chunks.get(unit, {})
        if unit not in self._unit_terms:
            self._unit_terms[unit] = {t: c.id for c in self.unit_chunk_infos(unit)
                                      for t in c.terms}
        return self._unit_terms[unit]

    def location(self, unit: int) -> dict[str, str]:
        """One leaf cluster's part of :attr:`locations`, reading only its chain of units."""
        if "locations" in self.__dict__:
            return self.locations[unit]
        if unit not in self._locations:
            chain = [self.unit_terms(a) for a in aggregates_above(
                self.tree, self.units[unit]["node"], self._parents)]
            where = dict(self.unit_terms(unit))
            for term in self.units[unit]["passed_up"]:
                where[term] = next(chunks[term] for chunks in chain if term in chunks)
            self._locations[unit] = where
        return self._locations[unit]

    @cached_property
    def _parents(self) -> dict[int, int]:
        return self.tree.parents()

    @cached_property
    def tree(self) -> Tree:
        return Tree.from_manifest(self.head["tree"], self.head.get("roots"))

    @property
    def units(self) -> list[dict]:
        return self.head["units"]

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
        return self.head["params"]["k"]

    @property
    def m(self) -> int:
        return self.head["params"]["m"]

    @property
    def record_segments(self) -> list[dict]:
        """The segments of record ids, in order: ``home``, ``start``, ``stop`` (an append
        writes one for its records and carries the others by reference; a version written
        before segments has one file, its own)."""
        listed = self.head.get("records")
        return listed["segments"] if listed else [{"home": self.version, "start": 0}]

    def segment_rows(self, segment: dict) -> list[list]:
        """``[record id, leaf cluster]`` of one segment's records."""
        path = f"{segment['home']}/{fmt.records_name(segment['start'])}"
        return fmt.decode_records(self.store.read("private", path), f"private/{path}")

    @cached_property
    def _records(self) -> list[list]:
        return [row for segment in self.record_segments for row in self.segment_rows(segment)]

    def record_ids_at(self, positions: Iterable[int]) -> dict[int, str]:
        """position -> record id, reading only the segments that hold them."""
        wanted = sorted(set(positions))
        if "_records" in self.__dict__:
            return {p: self._records[p][0] for p in wanted}
        found, segments = {}, self.record_segments
        for number, segment in enumerate(segments):
            stop = segment.get("stop") if number + 1 < len(segments) else None
            inside = [p for p in wanted if p >= segment["start"] and (stop is None or p < stop)]
            if inside:
                rows = self.segment_rows(segment)
                found.update((p, rows[p - segment["start"]][0]) for p in inside)
        return found

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

    @property
    def live_records(self) -> int:
        """Records the version holds, those erased since they were published left out (an
        erased record keeps its position, empty: ``cocktail forget``)."""
        return self.record_count - self.head.get("erased_records", 0)

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
        return self.chunk_info(chunk_id).unit

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
        return self.chunk_info(chunk_id).private

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
        path = fmt.index_path(self.chunk_info(chunk_id).home, chunk_id)
        return fmt.decode_index(self.store.read(self._zone(chunk_id), path), chunk_id, path)

    def chunk_files(self, chunk_id: str) -> tuple[bytes, bytes]:
        """One chunk's file and its index's, as bytes."""
        home, zone = self.chunk_info(chunk_id).home, self._zone(chunk_id)
        return (self.store.read(zone, fmt.chunk_path(home, chunk_id)),
                self.store.read(zone, fmt.index_path(home, chunk_id)))

    def index_location(self, chunk_id: str) -> str:
        return self.store.location(self._zone(chunk_id),
                                   fmt.index_path(self.chunk_info(chunk_id).home, chunk_id))

    def subrecords(self, chunk_id: str) -> Iterator[tuple[str, list[str]]]:
        path = fmt.chunk_path(self.chunk_info(chunk_id).home, chunk_id)
        return fmt.decode_chunk(self.store.read(self._zone(chunk_id), path), path)

    def map_home(self, unit: int) -> str:
        """The version whose directory holds the unit's pseudonym map."""
        return self.units[unit].get("map", self.version)

    def record_positions(self, chunk_id: str) -> dict[str, int]:
        """pseudonym -> record position, for one chunk (the private map, read per unit)."""
        unit = self.chunk_info(chunk_id).unit
        if unit not in self._maps:
            self._maps[unit] = fmt.decode_pseudonym_map(*self._map_file(unit))
        return self._maps[unit].get(chunk_id, {})

    def map_rows(self, unit: int, chunks: Iterable[str] | None = None) -> list[tuple]:
        """The unit's pseudonym map as rows: (chunk id, pseudonym, position[, record id]),
        only those of ``chunks`` when given."""
        return fmt.decode_map_rows(*self._map_file(unit), chunks=chunks)

    def map_bytes(self, unit: int) -> bytes:
        return self._map_file(unit)[0]

    def _map_file(self, unit: int) -> tuple[bytes, str]:
        path = fmt.pseudonym_map_path(self.map_home(unit), unit)
        return self.store.read("private", path), f"private/{path}"
