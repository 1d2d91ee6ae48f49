"""The owner's checks of what exact answers rest on: each committed version's term index is
what its chunks and private maps resolve to, and its segments of record ids tile its
positions with the right keys, and every file its manifest names is there."""

from __future__ import annotations

import hashlib

import numpy as np
from pyroaring import BitMap

from .. import chunkformat as fmt
from .. import releases
from ..query.termindex import IndexPart, as_array, bitmap_of, check_files, layout_from_manifest
from ..query.view import Publication
from ..store import Store, StoreError
from .report import EXAMPLES, Violation


def audit_term_indexes(store: Store) -> list[Violation]:
    """Owner check: each committed version's term index is what its chunks and private maps
    resolve to (a wrong index gives wrong exact answers, and the DP layer's noise would hide
    it).  Each part its manifest lists: at home in this version or an earlier one, its files
    there and matching their sha256s, its positions inside its range, its order a numbering of
    its range; the parts tiling the version's records; ``terms/parts.json`` the manifest's list.
    A part several versions share is read once."""
    found: list[Violation] = []
    checked: dict[IndexPart, tuple[list[Violation], dict[str, BitMap] | None]] = {}
    for version in releases.committed_versions(store):
        publication = Publication(store, version)
        listed = publication.manifest.get("term_index")
        manifest = f"private/{fmt.manifest_path(version)}"
        if not listed:
            for path in (f"{version}/{fmt.TERM_PARTS}", fmt.term_index_path(version)):
                if store.exists("private", path):
                    found.append(Violation("integrity", f"private/{path}", "a term index the "
                                           "private manifest does not list"))
            continue
        try:
            layout = layout_from_manifest(version, listed, manifest)
        except fmt.FormatError as exc:
            found.append(Violation("integrity", manifest, str(exc)))
            continue
        where = f"private/{fmt.term_index_path(version)}" if layout.legacy else \
            f"private/{version}/{fmt.TERM_PARTS}"
        if not layout.legacy:
            _check_parts_list(store, version, listed, where, found)
        sound = True
        problem = layout.gaps()
        if problem:
            found.append(Violation("integrity", manifest, f"term index: {problem}"))
            sound = False
        stored: dict[str, BitMap] = {}
        for part in layout.parts:
            if not isinstance(part.home, str) or not fmt.VERSION_RE.match(part.home) or \
                    part.home > version:
                found.append(Violation("integrity", manifest, f"term index part "
                                       f"{part.start}..{part.stop}: home {part.home!r} is not "
                                       f"{version} or an earlier version"))
                sound = False
                continue
            if part not in checked:
                checked[part] = _check_part(store, part)
            problems, postings = checked[part]
            found += [Violation(v.kind, v.where, f"{v.detail} (in the index of {version})")
                      for v in problems]
            if postings is None:
                sound = False
                continue
            for term, positions in postings.items():
                stored[term] = stored[term] | positions if term in stored else positions
        resolved = publication.resolved_term_records()
        if resolved.repeated:
            found.append(Violation("release-invariant", manifest,
                                   f"{resolved.repeated} (record, term) pair(s) are held by "
                                   "more than one chunk: what one chunking published, another "
                                   "shows again"))
        if sound:
            wrong = sorted(t for t in set(stored) | set(resolved)
                           if stored.get(t) != resolved.get(t))
            if wrong:
                found.append(Violation("integrity", where, f"{len(wrong)} term(s) disagree with "
                                       f"the chunks, e.g. {', '.join(map(repr, wrong[:EXAMPLES]))}"))
        if layout.records != len(publication.record_ids):
            found.append(Violation("integrity", where, f"counts {layout.records} records, the "
                                   f"version holds {len(publication.record_ids)}"))
    return found


def audit_record_segments(store: Store) -> list[Violation]:
    """Owner check: each committed version's segments of record ids tile its positions, each
    holds as many lines as its range, and each keys file holds exactly its segment's keys (a
    wrong one would let an append publish an id twice)."""
    found = []
    for version in releases.committed_versions(store):
        publication = Publication(store, version)
        at = 0
        for segment in publication.record_segments:
            where = f"private/{segment['home']}/{fmt.records_name(segment['start'])}"
            stop = segment.get("stop")
            if segment["start"] != at or not fmt.VERSION_RE.match(segment["home"]) \
                    or segment["home"] > version:
                found.append(Violation("integrity", where, f"a segment of {version} from "
                                       f"{segment['start']} (in {segment['home']}) does not "
                                       f"follow position {at}"))
                break
            try:
                rows = publication.segment_rows(segment)
            except (fmt.FormatError, StoreError) as exc:
                found.append(Violation("integrity", where, str(exc)))
                break
            at = segment["start"] + len(rows)
            if stop is not None and stop != at:
                found.append(Violation("integrity", where, f"{len(rows)} records, the "
                                       f"manifest says {stop - segment['start']}"))
            if "keys" in segment:
                path = f"{segment['keys']}/{fmt.record_keys_name(segment['start'])}"
                keys = np.sort(np.fromiter((releases.member_key(r[0]) for r in rows
                                            if r[0] is not None),  # None: erased
                                           dtype=np.uint64))
                try:
                    stored = fmt.decode_record_keys(store.read("private", path), path)
                except (fmt.FormatError, StoreError) as exc:
                    found.append(Violation("integrity", f"private/{path}", str(exc)))
                    continue
                if not np.array_equal(stored, keys):
                    found.append(Violation("integrity", f"private/{path}", "does not hold "
                                           "exactly the keys of its segment's record ids"))
        counted = publication.head.get("records", {}).get("count")
        if counted is not None and counted != at:
            found.append(Violation("integrity", f"private/{fmt.manifest_path(version)}",
                                   f"counts {counted} records, its segments hold {at}"))
    return found


def audit_references(store: Store) -> list[Violation]:
    """Owner check: every file a committed version's private manifest names by its home (each
    chunk's file and index, each unit's pseudonym map) is there. A prune that deletes a file a
    later version still names leaves that version unreadable in part, which nothing else
    reads until an append or a query needs it (a map of an emptied buffer once dangled so)."""
    found = []
    for version in releases.committed_versions(store):
        publication = Publication(store, version)
        named = [("private", fmt.pseudonym_map_path(publication.map_home(u["id"]), u["id"]))
                 for u in publication.units]
        for chunk in publication.chunks.values():
            zone = "private" if chunk.private else "public"
            named += [(zone, fmt.chunk_path(chunk.home, chunk.id)),
                      (zone, fmt.index_path(chunk.home, chunk.id))]
        found += [Violation("integrity", f"{zone}/{path}", f"{version}'s manifest names it; "
                            "the store lacks it (a dangling reference)")
                  for zone, path in named if not store.exists(zone, path)]
    return found


def _check_parts_list(store: Store, version: str, listed: dict, where: str,
                      found: list[Violation]) -> None:
    """``terms/parts.json`` (what readers that skip the manifest go by) is the manifest's."""
    path = f"{version}/{fmt.TERM_PARTS}"
    if not store.exists("private", path):
        found.append(Violation("integrity", where, "listed in the manifest but missing"))
        return
    try:
        stored = fmt.decode_json(store.read("private", path), where)
    except fmt.FormatError as exc:
        found.append(Violation("integrity", where, str(exc)))
        return
    if stored != listed:
        found.append(Violation("integrity", where, "differs from the private manifest's "
                               "term_index"))


def _check_part(store: Store, part: IndexPart) -> tuple[list[Violation], dict[str, BitMap] | None]:
    """A part's problems, and its bitmaps by record position (None when it cannot be read
    soundly)."""
    found: list[Violation] = []
    label = f"the part over {part.start}..{part.stop} at home in {part.home}"
    if not store.exists("private", part.home):
        return [Violation("integrity", f"private/{part.home}", f"{label}: its home does not "
                          "exist")], None
    if len(part.sha256) != len(part.files):
        found.append(Violation("integrity", f"private/{part.paths()[0]}", f"{label}: the "
                               f"manifest lists {len(part.sha256)} sha256 for {len(part.files)} "
                               "file(s)"))
    files = []
    for number, path in enumerate(part.paths()):
        if not store.exists("private", path):
            found.append(Violation("integrity", f"private/{path}", f"{label}: listed in the "
                                   "manifest but missing"))
            return found, None
        data = store.read("private", path)
        if number >= len(part.sha256) or hashlib.sha256(data).hexdigest() != part.sha256[number]:
            found.append(Violation("integrity", f"private/{path}", "content does not match the "
                                   "private manifest's sha256"))
        try:
            files.append(fmt.decode_term_index(data, f"private/{path}"))
        except fmt.FormatError as exc:
            found.append(Violation("integrity", f"private/{path}", str(exc)))
            return found, None
    try:
        check_files(files, part.start, part.stop, f"private/{part.paths()[0]}")
    except fmt.FormatError as exc:
        found.append(Violation("integrity", f"private/{part.paths()[0]}", str(exc)))
        return found, None
    sound = True
    for path, file in zip(part.paths(), files):
        outside = [t for t, b in file.bitmaps.items() if not _within(b, file.start, file.stop)]
        if outside:
            found.append(Violation("integrity", f"private/{path}", f"{len(outside)} term(s) hold "
                                   f"positions outside the part's {file.start}..{file.stop}"))
            sound = False
    order = _part_order(store, part, found)
    if order is None or not sound:
        return found, None
    postings: dict[str, list[np.ndarray]] = {}
    for file in files:
        for term, data in file.bitmaps.items():
            positions = as_array(BitMap.deserialize(data)) - np.uint32(part.start)
            postings.setdefault(term, []).append(order[positions])
    return found, {term: bitmap_of(np.concatenate(pieces)) for term, pieces in postings.items()}


def _part_order(store: Store, part: IndexPart, found: list[Violation]) -> np.ndarray | None:
    """The part's order, checked against the manifest's sha256 and to number each record of
    its range exactly once (the identity for a part in record order); None if unsound."""
    if part.order is None:
        if part.order_sha256:
            found.append(Violation("integrity", f"private/{part.home}", f"the part over "
                                   f"{part.start}..{part.stop} lists an order's sha256 but no "
                                   "order"))
            return None
        return np.arange(part.start, part.stop, dtype=np.uint32)
    path = part.order_path
    if not store.exists("private", path):
        found.append(Violation("integrity", f"private/{path}", "listed in the manifest but "
                               "missing"))
        return None
    data = store.read("private", path)
    if hashlib.sha256(data).hexdigest() != part.order_sha256:
        found.append(Violation("integrity", f"private/{path}", "content does not match the "
                               "private manifest's sha256"))
    try:
        order = fmt.decode_term_order(data, part.records, f"private/{path}")
    except fmt.FormatError as exc:
        found.append(Violation("integrity", f"private/{path}", str(exc)))
        return None
    if not np.array_equal(np.sort(order), np.arange(part.start, part.stop, dtype=order.dtype)):
        found.append(Violation("integrity", f"private/{path}", f"does not number each of the "
                               f"part's records {part.start}..{part.stop} exactly once"))
        return None
    return order


def _within(serialized: memoryview, start: int, stop: int) -> bool:
    positions = BitMap.deserialize(serialized)
    return not positions or (positions.min() >= start and positions.max() < stop)
