"""How a version lays out its manifests so that the next one carries them in slices
(cocktail/publish/carried.py): private entries unit by unit, public ones by chunk id, every
entry naming its home; an append that reads only the units it touches; and a manifest written
before the layout, brought to it by its first append with nothing lost."""

from __future__ import annotations

import json
import secrets
from itertools import combinations

from hypothesis import given
from hypothesis import strategies as st

from cocktail import chunkformat as fmt
from cocktail.audit import audit, audit_releases
from cocktail.dataset import Dataset
from cocktail.publish import PublishParams, publish
from cocktail.publish.append import append
from cocktail.query import Engine, Publication
from cocktail.querylang import CountQuery
from cocktail.releases import committed_versions
from cocktail.store import LocalStore
from cocktail.synthetic import SyntheticSpec, generate

ids = st.text("0123456789abcdef", min_size=fmt.CHUNK_ID_HEX, max_size=fmt.CHUNK_ID_HEX)


def line(chunk_id: str, mark: str = "old") -> bytes:
    return fmt.chunk_line({"mark": mark, "unit": 0}, chunk_id)


@given(st.sets(ids, max_size=40), st.data())
def test_a_splice_is_the_sort_of_what_is_kept_and_added(old, data):
    lines = [line(i) for i in sorted(old)]
    drop = data.draw(st.sets(st.sampled_from(sorted(old)) if old else st.nothing()))
    drop |= data.draw(st.sets(ids, max_size=3))  # ids it does not hold: nothing to drop
    added = data.draw(st.sets(ids, max_size=10) | st.sets(st.sampled_from(sorted(drop)))
                      if drop else st.sets(ids, max_size=10))
    new = [line(i, "new") for i in added if i in drop or i not in old]
    expected = sorted([x for x in lines if fmt.line_chunk_id(x) not in drop] + new,
                      key=fmt.line_chunk_id)
    assert fmt.spliced(lines, drop, new) == expected


def records(count: int, seed: int) -> Dataset:
    made = generate(SyntheticSpec(records=count, seed=seed, items=60, patterns=12))
    return Dataset(tuple(f"s{seed}-{i}" for i in range(count)), tuple(made), "memory", "jsonl")


def private_manifest(store: LocalStore, version: str) -> tuple[dict, list[bytes]]:
    path = fmt.manifest_path(version)
    return fmt.split_manifest(store.read("private", path), path)


def assert_laid_out(store: LocalStore, version: str) -> None:
    head, lines = private_manifest(store, version)
    assert head["chunk_order"] == "unit"
    units = [fmt.line_unit(x) for x in lines]
    assert units == sorted(units)  # unit by unit, in unit order
    assert [u["chunk_count"] for u in head["units"]] == [units.count(u["id"])
                                                        for u in head["units"]]
    for unit in head["units"]:
        mine = [fmt.line_chunk_id(x) for x in lines if fmt.line_unit(x) == unit["id"]]
        assert mine == sorted(mine)
    _, public = fmt.split_manifest(store.read("public", fmt.manifest_path(version)), "public")
    assert [fmt.line_chunk_id(x) for x in public] == sorted(map(fmt.line_chunk_id, public))
    for entry in (*(fmt.line_entry(x)[1] for x in lines), *map(json.loads, public)):
        assert fmt.VERSION_RE.match(entry["home"]) and entry["home"] <= version


def exact_counts_hold(store: LocalStore, every: list[frozenset]) -> bool:
    terms = sorted(frozenset().union(*every))[:25]
    queries = [CountQuery((t,)) for t in terms] + [CountQuery(p) for p in combinations(terms, 2)]
    return Engine(Publication.open(store)).counts(queries) == [
        sum(1 for r in every if set(q.terms) <= r) for q in queries]


def test_every_version_lists_its_units_in_order_and_names_each_home(tmp_path):
    store = LocalStore(tmp_path / "s")
    first, more = records(3000, 1), [records(150, seed) for seed in (2, 3, 4)]
    publish(first, store, PublishParams(k=4, m=2, cluster_size=200, keep=10))
    for batch in more:
        append(batch, store)
    for version in committed_versions(store):
        assert_laid_out(store, version)
    assert audit_releases(store).ok and audit(store).ok
    assert exact_counts_hold(store, [*first.records, *(r for b in more for r in b.records)])


def test_an_append_reads_only_the_lines_of_the_units_it_touches(tmp_path, monkeypatch):
    store = LocalStore(tmp_path / "s")
    first = records(6000, 1)
    publish(first, store, PublishParams(k=4, m=2, cluster_size=100, keep=10))
    head, lines = private_manifest(store, committed_versions(store)[-1])
    assert len(head["units"]) > 50
    read = []
    monkeypatch.setattr(fmt, "line_entry", lambda x, parse=fmt.line_entry: (
        read.append(fmt.line_unit(x)), parse(x))[1])

    def every_line(self):
        raise AssertionError("an append read every line of the manifest")
    monkeypatch.setattr(Publication, "_line_of_chunk", property(every_line))
    batch = records(20, 2)
    append(batch, store)
    assert 0 < len(set(read)) < len(head["units"]) / 2
    assert len(read) < len(lines) / 2
    assert_laid_out(store, committed_versions(store)[-1])
    assert exact_counts_hold(store, [*first.records, *batch.records])


def as_written_before_the_layout(store: LocalStore, version: str) -> None:
    """The private manifest as versions wrote it before the layout: no mark, no unit counts,
    entries in no order, and none naming its own version as home."""
    head, lines = private_manifest(store, version)
    del head["chunk_order"]
    for unit in head["units"]:
        del unit["chunk_count"]
    own = b'"home":"' + version.encode() + b'",'
    lines = [x.replace(own, b"") for x in lines]
    secrets.SystemRandom().shuffle(lines)
    store.write("private", fmt.manifest_path(version),
                b"".join(fmt.encode_manifest(head, lines, listed=False)), pri_label=True)


def test_a_manifest_written_before_the_layout_is_brought_to_it(tmp_path):
    store = LocalStore(tmp_path / "s")
    first, batch = records(3000, 1), records(150, 2)
    publish(first, store, PublishParams(k=4, m=2, cluster_size=200, keep=10))
    before = committed_versions(store)[-1]
    entries = Publication.open(store).manifest["chunks"]
    as_written_before_the_layout(store, before)
    legacy = Publication.open(store)
    assert not legacy.lines_by_unit
    assert {c: {"home": before} | e for c, e in legacy.manifest["chunks"].items()} == entries
    append(batch, store)
    assert_laid_out(store, committed_versions(store)[-1])
    assert audit_releases(store).ok and audit(store).ok
    assert exact_counts_hold(store, [*first.records, *batch.records])
