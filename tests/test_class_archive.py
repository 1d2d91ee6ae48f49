"""The class-data archive of a local Spark driver's JVM: made by the first publish, mapped by
the next, never a note on stdout, never one another user could have planted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from cocktail.jvm import ARCHIVE_DIR, STALE_PART, class_archive

from .conftest import dataset_path


@pytest.fixture
def archives(tmp_path, monkeypatch):
    directory = tmp_path / "cds"
    monkeypatch.setenv(ARCHIVE_DIR, str(directory))
    return directory


def test_an_archive_is_made_once_per_key_then_mapped(archives):
    making = class_archive("spark", ["java 17", "jars a b"])
    assert making.making is not None and not making.path.exists()
    assert making.flags.startswith(f"-XX:ArchiveClassesAtExit={making.making} ")
    making.making.write_bytes(b"classes")
    making.keep()
    assert [p.name for p in archives.iterdir()] == [making.path.name]
    mapped = class_archive("spark", ["java 17", "jars a b"])
    assert mapped.making is None and mapped.path == making.path
    assert mapped.flags.startswith(f"-XX:SharedArchiveFile={making.path} ")
    other = class_archive("spark", ["java 21", "jars a b"])
    assert other.making is not None and other.path != making.path


def test_keeping_puts_one_archive_in_place_and_clears_the_rest(archives):
    old = class_archive("spark", ["old java"])
    old.making.write_bytes(b"old")
    old.keep()
    stale = archives / "spark-0123456789abcdef.jsa.99.part"
    stale.write_bytes(b"half")
    os.utime(stale, (time.time() - STALE_PART - 1,) * 2)
    running = archives / "spark-fedcba9876543210.jsa.98.part"  # another publish's, writing
    running.write_bytes(b"half")
    new = class_archive("spark", ["new java"])
    new.making.write_bytes(b"new")
    new.keep()
    assert sorted(p.name for p in archives.iterdir()) == sorted([new.path.name, running.name])
    failed = class_archive("spark", ["a JVM killed before it wrote"])
    failed.keep()  # nothing written: nothing kept, nothing removed
    assert sorted(p.name for p in archives.iterdir()) == sorted([new.path.name, running.name])


def test_archives_are_off_or_refused_where_others_could_write(archives, monkeypatch):
    """A JVM runs the classes of the archive it maps: an archive in a directory others can
    write, or a file they can, is not used (nor is one made there)."""
    made = class_archive("spark", ["key"])
    made.making.write_bytes(b"classes")
    made.keep()
    os.chmod(made.path, 0o666)
    assert class_archive("spark", ["key"]) is None
    os.chmod(made.path, 0o444)
    assert class_archive("spark", ["key"]).making is None
    os.chmod(archives, 0o777)
    assert class_archive("spark", ["key"]) is None
    assert class_archive("spark", ["another key"]) is None
    os.chmod(archives, 0o700)
    monkeypatch.setenv(ARCHIVE_DIR, "off")
    assert class_archive("spark", ["key"]) is None


def publish_cli(source, store, env) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-m", "cocktail.cli", "publish", str(source),
                           "--store", str(store), "--engine", "spark", "--json"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout), done.stderr  # exactly one object: no JVM note on stdout


MAPS = """
import sys
from cocktail.publish.spark import SparkSettings, spark_context
from cocktail.publish.spark.context import _driver_archive
archive = _driver_archive(SparkSettings("local[2]"))
assert archive is not None and archive.making is None, archive
sc = spark_context(SparkSettings("local[2]"), archive)
maps = open(f"/proc/{sc._gateway.proc.pid}/maps").read()
print(str(archive.path) in maps)
sc.stop()
"""


@pytest.mark.skipif(shutil.which("java") is None, reason="the Spark engine needs a Java runtime")
def test_the_first_spark_publish_makes_the_archive_the_next_maps_it(archives, tmp_path):
    pytest.importorskip("pyspark", reason="pyspark is installed by the test extra")
    env = {**os.environ, ARCHIVE_DIR: str(archives)}
    source = dataset_path("bms-webview-1.dat")
    first, noted = publish_cli(source, tmp_path / "a", env)
    assert "cds" not in noted  # the hundreds of classes left out are not the user's business
    [made] = archives.iterdir()
    assert made.suffix == ".jsa" and made.stat().st_size > 1_000_000
    # Another process finds the same archive, and its driver's JVM maps it.
    mapped = subprocess.run([sys.executable, "-c", MAPS], capture_output=True, text=True,
                            env=env, timeout=300)
    assert mapped.stdout.strip() == "True", mapped.stderr[-2000:]
    # A damaged archive: the JVM starts without it, and says nothing on stdout.
    made.chmod(0o600)
    made.write_bytes(os.urandom(1 << 16))
    damaged, noted = publish_cli(source, tmp_path / "b", env)
    assert "cds" not in noted
    for report in (first, damaged):
        assert report["records"] == 59_602 and report["engine"] == "spark"
