"""The write phase works on arrays (a unit's terms, each chunk's distinct subrecords): what it
writes must be what the per-record definitions of the format give."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from cocktail import chunkformat as fmt
from cocktail.dataset import Records
from cocktail.overlay.layout import LeafMembers, cluster_records
from cocktail.publish import writer
from cocktail.publish.writer import (ChunkMembers, build_chunk, build_chunks, build_drawn,
                                     pseudonyms, unit_chunks, unit_records)
from cocktail.query.termindex import TermIndexBuilder
from cocktail.releases.log import (Added, chunk_record, member_key, member_keys,
                                   record_digests)

CHUNK = "0123456789abcdef"
KEY = b"k" * 32


def _records(count: int, vocabulary: int) -> list[frozenset[str]]:
    """Record i holds term j when a hash of (i, j) says so (about one term in six); a few
    terms JSON must escape."""
    names = [f"t{j:03d}" for j in range(vocabulary - 2)] + ['é "quoted"', "back\\slash\t"]
    return [frozenset(name for j, name in enumerate(names)
                      if hashlib.sha256(b"%d-%d" % (i, j)).digest()[0] < 43)
            for i in range(count)]


def _split_by_definition(members, chunk_terms):
    """Member by member, term by term: the (position, sorted subrecord) of each chunk."""
    owner = {term: i for i, terms in enumerate(chunk_terms) for term in terms}
    parts: list[list] = [[] for _ in chunk_terms]
    for position, terms in members:
        found: dict[int, list[str]] = {}
        for term in sorted(terms):
            if term in owner:
                found.setdefault(owner[term], []).append(term)
        for i, sub in sorted(found.items()):
            parts[i].append((position, sub))
    return parts


def split_members(members, chunk_terms):
    """:func:`unit_chunks` as (position, sorted subrecord) per chunk."""
    positions, records = unit_records(members)
    chunks, _ = unit_chunks(records, positions, [f"r{p}" for p in positions.tolist()],
                            chunk_terms)
    return [[(position, list(chunk.subrecords.terms[which])) for position, which
             in zip(chunk.positions.tolist(), chunk.subrecords.which.tolist())]
            for chunk in chunks]


def test_members_split_into_chunks_as_term_by_term():
    records = _records(300, 160)
    names = sorted(set().union(*records))
    # A chunk of 100 terms (its subrecords compared over two 64-bit words), one of 40, an
    # empty one; the last 20 terms are in none (a private part passed up).
    chunk_terms = [frozenset(names[:100]), frozenset(names[100:140]), frozenset()]
    members = list(enumerate(records))
    assert split_members(members, chunk_terms) == _split_by_definition(members, chunk_terms)
    leaf = LeafMembers(Records.build(records), list(range(299, -1, -2)))  # read off the arrays
    assert split_members(leaf, chunk_terms) == _split_by_definition(list(leaf), chunk_terms)


def test_a_chunk_is_written_as_the_format_defines_it():
    records = _records(400, 12)
    members = [(f"r{i}", 10 * i, sorted(r)) for i, r in enumerate(records) if r]
    built = build_chunk(KEY, CHUNK, members)
    # docs/publication-format.md: AES-128, under keyed BLAKE2b(owner key; chunk id), of the
    # first 128 bits of SHA-256(record id); the first 80 bits, in hex.
    chunk_key = hashlib.blake2b(CHUNK.encode(), key=KEY, digest_size=16,
                                person=b"chunk key").digest()
    names = []
    for record_id, _, _ in members:
        encryptor = Cipher(algorithms.AES(chunk_key), modes.ECB()).encryptor()
        block = encryptor.update(hashlib.sha256(record_id.encode()).digest()[:16])
        names.append(block[:fmt.PSEUDONYM_HEX // 2].hex())
    digests = record_digests(r for r, _, _ in members)
    assert pseudonyms(KEY, CHUNK, digests).astype(str).tolist() == names
    rows = sorted(zip(names, members))
    lines = [(name, sub) for name, (_, _, sub) in rows]
    assert built.names == [name for name, _ in lines]
    assert built.chunk == "".join(f"{name}\t{json.dumps(sub, ensure_ascii=False)}\n"
                                  for name, sub in lines).encode()
    assert built.index == fmt.encode_index(CHUNK, fmt.build_index(lines))
    assert fmt.decode_map_rows(built.map_lines()) == \
        [(CHUNK, name, position) for name, (_, position, _) in rows]
    with_ids = [(CHUNK, name, position, record_id) for name, (record_id, position, _) in rows]
    assert built.map_lines(with_ids=True) == "".join(
        f"{c}\t{n}\t{p}\t{json.dumps(r, ensure_ascii=False)}\n" for c, n, p, r in with_ids).encode()
    again = build_chunk(KEY, CHUNK, ChunkMembers.of(members))
    assert (again.chunk, again.index) == (built.chunk, built.index)


def test_a_units_chunks_built_together_are_each_as_built_alone():
    """One sort, one decoding and one pass over the terms for all of a unit's chunks; a
    vocabulary the chunks share, a chunk no member meets, terms JSON escapes."""
    records = _records(500, 40)
    names = sorted(set().union(*records))
    chunk_terms = [frozenset(names[:12]), frozenset(names[12:30]), frozenset(),
                   frozenset(names[30:])]
    positions, unit = unit_records(list(enumerate(records)))
    chunks, _ = unit_chunks(unit, positions, [f"r{p}" for p in positions.tolist()],
                            chunk_terms)
    ids = [f"{j:016x}" for j in range(len(chunks))]
    together = build_chunks(KEY, ids, chunks)
    for chunk_id, members, built in zip(ids, chunks, together):
        alone = build_chunk(KEY, chunk_id, members)
        assert (built.chunk_id, built.names, built.order.tolist(), built.chunk, built.index,
                built.map_lines(with_ids=True)) == \
            (alone.chunk_id, alone.names, alone.order.tolist(), alone.chunk, alone.index,
             alone.map_lines(with_ids=True))
    assert [len(built.names) for built in together][2] == 0


def test_only_a_chunk_whose_pseudonyms_collide_is_drawn_again(monkeypatch):
    real = writer.pseudonyms

    def colliding(key, chunk_id, digests):
        names = real(key, chunk_id, digests)
        return names[:1].repeat(len(names)) if chunk_id == "1-0" else names

    monkeypatch.setattr(writer, "pseudonyms", colliding)
    records = _records(60, 10)
    chunks = [ChunkMembers.of([(f"r{i}", i, sorted(r)) for i, r in enumerate(records) if r])
              for _ in range(3)]
    drawn = build_drawn(KEY, chunks, lambda j, attempt: f"{j}-{attempt}")
    assert [built.chunk_id for built in drawn] == ["0-0", "1-1", "2-0"]
    assert build_chunk(KEY, "1-0", chunks[1]) is None


def test_a_chunk_holding_a_record_twice_is_an_error_not_an_endless_draw():
    """Its two members get one pseudonym under every chunk id: drawing ids again would never
    end (a promotion that pooled public chunks' members too hung so)."""
    members = [("r0", 0, ["a"]), ("r1", 1, ["b"]), ("r0", 0, ["c"])]
    chunks = [ChunkMembers.of(members[:2]), ChunkMembers.of(members)]
    with pytest.raises(ValueError, match=r"chunk 1 holds record 'r0' \(position 0\) more than"):
        build_drawn(KEY, chunks, lambda j, attempt: f"{j}-{attempt}")


def test_what_a_chunk_adds_to_the_log_and_the_term_index():
    records = _records(300, 20)
    members = [(f"r{i}", i, sorted(r)) for i, r in enumerate(records) if r]
    chunk = ChunkMembers.of(members)
    added = chunk.added()
    assert added.keys.tolist() == [member_key(r) for r, _, _ in members]
    assert added.subrecords == Counter(tuple(sub) for _, _, sub in members)
    by_members = [(r, sub) for r, _, sub in members]
    assert chunk_record(1, ["a"], added, "x") == chunk_record(1, ["a"], by_members, "x")
    counted = Added.of(by_members)
    assert counted.subrecords == added.subrecords
    assert counted.keys.tolist() == member_keys([r for r, _ in by_members]).tolist()
    pairs = TermIndexBuilder()
    rows, terms = chunk.subrecords.pairs()
    pairs.add_pairs(chunk.subrecords.distinct.names, terms, chunk.positions[rows])
    postings: dict[str, list[int]] = {}
    for _, position, sub in members:
        for term in sub:
            postings.setdefault(term, []).append(position)
    assert pairs.bitmaps == {term: BitMap(positions) for term, positions in postings.items()}


def test_a_map_mixes_chunks_with_and_without_record_ids():
    lines = fmt.encode_map_lines("c1", ["p1", "p2"], [3, 4], ['id "x"', "y"]) + \
        fmt.encode_map_lines("c2", ["p3"], [5])
    assert lines == b'c1\tp1\t3\t"id \\"x\\""\nc1\tp2\t4\t"y"\nc2\tp3\t5\n'
    assert fmt.encode_map_lines("c3", [], []) == b""
    assert fmt.decode_map_rows(lines) == \
        [("c1", "p1", 3, 'id "x"'), ("c1", "p2", 4, "y"), ("c2", "p3", 5)]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.frozensets(st.integers(0, 29), max_size=5), min_size=1, max_size=12),
       st.integers(0, 300), st.data())
def test_a_cluster_goes_to_its_worker_numbered_over_its_own_terms(records, others, data):
    """The records a partitioning worker is sent: each cluster member's terms, named by the
    cluster's own sorted terms, through a table over the vocabulary or, when the vocabulary
    is vast beside the cluster's pairs (``others`` records of a term of their own), a sort."""
    whole = Records.build([*({f"t{t:02d}" for t in record} for record in records),
                           *({f"z{i:03d}"} for i in range(others))])
    positions = data.draw(st.lists(st.integers(0, len(records) - 1), min_size=1, max_size=12))
    sent = cluster_records(whole, positions)
    used = sorted(set().union(*(whole[p] for p in positions)))
    assert list(sent.names) == used and sent.indices.dtype == np.int32
    assert [sent[i] for i in range(len(positions))] == [whole[p] for p in positions]
