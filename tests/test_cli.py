"""The command line as a user meets it: help, JSON output, exit codes, clear errors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cocktail.cli import main

from cocktail.dataset import load

from .conftest import dataset_path

COMMANDS = ["generate", "publish", "audit", "query", "plan", "demo"]


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize("command", [[], *[[c] for c in COMMANDS]])
def test_help_everywhere(command):
    result = run(*command, "--help")
    assert result.exit_code == 0
    assert "Usage:" in result.output


def test_publish_audit_query_json(tmp_path):
    data = tmp_path / "baskets.dat"
    assert run("generate", data, "--records", 3000, "--seed", 3).exit_code == 0
    store = tmp_path / "store"
    result = run("publish", data, "--store", store, "--k", 4, "--m", 2, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    for key in ("public_chunks", "private_terms", "private_subrecords", "seconds", "version"):
        assert key in report
    assert report["records"] == 3000
    audited = json.loads(run("audit", "--store", store, "--json").stdout)
    assert audited["ok"] and audited["chunks"] == report["public_chunks"]
    dataset = load(data)
    top = max(dataset.terms(), key=lambda t: dataset.count_containing([t]))
    answer = json.loads(run("query", "--exact", f"count({top})", "--store", store, "--json").stdout)
    assert answer["answer"] == dataset.count_containing([top]) and answer["exact"] is True
    inline = json.loads(run("query", "--exact", f"count({top})", "--store", store, "--runner",
                            "inline", "--json").stdout)
    assert inline["answer"] == answer["answer"]
    plan = json.loads(run("plan", f"count({top})", "--store", store, "--json").stdout)
    assert plan["tasks"] and all(top in t["terms"] for t in plan["tasks"])


def test_audit_exit_status_on_violation(tmp_path):
    store = tmp_path / "store"
    run("publish", dataset_path("bms-webview-1.dat"), "--store", store, "--cluster-size", 20000)
    assert run("audit", "--store", store).exit_code == 0
    (store / "public" / "stray.txt").write_text("oops")
    result = run("audit", "--store", store)
    assert result.exit_code == 1
    assert "stray.txt" in result.output and "FAIL" in result.output


@pytest.mark.parametrize("args,message", [
    (["publish", "missing.dat"], "missing.dat"),
    (["query", "--exact", "count(a &)"], "expected a term"),
    (["query", "--exact", "count(a)", "--store", "nowhere"], "no publication yet"),
    (["audit", "--store", "nowhere"], "no publication to audit"),
])
def test_clear_errors(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert message in result.output


def test_noisy_query_is_refused_for_now(tmp_path):
    result = CliRunner().invoke(main, ["query", "count(a)", "--store", str(tmp_path)])
    assert result.exit_code == 2 and "--exact" in result.output


def test_bad_input_line_is_named_and_can_be_skipped(tmp_path):
    data = tmp_path / "bad.jsonl"
    data.write_text('{"id": 1, "terms": ["a", "b"]}\n{"id": 2, "terms": oops}\n'
                    '{"id": 3, "terms": ["a"]}\n')
    result = CliRunner().invoke(main, ["publish", str(data), "--store", str(tmp_path / "s")])
    assert result.exit_code == 2 and "bad.jsonl:2" in result.output
    result = run("publish", data, "--store", tmp_path / "s", "--skip-bad-lines", "--k", 1,
                 "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["skipped_lines"] == 1


def test_demo_json(tmp_path):
    result = run("demo", "--workdir", tmp_path / "demo", "--records", 2000, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] and report["audit"]["ok"]
    assert all(q["answer"] == q["brute_force"] for q in report["queries"])
