"""The persisted term index (issue 32): written at publish and append, read instead of rebuilt,
answers equal to brute force over the raw records, checked by the owner's audit."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from pyroaring import BitMap

from cocktail import chunkformat as fmt
from cocktail.audit import audit_releases
from cocktail.cli import main
from cocktail.dataset import Dataset
from cocktail.publish import PublishParams, publish
from cocktail.publish.append import append
from cocktail.query import Engine, Publication
from cocktail.query.termindex import TermIndex, TermIndexBuilder
from cocktail.querylang import CountQuery
from cocktail.releases import current_version
from cocktail.store import LocalStore
from cocktail.synthetic import SyntheticSpec, generate, random_conjunctions

PARAMS = PublishParams(k=5, m=2, cluster_size=400, workers=1)


def synthetic(records: int, seed: int, prefix: str) -> Dataset:
    spec = SyntheticSpec(records=records, items=200, patterns=40, seed=seed)
    data = generate(spec)
    return Dataset(tuple(f"{prefix}-{i}" for i in range(records)), tuple(data), "memory",
                   "jsonl")


FIRST, LATER, FEW = synthetic(2500, 1, "a"), synthetic(900, 2, "b"), synthetic(7, 3, "c")


def assert_brute_force(store: LocalStore, datasets: list[Dataset], runner: str = "fast"
                       ) -> None:
    """Exact counts of random conjunctions (and of everything) equal counting raw records."""
    records = [r for d in datasets for r in d.records]
    publication = Publication.open(store)
    engine = Engine(publication, runner)
    queries = [CountQuery(q) for q in random_conjunctions(records, 150, seed=7)]
    queries += [CountQuery(()), CountQuery(("absent",))]
    expected = [sum(1 for r in records if set(q.terms) <= r) for q in queries]
    assert engine.counts(queries) == expected


def reads_of(store: LocalStore, action) -> list[str]:
    """The private and public paths ``action`` reads from ``store``."""
    seen, read = [], store.read

    def spy(zone, path):
        seen.append(f"{zone}/{path}")
        return read(zone, path)

    store.read = spy
    try:
        action()
    finally:
        store.read = read
    return seen


def drop_index(store: LocalStore, version: str) -> None:
    """Make ``version`` look as versions written before the term index did."""
    root = store.root / "private" / version
    (root / fmt.TERM_INDEX).unlink()
    manifest = json.loads((root / fmt.MANIFEST).read_text())
    del manifest["term_index"]
    (root / fmt.MANIFEST).write_text(json.dumps(manifest))


def test_publish_writes_the_index_and_a_count_reads_nothing_else(tmp_path):
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PARAMS)
    version = current_version(store)
    manifest = Publication.open(store).manifest
    data = store.read("private", fmt.term_index_path(version))
    assert manifest["term_index"]["records"] == len(FIRST)
    index = TermIndex.decode(data)
    assert index.records == len(FIRST)
    publication = Publication.open(store)
    assert publication.term_record_positions() == publication.resolved_term_records()
    assert not store.exists("public", fmt.term_index_path(version))  # private only

    publication = Publication.open(store)
    read = reads_of(store, lambda: Engine(publication).count(CountQuery(("1", "2"))))
    assert read == [f"private/{fmt.term_index_path(version)}"]
    assert_brute_force(store, [FIRST])


def test_append_extends_the_index_with_new_and_buffered_records(tmp_path):
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PARAMS)
    buffered = append(FEW, store, min_new=1000)
    assert buffered.buffered_records > 0
    assert_brute_force(store, [FIRST, FEW])
    placed = append(LATER, store, min_new=10)  # the buffer's records are placed anew
    assert placed.buffered_records == 0 and placed.new_clusters > 0
    assert_brute_force(store, [FIRST, FEW, LATER])
    publication = Publication.open(store)
    assert publication.term_record_positions() == publication.resolved_term_records()
    assert audit_releases(store).ok


def test_a_version_without_the_index_is_resolved_in_memory_and_left_as_it_is(tmp_path):
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PARAMS)
    drop_index(store, current_version(store))
    before = sorted(p.relative_to(store.root) for p in store.root.rglob("*"))
    assert_brute_force(store, [FIRST])
    assert sorted(p.relative_to(store.root) for p in store.root.rglob("*")) == before
    assert audit_releases(store).ok
    with pytest.raises(ValueError, match="no term index"):  # no shards to count over
        Engine(Publication.open(store), "index-inline").count(CountQuery(("1",)))
    append(LATER, store, min_new=10)  # the next version has one again, from the old chunks
    assert store.exists("private", fmt.term_index_path(current_version(store)))
    assert_brute_force(store, [FIRST, LATER])
    assert audit_releases(store).ok


@pytest.mark.parametrize("rehash", [False, True])
def test_a_tampered_index_is_caught_by_the_owner_audit(tmp_path, rehash):
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PARAMS)
    version = current_version(store)
    path = store.root / "private" / fmt.term_index_path(version)
    builder = TermIndexBuilder()
    builder.update(TermIndex.decode(path.read_bytes()))
    builder.bitmaps["1"].discard(builder.bitmaps["1"].min())  # one record loses a term
    tampered = builder.encode_part().replace(b'"records":0', f'"records":{len(FIRST)}'.encode())
    tampered = tampered.replace(b'"stop":0', f'"stop":{len(FIRST)}'.encode())
    path.write_bytes(tampered)
    if rehash:  # consistent with the manifest: only the chunks can tell
        manifest_path = store.root / "private" / fmt.manifest_path(version)
        manifest = json.loads(manifest_path.read_text())
        manifest["term_index"]["sha256"] = [hashlib.sha256(tampered).hexdigest()]
        manifest_path.write_text(json.dumps(manifest))
    report = audit_releases(store)
    found = [v for v in report.violations if v.where.endswith(fmt.TERM_INDEX)]
    assert found and all(v.kind == "integrity" for v in found)
    assert any("'1'" in v.detail for v in found)
    assert any("sha256" in v.detail for v in found) != rehash
    result = CliRunner().invoke(main, ["audit", "--releases", "--store", str(store.root)])
    assert result.exit_code == 1


def rewrite_shard(store: LocalStore, version: str, number: int, change) -> None:
    """Apply ``change`` to a shard's bitmaps and store it with the manifest rehashed, so that
    only the audit's own checks can tell."""
    path = store.root / "private" / fmt.term_index_path(version, number)
    shard = fmt.decode_term_index(path.read_bytes())
    bitmaps = {t: BitMap.deserialize(b) for t, b in shard.bitmaps.items()}
    change(bitmaps)
    data = fmt.encode_term_index(shard.records, [(t, bitmaps[t].serialize())
                                                 for t in sorted(bitmaps)],
                                 shard.shard, shard.shards, shard.start, shard.stop)
    path.write_bytes(data)
    manifest_path = store.root / "private" / fmt.manifest_path(version)
    manifest = json.loads(manifest_path.read_text())
    manifest["term_index"]["sha256"][number] = hashlib.sha256(data).hexdigest()
    manifest_path.write_text(json.dumps(manifest))


SHARDED = PublishParams(k=5, m=2, cluster_size=400, workers=1, index_shard=700)


def test_a_sharded_index_answers_as_brute_force_in_process_and_as_a_job(tmp_path):
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, SHARDED)
    version = current_version(store)
    shards = [fmt.decode_term_index(store.read("private", fmt.term_index_path(version, n)))
              for n in range(4)]  # 2,500 records, 700 a shard
    assert [(s.start, s.stop) for s in shards] == [(0, 700), (700, 1400), (1400, 2100),
                                                   (2100, 2500)]
    assert not store.exists("private", fmt.term_index_path(version, 4))
    assert Publication.open(store).manifest["term_index"]["shard_records"] == 700
    assert_brute_force(store, [FIRST])
    assert_brute_force(store, [FIRST], "index-inline")
    append(LATER, store, min_new=10)  # keeps the store's shard size: 3,400 records, 5 shards
    assert store.exists("private", fmt.term_index_path(current_version(store), 4))
    assert_brute_force(store, [FIRST, LATER])
    assert_brute_force(store, [FIRST, LATER], "index-inline")
    assert audit_releases(store).ok


def test_the_audit_catches_a_record_moved_across_shards_and_a_missing_shard(tmp_path):
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, SHARDED)
    version = current_version(store)
    term = next(t for t, b in Publication.open(store).term_records.items() if b.max() >= 700)
    moved = Publication.open(store).term_records[term].max()

    def move(bitmaps):  # the union is unchanged: only the ranges tell
        bitmaps[term].discard(moved)

    rewrite_shard(store, version, (moved // 700), move)
    rewrite_shard(store, version, 0, lambda bitmaps: bitmaps[term].add(moved))
    found = [v.detail for v in audit_releases(store).violations]
    assert any("outside the shard's 0..700" in d for d in found), found
    (store.root / "private" / fmt.term_index_path(version, 3)).unlink()
    found = [v.detail for v in audit_releases(store).violations]
    assert found and not audit_releases(store).ok


def test_the_index_numbers_records_by_the_frequent_terms_they_hold(tmp_path):
    """The most frequent term's holders come first: its bitmap is one run, the next term's
    a run in each half, ...; counts stay those of the records."""
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PARAMS)
    index = Publication.open(store).term_records
    frequent = sorted(index, key=lambda t: (-len(index[t]), t))
    first, second = index[frequent[0]], index[frequent[1]]
    assert list(first) == list(range(len(first)))
    assert len(runs(second)) <= 2
    shuffled = sum(len(runs(b)) for b in Publication.open(store).resolved_term_records().values())
    assert sum(len(runs(b)) for b in index.values()) < shuffled / 2
    assert_brute_force(store, [FIRST])


def runs(bitmap) -> list[tuple[int, int]]:
    """The bitmap's maximal runs of consecutive positions."""
    found = []
    for position in bitmap:
        if found and found[-1][1] == position:
            found[-1] = (found[-1][0], position + 1)
        else:
            found.append((position, position + 1))
    return found


@pytest.mark.parametrize("tamper", ["swap", "repeat"])
def test_the_audit_catches_a_tampered_index_order(tmp_path, tamper):
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PARAMS)
    version = current_version(store)
    path = store.root / "private" / fmt.term_order_path(version)
    order = fmt.decode_term_order(path.read_bytes(), len(FIRST)).copy()
    if tamper == "swap":  # still a numbering: only the chunks can tell
        order[[0, -1]] = order[[-1, 0]]
    else:
        order[0] = order[1]
    data = fmt.encode_term_order(order)
    path.write_bytes(data)
    manifest_path = store.root / "private" / fmt.manifest_path(version)
    manifest = json.loads(manifest_path.read_text())
    manifest["term_index"]["order_sha256"] = hashlib.sha256(data).hexdigest()
    manifest_path.write_text(json.dumps(manifest))
    found = [v.detail for v in audit_releases(store).violations]
    expected = "disagree with the chunks" if tamper == "swap" else "exactly once"
    assert any(expected in d for d in found), found


def test_an_index_written_in_record_order_still_serves_appends_and_audits(tmp_path):
    """As the index was written before it had an order of its own."""
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PARAMS)
    version = current_version(store)
    publication = Publication.open(store)
    plain = fmt.encode_term_index(len(FIRST), [
        (t, b.serialize()) for t, b in sorted(publication.resolved_term_records().items())])
    (store.root / "private" / fmt.term_index_path(version)).write_bytes(plain)
    (store.root / "private" / fmt.term_order_path(version)).unlink()
    manifest_path = store.root / "private" / fmt.manifest_path(version)
    manifest = json.loads(manifest_path.read_text())
    manifest["term_index"] = {"records": len(FIRST), "sha256": hashlib.sha256(plain).hexdigest()}
    manifest_path.write_text(json.dumps(manifest))
    assert audit_releases(store).ok
    assert_brute_force(store, [FIRST])
    append(LATER, store, min_new=10)
    assert_brute_force(store, [FIRST, LATER])
    assert audit_releases(store).ok


def test_shards_that_do_not_tile_the_positions_are_refused():
    one = fmt.encode_term_index(10, [("a", BitMap([1]).serialize())], 0, 2, 0, 5)
    other = fmt.encode_term_index(10, [("a", BitMap([7]).serialize())], 1, 2, 6, 10)
    with pytest.raises(fmt.FormatError, match="does not follow"):
        TermIndex([fmt.decode_term_index(one), fmt.decode_term_index(other)])
    with pytest.raises(fmt.FormatError, match="1 shard"):
        TermIndex([fmt.decode_term_index(one)])
    whole = fmt.encode_term_index(10, [("a", BitMap([7]).serialize())], 1, 2, 5, 10)
    index = TermIndex([fmt.decode_term_index(one), fmt.decode_term_index(whole)])
    assert list(index["a"]) == [1, 7] and index.records == 10


def test_a_malformed_index_is_a_format_error():
    with pytest.raises(fmt.FormatError):
        TermIndex.decode(b"something else\n")
    good = fmt.encode_term_index(3, [("a", BitMap([0, 2]).serialize())])
    with pytest.raises(fmt.FormatError):
        TermIndex.decode(good[:-1])
    assert list(TermIndex.decode(good)["a"]) == [0, 2]


def test_serve_opens_the_index_alone_and_answers_as_brute_force(tmp_path):
    from cocktail.private_config import STORE_ID
    from cocktail.service import CurrentPublication

    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PARAMS)
    served = []
    read = reads_of(store, lambda: served.append(CurrentPublication(store, "fast", 3600)))
    served[0].close()
    data = [path for path in read if path != f"private/{STORE_ID}"]  # names its answers
    assert data == ["public/CURRENT", f"private/{fmt.term_index_path(current_version(store))}"]
    asked = [CountQuery(q) for q in random_conjunctions(list(FIRST.records), 50, seed=5)]
    assert served[0].get().counts(asked) == [FIRST.count_containing(q.terms) for q in asked]


def test_serve_over_the_shards_reads_only_the_first_shard_ahead(tmp_path):
    """With a job over the shards, the service holds one shard's bytes, not the index: the
    job's tasks read the shards."""
    from cocktail.private_config import STORE_ID
    from cocktail.service import CurrentPublication

    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, SHARDED)
    served = []
    read = reads_of(store, lambda: served.append(CurrentPublication(store, "index-inline",
                                                                    3600)))
    served[0].close()
    data = [path for path in read if path != f"private/{STORE_ID}"]
    assert data == ["public/CURRENT", f"private/{fmt.term_index_path(current_version(store))}"]
    asked = [CountQuery(q) for q in random_conjunctions(list(FIRST.records), 30, seed=6)]
    asked.append(CountQuery(()))
    assert served[0].get().counts(asked) == [FIRST.count_containing(q.terms) for q in asked]


def test_an_exact_count_starts_without_the_libraries_it_does_not_use():
    """`cocktail query --exact` pays for the CLI's imports: OpenDP, networkx and the HTTP
    client (a third of a second together), and scipy's optimizer (another 0.3 s) are imported
    by the commands that use them."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, cocktail.cli; print(*sorted(sys.modules))"],
        check=True, capture_output=True, text=True).stdout.split()
    assert not {"opendp", "networkx", "requests", "scipy"} & set(loaded)
