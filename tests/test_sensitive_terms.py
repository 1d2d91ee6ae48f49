"""`cocktail publish --sensitive-terms FILE --max-rho X`: ρ-cloned clusters of baskets."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from cocktail.cli import main
from cocktail.dataset import load
from cocktail.overlay.cloning import cloned_clusters, cluster_rho
from cocktail.query import Publication
from cocktail.store import LocalStore

WV1 = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "bms-webview-1.dat"


@pytest.fixture(scope="module")
def wv1():
    if not WV1.exists():
        pytest.skip(f"{WV1} is missing (the shared datasets are not mounted)")
    return load(WV1)


def sensitive_terms(dataset, clusters: int, n: int = 20) -> list[str]:
    """n terms whose support is at least the number of clusters, from the middle of the
    support ranking (the frequent ones would be in every cluster anyway)."""
    support = Counter(t for record in dataset.records for t in record)
    eligible = sorted((t for t, c in support.items() if c >= 2 * clusters),
                      key=lambda t: (support[t], t))
    return eligible[len(eligible) // 2:len(eligible) // 2 + n]


def test_stratified_clusters_carry_every_sensitive_term(wv1):
    clusters = -(-len(wv1) // 2000)
    terms = sensitive_terms(wv1, clusters)
    parts = cloned_clusters(wv1.records, 2000, terms)
    assert sorted(p for part in parts for p in part) == list(range(len(wv1)))  # none lost
    rho, _, _ = cluster_rho(wv1.records, parts, terms)
    for part in parts:
        held = {t for p in part for t in wv1.records[p]}
        assert set(terms) <= held
    contiguous = [list(range(s, min(s + 2000, len(wv1)))) for s in range(0, len(wv1), 2000)]
    assert rho < cluster_rho(wv1.records, contiguous, terms)[0] / 3  # far flatter than input order
    assert rho < 0.01


def test_publish_with_sensitive_terms_end_to_end(wv1, tmp_path):
    clusters = -(-len(wv1) // 2000)
    terms_file = tmp_path / "sensitive.txt"
    terms_file.write_text("# product pages\n" + "\n".join(sensitive_terms(wv1, clusters)))
    store = tmp_path / "store"
    result = CliRunner().invoke(main, ["publish", str(WV1), "--store", str(store), "--k", "5",
                                       "--m", "2", "--sensitive-terms", str(terms_file),
                                       "--max-rho", "0.01", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["rho"] is not None and report["rho"] <= 0.01
    audited = CliRunner().invoke(main, ["audit", "--store", str(store), "--json"])
    assert audited.exit_code == 0 and json.loads(audited.output)["ok"]
    publication = Publication.open(LocalStore(store))
    records = sum(u["members"] for u in publication.units if u["kind"] == "leaf")
    assert records == len(wv1)  # no counterfeit, none dropped: the rest is private


def test_a_rho_above_the_limit_is_refused_and_nothing_written(wv1, tmp_path):
    clusters = -(-len(wv1) // 2000)
    terms_file = tmp_path / "sensitive.txt"
    terms_file.write_text("\n".join(sensitive_terms(wv1, clusters)))
    store = tmp_path / "store"
    result = CliRunner().invoke(main, ["publish", str(WV1), "--store", str(store),
                                       "--sensitive-terms", str(terms_file), "--max-rho",
                                       "0.0001", "--json"])
    assert result.exit_code == 2
    assert "above --max-rho" in json.loads(result.output)["error"]
    assert not (store / "public" / "CURRENT").exists()
    assert not any(p.is_file() for p in (store / "public").rglob("*")) \
        if (store / "public").exists() else True
