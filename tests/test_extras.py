"""Install extras: a lean core, and a missing optional package as one line naming its extra.

The core install is simulated by blocking every optional package (``sys.modules[name] = None``
makes its import fail, as if it were not installed) in a fresh interpreter."""

from __future__ import annotations

import configparser
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cocktail.cli import main
from cocktail.dp.answer import prepare
from cocktail.dp.search import Searches
from cocktail.extras import EXTRAS, MissingExtra, require
from cocktail.querylang import parse_batch

ROOT = Path(__file__).resolve().parents[1]
CORE = f"""
import sys
for name in {sorted(EXTRAS)!r}:
    sys.modules[name] = None  # not installed
from cocktail.cli import main
main(prog_name="cocktail")
"""


def core(*args: str) -> subprocess.CompletedProcess:
    """``cocktail ARGS`` as in a core install: no optional package importable."""
    return subprocess.run([sys.executable, "-c", CORE, *args], capture_output=True, text=True,
                          timeout=300)


def declared() -> dict[str, set[str]]:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    def names(text: str) -> set[str]:
        return {line.split(">")[0].split("=")[0].strip() for line in text.splitlines()
                if line.strip() and not line.strip().startswith("#")}
    extras = {k: names(v) for k, v in cfg["options.extras_require"].items()}
    return {"core": names(cfg["options"]["install_requires"]), **extras}


def test_each_optional_package_is_in_its_extra_and_not_in_the_core():
    found = declared()
    runtime = set().union(*(found[extra] for extra in set(EXTRAS.values())))
    for package, extra in EXTRAS.items():
        distribution = package.replace("_", "-")  # fastapi_offline is fastapi-offline
        assert distribution in found[extra], (package, extra)
        assert distribution not in found["core"], package
    assert found["all"] == runtime
    assert runtime <= found["test"]  # the tests exercise every extra


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
    result = core(*args, "--json")
    assert result.returncode == 2, result.stderr
    [line] = result.stdout.splitlines()
    failure = json.loads(line)
    assert failure["code"] == 2 and f"pip install 'cocktail[{extra}]'" in failure["error"]


@pytest.mark.parametrize("command,package,extra", [
    (["report", "--out", "{root}/r.html", "--store", "{store}"], "plotly", "report"),
    (["serve", "--store", "{store}"], "uvicorn", "serve"),  # it has no --json
])
def test_a_missing_extra_is_one_line_on_stderr(published, command, package, extra):
    result = core(*[a.format(**published) for a in command])
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == f"error: this needs {package}: pip install 'cocktail[{extra}]'"


def test_the_core_answers_a_batch_with_the_best_fixed_strategy_and_says_why(monkeypatch):
    """Without scipy there is no strategy search: the best fixed candidate answers (so no
    query is less accurate than under it), and the answer says why it was not searched."""
    workload = parse_batch("count(a); count(a & b); count(a & b & c)")
    monkeypatch.setitem(sys.modules, "scipy", None)
    monkeypatch.setitem(sys.modules, "scipy.optimize", None)
    choice = prepare(workload, searches=Searches()).choice  # none kept from another test
    assert choice.optimized is choice.fixed
    report = choice.report(1.0)
    assert report["search_skipped"] == "this needs scipy: pip install 'cocktail[search]'"


def test_require_names_the_extra_and_passes_installed_packages_through(monkeypatch):
    assert require("json") is json
    for name in ("plotly", "plotly.graph_objects"):  # not installed (even if imported here)
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(MissingExtra) as missing:
        require("plotly.graph_objects")
    assert (str(missing.value), missing.value.extra) == (
        "this needs plotly: pip install 'cocktail[report]'", "report")
    assert isinstance(missing.value, ModuleNotFoundError)  # what `except ImportError` expects


def test_the_service_module_names_its_extra_when_fastapi_is_missing(monkeypatch):
    """A library user's `import cocktail.service` on the core: one line naming [serve], not
    FastAPI's bare ImportError."""
    for name in [m for m in sys.modules if m == "cocktail.service" or m.startswith("fastapi")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "fastapi", None)
    with pytest.raises(MissingExtra) as missing:
        importlib.import_module("cocktail.service")
    assert str(missing.value) == "this needs fastapi: pip install 'cocktail[serve]'"
