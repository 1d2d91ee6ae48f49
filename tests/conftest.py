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
