"""Shared fixtures: the real datasets, read in place from ../shared/datasets, never copied."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO.parent / "shared" / "datasets"


def dataset_path(name: str) -> Path:
    path = DATASETS / name
    if not path.exists():
        pytest.skip(f"{path} is not present (the shared BMS-WebView datasets live beside the repo)")
    return path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Grouped tests first (`--dist loadgroup` hands out work in collection order), the
    testbed's rehearsal, the longest, first of all: started last, it would leave the other
    worker idle for most of its ten minutes."""
    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("testbed"):
            return 0
        return 1 if item.get_closest_marker("xdist_group") else 2

    items.sort(key=rank)  # stable: each module's tests keep their order
