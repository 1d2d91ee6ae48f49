"""Signed publications: a re-share does not take the sender's word for its source.

A sender who edits a public chunk and recomputes the manifest's sha256s (so every checksum
holds) gets nothing past `republish`, `audit` or `audit --chain`: the signature no longer
covers the manifest, and the independent verifier finds the chunk is not k^m-anonymous.  A
view signed by another key than the pinned one is refused; an honest chain verifies hop by
hop back to the owner; an append's version is signed by the owner's key too."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from cocktail import chunkformat as fmt
from cocktail.cli import main
from cocktail.releases import prune, signing
from cocktail.store import LocalStore

RUN = CliRunner()


def cli(*args: str) -> tuple[int, dict]:
    """Exit status and the one JSON object the command printed, whatever the outcome."""
    result = RUN.invoke(main, [*args, "--json"])
    return result.exit_code, json.loads(result.output)


@pytest.fixture(scope="module")
def owner(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("signing")
    data = root / "d.dat"
    assert RUN.invoke(main, ["generate", str(data), "--records", "2000", "--seed", "3"]
                      ).exit_code == 0
    assert cli("publish", str(data), "--store", str(root / "s1"), "--k", "5", "--m", "2")[0] == 0
    assert cli("signing-key", "--store", str(root / "s1"), "--out", str(root / "owner.pem")
               )[0] == 0
    return root


def owner_fingerprint(root: Path) -> str:
    return cli("signing-key", "--store", str(root / "s1"))[1]["fingerprint"]


def copy(root: Path, name: str, into: str) -> Path:
    shutil.copytree(root / name, root / into)
    return root / into


def current(store: Path) -> str:
    return (store / "public" / fmt.POINTER).read_text().strip()


def tamper(store: Path) -> str:
    """What a hostile sender does: add a row holding a term no one else has to a public chunk
    (so it is no longer k^m-anonymous), rebuild its index, and recompute every sha256 the
    manifest lists.  Returns the chunk id."""
    version = current(store)
    public = LocalStore(store).zone("public")
    head, lines = fmt.split_manifest(public.read(fmt.manifest_path(version)), "manifest")
    entries = [json.loads(line) for line in lines]
    entry = entries[0]
    home = entry.get("home", version)
    chunk = store / "public" / fmt.chunk_path(home, entry["id"])
    rows = list(fmt.decode_chunk(chunk.read_bytes()))
    rows.append(("f" * fmt.PSEUDONYM_HEX, ["zz-victim-only"]))  # the largest pseudonym: in order
    chunk.write_bytes(fmt.encode_chunk(rows))
    index = store / "public" / fmt.index_path(home, entry["id"])
    index.write_bytes(fmt.encode_index(entry["id"], fmt.build_index(rows)))
    entry["subrecords"] += 1
    entry["sha256"] = {"chunk": hashlib.sha256(chunk.read_bytes()).hexdigest(),
                       "index": hashlib.sha256(index.read_bytes()).hexdigest()}
    manifest = b"".join(fmt.encode_manifest(head, map(fmt.chunk_line, entries), listed=True))
    (store / "public" / fmt.manifest_path(version)).write_bytes(manifest)
    return entry["id"]


def resign(store: Path, key_store: Path, sha256: str | None = None) -> None:
    """The sender also signs the tampered manifest with a key of its own: self-consistent
    (or, given ``sha256``, signs that digest as the manifest's)."""
    version = current(store)
    manifest = (store / "public" / fmt.manifest_path(version)).read_bytes()

    class Staged:  # what signing.sign reads of a release, and where it puts the signature
        def __init__(self) -> None:
            self.version, self.files = version, {}

        def staged_sha256(self, zone: str, name: str) -> str:
            return sha256 or hashlib.sha256(manifest).hexdigest()

        def put(self, zone: str, name: str, data: bytes) -> None:
            self.files[name] = data

    staged = Staged()
    signing.sign(staged, signing.signing_key(LocalStore(key_store)))
    (store / "public" / fmt.signature_path(version)).write_bytes(staged.files[fmt.SIGNATURE])


def kinds(body: dict) -> set[str]:
    return {v["kind"] for v in body["violations"]}


def test_a_store_is_signed_by_a_key_in_its_private_zone(owner):
    key = owner / "s1" / "private" / signing.KEY_FILE
    assert key.stat().st_mode & 0o077 == 0  # the owner's alone, like every private file
    code, body = cli("audit", "--store", str(owner / "s1"), "--trust-key", str(owner / "owner.pem"))
    assert code == 0 and body["ok"]
    signature = body["signature"]
    assert signature["status"] == "signed" and signature["trusted"] is True
    assert signature["signer"] == signature["origin"] == owner_fingerprint(owner)
    # the public key is published beside the manifest; the private key is not
    published = (owner / "s1" / "public" / fmt.signature_path(current(owner / "s1"))).read_text()
    assert owner_fingerprint(owner) in published and "PRIVATE" not in published


def test_an_unpinned_audit_says_how_to_pin_the_owners_key(owner):
    result = RUN.invoke(main, ["audit", "--store", str(owner / "s1")])
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stdout.splitlines() if "not pinned" in line)
    assert "`cocktail signing-key`" in line
    assert f"--trust-key {owner_fingerprint(owner)}" in line


def test_a_rehashed_tampered_view_is_refused_by_republish_and_audit(owner):
    forged = copy(owner, "s1", "forged")
    tamper(forged)
    code, body = cli("republish", "--from", str(forged), "--to", str(owner / "never"),
                     "--k", "10", "--m", "2")
    assert code == 2 and "fails verification" in body["error"]
    assert "signature" in body["error"] and "km-anonymity" in body["error"]
    assert not (owner / "never").exists()  # nothing written, not even a key
    code, body = cli("audit", "--store", str(forged))
    assert code == 1 and not body["ok"]
    assert {"signature", "km-anonymity"} <= kinds(body)
    assert body["signature"]["status"] == "invalid"
    assert "altered after it was signed" in body["signature"]["detail"]


def test_a_tampered_view_signed_again_by_the_sender_is_still_refused(owner):
    forged = copy(owner, "s1", "resigned")
    tamper(forged)
    resign(forged, owner / "sender-keys")
    # Self-consistent without a pin: the signature verifies, the verifier does not.
    code, body = cli("audit", "--store", str(forged))
    assert code == 1 and kinds(body) == {"km-anonymity"}
    assert body["signature"]["status"] == "signed"
    assert body["signature"]["origin"] != owner_fingerprint(owner)
    code, body = cli("republish", "--from", str(forged), "--to", str(owner / "never2"),
                     "--k", "10", "--m", "2")
    assert code == 2 and "km-anonymity" in body["error"]
    # Pinned: the chain does not start at the owner.
    code, body = cli("audit", "--store", str(forged), "--trust-key", owner_fingerprint(owner))
    assert code == 1 and "not at the pinned key" in body["signature"]["detail"]


def test_a_view_signed_by_another_key_than_the_pinned_one_is_refused(owner):
    data = owner / "d.dat"
    other = owner / "other-owner"
    assert cli("publish", str(data), "--store", str(other), "--k", "5", "--m", "2")[0] == 0
    pin = str(owner / "owner.pem")
    code, body = cli("republish", "--from", str(other), "--to", str(owner / "never3"),
                     "--k", "10", "--m", "2", "--trust-key", pin)
    assert code == 2 and "not at the pinned key" in body["error"]
    assert not (owner / "never3").exists()
    code, body = cli("audit", "--store", str(other), "--trust-key", pin)
    assert code == 1 and kinds(body) == {"signature"}  # k^m-anonymous, but not the owner's
    code, body = cli("audit", "--chain", str(other), "--trust-key", pin)
    assert code == 1 and not body["hops"][0]["ok"]
    # Without the pin the same view is sound, and its origin is reported for comparison.
    code, body = cli("republish", "--from", str(other), "--to", str(owner / "from-other"),
                     "--k", "10", "--m", "2")
    assert code == 0 and body["source_signature"]["trusted"] is None
    assert body["source_signature"]["origin"] != owner_fingerprint(owner)
    code, body = cli("republish", "--from", str(other), "--to", str(owner / "never4"),
                     "--k", "10", "--m", "2", "--trust-key", "ed25519:" + "0" * 63)
    assert code == 2 and "--trust-key" in body["error"]  # neither a fingerprint nor a file


def test_an_honest_chain_of_two_hops_verifies_every_hop(owner):
    s1, s2, s3 = owner / "s1", owner / "h2", owner / "h3"
    pin = owner_fingerprint(owner)
    code, hop2 = cli("republish", "--from", str(s1), "--to", str(s2), "--k", "10", "--m", "2",
                     "--trust-key", pin)
    assert code == 0 and hop2["source_signature"]["trusted"] is True
    code, hop3 = cli("republish", "--from", str(s2), "--to", str(s3), "--k", "20", "--m", "2",
                     "--trust-key", pin)
    assert code == 0 and hop3["source_signature"]["signers"] == [pin, hop2["signer"]]
    code, chain = cli("audit", "--chain", str(s1), str(s2), str(s3), "--trust-key", pin)
    assert code == 0 and chain["ok"] and chain["violations"] == []
    signers = [hop["signature"]["signers"] for hop in chain["hops"]]
    assert signers == [[pin], [pin, hop2["signer"]], [pin, hop2["signer"], hop3["signer"]]]
    assert all(hop["signature"]["trusted"] for hop in chain["hops"])
    # Each hop signed what it received: hop 3's file names hop 2's signature, which names
    # the owner's, which covers s1's manifest.
    hops = json.loads((s3 / "public" / fmt.signature_path(current(s3))).read_text())["hops"]
    s1_manifest = (s1 / "public" / fmt.manifest_path(current(s1))).read_bytes()
    assert hops[1]["statement"]["received"] == {
        "version": current(s1), "manifest_sha256": hashlib.sha256(s1_manifest).hexdigest(),
        "signer": pin, "signature": hops[0]["signature"]}
    assert hops[2]["statement"]["received"]["signature"] == hops[1]["signature"]
    # A hop is checked against the store given before it in the chain: s3 came from s2.
    code, skipped = cli("audit", "--chain", str(s1), str(s3), "--trust-key", pin)
    assert code == 1 and any("signed as derived from" in v for v in skipped["violations"])


def test_a_tampered_hop_fails_the_chain_audit(owner):
    s1, s2 = owner / "s1", owner / "c2"
    assert cli("republish", "--from", str(s1), "--to", str(s2), "--k", "10", "--m", "2")[0] == 0
    tamper(s2)
    code, chain = cli("audit", "--chain", str(s1), str(s2))
    assert code == 1 and not chain["ok"]
    assert chain["hops"][0]["ok"] and not chain["hops"][1]["ok"]
    assert chain["hops"][1]["signature"]["status"] == "invalid"
    code, body = cli("republish", "--from", str(s2), "--to", str(owner / "never5"),
                     "--k", "20", "--m", "2")
    assert code == 2 and "fails verification" in body["error"]


def test_a_forged_link_in_the_chain_of_signers_is_refused(owner):
    s1, s2 = owner / "s1", owner / "l2"
    assert cli("republish", "--from", str(s1), "--to", str(s2), "--k", "10", "--m", "2")[0] == 0
    path = s2 / "public" / fmt.signature_path(current(s2))
    document = json.loads(path.read_text())
    document["hops"][0]["statement"]["manifest_sha256"] = "0" * 64  # the owner "signed" other
    path.write_text(json.dumps(document))
    code, body = cli("audit", "--store", str(s2))
    assert code == 1 and "does not verify" in body["signature"]["detail"]
    # The recipient is told which hop to blame: the first, the owner's, not the sender's.
    assert f"hop 1 ({document['hops'][0]['signer']}):" in body["signature"]["detail"]
    del document["hops"][0]  # or drop the owner's hop altogether
    path.write_text(json.dumps(document))
    code, body = cli("audit", "--store", str(s2))
    assert code == 1 and "lacks" in body["signature"]["detail"]


def flip(data: bytes, at: int) -> bytes:
    """``data`` with one bit of its byte ``at`` changed."""
    changed = bytearray(data)
    changed[at] ^= 1
    return bytes(changed)


@pytest.mark.parametrize("at", [0, -1], ids=["first-byte", "last-byte"])
def test_one_byte_off_in_the_manifest_or_in_the_signed_digest_is_refused(owner, at):
    """The signature covers every byte of the manifest and of its sha256: a manifest one byte
    off, or a signature over a digest one byte off (signed by a key of the sender's, so the
    signature itself verifies), is refused as altered."""
    store = copy(owner, "s1", f"one-byte-{at}")
    version = current(store)
    zone = LocalStore(store).zone("public")
    manifest = (store / "public" / fmt.manifest_path(version)).read_bytes()
    assert signing.verify(zone, version, manifest).status == "signed"
    with pytest.raises(signing.SignatureError, match="altered after it was signed"):
        signing.verify(zone, version, flip(manifest, at))
    digest = hashlib.sha256(manifest).digest()
    resign(store, owner / f"one-byte-keys-{at}", flip(digest, at).hex())
    with pytest.raises(signing.SignatureError, match="altered after it was signed"):
        signing.verify(zone, version, manifest)
    code, body = cli("audit", "--store", str(store))
    assert code == 1 and kinds(body) == {"signature"}


def test_a_hop_naming_the_owners_fingerprint_over_another_key_is_refused(owner):
    """A hop's ``signer`` is not part of what is signed: a sender re-signs the owner's view
    with its own key and writes the owner's fingerprint as the signer.  Its signature verifies
    under the key it carries, and the name matches the pin: only comparing the name with that
    key's fingerprint refuses it."""
    impostor = copy(owner, "s1", "impostor")
    resign(impostor, owner / "impostor-keys")
    pin = owner_fingerprint(owner)
    path = impostor / "public" / fmt.signature_path(current(impostor))
    document = json.loads(path.read_text())
    assert document["hops"][0]["signer"] != pin
    document["hops"][0]["signer"] = pin
    path.write_text(json.dumps(document))
    code, body = cli("audit", "--store", str(impostor), "--trust-key", pin)
    assert code == 1 and kinds(body) == {"signature"}
    assert body["signature"]["status"] == "invalid"
    assert "the key's fingerprint is ed25519:" in body["signature"]["detail"]
    code, body = cli("republish", "--from", str(impostor), "--to", str(owner / "never7"),
                     "--k", "10", "--m", "2", "--trust-key", pin)
    assert code == 2 and "fingerprint" in body["error"]
    assert not (owner / "never7").exists()


def test_an_appended_version_is_signed_by_the_owner(owner, tmp_path):
    store = copy(owner, "s1", "appended")
    batch = tmp_path / "batch.dat"
    assert RUN.invoke(main, ["generate", str(batch), "--records", "400", "--seed", "9"]
                      ).exit_code == 0
    code, added = cli("publish", str(batch), "--store", str(store), "--append")
    assert code == 0 and added["version"] == "v000002"
    signature = json.loads((store / "public" / fmt.signature_path("v000002")).read_text())
    manifest = (store / "public" / fmt.manifest_path("v000002")).read_bytes()
    assert signature["hops"][0]["statement"] == {
        "version": "v000002", "manifest_sha256": hashlib.sha256(manifest).hexdigest(),
        "received": None}
    code, body = cli("audit", "--store", str(store), "--trust-key", str(owner / "owner.pem"))
    assert code == 0 and body["signature"]["trusted"] and body["version"] == "v000002"
    # pruning the version before takes its signature with its manifest
    assert (store / "public" / fmt.signature_path("v000001")).exists()
    prune(LocalStore(store), "v000002", 1)
    assert not (store / "public" / fmt.signature_path("v000001")).exists()
    assert cli("audit", "--store", str(store))[0] == 0


def test_signatures_swapped_between_earlier_versions_fail_the_release_audit(owner, tmp_path):
    """`audit` checks the current version's signature; `audit --releases` checks each
    remaining version's against that version's own manifest, so an earlier version's signature
    swapped for another's fails it (exit 1), naming both versions."""
    store = copy(owner, "s1", "swapped")
    for seed in (9, 10):
        batch = tmp_path / f"batch{seed}.dat"
        assert RUN.invoke(main, ["generate", str(batch), "--records", "300", "--seed",
                                 str(seed)]).exit_code == 0
        assert cli("publish", str(batch), "--store", str(store), "--append")[0] == 0
    code, history = cli("audit", "--releases", "--store", str(store))
    assert code == 0 and [r["signature"] for r in history["releases"]] == ["signed"] * 3
    first, second = (store / "public" / fmt.signature_path(v) for v in ("v000001", "v000002"))
    swapped = second.read_bytes()
    second.write_bytes(first.read_bytes())
    first.write_bytes(swapped)
    assert cli("audit", "--store", str(store))[0] == 0  # v000003, the current one, is sound
    code, history = cli("audit", "--releases", "--store", str(store))
    assert code == 1 and [r["signature"] for r in history["releases"]] == \
        ["invalid", "invalid", "signed"]
    assert {(v["kind"], v["where"]) for v in history["violations"]} == {
        ("signature", fmt.signature_path("v000001")),
        ("signature", fmt.signature_path("v000002"))}
    assert all("not what" in v["detail"] for v in history["violations"])


def test_an_unsigned_store_is_reported_and_republished_only_when_allowed(owner):
    old = copy(owner, "s1", "unsigned")
    (old / "public" / fmt.signature_path(current(old))).unlink()
    code, body = cli("audit", "--store", str(old))
    assert code == 0 and body["signature"]["status"] == "unsigned"  # readable, and says so
    text = RUN.invoke(main, ["audit", "--store", str(old)]).output
    assert "UNSIGNED" in text
    code, body = cli("audit", "--store", str(old), "--trust-key", owner_fingerprint(owner))
    assert code == 1 and kinds(body) == {"signature"}
    code, body = cli("republish", "--from", str(old), "--to", str(owner / "never6"),
                     "--k", "10", "--m", "2")
    assert code == 2 and "unsigned" in body["error"] and "--allow-unsigned" in body["error"]
    assert not (owner / "never6").exists()
    code, body = cli("republish", "--from", str(old), "--to", str(owner / "u2"), "--k", "10",
                     "--m", "2", "--allow-unsigned")
    assert code == 0 and body["source_signature"]["status"] == "unsigned"
    code, derived = cli("audit", "--store", str(owner / "u2"))
    assert code == 0 and derived["signature"]["origin_signed"] is False
    assert derived["signature"]["signers"] == [body["signer"]]
    code, chain = cli("audit", "--chain", str(old), str(owner / "u2"))
    assert code == 0 and chain["ok"]  # the link names the unsigned source's manifest


def test_a_signature_of_a_newer_format_fails_the_audit_saying_so(owner):
    """Not verified (a `signature` violation, exit 1, as any signature it cannot check), but
    named as a newer format to upgrade for, not as a malformed file."""
    store = copy(owner, "s1", "s-future-signature")
    path = store / "public" / fmt.signature_path(current(store))
    path.write_bytes(path.read_bytes().replace(signing.FORMAT.encode(),
                                               b"cocktail-signature/2", 1))
    code, report = cli("audit", "--store", str(store))
    assert code == 1
    [violation] = report["violations"]
    assert violation["kind"] == "signature"
    assert "format 'cocktail-signature/2', which this cocktail does not read" in \
        violation["detail"] and "upgrade cocktail" in violation["detail"]


@pytest.mark.parametrize("format_", [5, None])
def test_a_signature_file_without_a_format_string_is_named_as_not_a_signature_file(owner,
                                                                                     format_):
    """A signature file whose format is no string (or absent) fails the audit as not a
    signature file of this format, not as some other file's malformed fields."""
    store = copy(owner, "s1", f"s-format-{format_}")
    path = store / "public" / fmt.signature_path(current(store))
    document = json.loads(path.read_bytes())
    if format_ is None:
        del document["format"]
    else:
        document["format"] = format_
    path.write_bytes(json.dumps(document).encode())
    code, report = cli("audit", "--store", str(store))
    assert code == 1
    [violation] = report["violations"]
    assert violation["kind"] == "signature"
    assert f"not a {signing.FORMAT} file with at least one hop" in violation["detail"]


def test_a_trust_key_file_holding_a_fingerprint_pins_that_fingerprint(tmp_path):
    """`--trust-key` names a fingerprint, a PEM public key, or a file holding a fingerprint:
    the file's fingerprint is what the audit pins (nothing pinned would trust any signer)."""
    key = Ed25519PrivateKey.generate()
    held = tmp_path / "owner.fingerprint"
    held.write_text(f"  {signing.fingerprint(key.public_key())}\n")
    assert signing.trusted_fingerprint(str(held)) == signing.fingerprint(key.public_key())
    held.write_text("ed25519:not-hex\n")
    with pytest.raises(ValueError, match="neither a fingerprint nor a PEM public key"):
        signing.trusted_fingerprint(str(held))
