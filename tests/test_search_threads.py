"""BLAS runs on one thread: in a publish, and in the strategy search, scipy's own BLAS
included."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SPY = """
import json, sys
from threadpoolctl import threadpool_info
from cocktail.dp import optimize
from cocktail.dp.strategies import choose
from cocktail.dp.workload import Matrices
from cocktail.querylang import parse_batch

assert "scipy" not in sys.modules  # a fresh process: the search loads it
seen, p_identity = [], optimize.p_identity

def spy(*args, **kwargs):  # inside the limit, after the marginals' search used scipy
    seen.extend((i["filepath"], i["num_threads"]) for i in threadpool_info()
                if i["user_api"] == "blas")
    return p_identity(*args, **kwargs)

optimize.p_identity = spy
choose(Matrices(parse_batch("count(a); count(a & b); count(a & b & c)")), search_units=50)
print(json.dumps(seen))
"""


def test_the_search_runs_on_one_blas_thread_even_the_first_that_loads_scipy():
    """threadpoolctl limits only the libraries loaded when the limit is set: scipy, imported by
    the first search inside it, ran its BLAS on every core (a cold search took 23 s, not 2,
    on a busy machine)."""
    found = subprocess.run([sys.executable, "-c", SPY], capture_output=True, text=True,
                           timeout=300)
    assert found.returncode == 0, found.stderr
    seen = json.loads(found.stdout)
    assert any("scipy.libs" in path or "/scipy/" in path for path, _ in seen), seen  # its own
    assert {threads for _, threads in seen} == {1}, seen


PUBLISHER = """
import json, sys
from threadpoolctl import threadpool_info
from cocktail.dataset import Dataset
from cocktail.publish import PublishParams, publish
from cocktail.store import LocalStore

before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
records = [frozenset({f"t{i % 7}", f"u{i % 3}"}) for i in range(60)]
publish(Dataset(tuple(map(str, range(60))), records, "mem", "fimi"), LocalStore(sys.argv[1]),
        PublishParams(k=2, m=2, workers=1))
print(json.dumps([before, [i["num_threads"] for i in threadpool_info()
                           if i["user_api"] == "blas"]]))
"""


def test_a_publish_runs_its_blas_on_one_thread(tmp_path):
    """The overlay tree's products ran on every core with OpenBLAS's default, which spins on a
    loaded two-core machine (19.5 s of CPU for 1M records' tree, 4 s on one thread)."""
    found = subprocess.run([sys.executable, "-c", PUBLISHER, str(tmp_path / "s")],
                           capture_output=True, text=True, timeout=300,
                           env={k: v for k, v in os.environ.items()
                                if not k.endswith("_NUM_THREADS")} | {"OPENBLAS_NUM_THREADS": "2"})
    assert found.returncode == 0, found.stderr
    before, after = json.loads(found.stdout)
    assert before and max(before) > 1 and set(after) == {1}, (before, after)


STARTER = """
import json
import cocktail.cli
import numpy
from threadpoolctl import threadpool_info
print(json.dumps([i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]))
"""


def test_the_command_line_loads_openblas_on_one_thread_unless_the_user_says_otherwise():
    """OpenBLAS starts a thread a core as numpy loads, and they spin before they sleep (0.1 s
    of CPU a command here): the command line asks for one before anything loads numpy."""
    bare = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    for env, expected in ((bare, {1}), (bare | {"OPENBLAS_NUM_THREADS": "2"}, {2})):
        found = subprocess.run([sys.executable, "-c", STARTER], capture_output=True, text=True,
                               timeout=120, env=env)
        assert found.returncode == 0, found.stderr
        assert set(json.loads(found.stdout)) == expected
