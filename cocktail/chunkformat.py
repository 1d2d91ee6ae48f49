"""On-disk format of a publication: file names and line codecs.

This is the only code the independent auditor shares with the publisher: it parses files, it
decides nothing.  docs/publication-format.md describes the same layout for people.

Chunk file (one line per subrecord, ordered by pseudonym)::

    <pseudonym> TAB <JSON array of the subrecord's terms, sorted>

Inverted index (one line per term, ordered by term)::

    <chunk id> TAB <JSON string: term> TAB <pseudonyms containing it, sorted, space separated>

The chunk id on every line lets a streaming mapper work on any mix of index files without
knowing which file a line came from (not every runner tells it).

JSON keeps any term (tabs, spaces, non-ASCII) on one line while staying readable by the
standard-library streaming scripts in mappers/.

Term index (private: every term's record positions, for the fast path) in *parts*, each over
a range ``[start, stop)`` of record positions and written by one version (its *home*), which
later versions reference without copying (the private manifest's ``term_index`` lists them;
``terms/parts.json`` holds the same list for readers that do not read the manifest).  A part
written by version ``v`` is ``v/terms/<start>-<stop>.roaring``::

    cocktail-terms/1 NEWLINE
    {"start": first position, "stop": end position (excluded), "terms": [[<term>, <bytes>], ...]}
    NEWLINE
    <each term's roaring bitmap of index positions in [start, stop), portable serialization,
     in the header's order>

and its order, ``v/terms/<start>-<stop>.order``: a part numbers its records in an order of its
own, which makes its bitmaps runs (see :mod:`cocktail.query.termindex`); this file maps it back
to record positions::

    cocktail-terms-order/1 NEWLINE
    <the record position (in [start, stop)) at each index position start, start + 1, ...:
     32-bit unsigned, little-endian>

Versions written before parts have one index over all their records, in shard files
``terms.roaring``, ``terms.1.roaring``, ... whose header also names ``"records"`` (the
version's), ``"shard"`` and ``"shards"`` (none of them before shards), and one order for all
shards, ``terms.order`` (none before orders: records numbered by position).  They are read as
one part covering every record, at home in that version.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

FORMAT = "cocktail-publication/2"  # /1: one JSON document, every file in its version
READS = ("cocktail-publication/1", FORMAT)  # the manifests this version reads (and appends to)
UPGRADING = 'docs/publication-format.md, "Format versions and upgrading"'
POINTER = "CURRENT"
MANIFEST = "manifest.json"
SIGNATURE = "signature.json"  # beside the public manifest: who signed it (releases.signing)
CHUNK_DIR = "chunks"
INDEX_DIR = "index"
PSEUDONYM_DIR = "pseudonyms"
RECORDS = "records.jsonl"
TERM_INDEX = "terms.roaring"
TERM_INDEX_MAGIC = b"cocktail-terms/1\n"
TERM_ORDER = "terms.order"
TERM_PART_DIR = "terms"
TERM_PARTS = f"{TERM_PART_DIR}/parts.json"
TERM_ORDER_MAGIC = b"cocktail-terms-order/1\n"
SUPERSEDED = "superseded.json"
STAGING_PREFIX = ".staging-"

PSEUDONYM_HEX = 20
CHUNK_ID_HEX = 16
VERSION_RE = re.compile(r"^v\d{6}$")
CHUNK_ID_RE = re.compile(rf"^[0-9a-f]{{{CHUNK_ID_HEX}}}$")
PSEUDONYM_RE = re.compile(rf"^[0-9a-f]{{{PSEUDONYM_HEX}}}$")


class FormatError(ValueError):
    """A publication file does not follow the format."""


class UnknownFormat(FormatError):
    """A file in a format this version does not read, most likely a newer cocktail's: refused
    whole (bad input, exit status 2), never read by the rules of an older format, nor appended
    to."""


def check_format(found: object, name: str, reads: Sequence[str] = READS) -> None:
    """Refuse a document whose ``format`` is none of ``reads``, in one line that says what to
    do."""
    if found not in reads:
        raise UnknownFormat(f"{name}: format {found!r}, which this cocktail does not read (it "
                            f"reads {', '.join(reads)}): upgrade cocktail to a release that "
                            f"reads it ({UPGRADING})")


def check_magic(data: bytes, magic: bytes, name: str, what: str) -> None:
    """A file that must start with the line ``magic`` (``cocktail-<kind>/<n>``): one of a
    newer format of the same kind is refused as :class:`UnknownFormat`, anything else as not
    being ``what``."""
    if data.startswith(magic):
        return
    family = magic[:magic.rindex(b"/") + 1]
    if data.startswith(family):
        check_format(data[:64].split(b"\n", 1)[0].decode("ascii", "replace"), name,
                     (magic.decode().rstrip("\n"),))
    raise FormatError(f"{name}: not {what} (expected {magic.decode().rstrip()!r} first)")


def version_name(number: int) -> str:
    return f"v{number:06d}"


def chunk_path(version: str, chunk_id: str) -> str:
    return f"{version}/{CHUNK_DIR}/{chunk_id}.tsv"


def index_path(version: str, chunk_id: str) -> str:
    return f"{version}/{INDEX_DIR}/{chunk_id}.tsv"


def pseudonym_map_path(version: str, cluster: int) -> str:
    return f"{version}/{PSEUDONYM_DIR}/{cluster}.tsv"


def manifest_path(version: str) -> str:
    return f"{version}/{MANIFEST}"


def signature_path(version: str) -> str:
    return f"{version}/{SIGNATURE}"


def lines(data: bytes, encoding: str = "utf-8") -> Iterator[tuple[int, str]]:
    """(line number, line) of a file, split at "\n" only.

    str.splitlines also breaks at U+2028, U+0085, \x1c..., which JSON leaves unescaped inside a
    term: one data subject's record would otherwise make every file holding it unreadable.
    """
    text = data.decode(encoding)
    pieces = text.split("\n")
    if pieces[-1] == "":
        pieces.pop()
    return enumerate(pieces, 1)


# -- chunk files ---------------------------------------------------------------------------

# json.dumps(term, ensure_ascii=False), in C without building an encoder per call
_json_term = json.encoder.encode_basestring


def encode_chunk(subrecords: Iterable[tuple[str, Sequence[str]]]) -> bytes:
    """Subrecords as (pseudonym, sorted terms), already ordered by pseudonym."""
    distinct: dict[tuple[str, ...], int] = {}
    pseudonyms, which = [], []
    for pseudonym, terms in subrecords:
        pseudonyms.append(pseudonym)
        which.append(distinct.setdefault(tuple(terms), len(distinct)))
    return encode_chunk_lines(pseudonyms, list(distinct), which)


def encode_chunk_lines(pseudonyms: Sequence[str], distinct: Sequence[Sequence[str]],
                       which: Sequence[int] | np.ndarray) -> bytes:
    """The chunk file whose line i is (``pseudonyms[i]``, ``distinct[which[i]]``).  Each
    line's array is exactly ``json.dumps(terms)``, encoded once per distinct subrecord: a
    chunk holds few (on 1M records, about 25 lines each).  ``pseudonyms`` are strings."""
    return encode_chunks_lines(pseudonyms, distinct, which, [0, len(pseudonyms)])[0]


def encode_chunks_lines(pseudonyms: Sequence[str], distinct: Sequence[Sequence[str]],
                        which: Sequence[int] | np.ndarray, cuts: Sequence[int]) -> list[bytes]:
    """:func:`encode_chunk_lines` of several chunks at once: chunk j's lines are those from
    ``cuts[j]`` to ``cuts[j + 1]``."""
    arrays = np.empty(len(distinct), dtype=object)  # picked per line in C, not in a loop
    arrays[:] = [f"\t[{', '.join(map(_json_term, terms))}]\n" for terms in distinct]
    pieces = [""] * (2 * len(pseudonyms))
    pieces[::2] = pseudonyms
    pieces[1::2] = arrays[np.asarray(which, dtype=np.intp)].tolist()
    return ["".join(pieces[2 * a:2 * b]).encode("utf-8") for a, b in zip(cuts, cuts[1:])]


def decode_chunk(data: bytes, name: str = "chunk") -> Iterator[tuple[str, list[str]]]:
    for lineno, line in lines(data):
        pseudonym, sep, payload = line.partition("\t")
        if not sep:
            raise FormatError(f"{name}:{lineno}: expected '<pseudonym>\\t<terms>'")
        try:
            terms = json.loads(payload)
        except json.JSONDecodeError as exc:
            raise FormatError(f"{name}:{lineno}: terms are not JSON: {exc}") from None
        if not isinstance(terms, list) or not all(isinstance(t, str) for t in terms):
            raise FormatError(f"{name}:{lineno}: terms must be a JSON array of strings")
        yield pseudonym, terms


# -- inverted indexes ----------------------------------------------------------------------

def encode_index(chunk_id: str, postings: Mapping[str, Sequence[str]]) -> bytes:
    """term -> sorted pseudonyms, written in term order."""
    return "".join(index_line(chunk_id, term, postings[term])
                   for term in sorted(postings)).encode("utf-8")


def index_line(chunk_id: str, term: str, pseudonyms: Sequence[str]) -> str:
    """An index's line: a term of the chunk and the pseudonyms of its lines holding it."""
    return f"{chunk_id}\t{_json_term(term)}\t{' '.join(pseudonyms)}\n"


def decode_index(data: bytes, chunk_id: str, name: str = "index") -> Iterator[tuple[str, list[str]]]:
    """(term, pseudonyms) lines of the index of ``chunk_id``."""
    for lineno, line in lines(data):
        fields = line.split("\t")
        if len(fields) != 3:
            raise FormatError(f"{name}:{lineno}: expected '<chunk>\\t<term>\\t<pseudonyms>'")
        if fields[0] != chunk_id:
            raise FormatError(f"{name}:{lineno}: line of chunk {fields[0]!r} in the index of "
                              f"{chunk_id!r}")
        try:
            term = json.loads(fields[1])
        except json.JSONDecodeError as exc:
            raise FormatError(f"{name}:{lineno}: term is not a JSON string: {exc}") from None
        if not isinstance(term, str):
            raise FormatError(f"{name}:{lineno}: term is not a JSON string")
        yield term, fields[2].split()


def build_index(subrecords: Iterable[tuple[str, Sequence[str]]]) -> dict[str, list[str]]:
    """The inverted index of a chunk, pseudonyms in the chunk's (sorted) order."""
    postings: dict[str, list[str]] = {}
    for pseudonym, terms in subrecords:
        for term in terms:
            postings.setdefault(term, []).append(pseudonym)
    return postings


def merge_chunk(old: bytes, added: bytes) -> bytes:
    """A chunk's file with lines added: both in pseudonym order, merged without decoding (every
    line starts with its pseudonym, all of one length, so byte order is pseudonym order)."""
    merged = sorted(old.split(b"\n")[:-1] + added.split(b"\n")[:-1])
    return b"\n".join(merged) + b"\n" if merged else b""


def chunk_pseudonyms(data: bytes) -> list[str]:
    """The pseudonyms of a chunk file, read off its lines without decoding their terms."""
    return [line[:PSEUDONYM_HEX].decode("ascii") for line in data.split(b"\n")[:-1]]


def chunk_without(data: bytes, pseudonyms: set[str]) -> bytes:
    """A chunk file without the lines of ``pseudonyms``, the others as they are."""
    gone = {p.encode("ascii") for p in pseudonyms}
    return b"".join(line + b"\n" for line in data.split(b"\n")[:-1]
                    if line[:PSEUDONYM_HEX] not in gone)


def index_without(data: bytes, chunk_id: str, pseudonyms: set[str]) -> bytes:
    """A chunk's inverted index without ``pseudonyms``; a term no line holds any more keeps
    no line."""
    kept = {}
    for term, names in decode_index(data, chunk_id):
        left = [p for p in names if p not in pseudonyms]
        if left:
            kept[term] = left
    return encode_index(chunk_id, kept)


def index_pairs(data: bytes) -> int:
    """The (subrecord, term) pairs a chunk's inverted index holds, counted in its bytes."""
    return sum(line.rsplit(b"\t", 1)[1].count(b" ") + 1 for line in data.split(b"\n")[:-1])


def merge_index(old: bytes, chunk_id: str, added: bytes) -> bytes:
    """A chunk's inverted index with the postings of ``added`` (the index of the lines added
    to it) merged in: the lines of the terms it does not name are kept as they are."""
    postings = dict(decode_index(added, chunk_id, "added index"))
    kept: dict[str, bytes] = {}
    for term, pseudonyms in decode_index(old, chunk_id):
        if term in postings:
            postings[term] = sorted([*pseudonyms, *postings[term]])
        else:
            kept[term] = index_line(chunk_id, term, pseudonyms).encode("utf-8")
    rewritten = encode_index(chunk_id, postings)
    lines_by_term = kept | {t: line + b"\n" for t, line in
                            zip(sorted(postings), rewritten.split(b"\n")[:-1])}
    return b"".join(lines_by_term[t] for t in sorted(lines_by_term))


# -- pseudonym maps (private, one file per cluster) ----------------------------------------

def encode_map_lines(chunk_id: str, pseudonyms: Sequence[str], positions: Sequence[int],
                     record_ids: Sequence[str] | None = None) -> bytes:
    """One chunk's rows of the map, given as columns: one %-format over them all, in C,
    rather than a format per line."""
    columns = [pseudonyms, positions]
    line = chunk_id.replace("%", "%%") + "\t%s\t%d\n"
    if record_ids is not None:
        columns.append(list(map(_json_term, record_ids)))
        line = line[:-1] + "\t%s\n"
    values: list = [None] * (len(columns) * len(pseudonyms))
    for at, column in enumerate(columns):
        values[at::len(columns)] = column
    return (line * len(pseudonyms) % tuple(values)).encode("utf-8")


def _map_rows(data: bytes, name: str) -> Iterator[list[str]]:
    for lineno, line in lines(data):
        fields = line.split("\t")
        if len(fields) not in (3, 4) or not fields[2].isdigit():
            raise FormatError(f"{name}:{lineno}: expected '<chunk>\\t<pseudonym>\\t<record>' "
                              "and, for a private chunk, '\\t<record id>'")
        yield fields


def decode_pseudonym_map(data: bytes, name: str = "pseudonyms") -> dict[str, dict[str, int]]:
    """chunk id -> pseudonym -> record position."""
    result: dict[str, dict[str, int]] = {}
    for fields in _map_rows(data, name):
        result.setdefault(fields[0], {})[fields[1]] = int(fields[2])
    return result


def _map_lines(data: bytes, chunks: Iterable[str], keep: bool) -> bytes:
    """The map's rows of ``chunks`` (``keep``) or all the others, as they are: one regular
    expression over the bytes, for a line apiece would be a million objects."""
    rows = re.compile(rb"^(?:%s)\t[^\n]*\n" % b"|".join(re.escape(c.encode("ascii"))
                                                        for c in chunks), re.MULTILINE)
    return b"".join(rows.findall(data)) if keep else rows.sub(b"", data)


def map_rows_at(data: bytes, positions: Iterable[int]) -> list[tuple[str, str, int]]:
    """(chunk id, pseudonym, position) of the map's rows at ``positions``, found in the bytes
    (an aggregated cluster's map holds a row for each of its subrecords): a few positions by
    one expression, many by a pass over the rows."""
    wanted = set(positions)
    if len(wanted) <= 64:
        alternatives = b"|".join(str(p).encode("ascii") for p in sorted(wanted))
        if not alternatives:
            return []
        rows = re.compile(rb"^([0-9a-f]+)\t([0-9a-f]+)\t(%s)(?=[\t\n])" % alternatives,
                          re.MULTILINE)
        found = rows.findall(data)
    else:
        found = [fields[:3] for fields in (line.split(b"\t", 3)
                                            for line in data.split(b"\n")[:-1])
                 if int(fields[2]) in wanted]
    return [(c.decode("ascii"), p.decode("ascii"), int(at)) for c, p, at in found]


def map_without_rows(data: bytes, pseudonyms: set[str]) -> bytes:
    """A pseudonym map without the rows of ``pseudonyms`` (each names one subrecord)."""
    if not pseudonyms:
        return data
    gone = {p.encode("ascii") for p in pseudonyms}
    return b"".join(line + b"\n" for line in data.split(b"\n")[:-1]
                    if line.split(b"\t", 2)[1] not in gone)


def map_without(data: bytes, chunks: set[str]) -> bytes:
    """A pseudonym map without the rows of ``chunks``, the others kept as they are."""
    return _map_lines(data, chunks, keep=False) if chunks else data


def decode_map_rows(data: bytes, name: str = "pseudonyms",
                    chunks: Iterable[str] | None = None) -> list[tuple]:
    """(chunk id, pseudonym, record position[, record id]) rows, as written; only those of
    ``chunks`` when given (a cluster's aggregated map can hold a million rows, of which an
    append needs its few private ones)."""
    if chunks is not None:
        data = _map_lines(data, chunks, keep=True)
    try:
        return [(c, p, int(record), *(json.loads(i) for i in rest))
                for c, p, record, *rest in _map_rows(data, name)]
    except json.JSONDecodeError as exc:
        raise FormatError(f"{name}: a record id is not a JSON string: {exc}") from None


# -- the term index (private, in parts of record positions) ---------------------------------

@dataclass(frozen=True)
class TermIndexFile:
    """One file of a term index: each term's serialized bitmap (a view into the file's bytes,
    not a copy) of index positions in ``range(start, stop)``.  A part's file has no
    ``records``; a shard of a version written before parts names the version's record count
    and its number among the version's shards."""
    start: int
    stop: int
    bitmaps: dict[str, memoryview]
    records: int | None = None
    shard: int = 0
    shards: int = 1


def term_part_names(start: int, stop: int) -> tuple[str, str]:
    """The bitmaps' and the order's file names of a part over ``[start, stop)``, relative to
    its home version's directory."""
    return (f"{TERM_PART_DIR}/{start}-{stop}.roaring", f"{TERM_PART_DIR}/{start}-{stop}.order")


def term_index_path(version: str, shard: int = 0) -> str:
    """A shard of an index written before parts."""
    return f"{version}/{term_index_name(shard)}"


def term_index_name(shard: int) -> str:
    return TERM_INDEX if shard == 0 else TERM_INDEX.replace(".", f".{shard}.", 1)


def _term_file(header: dict, bitmaps: list[tuple[str, bytes]]) -> bytes:
    header["terms"] = [[t, len(b)] for t, b in bitmaps]
    text = json.dumps(header, ensure_ascii=False, separators=(",", ":"))
    return b"".join([TERM_INDEX_MAGIC, text.encode("utf-8"), b"\n", *(b for _, b in bitmaps)])


def encode_term_part(bitmaps: Iterable[tuple[str, bytes]], start: int, stop: int) -> bytes:
    """A part's bitmaps file: (term, serialized bitmap of index positions in ``[start,
    stop)``) in term order."""
    return _term_file({"start": start, "stop": stop}, list(bitmaps))


def encode_term_index(records: int, bitmaps: Iterable[tuple[str, bytes]], shard: int = 0,
                      shards: int = 1, start: int = 0, stop: int | None = None) -> bytes:
    """A shard as versions before parts wrote it (the writer no longer does: kept to describe,
    and to test, what old stores hold)."""
    return _term_file({"records": records, "shard": shard, "shards": shards, "start": start,
                       "stop": records if stop is None else stop}, list(bitmaps))


def decode_term_index(data: bytes, name: str = TERM_INDEX) -> TermIndexFile:
    """A part's bitmaps file or an old shard, as stored; a reader deserializes only the terms
    it is asked about."""
    check_magic(data, TERM_INDEX_MAGIC, name, "a term index")
    end = data.find(b"\n", len(TERM_INDEX_MAGIC))
    if end < 0:
        raise FormatError(f"{name}: not a term index (no header line)")
    view, offset, found = memoryview(data), end + 1, {}
    try:
        header = json.loads(data[len(TERM_INDEX_MAGIC):end].decode("utf-8"))
        records = int(header["records"]) if "records" in header else None
        shard, shards = int(header.get("shard", 0)), int(header.get("shards", 1))
        start = int(header.get("start", 0))
        stop = int(header["stop"] if "stop" in header else header["records"])
        for term, size in header["terms"]:
            found[str(term)] = view[offset:offset + size]
            offset += size
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise FormatError(f"{name}: unreadable header: {exc}") from None
    if offset != len(data):
        raise FormatError(f"{name}: the header's sizes do not add up to the file's")
    if not 0 <= shard < shards or not 0 <= start <= stop or \
            (records is not None and stop > records):
        raise FormatError(f"{name}: shard {shard} of {shards} over positions {start}..{stop}"
                          f"{'' if records is None else f' of {records} records'} is impossible")
    return TermIndexFile(start, stop, found, records, shard, shards)


def term_order_path(version: str) -> str:
    """The order of an index written before parts."""
    return f"{version}/{TERM_ORDER}"


def encode_term_order(positions: np.ndarray) -> bytes:
    """``positions``: the record position at each index position."""
    return TERM_ORDER_MAGIC + np.asarray(positions, dtype="<u4").tobytes()


def decode_term_order(data: bytes, records: int, name: str = TERM_ORDER) -> np.ndarray:
    """The record position at each of ``records`` index positions (a read-only view into
    ``data``); that it numbers each record of its range once is the audit's to check."""
    check_magic(data, TERM_ORDER_MAGIC, name, "an index order")
    body = memoryview(data)[len(TERM_ORDER_MAGIC):]
    if len(body) != 4 * records:
        raise FormatError(f"{name}: {len(body)} bytes for {records} records (4 each)")
    return np.frombuffer(body, dtype="<u4")


# -- manifests -----------------------------------------------------------------------------

def records_name(start: int) -> str:
    """The file of the segment of record ids that starts at ``start``."""
    return RECORDS if start == 0 else f"records.{start}.jsonl"


def record_keys_name(start: int) -> str:
    """The sorted 64-bit keys of that segment's record ids (what an append checks new ids
    against without reading the ids)."""
    return f"records.{start}.keys"


RECORD_KEYS_MAGIC = b"cocktail-record-keys/1\n"


def encode_record_keys(keys: np.ndarray) -> bytes:
    return RECORD_KEYS_MAGIC + np.sort(np.asarray(keys, dtype="<u8")).tobytes()


def decode_record_keys(data: bytes, name: str) -> np.ndarray:
    check_magic(data, RECORD_KEYS_MAGIC, name, "a file of record keys")
    if (len(data) - len(RECORD_KEYS_MAGIC)) % 8:
        raise FormatError(f"{name}: not a file of record keys")
    return np.frombuffer(memoryview(data)[len(RECORD_KEYS_MAGIC):], dtype="<u8")


def decode_records(data: bytes, name: str) -> list[list]:
    """``[record id, leaf cluster]`` per line of a segment of records.jsonl."""
    try:
        return [json.loads(line) for _, line in lines(data)]
    except json.JSONDecodeError as exc:
        raise FormatError(f"{name}: not a line of [record id, cluster]: {exc}") from None


def encode_records(ids: Sequence[str], clusters: Sequence[int]) -> bytes:
    """records.jsonl: ``[record id, leaf cluster]`` per record position (of a segment)."""
    quote = json.encoder.encode_basestring  # json.dumps of a str, in C, without the overhead
    return "".join(f"[{quote(rid)}, {cluster}]\n"
                   for rid, cluster in zip(ids, clusters)).encode("utf-8")


def encode_json(obj: object, *, compact: bool = False) -> bytes:
    """Indented for people; ``compact`` for files only programs read, where a million-line
    indented document would cost its writer several times the memory.  Strict JSON: a NaN
    fails here, before the commit, rather than in every later reader."""
    if compact:
        text = json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"),
                          allow_nan=False)
    else:
        text = json.dumps(obj, indent=1, ensure_ascii=False, sort_keys=True, allow_nan=False)
    return (text + "\n").encode("utf-8")


def encode_manifest(head: dict, entries: Iterable[bytes], listed: bool) -> Iterator[bytes]:
    """A manifest, in pieces: ``head``'s fields on the first line, then ``chunks`` last with
    one compact entry per line (``listed``: a JSON array, the public manifest's; else an
    object keyed by chunk id, the private one's), so that an append carries the lines of the
    chunks it leaves alone as bytes, without parsing them.  The whole is one JSON document."""
    text = json.dumps(head, ensure_ascii=False, sort_keys=True, separators=(",", ":"),
                      allow_nan=False)
    opening, closing = (b"[", b"]") if listed else (b"{", b"}")
    yield text[:-1].encode("utf-8") + b',"chunks":' + opening
    separator = b"\n"
    for entry in entries:
        yield separator + entry
        separator = b",\n"
    yield b"\n" + closing + b"}\n"


def split_manifest(data: bytes, name: str) -> tuple[dict, list[bytes]]:
    """A manifest's head (every field but ``chunks``) and its chunk entries, one line each.
    A manifest of the first format, one indented document, has its entries re-encoded; one of
    a format this version does not read is refused (:class:`UnknownFormat`)."""
    first, _, rest = data.partition(b"\n")
    try:
        head = json.loads(first[:-len(b',"chunks":{')] + b"}")
    except (UnicodeDecodeError, json.JSONDecodeError):
        head = None
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        whole = decode_json(data, name)
        check_format(whole.get("format"), name)
        chunks = whole.pop("chunks", [])
        if isinstance(chunks, list):
            return whole, [chunk_line(c) for c in chunks]
        return whole, [chunk_line(entry, chunk_id) for chunk_id, entry in chunks.items()]
    del data
    entries = rest.split(b",\n")
    entries[-1] = entries[-1][:-len(b"\n}}\n")]
    return head, entries if entries[-1] else []


def chunk_line(entry: dict, chunk_id: str | None = None) -> bytes:
    """One chunk entry as its manifest line: a public one (with its ``id``), or, with
    ``chunk_id``, a private one keyed by it."""
    text = json.dumps(entry, ensure_ascii=False, sort_keys=True, separators=(",", ":"),
                      allow_nan=False)
    return (text if chunk_id is None else f'"{chunk_id}":{text}').encode("utf-8")


def line_chunk_id(line: bytes) -> str:
    """The chunk id of a manifest line, read without parsing it: a private line starts with
    it, a public one holds it as its ``id``."""
    if line.startswith(b'"'):
        return line[1:1 + CHUNK_ID_HEX].decode("ascii")
    at = line.index(b'"id":"') + 6
    return line[at:at + CHUNK_ID_HEX].decode("ascii")


def line_unit(line: bytes) -> int:
    """The unit of a private manifest line, read without parsing it (its last field)."""
    return int(line.rsplit(b'"unit":', 1)[1].rstrip(b"}"))


def spliced(lines: Sequence[bytes], drop: Collection[str], add: Iterable[bytes]
            ) -> list[bytes]:
    """``lines`` (sorted by chunk id) without the entries of the chunks ``drop`` names and
    with the lines ``add``, still sorted.  Each change is found by bisection and the lines
    between changes are copied as slices, so the work follows what changes, not how many
    lines there are."""
    cuts = []  # (where, where the old lines resume, chunk id, line to insert or None)
    for chunk_id in drop:
        at = bisect_left(lines, chunk_id, key=line_chunk_id)
        if at < len(lines) and line_chunk_id(lines[at]) == chunk_id:
            cuts.append((at, at + 1, chunk_id, None))
    for line in add:
        chunk_id = line_chunk_id(line)
        at = bisect_left(lines, chunk_id, key=line_chunk_id)
        cuts.append((at, at, chunk_id, line))
    out: list[bytes] = []
    start = 0
    for at, resume, _, line in sorted(cuts, key=lambda cut: cut[:3]):
        out += lines[start:at]
        if line is not None:
            out.append(line)
        start = max(start, at, resume)
    out += lines[start:]
    return out


def with_home(line: bytes, home: str) -> bytes:
    """A manifest line carried into a later version: it names ``home`` (the version whose
    directory holds the chunk's files) unless it names one already.  Keys are sorted, and
    ``home`` sorts first."""
    at = line.index(b"{") + 1
    if line.startswith(b'"home":', at):
        return line
    return line[:at] + b'"home":"' + home.encode("ascii") + b'",' + line[at:]


def line_entry(line: bytes) -> tuple[str, dict]:
    """(chunk id, entry) of a private manifest line."""
    return line_chunk_id(line), json.loads(line[CHUNK_ID_HEX + 3:])


def encode_superseded(files: Iterable[tuple[str, str]]) -> bytes:
    """superseded.json: the files of earlier versions that the version before this one
    referenced and this one does not, by zone (what pruning that version deletes)."""
    zones: dict[str, list[str]] = {"private": [], "public": []}
    for zone, path in files:
        zones[zone].append(path)
    return encode_json({zone: sorted(set(paths)) for zone, paths in zones.items()})


def decode_json(data: bytes, name: str) -> dict:
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FormatError(f"{name}: not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise FormatError(f"{name}: expected a JSON object")
    return obj
