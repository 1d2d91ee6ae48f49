"""`benchmarks/serve_load.py --store` loads a real store's server without touching the store:
its roles, tokens and charges go to a throwaway ledger."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from cocktail.dataset import load
from cocktail.dp.ledger import Ledger
from cocktail.private_config import ledger_location
from cocktail.publish import PublishParams, publish
from cocktail.store import LocalStore

from .conftest import REPO, dataset_path


def files(root: Path) -> dict[str, str]:
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*")) if path.is_file()}


def test_serve_load_leaves_the_real_store_and_its_ledger_as_they_were(tmp_path):
    """It once gave the real ledger three live users with a budget of 1e6 each and spent
    0.067 of the dataset's 5.0 in 3 s."""
    store = LocalStore(tmp_path / "store")
    publish(load(dataset_path("bms-webview-1.dat")).head(2000), store, PublishParams(k=5, m=3))
    ledger = Ledger(ledger_location(store))
    ledger.set_dataset_budget(5.0)
    ledger.add_role("analyst", alpha=0.1, budget=1.0)
    ledger.add_user("ann", "analyst")
    del ledger  # its connection closed: the ledger's files stay as they are
    before = files(store.root)
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "serve_load.py"), "--store",
                          str(store.root), "--clients", "3", "--seconds", "1", "--rate", "20",
                          "--json"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    runs = json.loads(run.stdout)["runs"]
    assert all(r["status_codes"].get("200", 0) > 0 for r in runs), runs  # it did load it
    assert files(store.root) == before  # the ledger too, byte for byte
