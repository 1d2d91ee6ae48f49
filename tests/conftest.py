"""Shared fixtures: the real datasets, read in place from ../shared/datasets, never copied."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO.parent / "shared" / "datasets"


def dataset_path(name: str) -> Path:
    path = DATASETS / name
    if not path.exists():
        pytest.skip(f"{path} is not present (the shared BMS-WebView datasets live beside the repo)")
    return path


@pytest.fixture(scope="session", autouse=True)
def jvm_archives(tmp_path_factory):
    """The Spark drivers the tests start keep their class-data archive in the session's
    temporary directory, not in the user's cache."""
    from cocktail.jvm import ARCHIVE_DIR

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ARCHIVE_DIR, str(tmp_path_factory.mktemp("jvm-archives")))
        yield


@pytest.fixture(scope="session")
def spark():
    """One local[2] context for every Spark test of a worker (the engine uses a running one),
    in the `spark` group: a context each would cost seconds."""
    if shutil.which("java") is None:
        pytest.skip("the Spark engine needs a Java runtime (java is not on PATH)")
    pytest.importorskip("pyspark", reason="pyspark is installed by the test extra")
    from cocktail.publish.spark import SparkSettings, spark_context

    context = spark_context(SparkSettings("local[2]"))
    yield context
    context.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Grouped tests first (`--dist loadgroup` hands out work in collection order), the
    testbed's rehearsal, the longest, first of all: started last, it would leave the other
    worker idle for most of its ten minutes."""
    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("testbed"):
            return 0
        return 1 if item.get_closest_marker("xdist_group") else 2

    items.sort(key=rank)  # stable: each module's tests keep their order


def pytest_collection_finish(session: pytest.Session) -> None:
    """Under `--dist loadgroup`, a worker's grouped tests must carry their group in their id
    (how xdist keeps a group on one worker); a pytest that drops it would scatter the Hadoop
    tests over both workers, each starting its own clusters."""
    if not session.config.getoption("loadgroup", False):
        return
    lost = [item.nodeid for item in session.items
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(f"pytest-xdist could not group {lost[0]} (and {len(lost) - 1} "
                                "more): use a pytest it supports (setup.cfg, the test extra)")
