"""The persisted term index (issue 32): written at publish and append, read instead of rebuilt,
answers equal to brute force over the raw records, checked by the owner's audit; in parts that
appends carry by reference and merge (issue: appends cost in proportion to the batch)."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import subprocess
import sys

import numpy as np
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
from cocktail.query.termindex import (MERGE_RATIO, SHARD_RECORDS, IndexLayout, IndexPart,
                                     PendingPart, TermIndex, as_array, bitmap_of,
                                     layout_from_manifest, part_order, plan_parts)
from cocktail.querylang import CountQuery
from cocktail.releases import committed_versions, current_version
from cocktail.store import LocalStore, StoreError
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


def manifest_of(store: LocalStore, version: str) -> dict:
    return json.loads((store.root / "private" / fmt.manifest_path(version)).read_text())


def rewrite_manifest(store: LocalStore, version: str, change) -> None:
    """Apply ``change`` to the private manifest and keep ``terms/parts.json`` its copy of the
    term index, so that only the audit's own checks can tell."""
    path = store.root / "private" / fmt.manifest_path(version)
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))
    listing = store.root / "private" / version / fmt.TERM_PARTS
    if "parts" in manifest.get("term_index", {}):
        listing.write_bytes(fmt.encode_json(manifest["term_index"], compact=True))


def layout_of(store: LocalStore, version: str | None = None) -> IndexLayout:
    version = version or current_version(store)
    return layout_from_manifest(version, manifest_of(store, version)["term_index"])


def drop_index(store: LocalStore, version: str) -> None:
    """Make ``version`` look as versions written before the term index did."""
    shutil.rmtree(store.root / "private" / version / fmt.TERM_PART_DIR)
    rewrite_manifest(store, version, lambda manifest: manifest.pop("term_index"))


def make_legacy(store: LocalStore, version: str, shard_records: int | None = None,
                ordered: bool = True) -> None:
    """Rewrite ``version``'s index as versions before parts wrote it, with the old codec: one
    index over every record in shards of index positions (``terms.roaring``,
    ``terms.1.roaring``, ...) and one global order (``terms.order``), or, unordered, one file
    without shard fields in record order; the manifest's old entry."""
    publication = Publication(store, version)
    records = len(publication.record_ids)
    bitmaps = dict(publication.resolved_term_records())
    root = store.root / "private" / version
    shutil.rmtree(root / fmt.TERM_PART_DIR)
    entry: dict = {"records": records}
    if not ordered:
        pieces = [(t, b.serialize()) for t, b in sorted(bitmaps.items())]
        header = json.dumps({"records": records, "terms": [[t, len(b)] for t, b in pieces]})
        data = b"".join([fmt.TERM_INDEX_MAGIC, header.encode(), b"\n", *(b for _, b in pieces)])
        (root / fmt.TERM_INDEX).write_bytes(data)
        entry["sha256"] = hashlib.sha256(data).hexdigest()
    else:
        order = part_order(bitmaps, 0, records)
        renumber = np.empty(records, dtype=np.uint32)
        renumber[order] = np.arange(records, dtype=np.uint32)
        bitmaps = {t: bitmap_of(renumber[as_array(b)]) for t, b in bitmaps.items()}
        shard = shard_records or records
        count = -(-records // shard)
        entry["sha256"] = []
        for number in range(count):
            start, stop = number * shard, min(records, (number + 1) * shard)
            window = BitMap(range(start, stop))
            data = fmt.encode_term_index(records, [(t, (b & window).serialize())
                                                   for t, b in sorted(bitmaps.items())
                                                   if b & window], number, count, start, stop)
            (root / fmt.term_index_name(number)).write_bytes(data)
            entry["sha256"].append(hashlib.sha256(data).hexdigest())
        data = fmt.encode_term_order(order)
        (root / fmt.TERM_ORDER).write_bytes(data)
        entry |= {"shard_records": shard, "order_sha256": hashlib.sha256(data).hexdigest()}
    rewrite_manifest(store, version, lambda manifest: manifest.update(term_index=entry))


def own_index_files(store: LocalStore, version: str) -> list[str]:
    """The term index files in ``version``'s directory."""
    root = store.root / "private" / version
    return sorted(name for name in (p.relative_to(root).as_posix() for p in root.rglob("*")
                                    if p.is_file()) if name.startswith("terms"))


def assert_parts_sound(store: LocalStore, version: str | None = None) -> IndexLayout:
    """The parts tile the records, each part's order numbers its own range once, each file
    sits in its home."""
    layout = layout_of(store, version)
    assert layout.gaps() is None
    for part in layout.parts:
        order = fmt.decode_term_order(
            store.read("private", part.order_path), part.records)
        assert sorted(order) == list(range(part.start, part.stop))
        for path in part.paths():
            file = fmt.decode_term_index(store.read("private", path))
            assert (file.start, file.stop) == (part.start, part.stop)
    return layout


def test_publish_writes_the_index_and_a_count_reads_nothing_else(tmp_path):
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PARAMS)
    version = current_version(store)
    layout = assert_parts_sound(store)
    assert layout.records == len(FIRST) and len(layout.parts) == 1
    [part] = layout.parts
    assert part.home == version and (part.start, part.stop) == (0, len(FIRST))
    assert part.files == ("terms/0-2500.roaring",) and part.order == "terms/0-2500.order"
    assert json.loads(store.read("private", f"{version}/{fmt.TERM_PARTS}")) == \
        manifest_of(store, version)["term_index"]
    publication = Publication.open(store)
    assert publication.term_record_positions() == publication.resolved_term_records()
    assert not any(store.root.joinpath("public").rglob("terms*"))  # private only

    publication = Publication.open(store)
    read = reads_of(store, lambda: Engine(publication).count(CountQuery(("1", "2"))))
    assert read == [f"private/{version}/{fmt.TERM_PARTS}", f"private/{part.paths()[0]}"]
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
    assert_parts_sound(store)
    assert audit_releases(store).ok


def test_an_append_adds_one_part_and_carries_the_others_by_reference(tmp_path):
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PARAMS)
    first = current_version(store)
    first_files = own_index_files(store, first)
    append(LATER, store, min_new=10)
    version = current_version(store)
    layout = assert_parts_sound(store)
    assert [(p.home, p.start, p.stop) for p in layout.parts] == \
        [(first, 0, 2500), (version, 2500, 3400)]
    assert layout.parts[0] == layout_of(store, first).parts[0]  # listed as it was
    # the new version's directory holds the new part and its list, nothing of the old part
    assert own_index_files(store, version) == ["terms/2500-3400.order",
                                               "terms/2500-3400.roaring", "terms/parts.json"]
    assert own_index_files(store, first) == first_files  # left as it was
    assert_brute_force(store, [FIRST, LATER])
    assert_brute_force(store, [FIRST, LATER], "index-inline")
    assert audit_releases(store).ok


def test_the_writer_names_the_parts_it_merged_away(tmp_path):
    """What pruning the previous version may delete: the files of the parts this version
    merged into one of its own, and nothing it still lists."""
    from cocktail.publish import writer as writer_module

    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PARAMS)
    append(synthetic(300, 40, "m"), store, min_new=10)
    merged = layout_of(store).parts[1]
    seen = []
    finish = writer_module.VersionWriter.finish

    def spy(self, *args, **kwargs):
        finish(self, *args, **kwargs)
        seen.append(self.superseded_index_files)

    writer_module.VersionWriter.finish = spy
    try:
        append(synthetic(300, 41, "n"), store, min_new=10)  # 2500, 300, 300 -> 2500, 600
    finally:
        writer_module.VersionWriter.finish = finish
    assert seen == [[("private", merged.paths()[0]), ("private", merged.order_path)]]
    assert [(p.start, p.stop) for p in layout_of(store).parts] == [(0, 2500), (2500, 3100)]


def test_the_carried_parts_are_neither_read_nor_copied(tmp_path):
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PARAMS)
    old = layout_of(store).parts[0]
    read = reads_of(store, lambda: append(LATER, store, min_new=10))
    assert not {f"private/{old.paths()[0]}", f"private/{old.order_path}"} & set(read)
    assert (store.root / "private" / old.paths()[0]).stat().st_nlink == 1  # no link either


def test_appends_merge_parts_so_that_few_remain(tmp_path):
    """Eight small appends (keeping every version): the last two parts merge while the first
    holds at most twice the second's records; each version answers as brute force, its parts
    tile it, each with an order of its own range."""
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PARAMS)
    datasets, counts = [FIRST], []
    for number in range(8):
        datasets.append(synthetic(60, 10 + number, f"d{number}"))
        append(datasets[-1], store, min_new=10)
        layout = assert_parts_sound(store)
        counts.append([p.records for p in layout.parts])
        for before, after in zip(counts[-1], counts[-1][1:]):
            assert before > MERGE_RATIO * after
        assert_brute_force(store, datasets)
    assert counts == [[2500, 60], [2500, 120], [2500, 180], [2500, 180, 60], [2500, 300],
                      [2500, 300, 60], [2500, 300, 120], [2500, 480]]
    assert_brute_force(store, datasets, "index-inline")
    assert audit_releases(store).ok


@pytest.mark.parametrize("legacy", [False, True])
def test_pruning_keeps_the_parts_that_kept_versions_reference(tmp_path, legacy):
    """With --keep 2, the first version is pruned while later ones still list its part: its
    private directory keeps that part alone, and goes once no kept version lists it."""
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PublishParams(k=5, m=2, cluster_size=400, workers=1, keep=2))
    first = current_version(store)
    if legacy:  # an index written before parts, in shards
        make_legacy(store, first, 700)
    datasets = [FIRST]
    for number in range(3):  # 2500, 300 -> 2500, 600 -> 2500, 900
        datasets.append(synthetic(300, 20 + number, f"p{number}"))
        append(datasets[-1], store, min_new=10)
    assert [p.home for p in layout_of(store).parts] == [first, current_version(store)]
    assert first not in committed_versions(store)
    part_files = ["terms.1.roaring", "terms.2.roaring", "terms.3.roaring", "terms.order",
                  "terms.roaring"] if legacy else ["terms/0-2500.order", "terms/0-2500.roaring"]
    assert own_index_files(store, first) == part_files  # what else stays is not the index's
    assert_brute_force(store, datasets)
    assert audit_releases(store).ok
    # 2500, 900, 1300 -> 2500, 2200 -> 4700 (2500 <= 4400): the first part is merged away
    datasets.append(synthetic(1300, 30, "q"))
    append(datasets[-1], store, min_new=10)
    assert [(p.start, p.stop) for p in layout_of(store).parts] == [(0, 4700)]
    assert own_index_files(store, first) == part_files  # the version before still lists it
    datasets.append(synthetic(5, 31, "r"))
    append(datasets[-1], store, min_new=10)
    assert own_index_files(store, first) == []
    assert_brute_force(store, datasets)
    assert audit_releases(store).ok


def test_the_merge_policy_keeps_logarithmically_many_parts():
    """The plan alone, over a thousand appends: the parts' sizes fall by more than half from
    one to the next, and the records rewritten stay within batch · log2 per append."""
    for sizes in ([1000] * 1000, [37 * (1 + n % 7) for n in range(1000)],
                  [5000 - 4 * n for n in range(1000)]):
        parts, rewritten, total = [IndexPart("v000001", 0, 10_000, ("f",), ("x",), None, None)], \
            0, 10_000
        for number, size in enumerate(sizes):
            planned = plan_parts(parts, total + size, SHARD_RECORDS)
            rewritten += sum(p.records for p in planned if isinstance(p, PendingPart))
            parts = [p if isinstance(p, IndexPart) else
                     IndexPart(f"v{number + 2:06d}", p.start, p.stop, ("f",), ("x",), None, None)
                     for p in planned]
            total += size
            assert [p.start for p in parts[1:]] == [p.stop for p in parts[:-1]]
            assert all(a.records > MERGE_RATIO * b.records for a, b in zip(parts, parts[1:]))
        assert len(parts) <= math.log2(total / min(sizes)) + 2
        assert rewritten <= sum(sizes) * math.log2(total)
    # never across the shard size: full parts stay apart
    planned = plan_parts([], 2500, 700)
    assert [(p.start, p.stop) for p in planned] == [(0, 700), (700, 1400), (1400, 2100),
                                                     (2100, 2500)]


def test_a_version_without_the_index_is_resolved_in_memory_and_left_as_it_is(tmp_path):
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PARAMS)
    drop_index(store, current_version(store))
    before = sorted(p.relative_to(store.root) for p in store.root.rglob("*"))
    assert_brute_force(store, [FIRST])
    assert sorted(p.relative_to(store.root) for p in store.root.rglob("*")) == before
    assert audit_releases(store).ok
    with pytest.raises(ValueError, match="no term index"):  # no parts to count over
        Engine(Publication.open(store), "index-inline").count(CountQuery(("1",)))
    append(LATER, store, min_new=10)  # the next version has one again, from the old chunks
    version = current_version(store)
    assert [(p.home, p.start, p.stop) for p in assert_parts_sound(store).parts] == \
        [(version, 0, 3400)]
    assert_brute_force(store, [FIRST, LATER])
    assert audit_releases(store).ok


@pytest.mark.parametrize("rehash", [False, True])
def test_a_tampered_index_is_caught_by_the_owner_audit(tmp_path, rehash):
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PARAMS)
    version = current_version(store)
    [part] = layout_of(store).parts
    path = store.root / "private" / part.paths()[0]
    file = fmt.decode_term_index(path.read_bytes())
    bitmaps = {t: BitMap.deserialize(b) for t, b in file.bitmaps.items()}
    bitmaps["1"].discard(bitmaps["1"].min())  # one record loses a term
    tampered = fmt.encode_term_part([(t, bitmaps[t].serialize()) for t in sorted(bitmaps)],
                                    file.start, file.stop)
    path.write_bytes(tampered)
    if rehash:  # consistent with the manifest: only the chunks can tell
        rewrite_manifest(store, version, lambda manifest: manifest["term_index"]["parts"][0]
                         .update(sha256=[hashlib.sha256(tampered).hexdigest()]))
    report = audit_releases(store)
    found = [v for v in report.violations if fmt.TERM_PART_DIR in v.where]
    assert found and all(v.kind == "integrity" for v in found)
    assert any("'1'" in v.detail for v in found)
    assert any("sha256" in v.detail for v in found) != rehash
    result = CliRunner().invoke(main, ["audit", "--releases", "--store", str(store.root)])
    assert result.exit_code == 1


def rewrite_part(store: LocalStore, version: str, number: int, change) -> None:
    """Apply ``change`` to a part's bitmaps and store it with the manifest rehashed, so that
    only the audit's own checks can tell."""
    part = layout_of(store, version).parts[number]
    path = store.root / "private" / part.paths()[0]
    file = fmt.decode_term_index(path.read_bytes())
    bitmaps = {t: BitMap.deserialize(b) for t, b in file.bitmaps.items()}
    change(bitmaps)
    data = fmt.encode_term_part([(t, bitmaps[t].serialize()) for t in sorted(bitmaps)],
                                file.start, file.stop)
    path.write_bytes(data)
    rewrite_manifest(store, version, lambda manifest: manifest["term_index"]["parts"][number]
                     .update(sha256=[hashlib.sha256(data).hexdigest()]))


SHARDED = PublishParams(k=5, m=2, cluster_size=400, workers=1, index_shard=700)


def test_a_fresh_publish_in_several_parts_answers_as_brute_force_in_process_and_as_a_job(
        tmp_path):
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, SHARDED)
    first = current_version(store)
    layout = assert_parts_sound(store)  # 2,500 records, 700 a part, each its own order
    assert [(p.home, p.start, p.stop) for p in layout.parts] == [
        (first, 0, 700), (first, 700, 1400), (first, 1400, 2100), (first, 2100, 2500)]
    assert layout.shard_records == 700
    assert_brute_force(store, [FIRST])
    assert_brute_force(store, [FIRST], "index-inline")
    append(LATER, store, min_new=10)  # keeps the store's part size: 900 new records, 2 parts
    version = current_version(store)
    assert [(p.home, p.start, p.stop) for p in assert_parts_sound(store).parts] == [
        (first, 0, 700), (first, 700, 1400), (first, 1400, 2100), (first, 2100, 2500),
        (version, 2500, 3200), (version, 3200, 3400)]
    assert_brute_force(store, [FIRST, LATER])
    assert_brute_force(store, [FIRST, LATER], "index-inline")
    assert audit_releases(store).ok


def test_the_audit_catches_a_record_moved_across_parts_and_a_missing_part(tmp_path):
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, SHARDED)
    version = current_version(store)
    term = next(t for t, b in Publication.open(store).term_records.items() if b.max() >= 700)
    moved = Publication.open(store).term_records[term].max()

    def move(bitmaps):  # the union is unchanged: only the ranges tell
        bitmaps[term].discard(moved)

    rewrite_part(store, version, (moved // 700), move)
    rewrite_part(store, version, 0, lambda bitmaps: bitmaps[term].add(moved))
    found = [v.detail for v in audit_releases(store).violations]
    assert any("outside the part's 0..700" in d for d in found), found
    missing = layout_of(store).parts[3].paths()[0]
    (store.root / "private" / missing).unlink()
    found = audit_releases(store).violations
    assert any(v.where == f"private/{missing}" and "missing" in v.detail for v in found), found


@pytest.mark.parametrize("tiling", ["overlap", "gap", "short"])
def test_the_audit_catches_parts_that_overlap_or_leave_a_gap(tmp_path, tiling):
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, SHARDED)
    version = current_version(store)

    def change(manifest):
        parts = manifest["term_index"]["parts"]
        if tiling == "overlap":
            parts[1]["start"] = 600
        elif tiling == "gap":
            del parts[1]
        else:
            manifest["term_index"]["records"] = 2600

    rewrite_manifest(store, version, change)
    found = [v.detail for v in audit_releases(store).violations]
    expected = {"overlap": "overlaps its predecessor", "gap": "leaves a gap",
                "short": "the parts cover positions 0..2500"}[tiling]
    assert any(expected in d for d in found), found
    with pytest.raises(StoreError, match=expected):  # an append does not build on it
        append(FEW, store, min_new=1000)
    assert current_version(store) == version


@pytest.mark.parametrize("home", ["missing", "later", "not a version"])
def test_the_audit_names_a_part_whose_home_is_wrong(tmp_path, home):
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PARAMS)
    first = current_version(store)
    append(LATER, store, min_new=10)
    version = current_version(store)
    wrong = {"missing": "v000000", "later": "v000009", "not a version": "../v000001"}[home]
    rewrite_manifest(store, version, lambda manifest: manifest["term_index"]["parts"][0]
                     .update(home=wrong))
    found = [v for v in audit_releases(store).violations if v.kind == "integrity"]
    assert first == "v000001"
    if home == "missing":  # an earlier version's name, but no such directory
        assert any(v.where == "private/v000000" and "home does not exist" in v.detail
                   and version in v.detail for v in found), found
    else:
        name = "'v000009'" if home == "later" else "'../v000001'"
        assert any(f"home {name} is not {version} or an earlier version" in v.detail
                   for v in found), found


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


@pytest.mark.parametrize("tamper", ["swap", "repeat", "outside"])
def test_the_audit_catches_a_tampered_index_order(tmp_path, tamper):
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, SHARDED)
    version = current_version(store)
    part = layout_of(store).parts[1]
    path = store.root / "private" / part.order_path
    order = fmt.decode_term_order(path.read_bytes(), part.records).copy()
    if tamper == "swap":  # still a numbering: only the chunks can tell
        order[[0, -1]] = order[[-1, 0]]
    elif tamper == "repeat":
        order[0] = order[1]
    else:  # a numbering of positions, not of the part's
        order[0] = 0
    data = fmt.encode_term_order(order)
    path.write_bytes(data)
    rewrite_manifest(store, version, lambda manifest: manifest["term_index"]["parts"][1]
                     .update(order_sha256=hashlib.sha256(data).hexdigest()))
    found = [v.detail for v in audit_releases(store).violations]
    expected = "disagree with the chunks" if tamper == "swap" else \
        "records 700..1400 exactly once"
    assert any(expected in d for d in found), found


@pytest.mark.parametrize("legacy", ["sharded", "in record order"])
def test_an_index_written_before_parts_is_read_served_audited_and_appended_to(tmp_path,
                                                                               legacy):
    """As versions before parts wrote it: shards of one index with one global order, or one
    file in record order without shard fields.  Appends carry it as one part at home in its
    version, and merge it like any other."""
    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PARAMS)
    first = current_version(store)
    make_legacy(store, first, 700 if legacy == "sharded" else None, legacy == "sharded")
    legacy_files = own_index_files(store, first)
    assert legacy_files == (["terms.1.roaring", "terms.2.roaring", "terms.3.roaring",
                             "terms.order", "terms.roaring"] if legacy == "sharded"
                            else ["terms.roaring"])
    assert audit_releases(store).ok
    assert_brute_force(store, [FIRST])
    assert_brute_force(store, [FIRST], "index-inline")
    publication = Publication.open(store)
    assert publication.record_count == len(FIRST)
    assert publication.term_record_positions() == publication.resolved_term_records()

    append(LATER, store, min_new=10)
    version = current_version(store)
    parts = layout_of(store).parts
    assert [(p.home, p.start, p.stop) for p in parts] == [(first, 0, 2500),
                                                          (version, 2500, 3400)]
    assert parts[0].files == (("terms.roaring", "terms.1.roaring", "terms.2.roaring",
                               "terms.3.roaring") if legacy == "sharded" else ("terms.roaring",))
    assert parts[0].order == ("terms.order" if legacy == "sharded" else None)
    assert own_index_files(store, first) == legacy_files
    assert_brute_force(store, [FIRST, LATER])
    assert_brute_force(store, [FIRST, LATER], "index-inline")
    assert audit_releases(store).ok
    more = synthetic(900, 4, "d")
    append(more, store, min_new=10)  # 2500, 900, 900 -> 2500, 1800 -> 4300: reads the old one
    assert [(p.start, p.stop) for p in assert_parts_sound(store).parts] == [(0, 4300)]
    assert_brute_force(store, [FIRST, LATER, more])
    assert audit_releases(store).ok


def test_files_that_do_not_tile_the_positions_are_refused():
    one = fmt.encode_term_index(10, [("a", BitMap([1]).serialize())], 0, 2, 0, 5)
    other = fmt.encode_term_index(10, [("a", BitMap([7]).serialize())], 1, 2, 6, 10)
    with pytest.raises(fmt.FormatError, match="does not follow"):
        TermIndex([fmt.decode_term_index(one), fmt.decode_term_index(other)])
    with pytest.raises(fmt.FormatError, match="shard 0 of 2"):
        TermIndex([fmt.decode_term_index(one)])
    whole = fmt.encode_term_index(10, [("a", BitMap([7]).serialize())], 1, 2, 5, 10)
    index = TermIndex([fmt.decode_term_index(one), fmt.decode_term_index(whole)])
    assert list(index["a"]) == [1, 7] and index.records == 10
    low = fmt.encode_term_part([("a", BitMap([1]).serialize())], 0, 5)
    high = fmt.encode_term_part([("a", BitMap([6]).serialize())], 6, 10)
    with pytest.raises(fmt.FormatError, match="does not follow"):
        TermIndex([fmt.decode_term_index(low), fmt.decode_term_index(high)], 10)
    high = fmt.encode_term_part([("a", BitMap([6]).serialize())], 5, 10)
    index = TermIndex([fmt.decode_term_index(low), fmt.decode_term_index(high)], 10)
    assert list(index["a"]) == [1, 6] and index.records == 10


def test_a_malformed_index_is_a_format_error():
    with pytest.raises(fmt.FormatError):
        TermIndex.decode(b"something else\n")
    good = fmt.encode_term_index(3, [("a", BitMap([0, 2]).serialize())])
    with pytest.raises(fmt.FormatError):
        TermIndex.decode(good[:-1])
    assert list(TermIndex.decode(good)["a"]) == [0, 2]


def test_serve_opens_the_index_alone_and_answers_as_brute_force(tmp_path):
    """The index, and the private manifest for the public chunks' terms (GET /v1/terms, and
    a query's check that it names only those)."""
    from cocktail.private_config import STORE_ID
    from cocktail.service import CurrentPublication

    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, PARAMS)
    served = []
    read = reads_of(store, lambda: served.append(CurrentPublication(store, "fast", 3600)))
    served[0].close()
    data = [path for path in read if path != f"private/{STORE_ID}"]  # names its answers
    version = current_version(store)
    assert data == ["public/CURRENT", f"private/{version}/{fmt.TERM_PARTS}",
                    f"private/{layout_of(store).parts[0].paths()[0]}",
                    f"private/{version}/{fmt.MANIFEST}"]
    asked = [CountQuery(q) for q in random_conjunctions(list(FIRST.records), 50, seed=5)]
    assert served[0].get().counts(asked) == [FIRST.count_containing(q.terms) for q in asked]


def test_serve_over_the_parts_reads_only_their_list_ahead(tmp_path):
    """With a job over the parts, the service holds the parts' list, not the index: the
    job's tasks read the parts.  (And the private manifest, for the public chunks' terms.)"""
    from cocktail.private_config import STORE_ID
    from cocktail.service import CurrentPublication

    store = LocalStore(tmp_path / "s")
    publish(FIRST, store, SHARDED)
    served = []
    read = reads_of(store, lambda: served.append(CurrentPublication(store, "index-inline",
                                                                    3600)))
    served[0].close()
    data = [path for path in read if path != f"private/{STORE_ID}"]
    version = current_version(store)
    assert data == ["public/CURRENT", f"private/{version}/{fmt.TERM_PARTS}",
                    f"private/{version}/{fmt.MANIFEST}"]
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
