"""The independent verifier passes honest publications and catches every kind of tampering."""

from __future__ import annotations

import hashlib
import json

import pytest

from cocktail import chunkformat as fmt
from cocktail.audit import audit, km_violations
from cocktail.dataset import load
from cocktail.publish import PublishParams, publish
from cocktail.store import LocalStore

from .conftest import dataset_path
from .test_publication import SMALL


@pytest.fixture
def published(tmp_path):
    store = LocalStore(tmp_path / "s")
    report = publish(load(dataset_path("bms-webview-1.dat")).head(3000), store,
                     PublishParams(k=5, m=3, method="testing", cluster_size=1000))
    return store, report.version


def public_manifest(store, version):
    return json.loads(store.read("public", fmt.manifest_path(version)))


def rewrite_chunk(store, version, chunk_id, rows):
    """Replace a chunk consistently: its index and the manifest's checksums follow."""
    chunk = fmt.encode_chunk(rows)
    index = fmt.encode_index(chunk_id, {t: sorted(ps) for t, ps in fmt.build_index(rows).items()})
    store.write("public", fmt.chunk_path(version, chunk_id), chunk, pri_label=False)
    store.write("public", fmt.index_path(version, chunk_id), index, pri_label=False)
    manifest = public_manifest(store, version)
    for entry in manifest["chunks"]:
        if entry["id"] == chunk_id:
            entry["sha256"] = {"chunk": hashlib.sha256(chunk).hexdigest(),
                               "index": hashlib.sha256(index).hexdigest()}
            entry["subrecords"] = len(rows)
    store.write("public", fmt.manifest_path(version), fmt.encode_json(manifest), pri_label=False)


def kinds(report):
    return {v.kind for v in report.violations}


def test_honest_publication_passes(published):
    store, version = published
    report = audit(store)
    assert report.ok, report.violations[:3]
    assert report.chunks == len(public_manifest(store, version)["chunks"]) > 0
    assert (report.k, report.m) == (5, 3)


def test_rare_combination_in_one_chunk_fails(published):
    """The mutation check: a subrecord gains a term combination no other subrecord has."""
    store, version = published
    entry = max(public_manifest(store, version)["chunks"], key=lambda c: c["terms"])
    rows = list(fmt.decode_chunk(store.read("public", fmt.chunk_path(version, entry["id"]))))
    terms = sorted({t for _, ts in rows for t in ts})
    assert len(terms) >= 2
    combo = next((a, b) for i, a in enumerate(terms) for b in terms[i + 1:]
                 if not any(a in ts and b in ts for _, ts in rows))
    rows[0] = (rows[0][0], sorted(set(rows[0][1]) | set(combo)))
    rewrite_chunk(store, version, entry["id"], rows)
    report = audit(store)
    assert not report.ok
    # the rewritten manifest is no longer the one the owner signed
    assert kinds(report) == {"km-anonymity", "signature"}
    assert any(str(list(combo)) in v.detail for v in report.violations)


def test_a_chunk_with_many_rare_itemsets_names_five_then_counts_the_rest(published):
    """A report shows the first EXAMPLES (5) rare itemsets of a chunk, then how many more."""
    store, version = published
    entry = max(public_manifest(store, version)["chunks"], key=lambda c: c["terms"])
    rows = list(fmt.decode_chunk(store.read("public", fmt.chunk_path(version, entry["id"]))))
    rows[0] = (rows[0][0], sorted({t for _, ts in rows for t in ts}))  # every term at once
    rewrite_chunk(store, version, entry["id"], rows)
    rare = km_violations([ts for _, ts in rows], 5, 3, 10**7)[1]
    assert len(rare) > 6
    found = [v.detail for v in audit(store).violations if v.kind == "km-anonymity"]
    assert [d.startswith("itemset ") for d in found] == [True] * 5 + [False]
    assert found[-1] == f"... and {len(rare) - 5} more rare itemsets"


def test_raw_corruption_fails_integrity(published):
    store, version = published
    chunk_id = public_manifest(store, version)["chunks"][0]["id"]
    path = fmt.chunk_path(version, chunk_id)
    store.write("public", path, store.read("public", path).replace(b"]", b', "x"]', 1),
                pri_label=False)
    assert "integrity" in kinds(audit(store))


def test_a_pointer_to_a_missing_version_fails_integrity(published):
    """A current pointer rewritten to name a version the public zone does not hold is a
    finding, not a pass or a crash."""
    store, version = published
    store.write("public", fmt.POINTER, b"v999999\n", pri_label=False)
    report = audit(store)
    assert not report.ok and kinds(report) == {"integrity"}
    assert any(v.where == fmt.POINTER and "'v999999'" in v.detail for v in report.violations)
    assert audit(store, version=version).ok  # the version itself is untouched


@pytest.mark.parametrize("public_replicas", [19, 21])
def test_placement_counts_every_replica_and_names_those_off_the_private_racks(published,
                                                                              public_replicas):
    """An owner's audit reads where HDFS put each private block (a local store has no racks:
    this one reports a fixed layout): every file, block and replica is counted, and each
    replica outside the private racks is a finding naming its block and datanode, the first
    20 of them, then how many more."""
    store, _ = published

    class Racked(LocalStore):
        private_racks = "/private/"

        def replicas(self, zone):
            assert zone == "private"
            yield "v000001/a", [["/private/r1/d1", "/private/r2/d2"], ["/public/r1/d3"]]
            yield "v000001/b", [["/private/r1/d1"] +
                                [f"/public/r2/d{n}" for n in range(public_replicas)]]
    report = audit(Racked(store.root))
    outside = 1 + public_replicas
    assert report.placement == {"private_files": 2, "blocks": 3, "replicas": 4 + public_replicas,
                                "replicas_outside_private_racks": outside,
                                "private_racks": "/private/"}
    shown = [v for v in report.violations if v.kind == "placement"]
    assert (shown[0].where, shown[0].detail) == ("v000001/a", "block 1 has a replica on "
                                                 "/public/r1/d3")
    assert [v.where for v in shown[1:20]] == ["v000001/b"] * 19
    more = ["... and 2 more such replicas"] if outside > 20 else []
    assert [v.detail for v in shown[20:]] == more
    assert kinds(report) == {"placement"}


def test_linkable_pseudonym_fails(published):
    store, version = published
    a, b = (c["id"] for c in public_manifest(store, version)["chunks"][:2])
    rows_a = list(fmt.decode_chunk(store.read("public", fmt.chunk_path(version, a))))
    rows_b = list(fmt.decode_chunk(store.read("public", fmt.chunk_path(version, b))))
    rows_b[0] = (rows_a[0][0], rows_b[0][1])  # the same record named alike in two chunks
    rewrite_chunk(store, version, b, sorted(rows_b))
    assert "linkable-pseudonym" in kinds(audit(store))


def test_private_files_in_public_zone_fail(tmp_path):
    store = LocalStore(tmp_path / "s")
    version = publish(SMALL, store, PublishParams(k=3, m=2)).version
    assert audit(store).ok
    private_chunk = next(cid for cid, c in json.loads(
        store.read("private", fmt.manifest_path(version)))["chunks"].items() if c["priLabel"])
    leaked = store.read("private", fmt.chunk_path(version, private_chunk))
    store.write("public", fmt.chunk_path(version, private_chunk), leaked, pri_label=False)
    report = audit(store)
    assert "private-data" in kinds(report)
    assert any(private_chunk in v.where for v in report.violations)


def test_key_copied_to_public_fails(tmp_path):
    store = LocalStore(tmp_path / "s")
    publish(SMALL, store, PublishParams(k=3, m=2))
    store.write("public", "owner.key", store.read("private", "owner.key"), pri_label=False)
    assert "private-data" in kinds(audit(store))


def test_stricter_parameters_and_budget(published):
    store, _ = published
    assert not audit(store, k=50).ok  # the chunks were built for k=5
    with pytest.raises(ValueError, match="weaker"):
        audit(store, k=2)
    assert "unverifiable" in kinds(audit(store, max_itemsets=10))


def test_km_counting_against_definition():
    subrecords = [["a", "b"], ["a", "b"], ["a", "c"], ["b", "c"], ["a"]]
    counted, rare = km_violations(subrecords, 2, 2, 1000)
    assert counted == 6  # a b c ab ac bc
    assert rare == [(("a", "c"), 1), (("b", "c"), 1)]
    assert km_violations(subrecords, 1, 2, 1000)[1] == []
    assert km_violations([["a", "b", "c"]], 2, 3, 6) is None  # 7 itemsets > budget
