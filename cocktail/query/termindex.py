"""The term index: every term's record positions as a roaring bitmap, what the fast path
intersects.  Written once per version into the private zone (``terms.roaring``, codec in
:mod:`cocktail.chunkformat`), so that a reader deserializes it instead of resolving every
chunk's index through the pseudonym maps; :func:`cocktail.audit.audit_term_indexes` is the
owner's check that it agrees with the chunks."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from pyroaring import BitMap, FrozenBitMap

from .. import chunkformat as fmt


class TermIndex(Mapping[str, FrozenBitMap]):
    """term -> record positions, read from the file: each bitmap is deserialized the first
    time it is asked for, so a reader pays only for the terms its queries name."""

    def __init__(self, records: int, serialized: dict[str, memoryview]) -> None:
        self.records = records
        self._serialized = serialized
        self._open: dict[str, FrozenBitMap] = {}

    @classmethod
    def decode(cls, data: bytes, name: str = fmt.TERM_INDEX) -> TermIndex:
        return cls(*fmt.decode_term_index(data, name))

    def __getitem__(self, term: str) -> FrozenBitMap:
        found = self._open.get(term)
        if found is None:
            found = self._open[term] = FrozenBitMap.deserialize(self._serialized[term])
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._serialized)

    def __len__(self) -> int:
        return len(self._serialized)


class TermIndexBuilder:
    """Collects (term, positions) while a version's chunks are written, or merges the
    indexes of parts (a Spark task's units)."""

    def __init__(self) -> None:
        self.bitmaps: dict[str, BitMap] = {}

    def add_members(self, members: Iterable[tuple[int, Sequence[str]]]) -> None:
        """(record position, its terms in one chunk)."""
        postings: dict[str, list[int]] = {}
        for position, terms in members:
            for term in terms:
                postings.setdefault(term, []).append(position)
        for term, positions in postings.items():
            self.bitmaps.setdefault(term, BitMap()).update(positions)

    def update(self, index: Mapping[str, BitMap | FrozenBitMap]) -> None:
        for term, positions in index.items():
            if term in self.bitmaps:
                self.bitmaps[term] |= positions
            else:
                self.bitmaps[term] = BitMap(positions)

    def discard(self, positions: BitMap) -> None:
        """Forget these records (an append places its buffer's records anew)."""
        for term in list(self.bitmaps):
            self.bitmaps[term].difference_update(positions)
            if not self.bitmaps[term]:
                del self.bitmaps[term]

    def encode(self, records: int) -> bytes:
        return fmt.encode_term_index(records, ((term, self._compact(term).serialize())
                                               for term in sorted(self.bitmaps)))

    def _compact(self, term: str) -> BitMap:
        bitmap = self.bitmaps[term]
        bitmap.run_optimize()
        return bitmap


def build_term_index(chunks: Iterable[tuple[dict[str, int], Iterable[tuple[str, list[str]]]]]
                     ) -> dict[str, FrozenBitMap]:
    """The index resolved from chunks: per chunk, its pseudonym -> position map and its
    inverted index, (term, pseudonyms).  Each (record, term) pair sits in exactly one chunk,
    so the union over chunks is exact."""
    records: dict[str, BitMap] = {}
    for names, postings in chunks:
        for term, pseudonyms in postings:
            records.setdefault(term, BitMap()).update(names[p] for p in pseudonyms)
    return {term: FrozenBitMap(found) for term, found in records.items()}
