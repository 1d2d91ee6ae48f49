"""Taking it back: a duplicate batch refused, records forgotten, a release retracted, and the
public cloud's version-diff attacker on what was erased (docs/releases.md)."""

from __future__ import annotations

import json
import random
import re
import shutil
import signal
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cocktail.attacks.version_diff import mean_success, public_view
from cocktail.audit import audit, audit_releases
from cocktail.cli import main
from cocktail.dataset import Dataset, load
from cocktail.publish import PublishParams, publish
from cocktail.publish.append import DuplicateBatch, append
from cocktail.publish.forget import forget, retract
from cocktail.query import Engine, Publication
from cocktail.querylang import CountQuery
from cocktail.releases import Refused, current_version, member_hash, read_log
from cocktail.store import LocalStore
from cocktail.synthetic import random_conjunctions

from .conftest import dataset_path


def generated(tmp_path, name: str, records: int, seed: int):
    path = tmp_path / name
    assert CliRunner().invoke(main, ["generate", str(path), "--records", str(records),
                                     "--seed", str(seed)]).exit_code == 0
    return path


def test_a_fimi_batch_appended_twice_is_refused_unless_meant(tmp_path):
    day1, day2 = generated(tmp_path, "day1.dat", 3000, 1), generated(tmp_path, "day2.dat", 800, 2)
    store = LocalStore(tmp_path / "s")
    publish(load(day1), store, PublishParams(k=4, m=2))
    with pytest.raises(DuplicateBatch, match="release v000001 added the same records"):
        append(load(day1), store)  # the first release's batch counts too
    append(load(day2), store)
    again = CliRunner().invoke(main, ["publish", str(day2), "--store", str(store.root),
                                      "--append", "--json"])
    assert again.exit_code == 3, again.output
    refusal = json.loads(again.stdout)
    assert "v000002 added the same records" in json.dumps(refusal)
    assert [e["version"] for e in read_log(store)] == ["v000001", "v000002"]  # nothing written
    copy = tmp_path / "copy.dat"  # the same content under another name is the same batch
    copy.write_bytes(day2.read_bytes())
    with pytest.raises(Refused):
        append(load(copy), store)
    meant = CliRunner().invoke(main, ["publish", str(day2), "--store", str(store.root),
                                      "--append", "--allow-duplicate", "--json"])
    assert meant.exit_code == 0, meant.output
    assert json.loads(meant.stdout)["appended_records"] == 800
    assert CliRunner().invoke(main, ["publish", str(day2), "--store", str(store.root),
                                     "--allow-duplicate"]).exit_code == 2


# -- forgetting and retracting ---------------------------------------------------------------


HEX = re.compile(rb"[0-9a-f]{16,20}")
QUOTED = re.compile(rb'"(?:[^"\\\n]|\\.)*"')


def traces(store: LocalStore, positions: list[int]) -> dict[str, set]:
    """What the current version holds of the records at ``positions``: their ids, the log's
    names for them, and their pseudonyms in every chunk (from the private maps)."""
    publication = Publication.open(store)
    ids = publication.record_ids_at(positions)
    pseudonyms = set()
    wanted = set(positions)
    for unit in range(len(publication.units)):
        pseudonyms |= {p for _, p, at, *_ in publication.map_rows(unit) if at in wanted}
    return {"ids": {f'"{i}"'.encode() for i in ids.values()},
            "names": {member_hash(i).encode() for i in ids.values()},
            "pseudonyms": {p.encode() for p in pseudonyms}}


def assert_gone(store: LocalStore, found: dict[str, set], positions: list[int]) -> None:
    """No file of either zone holds an erased record's id, log name or pseudonym; the current
    version maps nothing to its positions and indexes nothing there."""
    for path in store.root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            tokens = set(HEX.findall(data))
            assert not tokens & found["pseudonyms"], path
            assert not tokens & found["names"], path
            assert not set(QUOTED.findall(data)) & found["ids"], path
    publication = Publication.open(store)
    held = set(positions)
    for unit in range(len(publication.units)):
        assert not {at for _, _, at, *_ in publication.map_rows(unit)} & held
    assert not any(held & set(bitmap) for bitmap in publication.term_record_positions().values())
    assert set(publication.record_ids_at(positions).values()) == {None}


def remaining(records: list[frozenset[str]], erased: set[int]) -> Dataset:
    left = tuple(r for p, r in enumerate(records) if p not in erased)
    return Dataset(tuple(map(str, range(len(left)))), left, "memory", "jsonl")


def assert_sound(store: LocalStore, records: list[frozenset[str]], erased: set[int],
                 seed: int) -> None:
    """Both audits pass; 200 random conjunctions (and the count of all records) equal brute
    force over the records that remain."""
    assert audit(store).ok
    history = audit_releases(store)
    assert history.ok, history.violations[:3]
    left = remaining(records, erased)
    pairs = Publication.open(store).head["pairs"]
    assert pairs["public"] + pairs["private"] == sum(len(r) for r in left.records)
    queries = [CountQuery(q) for q in random_conjunctions(left.records, 200, seed=seed)]
    queries.append(CountQuery(()))
    assert Engine(Publication.open(store)).counts(queries) == \
        [left.count_containing(q.terms) for q in queries]


def test_forgetting_1_10_and_1000_records_and_retracting_a_release_of_bms_webview_2(tmp_path):
    read = load(dataset_path("bms-webview-2.dat"))  # ids unlike any term, for the grep
    whole = Dataset(tuple(f"person-{i}" for i in read.ids), read.records, "memory", "jsonl")
    store = LocalStore(tmp_path / "s")
    cut = len(whole) - 5000
    publish(Dataset(whole.ids[:cut], whole.records[:cut], "memory", "jsonl"), store,
            PublishParams(k=5, m=3))
    append(Dataset(whole.ids[cut:], whole.records[cut:], "memory", "jsonl"), store)
    records = Publication.open(store).owner_records()
    assert records == list(whole.records)
    rng, erased = random.Random(65), set()
    for count in (1, 10, 1000):
        positions = rng.sample(sorted(set(range(cut)) - erased), count)
        found = traces(store, positions)
        ids = [i.decode()[1:-1] for i in found["ids"]]
        receipt = forget(store, ids, "erasure request")
        erased |= set(positions)
        assert receipt.records_erased == count and receipt.kept_versions == [receipt.version]
        assert receipt.files_pending == 0 and receipt.files_removed > 0
        assert_gone(store, found, positions)
        assert_sound(store, records, erased, seed=count)
    found = traces(store, list(range(cut, len(whole))))
    receipt = retract(store, "v000002", "wrong file appended")
    assert receipt.records_erased == 5000 and receipt.retracted == "v000002"
    erased |= set(range(cut, len(whole)))
    assert_gone(store, found, list(range(cut, len(whole))))
    assert_sound(store, records, erased, seed=5000)
    entries = {e["version"]: e for e in read_log(store)}
    assert [e["kind"] for e in entries.values()] == \
        ["fresh", "append", "forget", "forget", "forget", "retract"]
    assert entries["v000006"]["erased"] == {"records": 5000, "reason": "wrong file appended"}
    with pytest.raises(ValueError, match="no record left to erase"):
        retract(store, "v000002", "again")


# -- the public cloud's version-diff attacker ------------------------------------------------

def parts(store: LocalStore, positions) -> list[dict[str, tuple[str, ...]]]:
    """Each record's public subrecords in the current version: chunk -> its terms there."""
    publication = Publication.open(store)
    wanted, found = set(positions), {p: {} for p in positions}
    for chunk in publication.chunks.values():
        if chunk.private:
            continue
        names = publication.record_positions(chunk.id)
        for pseudonym, terms in publication.subrecords(chunk.id):
            if names[pseudonym] in wanted:
                found[names[pseudonym]][chunk.id] = tuple(sorted(terms))
    return [found[p] for p in positions]


def dropped(view: dict, records: list[dict]) -> dict:
    """The naive erasure as the public cloud would see it: the same chunks, the erased
    records' lines gone (renaming or reordering the rest changes no multiset)."""
    after = {chunk: lines.copy() for chunk, lines in view.items()}
    for record in records:
        for chunk, sub in record.items():
            after[chunk][sub] -= 1
    return {chunk: +lines for chunk, lines in after.items()}


def test_the_version_diff_attacker_does_no_better_on_erasures_than_on_an_append(tmp_path):
    """200 records erased, 10 a release, each release from the same publication: diffing each
    pair of consecutive versions re-associates none of their parts, against its success on
    the records an append added; dropping their lines (the naive design) gives them away."""
    day1, day2 = generated(tmp_path, "a.dat", 20000, 1), generated(tmp_path, "b.dat", 2000, 2)
    origin = LocalStore(tmp_path / "s")
    publish(load(day1), origin, PublishParams(k=4, m=2))
    before = public_view(origin, "v000001")
    appended = append(load(day2), origin)
    added = parts(origin, range(20000, 22000))
    baseline = mean_success([(before, public_view(origin, appended.version), added)])
    view = public_view(origin, appended.version)
    publication = Publication.open(origin)
    steps, naive, one_by_one = [], [], []
    candidates = random.Random(7).sample(range(20000), 200)
    for start in range(0, 200, 10):
        positions = candidates[start:start + 10]
        records = parts(origin, positions)
        store = LocalStore(shutil.copytree(origin.root, tmp_path / f"copy{start}"))
        receipt = forget(store, publication.record_ids_at(positions).values(), "erasure")
        steps.append((view, public_view(store, receipt.version), records))
        naive.append((view, dropped(view, records), records))
        one_by_one += [(view, dropped(view, [record]), [record]) for record in records]
        if start == 0:
            assert audit_releases(store).ok
        shutil.rmtree(store.root)
    linkable = sum(len(r) >= 2 for *_, records in steps for r in records)
    assert linkable >= 100  # records whose parts a diff could link, had it shown them
    ours = mean_success(steps)
    print(f"\nversion-diff attacker: append baseline {baseline:.3f}, retiring {ours:.3f}, "
          f"naive {mean_success(naive):.3f} (10 a release), "
          f"{mean_success(one_by_one):.3f} (one a release); {linkable} linkable of 200")
    assert ours <= baseline + 0.01
    assert mean_success(one_by_one) > 0.9 and mean_success(naive) > baseline + 0.2


KILLED_FORGET = """
import os, signal, sys
from cocktail.store import LocalStore
from cocktail.publish.forget import forget
calls, target = [0], int(sys.argv[3])
for name in ("write", "rename", "remove", "stamp"):
    def wrapped(self, *args, _original=getattr(LocalStore, name), **kwargs):
        calls[0] += 1
        if calls[0] == target:
            os.kill(os.getpid(), signal.SIGKILL)
        return _original(self, *args, **kwargs)
    setattr(LocalStore, name, wrapped)
forget(LocalStore(sys.argv[1]), open(sys.argv[2]).read().split(), "erasure request")
print(calls[0])
"""


def test_a_forget_killed_at_any_step_leaves_the_previous_release_current(tmp_path):
    """SIGKILL at the n-th change to the store, for n spread over the whole run: before the
    commit point the previous release is current, whole, and a re-run lands; after it, the
    erasure holds and the next release finishes the prune."""
    origin = LocalStore(tmp_path / "s")
    publish(load(generated(tmp_path, "a.dat", 3000, 1)), origin, PublishParams(k=4, m=2))
    ids = tmp_path / "ids.txt"
    positions = random.Random(3).sample(range(3000), 5)
    ids.write_text("\n".join(Publication.open(origin).record_ids_at(positions).values()))

    def run(target: int, where) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", KILLED_FORGET, str(where), str(ids),
                               str(target)], capture_output=True, text=True)

    whole = run(0, shutil.copytree(origin.root, tmp_path / "whole"))
    changes = int(whole.stdout)
    for target in sorted({1, 2, *range(3, changes, max(1, changes // 9)), changes - 1, changes}):
        store = LocalStore(shutil.copytree(origin.root, tmp_path / f"killed{target}"))
        assert run(target, store.root).returncode == -signal.SIGKILL
        if current_version(store) == "v000001":
            assert audit(store).ok and audit_releases(store).ok, target
            assert run(0, store.root).returncode == 0
        assert current_version(store) == "v000002", target
        append(load(generated(tmp_path, "b.dat", 500, 2)), store)  # prunes what was left
        assert audit(store).ok and audit_releases(store).ok, target
        assert Publication.open(store).live_records == 3000 - 5 + 500
        shutil.rmtree(store.root)
