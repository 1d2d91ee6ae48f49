"""A stricter public view derived from a public view alone: the re-sharing hop of a chain.

The recipient of a publication (the public-cloud tenant, say) passes it to a third party at a
stricter (k', m'), k' ≥ k and m' ≥ m, with no access to the owner's data.  The only safe
operations on a public view are splitting a chunk's term set and withholding terms: inside a
part every support is the chunk's own, so a part is k'^m'-anonymous when its own itemsets
are — which the partitioner decides, on each source chunk's subrecords as if they were a
cluster.  Merging anything would raise supports, which needs the owner.  The result is nested
in its source by construction (every new chunk a projection of one source chunk); rows get
fresh pseudonyms under a new key and are sorted by them, and files are written in random
order with one common time, so nothing links a new row or chunk to the source's beyond its
content.  The derived store keeps no private data: its private zone records the source only
(and the re-sharer's signing key).

The source is not taken on the sender's word: before anything is derived, the independent
verifier passes it at its own (k, m) and its signature is checked (from the pinned key, when
one is given); an unsigned source is refused unless allowed.  The derived version is signed
with the recipient store's own key, over a statement naming what it received, after the
source's chain of signers (:mod:`..releases.signing`).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from .. import chunkformat as fmt
from .. import releases
from ..anonymity import partition
from ..audit import verified_view
from ..releases import signing
from ..releases.layout import DERIVED, Refused, is_derived
from ..store import Store
from .writer import ChunkMembers, build_drawn


@dataclass
class RepublishReport:
    source: str
    source_version: str
    store: str
    version: str
    k: int
    m: int
    source_chunks: int
    public_chunks: int
    withheld_terms: int       # (chunk, term) pairs of the source left out
    public_occurrences: int   # (subrecord, term) pairs shown, of the source's
    source_occurrences: int
    source_signature: dict    # the source's signature, as checked (signers, origin, pinned)
    signer: str               # who signed the derived version: this store's key
    seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def republish(source: Store, target: Store, k: int, m: int, method: str = "improved",
              trust: str | None = None, allow_unsigned: bool = False) -> RepublishReport:
    """``trust``: the fingerprint the source's chain of signers must start from (the owner's);
    ``allow_unsigned``: re-share a source that carries no signature."""
    started = time.perf_counter()
    if source.url == target.url:
        raise Refused(f"{source.url} is both the source and the recipient: re-share to another "
                      "store")
    version, manifest, chunks, provenance = verified_view(source, trust, allow_unsigned)
    if k < manifest["k"] or m < manifest["m"]:
        raise ValueError(f"a re-share must be at least as strict as its source (k={manifest['k']},"
                         f" m={manifest['m']}); k={k}, m={m} is laxer; nothing written")
    parts, withheld = [], 0
    for _, terms, rows in sorted(chunks, key=lambda c: sorted(c[1])):
        split = partition(method, [frozenset(sub) for _, sub in rows], k, m)
        withheld += len(split.private)
        for part in split.public:
            members = [(name, sorted(part.intersection(sub))) for name, sub in rows
                       if part.intersection(sub)]
            parts.append(members)
    new_version = write_view(target, parts, k, m, {
        "source": source.url, "source_version": version, "source_k": manifest["k"],
        "source_m": manifest["m"]}, source=provenance)
    return RepublishReport(
        source.url, version, target.url, new_version, k, m, len(chunks), len(parts), withheld,
        sum(len(sub) for members in parts for _, sub in members),
        sum(len(sub) for _, _, rows in chunks for _, sub in rows), provenance.as_dict(),
        signing.fingerprint(signing.signing_key(target).public_key()),
        round(time.perf_counter() - started, 3))


def write_view(store: Store, parts: Sequence[Sequence[tuple[str, list[str]]]], k: int, m: int,
               derived: dict, signer: Store | None = None,
               source: signing.Provenance | None = None) -> str:
    """Commit chunks of (source row name, subrecord) as a public-only version: fresh random
    chunk ids, pseudonyms under a fresh key, files in random order with one common time;
    signed with the key of ``signer`` (the store itself by default), as derived from
    ``source``."""
    key = secrets.token_bytes(32)
    with releases.begin(store) as out:
        if out.current is not None and not is_derived(store, out.current):
            raise Refused(f"{store.url} holds an owner's publication: a re-share goes to a "
                          "store of its own, and this one would lose its publication")
        entries = []
        chunks = [ChunkMembers.of([(name, n, sub) for n, (name, sub) in enumerate(members)])
                  for members in parts]
        drawn = build_drawn(key, chunks, lambda *_: secrets.token_hex(fmt.CHUNK_ID_HEX // 2))
        for members, built in zip(parts, drawn):
            for name, data in built.files():
                out.put("public", name, data)
            entries.append({"id": built.chunk_id, "priLabel": False, "subrecords": len(members),
                            "terms": len({t for _, sub in members for t in sub}),
                            "sha256": built.sha256})
        manifest = {"format": fmt.FORMAT, "version": out.version, "created": out.created,
                    "k": k, "m": m, "chunks": sorted(entries, key=lambda e: e["id"])}
        out.put("public", fmt.MANIFEST, fmt.encode_json(manifest))
        signing.sign(out, signing.signing_key(signer or store), source)
        out.put("private", DERIVED, fmt.encode_json(derived))
        out.commit({"kind": "derived", "created": out.created, "k": k, "m": m, **derived}, None)
    return out.version
