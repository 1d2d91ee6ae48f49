"""The contract every command keeps, checked on every command the root group can reach: --help,
--json with exactly one JSON object on stdout whatever the outcome, one exit-status table; and
the cases that used to break it (typo'd stores, relative stores under the job runners, a busy
port, a missing optional package)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cocktail.cli import main
from cocktail.cli.contract import EXIT_STATUS, MEANING, ExitCode, classify
from cocktail.extras import install_command

REPO = Path(__file__).resolve().parents[1]


def commands(group: click.Group = main, path: tuple[str, ...] = ()):
    """(path, command) of every command, recursively through the groups."""
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))


LEAVES = [(path, command) for path, command in commands()
          if not isinstance(command, click.Group)]
IDS = [" ".join(path) for path, _ in LEAVES]


def invoke(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), env=env)


def one_json_object(result) -> dict:
    """stdout holds one JSON object, and nothing else."""
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout
    return json.loads(lines[0])


def test_the_walk_reaches_every_group():
    reached = {" ".join(path) for path, _ in commands()}
    assert {"publish", "audit", "query", "serve", "roles add", "users disable", "cluster get",
            "table query", "rank query", "attack rank", "chain plan"} <= reached


@pytest.mark.parametrize("args", [["--version", "--json"], ["--json", "--version"],
                                  ["--help", "--json"], ["publish", "--help", "--json"],
                                  ["rank", "query", "-h", "--json"]])
def test_help_and_version_under_json_are_one_object(args):
    """docs/cli.md promised their text under --json, and both were a usage error ("No such
    option '--json'"): now one object each, holding the text."""
    result = invoke(*args)
    shown = one_json_object(result)
    assert result.exit_code == 0 and "error" not in shown, shown
    if "--version" in args:
        assert shown == {"name": "cocktail", "version": invoke("--version").stdout.split()[-1]}
    else:
        assert shown["help"].startswith("Usage: ") and "--json" not in shown["help"][:60]


@pytest.mark.parametrize("path,command", LEAVES, ids=IDS)
def test_every_command_has_help_and_json(path, command):
    result = invoke(*path, "--help")
    assert result.exit_code == 0 and "Usage:" in result.stdout
    assert "--json" in {opt for param in command.params for opt in param.opts}, path


@pytest.mark.parametrize("path,command", LEAVES, ids=IDS)
def test_usage_errors_are_one_json_object_with_json(path, command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke(*path, "--no-such-option", "--json")
    failure = one_json_object(result)
    assert result.exit_code == 2 == failure["code"], result.output
    assert failure["type"] == "usage-error" and "--no-such-option" in failure["error"]
    choice = next((p for p in command.params if isinstance(p, click.Option)
                   and isinstance(p.type, click.Choice)), None)
    if choice is not None:
        result = invoke(*path, choice.opts[0], "no-such-choice", "--json")
        assert result.exit_code == 2 and "no-such-choice" in one_json_object(result)["error"]
    if any(p.required for p in command.params):  # nothing given: a missing argument or option
        result = invoke(*path, "--json")
        assert result.exit_code == 2 and one_json_object(result)["type"] == "usage-error"


def test_usage_errors_without_json_go_to_stderr():
    result = invoke("publish", "--no-such-option")
    assert result.exit_code == 2 and result.stdout == ""
    assert "No such option" in result.stderr and "Usage:" in result.stderr
    # one prefix for every error, usage errors included
    assert "\nerror: No such option" in result.stderr and "Error:" not in result.stderr
    root = invoke("--bogus", "--json")
    assert root.exit_code == 2 and one_json_object(root)["code"] == 2


def test_one_exit_status_table_in_help_and_docs():
    assert [c.value for c in ExitCode] == [0, 1, 2, 3, 4, 5, 70, 130, 143]
    shown = " ".join(invoke("--help").stdout.split())
    assert " ".join(EXIT_STATUS.replace("\b", "").split()) in shown
    documented = dict(re.findall(r"^\| (\d+) \| `\w+` \| (.+?) \|$",
                                 (REPO / "docs" / "cli.md").read_text(), re.M))
    assert {int(code): meaning for code, meaning in documented.items()} == \
        {code.value: meaning for code, meaning in MEANING.items()}
    for doc in ("README.md", "docs/dp.md", "scripts/README.md"):
        assert "docs/cli.md" in (REPO / doc).read_text(), doc


@pytest.mark.parametrize("args", [
    ["roles", "add", "analyst", "--alpha", "1", "--budget", "2"],
    ["users", "add", "ann", "--role", "analyst"],
    ["users", "disable", "ann"], ["roles", "list"], ["budget", "--set", "5"],
    ["owner-token"], ["signing-key"], ["ledger", "path"], ["report"],
    ["serve", "--port", "0"], ["reshare", "x", "--alpha", "1"]])
def test_owner_commands_refuse_a_store_without_a_publication(args, tmp_path):
    typo = tmp_path / "typo"
    result = invoke(*args, "--store", str(typo), "--json")
    failure = one_json_object(result)
    assert result.exit_code == 2 and failure["error"].startswith(f"no publication at {typo}")
    assert not typo.exists()  # nothing was made


def test_create_sets_up_a_ledger_before_the_first_publish(tmp_path):
    store = str(tmp_path / "store")
    added = invoke("roles", "add", "analyst", "--alpha", "1", "--budget", "2", "--store", store,
                   "--create", "--json")
    assert added.exit_code == 0 and one_json_object(added) == {"role": "analyst", "alpha": 1,
                                                               "budget": 2, "definition": "pure"}
    # from now on the store holds a ledger: no --create needed
    token = one_json_object(invoke("users", "add", "ann", "--role", "analyst", "--store", store,
                                   "--json"))["token"]
    assert token
    disabled = invoke("users", "disable", "ann", "--store", store)
    assert disabled.exit_code == 0 and disabled.stdout == "" and "disabled" in disabled.stderr
    assert one_json_object(invoke("users", "enable", "ann", "--store", store, "--json")) == \
        {"user": "ann", "active": True}


def test_serve_on_a_busy_port_is_a_system_failure(tmp_path):
    store = str(tmp_path / "store")
    invoke("roles", "add", "analyst", "--alpha", "1", "--budget", "2", "--store", store,
           "--create")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = invoke("serve", "--store", store, "--port", str(port), "--json")
    failure = one_json_object(result)
    assert result.exit_code == 5 == failure["code"] and "cannot listen" in failure["error"]


def test_confirmations_go_to_stderr_and_results_to_stdout(tmp_path):
    data = tmp_path / "d.dat"
    generated = invoke("generate", str(data), "--records", "300")
    assert generated.exit_code == 0 and generated.stdout == "" and "wrote" in generated.stderr
    published = invoke("publish", str(data), "--store", str(tmp_path / "s"), "--k", "3")
    assert published.stdout == "" and "published v000001" in published.stderr
    audited = invoke("audit", "--store", str(tmp_path / "s"))
    assert "PASS" in audited.stdout


def test_old_spellings_still_work_with_a_warning(tmp_path):
    data = tmp_path / "d.dat"
    data.write_text("a b\nb c\n" * 10)
    invoke("publish", str(data), "--store", str(tmp_path / "s"), "--k", "2")
    result = invoke("audit", "--version", "v000001", "--store", str(tmp_path / "s"), "--json")
    assert result.exit_code == 0 and one_json_object(result)["version"] == "v000001"
    assert "--version is deprecated here; use --at-version" in result.stderr
    table = tmp_path / "t.csv"
    table.write_text("q,s\n" + "".join(f"{'abc'[i % 3]},{i}\n" for i in range(12)))
    old = invoke("table", "publish", str(table), "--qi", "q", "--sensitive", "s", "--k", "2",
                 "--e", "1", "--store", str(tmp_path / "t"), "--json")
    assert old.exit_code == 0 and one_json_object(old)["tuples"] == 12
    assert "--k is deprecated here; use --distinct" in old.stderr
    summed = invoke("table", "query", "SUM", "--store", str(tmp_path / "t"), "--json")
    assert summed.exit_code == 0 and one_json_object(summed)["low"] == sum(range(12))


def python(*args: str, cwd: Path, prelude: str = "") -> subprocess.CompletedProcess:
    """`cocktail ARGS` in a fresh interpreter, after ``prelude`` (e.g. making an import fail)."""
    code = f"import sys\n{prelude}\nfrom cocktail.cli import main\nmain()"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


NO_PYSPARK = "sys.modules['pyspark'] = None  # as if it were not installed"


def test_a_missing_pyspark_is_one_line_naming_the_extra(tmp_path):
    (tmp_path / "d.dat").write_text("a b\nb c\n" * 5)
    spark = ["publish", "d.dat", "--store", "s", "--engine", "spark"]
    human = python(*spark, cwd=tmp_path, prelude=NO_PYSPARK)
    assert human.returncode == 2 and human.stdout == "" and "Traceback" not in human.stderr
    assert human.stderr.count("\n") == 1 and install_command("spark") in human.stderr
    assert not (tmp_path / "s").exists()
    assert python("publish", "d.dat", "--store", "s", "--k", "2", cwd=tmp_path).returncode == 0
    for args in (spark, ["query", "--exact", "count(a)", "--store", "s", "--runner", "spark"]):
        done = python(*args, "--json", cwd=tmp_path, prelude=NO_PYSPARK)
        failure = json.loads(done.stdout)
        assert done.returncode == 2 and failure["type"] == "missing-extra", done.stderr
        assert failure["extra"] == "spark" and install_command("spark") in failure["error"]


@pytest.mark.parametrize("runner", ["index-inline", "index-local", "inline"])
def test_job_runners_take_a_relative_store(tmp_path, runner):
    (tmp_path / "d.dat").write_text("".join(f"a b {i % 7}\n" for i in range(200)))
    assert python("publish", "d.dat", "--store", "store", "--k", "2", cwd=tmp_path
                  ).returncode == 0
    done = python("query", "--exact", "count(a & 3)", "--store", "store", "--runner", runner,
                  "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["answer"] == 29


@pytest.mark.parametrize("runner", ["hadoop", "index-hadoop"])
def test_the_hadoop_runner_refuses_a_local_store_up_front(tmp_path, runner):
    data = tmp_path / "d.dat"
    data.write_text("a b\nb c\n" * 10)
    invoke("publish", str(data), "--store", str(tmp_path / "s"), "--k", "2")
    result = invoke("query", "--exact", "count(a)", "--store", str(tmp_path / "s"), "--runner",
                    runner, "--json", env={"COCKTAIL_HADOOP_BIN": ""})
    failure = one_json_object(result)
    assert result.exit_code == 2 and "needs a webhdfs:// store" in failure["error"]
    assert "COCKTAIL_HADOOP_BIN" in failure["error"]


WRAPPER = REPO / "scripts" / "cocktail-query"


def test_analysts_rank_over_http_as_they_query(tmp_path):
    """`cocktail rank query --url` and `cocktail-query --rank`: the same token handling as
    `cocktail query --url` (--token-file, $COCKTAIL_TOKEN), the same exit statuses."""
    from .served import serve

    data, store = tmp_path / "t.csv", str(tmp_path / "s")
    data.write_text("id,city,religion\n" + "".join(
        f"p{i},{'ab'[i % 2]},{'xyz'[i % 3]}\n" for i in range(40)))
    assert invoke("rank", "build", str(data), "--public", "city", "--private", "religion",
                  "--id", "id", "--defense", "dp", "--store", store).exit_code == 0
    invoke("roles", "add", "analyst", "--alpha", "0.5", "--budget", "1", "--store", store)
    token = one_json_object(invoke("users", "add", "ann", "--role", "analyst", "--store", store,
                                   "--json"))["token"]
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    ask = ["rank", "query", "city=a,religion=x", "--top", "3"]
    # a loaded machine must not miss the rank deadline (503, a service failure: status 5):
    # a dp top k is due 8 x 500 ms after arrival, refusals too
    with serve(Path(store), "--deadline-rank-ms", "500") as (url, _):
        missing = invoke(*ask, "--url", url, "--json", env={"COCKTAIL_TOKEN": ""})
        assert missing.exit_code == 2 and "--token-file" in one_json_object(missing)["error"]
        first = invoke(*ask, "--url", url, "--token-file", str(token_file), "--json")
        body = one_json_object(first)
        assert first.exit_code == 0, body
        assert len(body["results"]) == 3 and body["charged"] == 0.5
        again = invoke(*ask, "--json", env={"COCKTAIL_URL": url, "COCKTAIL_TOKEN": token})
        assert one_json_object(again)["results"] == body["results"]  # reused, no charge
        refused = invoke(*ask, "--url", url, "--token", "nope", "--json")
        assert refused.exit_code == 3 and one_json_object(refused)["http_status"] == 401
        unknown = invoke("rank", "query", "city=a", "--name", "other", "--url", url,
                         "--token", token, "--json")
        assert unknown.exit_code == 2 and one_json_object(unknown)["http_status"] == 404
        if os.path.exists("/usr/bin/curl") or os.path.exists("/bin/curl"):
            def wrapper(*args: str, **env: str):
                return subprocess.run([str(WRAPPER), "--url", url, *args], text=True,
                                      capture_output=True, timeout=60,
                                      env={**os.environ, "COCKTAIL_TOKEN": "", **env})
            assert wrapper("--rank", "city=a,religion=x").returncode == 2  # no token
            shown = wrapper("--token-file", str(token_file), "--rank", "city=a,religion=x",
                            "--top", "3")
            assert shown.returncode == 0 and json.loads(shown.stdout)["results"] == \
                body["results"]
            spent = wrapper("--token-file", str(token_file), "--rank", "city=b,religion=y")
            assert spent.returncode == 0
            assert wrapper("--rank", "city=a,religion=z", COCKTAIL_TOKEN=token).returncode == 4


def test_every_failure_class_keeps_its_exit_status():
    """The contract names the classes it maps by module and name, so that a command imports
    only what it uses: a renamed or moved class would silently become an internal error.  A
    worker process killed (BrokenProcessPool) is the system's failure, not a bug."""
    from concurrent.futures.process import BrokenProcessPool

    from cocktail.client import ServiceRefused, ServiceUnreachable
    from cocktail.cluster.spec import SpecError
    from cocktail.dataset import InputError
    from cocktail.dp.ledger import BudgetExhausted, Forbidden, LedgerError, Unauthorized
    from cocktail.querylang import QuerySyntaxError
    from cocktail.releases import Refused
    from cocktail.store import StoreError, StoreUnavailable

    refused = ServiceRefused.__new__(ServiceRefused)
    refused.http_status = 429
    expected = {ServiceUnreachable("x"): ExitCode.PROBLEMS, refused: ExitCode.BUDGET,
                BudgetExhausted("x"): ExitCode.BUDGET, Unauthorized("x"): ExitCode.REFUSED,
                Forbidden("x"): ExitCode.REFUSED, Refused("x"): ExitCode.REFUSED,
                StoreUnavailable("x"): ExitCode.FAILED, StoreError("x"): ExitCode.USAGE,
                InputError("x"): ExitCode.USAGE, QuerySyntaxError("x"): ExitCode.USAGE,
                LedgerError("x"): ExitCode.USAGE, SpecError("x"): ExitCode.USAGE,
                BrokenProcessPool("x"): ExitCode.FAILED, RuntimeError("x"): ExitCode.INTERNAL}
    assert {type(e).__name__: classify(e)[0] for e in expected} == \
        {type(e).__name__: code for e, code in expected.items()}


def test_sigterm_ends_a_command_with_its_status_and_one_json_object(tmp_path):
    """A query waiting on a service that never answers is sent SIGTERM: it ends with 143,
    the table's status, and still prints its one JSON object."""
    import signal

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        waiting = subprocess.Popen(
            [sys.executable, "-m", "cocktail.cli", "query", "count(a)", "--url", url,
             "--token", "t", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=os.environ | {"PYTHONPATH": str(REPO)})
        connection, _ = silent.accept()  # the query is sent: it waits for the reply
        with connection:
            waiting.send_signal(signal.SIGTERM)
            stdout, _ = waiting.communicate(timeout=60)
    assert waiting.returncode == ExitCode.TERMINATED == 143
    assert json.loads(stdout) == {"error": "terminated (SIGTERM)", "code": 143,
                                  "type": "terminated"}
