"""The daemon Spark forks the engine's Python workers from: PySpark's own, started warm."""

from __future__ import annotations

import importlib.metadata
import zipfile

import pytest

from cocktail.publish.spark_daemon import installed_first, zipped_version

pytest.importorskip("pyspark", reason="pyspark is installed by the test extra")
PYSPARK = importlib.metadata.version("pyspark")
PY4J = importlib.metadata.version("py4j")


def spark_zip(path, version_file: str | None) -> str:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pyspark/__init__.py", "")
        if version_file is not None:
            archive.writestr("pyspark/version.py", version_file)
    return str(path)


def test_only_the_zips_of_the_installed_versions_leave_the_path(tmp_path):
    """A zip Spark ships is dropped only when the installed package is its very version; a
    zip of another Spark (a cluster's) stays first, and so does one that says no version."""
    (tmp_path / "same").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "bare").mkdir()
    (tmp_path / "broken").mkdir()
    same = spark_zip(tmp_path / "same" / "pyspark.zip", f'__version__: str = "{PYSPARK}"\n')
    other = spark_zip(tmp_path / "other" / "pyspark.zip", "__version__ = '0.0.1'\n")
    bare = spark_zip(tmp_path / "bare" / "pyspark.zip", None)
    broken = tmp_path / "broken" / "pyspark.zip"
    broken.write_bytes(b"not a zip")
    py4j_same, py4j_other = f"/spark/python/lib/py4j-{PY4J}-src.zip", "/x/py4j-0.0.1-src.zip"
    path = [same, "/work/app", py4j_same, other, bare, str(broken), py4j_other, "/site"]

    assert zipped_version(same) == ("pyspark", PYSPARK)
    assert zipped_version(other) == ("pyspark", "0.0.1")
    assert zipped_version(bare) is None and zipped_version(str(broken)) is None
    assert zipped_version(py4j_other) == ("py4j", "0.0.1")
    assert installed_first(path) == ["/work/app", other, bare, str(broken), py4j_other,
                                     "/site"]


@pytest.mark.xdist_group("spark")
def test_the_workers_are_forked_with_the_engine_loaded_and_frozen(spark):
    """Each Python worker comes from Cocktail's daemon: the engine loaded before the fork,
    the objects it held frozen (the collection after each task skips them), and PySpark
    from the installed package, not from the zip Spark puts first on the workers' path."""
    def probe(_):
        import gc
        import sys

        import pyspark
        return [(pyspark.__file__, gc.get_freeze_count(), sys.argv[0])]

    for where, frozen, daemon in spark.parallelize(range(2), 2).mapPartitions(probe).collect():
        assert daemon.endswith("spark_daemon.py")
        assert frozen > 10_000  # the engine's modules: ~55,000 objects
        assert ".zip" not in where, where
