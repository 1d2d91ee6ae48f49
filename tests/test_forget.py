"""Taking it back: a duplicate batch refused, records forgotten, a release retracted, and the
public cloud's version-diff attacker on what was erased (docs/releases.md)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cocktail.cli import main
from cocktail.dataset import load
from cocktail.publish import PublishParams, publish
from cocktail.publish.append import DuplicateBatch, append
from cocktail.releases import Refused, read_log
from cocktail.store import LocalStore


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
