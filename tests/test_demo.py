"""`cocktail demo`: each step shown as it ends, with what its figures mean, on an `[owner]`
install, and nothing slow on its path (no strategy search).  Its wall time is measured by
benchmarks/demo.py, not here."""

from __future__ import annotations

import subprocess

from cocktail.dp import strategies
from cocktail.demo import STEPS, DemoSettings, run_demo

from cocktail.extras import install_command

from .test_extras import OWNER, command

HEADINGS = ["1. data", "2. publish", "3. audit", "4. exact counts", "5. the same as an analyst",
            "6. report"]
MEANINGS = {"2. publish": ["k^m-anonymous:", "cluster:", "public chunks go to"],
            "3. audit": ["an independent check"], "4. exact counts": ["count(a & b):"],
            "5. the same as an analyst": ["α:", "strategy cells: histogram:", "expected error:"]}


def test_the_demo_shows_each_step_as_it_ends_with_what_it_means_on_an_owner_install(tmp_path):
    shown = subprocess.Popen(command(OWNER, "demo", "--workdir", str(tmp_path / "demo"),
                                     "--records", "500"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = shown.stdout.readline()
    running = shown.poll() is None  # step 1 arrived while the rest was still to do
    rest, errors = shown.communicate(timeout=300)
    assert shown.returncode == 0, errors
    assert first.startswith("1. data") and running
    lines = [first, *rest.splitlines()]
    at = [next(i for i, line in enumerate(lines) if line.startswith(h)) for h in HEADINGS]
    assert at == sorted(at)
    for heading, meanings in MEANINGS.items():
        start = at[HEADINGS.index(heading)]
        block = lines[start:at[HEADINGS.index(heading) + 1]]
        for meaning in meanings:
            assert any(line.strip().startswith(meaning) for line in block), (heading, meaning)
    assert lines[at[-1]].startswith("6. report    skipped: this needs plotly: "
                                    + install_command("report"))  # [owner] has no plotly


def test_the_demo_runs_no_strategy_search(tmp_path, monkeypatch):
    def search(*args, **kwargs):
        raise AssertionError("the demo searched for a strategy")

    monkeypatch.setattr(strategies, "searched_candidates", search)
    steps = []
    result = run_demo(DemoSettings(workdir=tmp_path, records=500),
                      step=lambda name, _: steps.append(name))
    assert steps == list(STEPS) and result["ok"]
    errors = result["noisy"]["strategy_errors"]
    assert errors["optimized_strategy"] == errors["fixed_strategy"] == result["noisy"]["strategy"]
