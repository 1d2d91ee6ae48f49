"""Install extras: a lean core (the analyst's client), the owner's engine as an extra, and a
missing optional package as one line naming its extra and how to install it.

An install is simulated by blocking the optional packages it lacks (``sys.modules[name] =
None`` makes an import fail, as if the package were not installed) in a fresh interpreter."""

from __future__ import annotations

import configparser
import importlib
import json
import re
import subprocess
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from click.testing import CliRunner

from cocktail import extras
from cocktail.cli import main
from cocktail.dp.answer import prepare
from cocktail.dp.search import Searches
from cocktail.extras import DISTRIBUTION, EXTRAS, MissingExtra, install_command, require
from cocktail.querylang import parse_batch

ROOT = Path(__file__).resolve().parents[1]
ENGINE = sorted(package for package, extra in EXTRAS.items() if extra == "owner")
# The optional packages each install lacks: the core (an analyst's client), and `[owner]`.
CLIENT = sorted(EXTRAS)
OWNER = sorted(set(EXTRAS) - set(ENGINE))
RUN = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None  # not installed
from cocktail.cli import main
main(prog_name="cocktail", args=sys.argv[2:])
"""


def command(lacks: list[str], *args: str) -> list[str]:
    """The command line of ``cocktail ARGS`` in a fresh interpreter that ``lacks`` packages."""
    return [sys.executable, "-c", RUN, ",".join(lacks), *args]


def owner(*args: str) -> subprocess.CompletedProcess:
    """``cocktail ARGS`` as in an ``[owner]`` install: the engine, and no other extra."""
    return subprocess.run(command(OWNER, *args), capture_output=True, text=True, timeout=300)


def client(*args: str) -> subprocess.CompletedProcess:
    """``cocktail ARGS`` as in the core install, an analyst's client: no optional package."""
    return subprocess.run(command(CLIENT, *args), capture_output=True, text=True, timeout=300)


def declared() -> dict[str, set[str]]:
    """Each extra's distributions (lower case), its references to other extras of ours
    expanded; "core" is install_requires."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    raw = {"core": cfg["options"]["install_requires"], **cfg["options.extras_require"]}
    lines = {extra: [line.strip() for line in text.splitlines()
                     if line.strip() and not line.strip().startswith("#")]
             for extra, text in raw.items()}

    def names(extra: str) -> set[str]:
        found = set()
        for line in lines[extra]:
            ours = re.fullmatch(re.escape(DISTRIBUTION) + r"\[(.*)\]", line)
            found |= (set().union(*(names(e.strip()) for e in ours[1].split(","))) if ours
                      else {re.split(r"[<>=\[]", line)[0].strip().lower()})
        return found
    return {extra: names(extra) for extra in lines}


def distribution(package: str) -> str:
    """The distribution that installs the import package ``package`` (installed here)."""
    [name] = packages_distributions()[package]
    return name.lower().replace("_", "-")


def test_each_optional_package_is_in_its_extra_and_not_in_the_core():
    found = declared()
    runtime = set().union(*(found[extra] for extra in set(EXTRAS.values())))
    for package, extra in EXTRAS.items():
        assert distribution(package) in found[extra], (package, extra)
        assert distribution(package) not in found["core"], package
    assert found["owner"] == {distribution(package) for package in ENGINE}
    for extra in set(EXTRAS.values()) - {"frames"} | {"bench"}:  # each brings its engine
        assert found["owner"] <= found[extra], extra
    assert not found["owner"] & found["frames"]  # DataFrames for the analyst's client too
    assert found["all"] == runtime
    assert runtime <= found["test"]  # the tests exercise every extra


def test_the_core_is_the_client_and_the_command_line_shell():
    assert declared()["core"] == {"click", "rich", "httpx"}


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("extras")
    data, store = root / "d.dat", root / "s"
    run = CliRunner()
    assert run.invoke(main, ["generate", str(data), "--records", "300"]).exit_code == 0
    assert run.invoke(main, ["publish", str(data), "--store", str(store), "--k", "3",
                             "--m", "2"]).exit_code == 0
    people = root / "people.csv"
    people.write_text("city,age,income\n" + "".join(f"{'AB'[i % 2]},{20 + i},{i * 7 % 50}\n"
                                                    for i in range(12)))
    return {"root": root, "data": data, "store": store, "people": people}


@pytest.mark.parametrize("command,extra", [
    (["report", "--out", "{root}/r.html", "--store", "{store}"], "report"),
    (["query", "--exact", "count(1)", "--runner", "inline", "--store", "{store}"], "hadoop"),
    (["query", "--exact", "count(1)", "--runner", "spark", "--store", "{store}"], "spark"),
    (["publish", "{data}", "--engine", "spark", "--store", "{root}/spark"], "spark"),
    (["publish", "{data}", "--method", "optimal", "--store", "{root}/optimal"], "solver"),
    (["publish", "{root}/baskets.parquet", "--store", "{root}/parquet"], "parquet"),
    (["generate", "{root}/g.parquet", "--records", "10"], "parquet"),
    (["audit", "--store", "webhdfs://127.0.0.1:9/nowhere"], "hadoop"),
    (["rank", "build", "{people}", "--public", "city,age", "--private", "income",
      "--numeric", "age,income", "--store", "{root}/rank"], "rank"),
])
def test_a_missing_extra_is_one_json_object_naming_it(published, command, extra):
    args = [a.format(**published) for a in command]
    result = owner(*args, "--json")
    assert result.returncode == 2, result.stderr
    [line] = result.stdout.splitlines()
    failure = json.loads(line)
    assert failure["code"] == 2 and failure["extra"] == extra
    assert failure["error"].endswith(f": {install_command(extra)}")


@pytest.mark.parametrize("command,package,extra", [
    (["report", "--out", "{root}/r.html", "--store", "{store}"], "plotly", "report"),
    (["serve", "--store", "{store}"], "uvicorn", "serve"),  # it has no --json
])
def test_a_missing_extra_is_one_line_on_stderr(published, command, package, extra):
    result = owner(*[a.format(**published) for a in command])
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == f"error: this needs {package}: {install_command(extra)}"


def test_the_client_asks_a_server_without_the_engine(tmp_path):
    """The core install, an analyst's client (no numpy, OpenDP, pyroaring, ...): the program
    starts, shows its help and version, and asks a server, unreachable here (exit 1, one JSON
    object), as ``query --url`` and ``rank query --url``."""
    token = tmp_path / "token"
    token.write_text("t0k3n\n")
    for args in (["--help"], ["query", "--help"], ["rank", "query", "--help"]):
        shown = client(*args)
        assert shown.returncode == 0 and shown.stdout.startswith("Usage: "), shown.stderr
    assert client("--version").stdout == CliRunner().invoke(main, ["--version"],
                                                            prog_name="cocktail").stdout
    for ask in (["query", "count(a)"], ["rank", "query", "city=Oslo"]):
        asked = client(*ask, "--url", "http://127.0.0.1:9", "--token-file", str(token), "--json")
        [line] = asked.stdout.splitlines()
        assert asked.returncode == 1 and json.loads(line)["type"] == "unreachable", asked.stderr


@pytest.mark.parametrize("command", [
    ["publish", "x.dat"], ["publish", "--help"], ["query", "--exact", "count(a)"],
    ["plan", "count(a)"], ["rank", "build", "t.csv"], ["rank", "query", "city=Oslo"],
    ["serve"], ["demo"],
])
def test_the_client_names_the_owner_extra_for_the_engine(command):
    """What needs the owner's engine is, on the client, the one-line missing-extra error
    naming ``owner`` (exit 2, one JSON object), not an ImportError; ``--help`` lists it."""
    result = client(*command, "--json")
    [line] = result.stdout.splitlines()
    failure = json.loads(line)
    assert result.returncode == 2 and failure["extra"] == "owner", result.stderr
    assert failure["error"].endswith(f": {install_command('owner')}")
    listed = client("--help").stdout
    assert re.search(rf"^  {command[0]} +this needs ", listed, re.MULTILINE) or command[0] in (
        "query", "rank")  # the client runs their analysts' side


@pytest.fixture
def metadata(tmp_path, monkeypatch):
    """``record(direct_url)``: the path holds only an install of ours whose metadata records
    ``direct_url`` (PEP 610; None: none, as from the index), after a checkout's .egg-info,
    which records none."""
    checkout, site = tmp_path / "checkout", tmp_path / "site"
    header = f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: 0.1.0\n"
    for info, name in ((checkout / "cocktail_privacy.egg-info", "PKG-INFO"),
                       (site / "cocktail_privacy-0.1.0.dist-info", "METADATA")):
        info.mkdir(parents=True)
        (info / name).write_text(header)

    def record(direct_url: dict | None) -> None:
        if direct_url is not None:
            (site / "cocktail_privacy-0.1.0.dist-info" / "direct_url.json").write_text(
                json.dumps(direct_url))
        monkeypatch.setattr(sys, "path", [str(checkout), str(site)])
        extras._installed_from.cache_clear()
    yield record
    extras._installed_from.cache_clear()


@pytest.mark.parametrize("direct_url,command", [
    ({"url": "file:///home/ann/cocktail", "dir_info": {"editable": True}},
     "pip install -e '/home/ann/cocktail[serve]'"),
    ({"url": "file:///home/ann/my%20src", "dir_info": {}}, "pip install '/home/ann/my src[serve]'"),
    ({"url": "file:///tmp/cocktail_privacy-0.1.0-py3-none-any.whl", "archive_info": {}},
     "pip install '/tmp/cocktail_privacy-0.1.0-py3-none-any.whl[serve]'"),
    ({"url": "https://example.org/cocktail.git", "vcs_info": {"vcs": "git", "commit_id": "0"}},
     "pip install 'cocktail-privacy[serve]'"),
    (None, "pip install 'cocktail-privacy[serve]'"),
])
def test_the_hint_installs_from_where_this_install_came(metadata, direct_url, command):
    """From a checkout (editable or not) or a local file, the hint names that path; from the
    index (or a VCS), our name there: `cocktail` on the index is another project."""
    metadata(direct_url)
    assert install_command("serve") == command
    assert str(MissingExtra("fastapi", "serve")) == f"this needs fastapi: {command}"


def test_without_search_a_batch_gets_the_best_fixed_strategy_and_says_why(monkeypatch):
    """Without scipy there is no strategy search: the best fixed candidate answers (so no
    query is less accurate than under it), and the answer says why it was not searched."""
    workload = parse_batch("count(a); count(a & b); count(a & b & c)")
    monkeypatch.setitem(sys.modules, "scipy", None)
    monkeypatch.setitem(sys.modules, "scipy.optimize", None)
    choice = prepare(workload, searches=Searches()).choice  # none kept from another test
    assert choice.optimized is choice.fixed
    report = choice.report(1.0)
    assert report["search_skipped"] == f"this needs scipy: {install_command('search')}"


def test_require_names_the_extra_and_passes_installed_packages_through(monkeypatch):
    assert require("json") is json
    for name in ("plotly", "plotly.graph_objects"):  # not installed (even if imported here)
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(MissingExtra) as missing:
        require("plotly.graph_objects")
    assert (str(missing.value), missing.value.extra) == (
        f"this needs plotly: {install_command('report')}", "report")
    assert isinstance(missing.value, ModuleNotFoundError)  # what `except ImportError` expects


def test_the_service_module_names_its_extra_when_fastapi_is_missing(monkeypatch):
    """A library user's `import cocktail.service` without fastapi: one line naming [serve], not
    FastAPI's bare ImportError."""
    for name in [m for m in sys.modules if m == "cocktail.service" or m.startswith("fastapi")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "fastapi", None)
    with pytest.raises(MissingExtra) as missing:
        importlib.import_module("cocktail.service")
    assert str(missing.value) == f"this needs fastapi: {install_command('serve')}"


@pytest.mark.parametrize("origin", [("/home/ann/cocktail", True), None])
def test_the_missing_extra_line_docs_cli_shows_is_the_one_printed(origin, tmp_path,
                                                                   monkeypatch):
    """docs/cli.md's example (issue 66, item 4: it once showed another line than the program
    prints): `--engine spark` without pyspark, from a checkout installed as the README says
    and from the package index, prints a line the doc holds verbatim."""
    monkeypatch.setattr(extras, "_installed_from", lambda: origin)
    monkeypatch.setitem(sys.modules, "pyspark", None)  # not installed
    monkeypatch.chdir(tmp_path)
    Path("baskets.dat").write_text("1 2\n2 3\n")
    result = CliRunner().invoke(main, ["publish", "baskets.dat", "--engine", "spark"])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: this needs pyspark: pip install")
    assert line in (ROOT / "docs" / "cli.md").read_text().splitlines(), line
