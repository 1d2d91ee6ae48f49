"""The command line as a user meets it: help, JSON output, exit codes, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cocktail.cli import main

from cocktail.dataset import load
from cocktail.synthetic import random_conjunctions

from .conftest import dataset_path
from .served import free_port, serve

COMMANDS = ["generate", "publish", "audit", "query", "plan", "demo", "roles", "users",
            "budget", "serve", "ledger"]


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
    pairs = random_conjunctions(dataset.records, 12, seed=4)
    batch = tmp_path / "batch.txt"
    lines = [f"count({' & '.join(q)})" for q in pairs] + [f"2*count({top}) - count({top})"]
    batch.write_text("\n".join(lines) + "\n")
    exact = json.loads(run("query", "--exact", "--batch", batch, "--store", store, "--runner",
                           "inline", "--json").stdout)
    truth = [dataset.count_containing(q) for q in pairs] + [dataset.count_containing([top])]
    assert exact["answers"] == truth and exact["exact"] is True


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


def test_analysts_ask_the_service_and_owners_the_store(tmp_path, monkeypatch):
    data, store = tmp_path / "baskets.dat", tmp_path / "store"
    run("generate", data, "--records", 3000, "--seed", 5)
    run("publish", data, "--store", store, "--k", 4, "--m", 2)
    dataset = load(data)
    a, b = sorted(dataset.terms(), key=lambda t: -dataset.count_containing([t]))[:2]
    missing = CliRunner().invoke(main, ["query", f"count({a})", "--store", str(store)])
    assert missing.exit_code == 2 and "--url" in missing.output and "--token" in missing.output
    assert run("roles", "add", "analyst", "--alpha", 1, "--budget", 2.5, "--store",
               store).exit_code == 0
    token = json.loads(run("users", "add", "ann", "--role", "analyst", "--store", store,
                           "--json").stdout)["token"]
    # A token marks an analyst: the owner's exact path refuses it.
    exact = CliRunner().invoke(main, ["query", "--exact", f"count({a})", "--store", str(store),
                                      "--token", token])
    assert exact.exit_code == 2 and "owner command" in exact.output
    with serve(store) as (url, _):
        def ask(*args):
            return CliRunner().invoke(main, ["query", *map(str, args), "--url", url, "--token",
                                             token, "--json"])

        first = json.loads(ask(f"count({a})").stdout)
        error = first["expected_rms_error"][0]
        assert first["charged"] == 1 and not first["reused"]
        assert abs(first["answers"][0] - dataset.count_containing([a])) < 25 * error
        again = json.loads(ask(f"count({a})").stdout)
        assert again["reused"] and again["answers"] == first["answers"]
        batch = tmp_path / "batch.txt"
        batch.write_text(f"count({a})\ncount({a} & {b})\n")
        assert json.loads(ask("--batch", batch).stdout)["budget"]["remaining"] == 0.5
        refused = ask(f"count({b})")
        assert refused.exit_code == 4 and json.loads(refused.stdout)["code"] == 4
        assert json.loads(refused.stdout)["http_status"] == 429
        assert "budget" in json.loads(refused.stdout)["error"]
        malformed = ask("count(a &")
        assert malformed.exit_code == 2 and "expected a term" in malformed.stdout
        wrong = CliRunner().invoke(main, ["query", "count(a)", "--url", url, "--token", "nope"])
        assert wrong.exit_code == 3 and "unknown token" in wrong.output
        monkeypatch.setenv("COCKTAIL_URL", url)
        monkeypatch.setenv("COCKTAIL_TOKEN", token)
        human = CliRunner().invoke(main, ["query", f"count({a})"])
        assert human.exit_code == 0 and "reused, no charge" in human.output
        no_scheme = CliRunner().invoke(main, ["query", "count(a)", "--url",
                                              url.removeprefix("http://")])
        assert no_scheme.exit_code == 2 and f"e.g. {url}" in no_scheme.output
        with_path = CliRunner().invoke(main, ["query", "count(a)", "--url", url + "/v1"])
        assert with_path.exit_code == 2 and "without a path" in with_path.output
    unreachable = CliRunner().invoke(main, ["query", "count(a)", "--url",
                                            f"http://127.0.0.1:{free_port()}"])
    assert unreachable.exit_code == 1 and "cannot reach" in unreachable.output
    users = json.loads(run("users", "list", "--store", store, "--json").stdout)["users"]
    assert [u["spent"] for u in users] == [2]


def test_users_tokens_are_rotated_removed_and_written_owner_only(tmp_path):
    from cocktail.dp.ledger import Ledger, Unauthorized
    from cocktail.private_config import ledger_location
    from cocktail.store import open_store

    store = tmp_path / "store"
    run("roles", "add", "analyst", "--alpha", 1, "--budget", 2, "--store", store, "--create")
    added = run("users", "add", "ann", "--role", "analyst", "--store", store)
    old = added.stdout.strip()
    assert added.exit_code == 0 and "user ann added (role analyst)" in added.stderr
    token_file = tmp_path / "ann.token"
    token_file.write_text("stale")
    token_file.chmod(0o644)
    rotated = run("users", "rotate", "ann", "--out", token_file, "--store", store, "--json")
    assert rotated.exit_code == 0 and json.loads(rotated.stdout) == {"user": "ann",
                                                                     "out": str(token_file)}
    assert token_file.stat().st_mode & 0o777 == 0o600
    new = token_file.read_text().strip()
    ledger = Ledger(ledger_location(open_store(str(store))))
    with pytest.raises(Unauthorized):
        ledger.authenticate(old)
    assert ledger.authenticate(new).name == "ann"
    removed = run("users", "remove", "ann", "--store", store)
    assert removed.exit_code == 0 and "user ann removed" in removed.stderr
    with pytest.raises(Unauthorized):
        ledger.authenticate(new)
    assert run("users", "rotate", "ann", "--store", store).exit_code == 2  # no user 'ann'
    owner = tmp_path / "owner.token"
    assert run("owner-token", "--out", owner, "--store", store).exit_code == 0
    assert owner.stat().st_mode & 0o777 == 0o600


def test_budget_names_each_cap_in_its_unit(tmp_path):
    store = tmp_path / "store"
    shown = run("budget", "--set", 10, "--store", store, "--create")
    assert shown.exit_code == 0 and "None" not in shown.stdout
    assert "α 0 of 10" in shown.stdout and "ρ 0 of no cap" in shown.stdout
    assert "ρ 0 of 2" in run("budget", "--set-rho", 2, "--store", store).stdout


OWNER_COMMANDS = [["publish"], ["plan"], ["serve"], ["roles"], ["roles", "add"], ["users"],
                  ["users", "add"], ["users", "disable"], ["budget"], ["ledger", "path"]]


@pytest.mark.parametrize("command", OWNER_COMMANDS)
def test_owner_commands_say_so(command):
    assert "owner command" in " ".join(run(*command, "--help").output.split()).lower()


def test_the_caller_cannot_choose_the_ledger(tmp_path, monkeypatch):
    """The ledger is where the store's private zone says: neither an option nor an environment
    variable can point a command at a ledger where the caller makes their own role."""
    data, store = tmp_path / "baskets.dat", tmp_path / "store"
    run("generate", data, "--records", 500, "--seed", 2)
    run("publish", data, "--store", store, "--k", 3, "--m", 2)
    forged = tmp_path / "forged.sqlite"
    monkeypatch.setenv("COCKTAIL_LEDGER", str(forged))
    assert CliRunner().invoke(main, ["roles", "add", "boss", "--alpha", 1000, "--budget", 1e12,
                                     "--store", str(store), "--ledger", str(forged)]).exit_code == 2
    assert run("roles", "add", "boss", "--alpha", 1, "--budget", 1, "--store", store).exit_code == 0
    assert not forged.exists()
    assert json.loads(run("ledger", "path", "--store", store, "--json").stdout)["ledger"] == \
        str(store / "private" / "ledger.sqlite")
    moved = tmp_path / "elsewhere" / "ledger.sqlite"
    run("ledger", "path", moved, "--store", store)
    run("roles", "add", "analyst", "--alpha", 1, "--budget", 1, "--store", store)
    assert [r["name"] for r in json.loads(run("roles", "list", "--store", store,
                                               "--json").stdout)["roles"]] == ["analyst"]
    assert moved.exists()


def test_bad_input_line_is_named_and_can_be_skipped(tmp_path):
    data = tmp_path / "bad.jsonl"
    data.write_text('{"id": 1, "terms": ["a", "b"]}\n{"id": 2, "terms": oops}\n'
                    '{"id": 3, "terms": ["a"]}\n')
    result = CliRunner().invoke(main, ["publish", str(data), "--store", str(tmp_path / "s")])
    assert result.exit_code == 2 and "bad.jsonl:2" in result.output
    result = run("publish", data, "--store", tmp_path / "s", "--skip-bad-lines", "--k", 2,
                 "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["skipped_lines"] == 1
    assert "skipped 1 malformed line: line 2 (invalid JSON" in result.stderr


def test_demo_json(tmp_path):
    result = run("demo", "--workdir", tmp_path / "demo", "--records", 2000, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] and report["audit"]["ok"]
    assert all(q["answer"] == q["brute_force"] for q in report["queries"])
    noisy = report["noisy"]
    assert noisy["charged"] == 0.5 and len(noisy["answers"]) == 3
    for exact, answer, error in zip(report["queries"], noisy["answers"],
                                    noisy["expected_rms_error"]):
        assert abs(answer - exact["brute_force"]) < 25 * error


@pytest.mark.parametrize("args,status", [
    (["publish", "missing.dat"], 2),
    (["audit", "--store", "nowhere"], 2),
    (["query", "--exact", "count(a &)"], 2),
    (["users", "add", "x\ny", "--role", "analyst", "--create"], 2),
])
def test_failures_in_json_are_one_json_object(tmp_path, monkeypatch, args, status):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == status
    failure = json.loads(result.stdout)
    assert failure["code"] == status and failure["error"]


def test_publish_reports_its_phases_and_the_demo_a_working_next_command(tmp_path):
    data = tmp_path / "d.dat"
    run("generate", data, "--records", 500)
    report = json.loads(run("publish", data, "--store", tmp_path / "s", "--json").stdout)
    assert set(report["phase_seconds"]) == {"load", "tree", "partition", "aggregate", "write",
                                            "term_index", "commit"}
    assert min(report["phase_seconds"].values()) >= 0
    assert sum(report["phase_seconds"].values()) <= report["seconds"] + report[
        "phase_seconds"]["load"] + 0.05
    demo = subprocess.run([sys.executable, "-m", "cocktail.cli", "demo", "--workdir",
                           str(tmp_path / "demo"), "--records", "500"], capture_output=True,
                          text=True, timeout=300)
    lines = demo.stdout.strip().splitlines()
    command = next(line for line in lines if "(try: " in line).split("(try: ")[1].rstrip(
        ")").split()
    # run as `python -m cocktail.cli`, the demo names that, not the package's __main__.py
    assert command[:5] == [Path(sys.executable).name, "-m", "cocktail.cli", "audit", "--store"]
    report = Path(next(line for line in lines if "xdg-open " in line).split("xdg-open ")[1])
    assert report.stat().st_size > 1_000_000
    followed = subprocess.run([sys.executable, *command[1:]],
                              capture_output=True, text=True, timeout=120)
    assert followed.returncode == 0 and "PASS" in followed.stdout


def test_counts_agree_with_their_nouns():
    from cocktail.cli.contract import plural

    assert [plural(1, "private chunk"), plural(2, "private chunk"), plural(0, "violation"),
            plural(1_000, "record")] == ["1 private chunk", "2 private chunks", "0 violations",
                                         "1,000 records"]
    sources = "".join(p.read_text() for p in (Path(__file__).parents[1] / "cocktail" / "cli")
                      .glob("*.py"))
    assert "(s)" not in sources  # every count printed through plural


def test_a_negative_noisy_count_says_it_is_the_noise(capsys):
    from cocktail.cli.query import _print_noisy
    from cocktail.client import QUERY_COLUMNS, Result, _answer_rows

    reply = {"workload": "count(a)\ncount(b) - count(a)", "answers": [-3.2, -1.0],
             "expected_squared_error": [4.0, 8.0], "expected_rms_error": [2.0, 2.83],
             "strategy": "identity", "reused": False, "charged": 0.5,
             "budget": {"remaining": 1.5, "budget": 2.0}}
    rows = _answer_rows(reply, 0.95, spent=0.5, reused=False, answer_id="x")
    _print_noisy(Result(rows, QUERY_COLUMNS, reply), 0.95)
    count, difference = capsys.readouterr().out.splitlines()[:2]
    assert "below 0 from the noise alone" in count
    assert "noise alone" not in difference  # a difference may well be negative


def test_query_help_lists_every_status_it_can_end_with():
    shown = " ".join(run("query", "--help").stdout.split())
    for status in ("1 when", "2 for", "3 for", "4 when", "5 when"):
        assert status in shown


def test_every_long_phase_shows_progress_on_stderr_and_json_stays_one_object(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("".join(f"{n},t{n % 7}\n{n},u{n % 5}\n" for n in range(300)))
    shown = run("publish", data, "--store", tmp_path / "s", "--k", 2, "--m", 1)
    assert shown.exit_code == 0, shown.output
    phases = [line.split()[1] for line in shown.stderr.splitlines()
              if line.startswith("publish: ")]
    assert phases[0] == "load" and phases[-1] == "commit"
    assert {"tree", "partition", "write"} <= set(phases)
    more = tmp_path / "more.csv"
    more.write_text("".join(f"n{n},t{n % 7}\n" for n in range(50)))
    appended = run("publish", more, "--store", tmp_path / "s", "--append")
    assert [line.split()[1] for line in appended.stderr.splitlines()
            if line.startswith("append: ")] == ["load", "commit"]
    quiet = run("publish", data, "--store", tmp_path / "t", "--k", 2, "--m", 1, "--json")
    assert json.loads(quiet.stdout)["records"] == 300 and "publish: " not in quiet.stderr


def test_a_text_files_load_reports_its_lines(tmp_path, monkeypatch):
    import cocktail.dataset

    monkeypatch.setattr(cocktail.dataset, "PROGRESS_LINES", 4)
    data = tmp_path / "d.csv"
    data.write_text("".join(f"{n},t{n}\n" for n in range(10)))
    steps = []
    load(data, progress=lambda *step: steps.append(step))
    assert steps == [("load", 0, 10), ("load", 4, 10), ("load", 8, 10), ("load", 10, 10)]


def test_publish_and_append_seconds_count_the_load(tmp_path, monkeypatch):
    """The `seconds` publish and append report is the owner's wait, reading the input
    included (issue 66, item 9: 44 s reported, 64 s wall on a 50 MB CSV): a load made to take
    2 s shows in it, and in the load's own phase."""
    import time

    import cocktail.cli.publish as publishing

    def slow(*args, **kwargs):
        time.sleep(2)
        return load(*args, **kwargs)
    monkeypatch.setattr(publishing, "load", slow)
    data = tmp_path / "d.dat"
    run("generate", data, "--records", 300)
    reports = [json.loads(CliRunner().invoke(main, ["publish", str(data), "--store",
                                                    str(tmp_path / "s"), "--json",
                                                    *extra]).stdout)
               for extra in ([], ["--append", "--allow-duplicate"])]  # the same records again
    assert all(report["seconds"] >= 2 for report in reports), reports
    assert reports[0]["phase_seconds"]["load"] >= 2


@pytest.mark.parametrize("args", [["publish", "d.dat"], ["publish", "d.dat", "--append"],
                                  ["audit"], ["serve"], ["roles", "add", "a", "--alpha", "1",
                                                         "--budget", "1", "--create"],
                                  ["query", "--exact", "count(a)"], ["report"],
                                  ["republish", "--from", "", "--to", "out", "--k", "5",
                                   "--m", "3"]])
def test_an_empty_store_is_refused_not_made_here(tmp_path, monkeypatch, args):
    """`--store ""` (an unset variable) once made the current directory a store (issue 66,
    item 5): every command taking a store refuses it, exit 2, and writes nothing here."""
    monkeypatch.chdir(tmp_path)
    run("generate", "d.dat", "--records", 200)
    store = [] if args[0] == "republish" else ["--store", ""]
    result = CliRunner().invoke(main, [*args, *store, "--json"])
    assert result.exit_code == 2, result.output
    assert "is empty" in json.loads(result.stdout)["error"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.dat"]
