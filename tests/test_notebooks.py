"""The notebooks of docs/notebooks/, executed as a user runs them: each cell in a Jupyter
kernel on this interpreter (nbclient), the analyst's against a real `cocktail serve`.  A check
cell appended by the test reads what the notebook made, and the ledger says what it spent."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

from cocktail.dp.ledger import Ledger
from cocktail.private_config import ledger_location
from cocktail.store import LocalStore

from .served import serve
from .test_fuzz import fuzz_store

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "docs" / "notebooks"
KERNEL = "cocktail-tests"
CELL_TIMEOUT = 120  # seconds; a publish takes a few under load


@pytest.fixture
def run(tmp_path, monkeypatch):
    """``run(name, check, **env)``: execute docs/notebooks/NAME.py with ``env`` added to the
    kernel's environment and the code ``check`` appended as a last cell, which prints one JSON
    object; returns it.  The kernel is this interpreter (a kernelspec of ours, found first on
    JUPYTER_PATH) with this checkout first on its path."""
    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "cocktail tests", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))

    def execute(name: str, check: str, **env: str) -> dict:
        notebook = jupytext.read(NOTEBOOKS / f"{name}.py", fmt="py:percent")
        notebook.cells.append(nbformat.v4.new_code_cell(check))
        kernel_env = os.environ | env | {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "IPYTHONDIR": str(tmp_path / "ipython")}
        NotebookClient(notebook, kernel_name=KERNEL, timeout=CELL_TIMEOUT,
                       resources={"metadata": {"path": str(tmp_path)}}).execute(env=kernel_env)
        [printed] = [output["text"] for output in notebook.cells[-1].outputs
                     if output.get("name") == "stdout"]
        return json.loads(printed)
    return execute


def test_the_owners_notebook(run):
    found = run("owner", """
import json
print(json.dumps({
    "versions": versions["version"].tolist(), "kinds": versions["kind"].tolist(),
    "audit": audit.ok, "violations": len(audit.to_pandas()), "releases": releases.ok,
    "exact": exact["answer"].tolist(), "by_pandas": exact["by pandas"].tolist(),
    "records": int(everything["record_id"].nunique()),
    "report": report.read_text().lstrip()[:15].lower()}))
""")
    assert found["versions"] == ["v000001", "v000002"]
    assert found["kinds"] == ["fresh", "append"]
    assert found["audit"] and found["releases"] and found["violations"] == 0
    assert found["exact"] == found["by_pandas"] and found["exact"][0] > 0
    assert found["records"] == 3500
    assert found["report"] == "<!doctype html>"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """fuzz_store's publication and rankings, served, and an analyst ``nia`` of a role that
    spends 0.1 a query out of 2."""
    store, _, _ = fuzz_store(tmp_path_factory.mktemp("notebook"))
    ledger = Ledger(ledger_location(LocalStore(str(store))))
    ledger.add_role("scientist", alpha=0.1, budget=2)
    token = ledger.add_user("nia", "scientist")
    with serve(store) as (url, _):
        yield {"url": url, "token": token, "ledger": ledger}


def test_the_analysts_notebook(run, served):
    found = run("analyst", """
import json
bar = figure.data[0]
print(json.dumps({
    "terms": terms, "rankings": rankings["name"].tolist(),
    "answers": answers[["answer", "ci_low", "ci_high"]].values.tolist(),
    "spent": answers["spent"].tolist(), "budget": budget,
    "plotted": list(bar.y), "above": list(bar.error_y.array),
    "below": list(bar.error_y.arrayminus),
    "history": history["query"].tolist()}))
""", COCKTAIL_URL=served["url"], COCKTAIL_TOKEN=served["token"])
    ledger = served["ledger"]
    nia = ledger.authenticate(served["token"])
    assert found["terms"] and sorted(found["rankings"]) == ["noisy", "ranking"]
    assert len(found["answers"]) == 9 and set(found["spent"]) == {0.1}  # one charge
    for answer, low, high in found["answers"]:
        assert low < answer < high
    assert found["plotted"] == [answer for answer, _, _ in found["answers"]]
    assert found["above"] == pytest.approx([high - answer for answer, _, high in found["answers"]])
    assert found["below"] == pytest.approx([answer - low for answer, low, _ in found["answers"]])
    assert found["budget"] == ledger.budget_status(nia)
    assert found["budget"]["spent"] == pytest.approx(0.2)  # preview, batch; not the reuse
    assert [h["alpha"] for h in ledger.history(nia)] == [0.1, 0.1]
    assert len(found["history"]) == 1 + 9
