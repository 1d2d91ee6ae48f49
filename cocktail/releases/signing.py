"""Signed publications: who vouches for each version's public view, hop by hop.

Every version of a basket publication (an owner's publish or append, a re-sharer's
``republish``, a hop of an owner's planned chain) is committed with ``<version>/signature.json``
in the public zone, beside the manifest it signs; the manifest stays as it is.  The signed
statement names the version and the SHA-256 of the manifest's exact bytes, and the manifest
lists every chunk's and index's SHA-256, so one signature covers the whole public view.

Ed25519 through ``cryptography`` (nothing hand-rolled).  A store's key is made by its first
signed commit and kept in its private zone, ``signing.key`` (PKCS#8 PEM), owner-only like every
private file; it also tags the ledger's backups (``cocktail.dp.ledger``).  A re-share is
signed with the *recipient* store's key, over a statement that also names what it received (the
source's version, manifest hash, signer and signature), and its file carries the source's hops
before its own: a recipient checks every hop back to the origin from that one file, and pins the
origin's key (``--trust-key``) to know it is the owner's.  docs/publication-format.md gives the
format, docs/propagation.md what it proves and what not.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .. import chunkformat as fmt
from ..store import Store, StoreError, ZoneReader
from .commit import Release

FORMAT = "cocktail-signature/1"
KEY_FILE = "signing.key"
# Domain separation: the key signs these statements and nothing else could be replayed as one.
CONTEXT = FORMAT.encode() + b"\n"
FINGERPRINT_RE = re.compile(r"^ed25519:[0-9a-f]{64}$")


class SignatureError(StoreError):
    """A version's signature is broken, does not cover its manifest, or is not from the
    pinned key: the view is not what its signer published (exit status 2, bad input)."""


def fingerprint(key: Ed25519PublicKey) -> str:
    """``ed25519:`` and the SHA-256 of the raw public key: what users compare out of band."""
    return "ed25519:" + hashlib.sha256(_raw(key)).hexdigest()


def _raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def stored_key(store: Store) -> Ed25519PrivateKey | None:
    """The store's signing key, or None before its first use."""
    if not store.exists("private", KEY_FILE):
        return None
    key = serialization.load_pem_private_key(store.read("private", KEY_FILE), None)
    if not isinstance(key, Ed25519PrivateKey):
        raise StoreError(f"{store.url}: private/{KEY_FILE} is not an Ed25519 key")
    return key


def signing_key(store: Store) -> Ed25519PrivateKey:
    """The store's signing key, made on first use; it never leaves the private zone."""
    key = stored_key(store)
    if key is not None:
        return key
    key = Ed25519PrivateKey.generate()
    store.write("private", KEY_FILE, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()), pri_label=True)
    return key


def public_pem(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)


def trusted_fingerprint(given: str) -> str:
    """What ``--trust-key`` names: a fingerprint, or a file holding one or a PEM public key."""
    if FINGERPRINT_RE.match(given.strip()):
        return given.strip()
    path = Path(given)
    if not path.is_file():
        raise ValueError(f"--trust-key {given!r} is neither a fingerprint (ed25519: and 64 hex "
                         "digits) nor a file")
    data = path.read_bytes()
    if data.lstrip().startswith(b"-----BEGIN"):
        try:
            key = serialization.load_pem_public_key(data)
        except ValueError as exc:
            raise ValueError(f"--trust-key {given}: not a PEM public key ({exc})") from None
        if not isinstance(key, Ed25519PublicKey):
            raise ValueError(f"--trust-key {given}: not an Ed25519 public key")
        return fingerprint(key)
    text = data.decode("utf-8", "replace").strip()
    if not FINGERPRINT_RE.match(text):
        raise ValueError(f"--trust-key {given}: holds neither a fingerprint nor a PEM public key")
    return text


def _message(statement: dict) -> bytes:
    return CONTEXT + json.dumps(statement, sort_keys=True, separators=(",", ":"),
                                ensure_ascii=True).encode()


@dataclass(frozen=True)
class Provenance:
    """What a version's signature file says, once checked: ``status`` signed, unsigned or
    invalid; ``hops`` its signers' entries, the origin first, this version's signer last."""

    status: str
    version: str
    manifest_sha256: str
    hops: tuple[dict, ...] = ()
    trusted: bool | None = None  # the origin is the pinned key; None: nothing pinned
    detail: str = ""

    @property
    def signers(self) -> list[str]:
        return [hop["signer"] for hop in self.hops]

    @property
    def origin_signed(self) -> bool:
        """The first signer received nothing: it is the origin (an owner), not a re-sharer of
        an unsigned view."""
        return bool(self.hops) and self.hops[0]["statement"]["received"] is None

    def received(self) -> dict:
        """How a view derived from this version names its source in its own statement."""
        last = self.hops[-1] if self.status == "signed" else {}
        return {"version": self.version, "manifest_sha256": self.manifest_sha256,
                "signer": last.get("signer"), "signature": last.get("signature")}

    def as_dict(self) -> dict:
        return {"status": self.status, "version": self.version,
                "manifest_sha256": self.manifest_sha256,
                "signer": self.signers[-1] if self.hops else None,
                "origin": self.signers[0] if self.hops else None,
                "origin_signed": self.origin_signed, "signers": self.signers,
                "trusted": self.trusted, "detail": self.detail}


def sign(release: Release, key: Ed25519PrivateKey, source: Provenance | None = None) -> str:
    """Sign the public manifest ``release`` has staged, as received from ``source`` (a
    re-share) or as an origin; stage the signature file.  Returns the signer's fingerprint."""
    statement = {"version": release.version,
                 "manifest_sha256": release.staged_sha256("public", fmt.MANIFEST),
                 "received": source.received() if source else None}
    public = key.public_key()
    hop = {"algorithm": "ed25519", "public_key": _raw(public).hex(),
           "signer": fingerprint(public), "statement": statement,
           "signature": key.sign(_message(statement)).hex()}
    hops = [*(source.hops if source and source.status == "signed" else ()), hop]
    release.put("public", fmt.SIGNATURE, fmt.encode_json({"format": FORMAT, "hops": hops}))
    return hop["signer"]


def verify(zone: ZoneReader, version: str, manifest: bytes,
           trust: str | None = None) -> Provenance:
    """Check ``version``'s signature file against the manifest bytes: every hop's signature
    under its own key, each hop naming the hop before as what it received, the last one
    covering this manifest, and the origin the ``trust`` fingerprint when one is pinned.
    A version without the file is ``unsigned`` (refused when a key is pinned); anything
    else wrong raises :class:`SignatureError`."""
    digest = hashlib.sha256(manifest).hexdigest()
    where = f"{zone.url}: {fmt.signature_path(version)}"
    if not zone.exists(fmt.signature_path(version)):
        if trust:
            raise SignatureError(f"{where} is missing: {version} is unsigned, so nothing shows "
                                 f"it came from the pinned key {trust}")
        return Provenance("unsigned", version, digest)
    try:
        document = fmt.decode_json(zone.read(fmt.signature_path(version)), where)
        hops = document["hops"]
        if isinstance(document.get("format"), str) and \
                document["format"].startswith("cocktail-signature/"):
            fmt.check_format(document["format"], where, (FORMAT,))  # a newer one's: say so
        if document.get("format") != FORMAT or not isinstance(hops, list) or not hops:
            raise SignatureError(f"{where}: not a {FORMAT} file with at least one hop")
        before = None
        for number, hop in enumerate(hops, start=1):
            _check_hop(hop, before, f"{where}: hop {number} ({hop.get('signer')})")
            before = hop
        last = hops[-1]["statement"]
    except fmt.UnknownFormat as exc:
        raise SignatureError(str(exc)) from None
    except (fmt.FormatError, KeyError, TypeError, AttributeError) as exc:
        raise SignatureError(f"{where}: malformed ({exc!r})") from None
    if last["version"] != version or last["manifest_sha256"] != digest:
        raise SignatureError(f"{where}: the manifest of {version} is not what "
                             f"{hops[-1]['signer']} signed (signed {last['version']} with "
                             f"sha256 {last['manifest_sha256']}; it now hashes to {digest}): "
                             "the view was altered after it was signed")
    trusted = None
    if trust:
        trusted = hops[0]["signer"] == trust
        if not trusted:
            raise SignatureError(f"{where}: the chain starts at {hops[0]['signer']}, not at the "
                                 f"pinned key {trust}")
    return Provenance("signed", version, digest, tuple(hops), trusted)


def _check_hop(hop: dict, before: dict | None, where: str) -> None:
    if hop["algorithm"] != "ed25519":
        raise SignatureError(f"{where}: algorithm {hop['algorithm']!r}, only ed25519 is known")
    try:
        key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(hop["public_key"]))
        key.verify(bytes.fromhex(hop["signature"]), _message(hop["statement"]))
    except (ValueError, InvalidSignature):
        raise SignatureError(f"{where}: the signature does not verify under its key") from None
    if fingerprint(key) != hop["signer"]:
        raise SignatureError(f"{where}: the key's fingerprint is {fingerprint(key)}")
    received = hop["statement"]["received"]
    if before is None:
        if received is not None and received.get("signature") is not None:
            raise SignatureError(f"{where}: names a signed source whose hop the file lacks")
        return
    link = {"version": before["statement"]["version"],
            "manifest_sha256": before["statement"]["manifest_sha256"],
            "signer": before["signer"], "signature": before["signature"]}
    if received != link:
        raise SignatureError(f"{where}: did not receive the view the hop before signed")
