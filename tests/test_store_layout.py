"""One home for a store's layout and its commit step (cocktail.releases): every writer commits
through it, `cocktail audit` and the report cover every part the registry knows, and the
republish hop can neither overwrite an owner's publication nor derive from an altered one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from cocktail.cli import main
from cocktail.releases import committed_versions, current_version, read_log
from cocktail.releases.layout import RANKS, TABLES, named_store
from cocktail.report.numbers import store_numbers
from cocktail.store import LocalStore

RUN = CliRunner()


def cli(*args: str) -> tuple[int, dict]:
    result = RUN.invoke(main, [*args, "--json"])
    return result.exit_code, json.loads(result.output)


def ok(*args: str) -> dict:
    code, report = cli(*args)
    assert code == 0, report
    return report


@pytest.fixture()
def full_store(tmp_path) -> Path:
    """Baskets (published, then appended), a table (twice) and a ranking (built twice)."""
    store = tmp_path / "s"
    for seed, name in ((1, "b1.dat"), (2, "b2.dat")):
        assert RUN.invoke(main, ["generate", str(tmp_path / name), "--records", "1500",
                                 "--seed", str(seed)]).exit_code == 0
    ok("publish", str(tmp_path / "b1.dat"), "--store", str(store), "--k", "4", "--m", "2",
       "--keep", "1")
    ok("publish", str(tmp_path / "b2.dat"), "--store", str(store), "--append")
    table = tmp_path / "t.csv"
    table.write_text("q,s\n" + "".join(f"{'abcdef'[i % 6]},{i * 7 % 50}\n" for i in range(60)))
    ok("table", "publish", str(table), "--qi", "q", "--sensitive", "s", "--distinct", "2",
       "--range", "1", "--store", str(store), "--keep", "1")
    more = tmp_path / "u.csv"
    more.write_text("q,s\n" + "".join(f"{'abcdef'[i % 6]},{i * 3 % 40}\n" for i in range(30)))
    ok("table", "publish", "--append", str(more), "--store", str(store))
    people = tmp_path / "p.csv"
    people.write_text("id,city,age,religion\n" + "".join(
        f"p{i},{'xyz'[i % 3]},{20 + i},{'rst'[i * 7 % 3]}\n" for i in range(30)))
    for _ in range(2):
        ok("rank", "build", str(people), "--public", "city,age", "--private", "religion",
           "--id", "id", "--numeric", "age", "--defense", "estt", "--store", str(store))
    return store


def parts(root: Path) -> list[LocalStore]:
    store = LocalStore(root)
    return [store, named_store(store, TABLES, "table"), named_store(store, RANKS, "ranking")]


def test_every_writer_commits_through_one_step(full_store):
    """Each part: a log entry per version, old versions pruned, the public files of a version
    sharing one modification time (nothing tells how they were made)."""
    for part, kept in zip(parts(full_store), (1, 3, 3)):  # a table append keeps 3 by default
        current = current_version(part)
        versions = committed_versions(part)
        assert current == "v000002" and len(versions) == min(kept, 2)
        assert [e["version"] for e in read_log(part)] == ["v000001", "v000002"]
        public = Path(part.location("public", current))
        times = {p.stat().st_mtime for p in public.rglob("*") if p.is_file()}
        assert len(times) == 1, f"{part.url}: {len(times)} modification times"
    assert not list(full_store.rglob(".lock")) and not list(full_store.rglob(".staging-*"))


def test_audit_covers_baskets_tables_and_rankings(full_store):
    report = ok("audit", "--store", str(full_store))
    assert report["ok"] and report["chunks"] > 0
    assert report["tables"]["table"]["ok"] and report["rankings"]["ranking"]["ok"]
    assert report["rankings"]["ranking"]["versions"] == 2
    numbers = store_numbers(LocalStore(full_store))
    assert [(r["name"], r["audit"]) for r in numbers["rankings"]] == [("ranking", "pass")]


def test_audit_catches_what_a_ranking_must_not_show(full_store):
    ranking = named_store(LocalStore(full_store), RANKS, "ranking")
    version = current_version(ranking)
    public = Path(ranking.location("public", f"{version}/public.csv"))
    original = public.read_bytes()
    (public.parent / "state.json").write_bytes(b"{}")  # a private file in the public zone
    code, report = cli("audit", "--store", str(full_store))
    assert code == 1 and "state.json" in str(report["rankings"]["ranking"]["violations"])
    (public.parent / "state.json").unlink()
    lines = original.decode().splitlines()  # a private column shown beside the public ones
    public.write_text("\n".join([lines[0] + ",religion"] + [f"{l},r" for l in lines[1:]]) + "\n")
    code, report = cli("audit", "--store", str(full_store))
    assert code == 1 and "religion" in str(report["rankings"]["ranking"]["violations"])
    public.write_bytes(original.replace(b",x,", b",y,", 1))  # values that are not the owner's
    code, report = cli("audit", "--store", str(full_store))
    assert code == 1 and "public values" in str(report["rankings"]["ranking"]["violations"])


def test_a_stray_file_beside_the_parts_fails_the_audit(full_store):
    (full_store / "public" / "export.csv").write_text("id,religion\n")
    code, report = cli("audit", "--store", str(full_store))
    assert code == 1 and "export.csv" in str(report["violations"])


def test_a_store_of_tables_and_rankings_only_is_audited(tmp_path, full_store):
    os.rename(full_store / "public" / "CURRENT", tmp_path / "moved")  # no basket publication
    report = ok("audit", "--store", str(full_store))
    assert report["version"] is None and set(report["tables"]) == {"table"}
    assert cli("audit", "--store", str(tmp_path / "empty"))[0] == 2


# -- republish: one store, one kind of publication --------------------------------------------

@pytest.fixture()
def two_stores(tmp_path) -> tuple[Path, Path]:
    data = tmp_path / "d.dat"
    assert RUN.invoke(main, ["generate", str(data), "--records", "2000", "--seed", "3"]
                      ).exit_code == 0
    for name in ("a", "b"):
        ok("publish", str(data), "--store", str(tmp_path / name), "--k", "4", "--m", "2")
    return tmp_path / "a", tmp_path / "b"


def test_republish_refuses_a_store_holding_an_owners_publication(tmp_path, two_stores):
    a, b = two_stores
    before = (b / "public" / "CURRENT").read_bytes()
    code, report = cli("republish", "--from", str(a), "--to", str(b), "--k", "8", "--m", "2")
    assert code == 3 and "owner's publication" in report["error"]
    assert (b / "public" / "CURRENT").read_bytes() == before
    assert committed_versions(LocalStore(b)) == ["v000001"]
    code, report = cli("republish", "--from", str(a), "--to", str(a), "--k", "8", "--m", "2")
    assert code == 3 and "both the source and the recipient" in report["error"]
    more = tmp_path / "more.dat"
    assert RUN.invoke(main, ["generate", str(more), "--records", "500", "--seed", "9"]
                      ).exit_code == 0
    assert ok("publish", str(more), "--store", str(b), "--append")["version"] == "v000002"


def test_a_derived_view_takes_no_owner_writes(tmp_path, two_stores):
    a, _ = two_stores
    derived = tmp_path / "d"
    ok("republish", "--from", str(a), "--to", str(derived), "--k", "8", "--m", "2")
    again = ok("republish", "--from", str(a), "--to", str(derived), "--k", "10", "--m", "2")
    assert again["version"] == "v000002"
    assert [e["kind"] for e in read_log(LocalStore(derived))] == ["derived", "derived"]
    more = tmp_path / "more.dat"
    assert RUN.invoke(main, ["generate", str(more), "--records", "500", "--seed", "9"]
                      ).exit_code == 0
    for args in (["--append"], ["--rebase"]):
        code, report = cli("publish", str(more), "--store", str(derived), *args)
        assert code == 3 and "derived" in report["error"]
    code, report = cli("audit", "--releases", "--store", str(derived))
    assert code == 2 and "--chain" in report["error"]
    assert ok("audit", "--store", str(derived))["ok"]


def test_republish_refuses_an_altered_source(tmp_path, two_stores):
    a, _ = two_stores
    chunk = sorted((a / "public" / "v000001" / "chunks").iterdir())[0]
    first = chunk.read_text().splitlines()
    pseudonym, terms = first[0].split("\t")
    chunk.write_text("\n".join([f"{pseudonym}\t{json.dumps(json.loads(terms) + ['~'])}",
                                *first[1:]]) + "\n")
    code, report = cli("republish", "--from", str(a), "--to", str(tmp_path / "d"), "--k", "8",
                       "--m", "2")
    assert code == 2 and "sha256" in report["error"] and chunk.name in report["error"]
    assert not (tmp_path / "d").exists()
