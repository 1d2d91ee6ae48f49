"""On-disk format of a publication: file names and line codecs.

This is the only code the independent auditor shares with the publisher: it parses files, it
decides nothing.  docs/publication-format.md describes the same layout for people.

Chunk file (one line per subrecord, ordered by pseudonym)::

    <pseudonym> TAB <JSON array of the subrecord's terms, sorted>

Inverted index (one line per term, ordered by term)::

    <JSON string: term> TAB <pseudonyms containing it, sorted, space separated>

JSON keeps any term (tabs, spaces, non-ASCII) on one line while staying readable by the
standard-library streaming scripts in mappers/.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence

FORMAT = "cocktail-publication/1"
POINTER = "CURRENT"
MANIFEST = "manifest.json"
CHUNK_DIR = "chunks"
INDEX_DIR = "index"
PSEUDONYM_DIR = "pseudonyms"
RECORDS = "records.jsonl"
STAGING_PREFIX = ".staging-"

PSEUDONYM_HEX = 20
CHUNK_ID_HEX = 16
VERSION_RE = re.compile(r"^v\d{6}$")
CHUNK_ID_RE = re.compile(rf"^[0-9a-f]{{{CHUNK_ID_HEX}}}$")
PSEUDONYM_RE = re.compile(rf"^[0-9a-f]{{{PSEUDONYM_HEX}}}$")


class FormatError(ValueError):
    """A publication file does not follow the format."""


def version_name(number: int) -> str:
    return f"v{number:06d}"


def chunk_path(version: str, chunk_id: str) -> str:
    return f"{version}/{CHUNK_DIR}/{chunk_id}.tsv"


def index_path(version: str, chunk_id: str) -> str:
    return f"{version}/{INDEX_DIR}/{chunk_id}.tsv"


def pseudonym_map_path(version: str, chunk_id: str) -> str:
    return f"{version}/{PSEUDONYM_DIR}/{chunk_id}.tsv"


def manifest_path(version: str) -> str:
    return f"{version}/{MANIFEST}"


# -- chunk files ---------------------------------------------------------------------------

def encode_chunk(subrecords: Iterable[tuple[str, Sequence[str]]]) -> bytes:
    """Subrecords as (pseudonym, sorted terms), already ordered by pseudonym."""
    return "".join(
        f"{p}\t{json.dumps(list(terms), ensure_ascii=False)}\n" for p, terms in subrecords
    ).encode("utf-8")


def decode_chunk(data: bytes, name: str = "chunk") -> Iterator[tuple[str, list[str]]]:
    for lineno, line in enumerate(data.decode("utf-8").splitlines(), 1):
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

def encode_index(postings: Mapping[str, Sequence[str]]) -> bytes:
    """term -> sorted pseudonyms, written in term order."""
    return "".join(
        f"{json.dumps(term, ensure_ascii=False)}\t{' '.join(postings[term])}\n"
        for term in sorted(postings)
    ).encode("utf-8")


def decode_index(data: bytes, name: str = "index") -> Iterator[tuple[str, list[str]]]:
    for lineno, line in enumerate(data.decode("utf-8").splitlines(), 1):
        head, sep, tail = line.partition("\t")
        if not sep:
            raise FormatError(f"{name}:{lineno}: expected '<term>\\t<pseudonyms>'")
        try:
            term = json.loads(head)
        except json.JSONDecodeError as exc:
            raise FormatError(f"{name}:{lineno}: term is not a JSON string: {exc}") from None
        if not isinstance(term, str):
            raise FormatError(f"{name}:{lineno}: term is not a JSON string")
        yield term, tail.split()


def build_index(subrecords: Iterable[tuple[str, Sequence[str]]]) -> dict[str, list[str]]:
    """The inverted index of a chunk, pseudonyms in the chunk's (sorted) order."""
    postings: dict[str, list[str]] = {}
    for pseudonym, terms in subrecords:
        for term in terms:
            postings.setdefault(term, []).append(pseudonym)
    return postings


# -- pseudonym maps (private) --------------------------------------------------------------

def encode_pseudonym_map(pairs: Iterable[tuple[str, int]]) -> bytes:
    return "".join(f"{p}\t{record}\n" for p, record in pairs).encode("ascii")


def decode_pseudonym_map(data: bytes, name: str = "pseudonyms") -> dict[str, int]:
    result: dict[str, int] = {}
    for lineno, line in enumerate(data.decode("ascii").splitlines(), 1):
        pseudonym, sep, record = line.partition("\t")
        if not sep or not record.isdigit():
            raise FormatError(f"{name}:{lineno}: expected '<pseudonym>\\t<record index>'")
        result[pseudonym] = int(record)
    return result


# -- manifests -----------------------------------------------------------------------------

def encode_json(obj: object) -> bytes:
    return (json.dumps(obj, indent=1, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")


def decode_json(data: bytes, name: str) -> dict:
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FormatError(f"{name}: not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise FormatError(f"{name}: expected a JSON object")
    return obj
