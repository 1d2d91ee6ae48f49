"""The strategy search runs on one BLAS thread, scipy's own BLAS included."""

from __future__ import annotations

import json
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
