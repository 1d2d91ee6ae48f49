"""Every runner gives the fast path's answers, and those equal brute force on the raw data."""

from __future__ import annotations

import shutil

import pytest

from cocktail.dataset import load
from cocktail.publication import Publication, PublishParams, publish
from cocktail.querylang import CountQuery
from cocktail.runners import exact_counts
from cocktail.store import LocalStore
from cocktail.synthetic import random_conjunctions

from .conftest import dataset_path


@pytest.fixture(scope="module", params=["bms-webview-1.dat", "bms-webview-2.dat"])
def published(request, tmp_path_factory):
    dataset = load(dataset_path(request.param))
    store = LocalStore(tmp_path_factory.mktemp("store"))
    publish(dataset, store, PublishParams(k=5, m=3))
    return dataset, Publication.open(store)


@pytest.mark.parametrize("runner", ["fast", "inline", "local"])
def test_200_queries_equal_brute_force(published, runner):
    dataset, publication = published
    queries = [CountQuery(q) for q in random_conjunctions(dataset.records, 200, seed=11)]
    answers = exact_counts(publication, queries, runner)
    expected = [dataset.count_containing(q.terms) for q in queries]
    assert answers == expected
    assert sum(a > 0 for a in answers) > 100  # the workload is not trivially zero


def test_spark_runner(tmp_path):
    if shutil.which("java") is None:
        pytest.skip("the spark runner needs a Java runtime (java is not on PATH)")
    pytest.importorskip("pyspark", reason="pyspark is installed by the test extra")
    dataset = load(dataset_path("bms-webview-1.dat")).head(8000)
    store = LocalStore(tmp_path / "s")
    publish(dataset, store, PublishParams(k=5, m=3, cluster_size=1000))
    queries = [CountQuery(q) for q in random_conjunctions(dataset.records, 40, seed=5)]
    answers = exact_counts(Publication.open(store), queries, "spark")
    assert answers == [dataset.count_containing(q.terms) for q in queries]
