"""Optional dependencies: every import of an extra's package goes through :func:`require`, and
so does the command line's of the owner's engine (whose modules import numpy and the rest
directly), so that a missing package is one line naming the extra that installs it, never a
traceback.

The core install is the analyst's client and the command line's shell (click, rich, httpx);
the owner's engine (publish, audit, exact and noisy answers) is the ``owner`` extra, and each
other extra adds one capability (docs/install.md lists them, setup.cfg declares them).
"""

from __future__ import annotations

import importlib
import json
import shlex
from functools import cache
from importlib.metadata import distributions
from types import ModuleType
from urllib.parse import unquote, urlparse

# Our name on the package index (`cocktail` there is an unrelated project); we import as `cocktail`.
DISTRIBUTION = "cocktail-privacy"

# The extra that brings each optional package (by its import name).
EXTRAS = {
    "numpy": "owner",       # the owner's engine: publish, audit, exact and noisy answers
    "fim": "owner",         # (pyfim) the concepts' frequent itemsets
    "pyroaring": "owner",   # the term index
    "opendp": "owner",      # the noise
    "threadpoolctl": "owner",  # BLAS on one thread
    "cryptography": "owner",   # the releases' signatures
    "yaml": "owner",        # (pyyaml) the cluster's description
    "pyspark": "spark",     # publish --engine spark, query --runner spark
    "mrjob": "hadoop",      # query --runner inline|local|hadoop (and spark, with [spark])
    "hdfs": "hadoop",       # webhdfs:// stores
    "plotly": "report",     # cocktail report, the demo's report
    "fastapi": "serve",     # cocktail serve
    "uvicorn": "serve",
    "fastapi_offline": "serve",  # /docs and /redoc without a CDN
    "scipy": "search",      # the strategy search of noisy answers (else the best fixed one)
    "ortools": "solver",    # publish --method optimal, the exact cover of table chains
    "networkx": "rank",     # cocktail rank build (the ESVT and ESTT matchings)
    "pandas": "frames",     # the library's results as DataFrames (to_pandas)
    "pyarrow": "parquet",   # Parquet input, DataFrames (cocktail.dataset.from_frame)
}


class MissingExtra(ModuleNotFoundError):
    """An optional package is not installed; the message names the extra that installs it."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(f"this needs {package}: {install_command(extra)}", name=package)
        self.extra = extra


def require(module: str, extra: str | None = None) -> ModuleType:
    """``module`` (a dotted name) imported, or :class:`MissingExtra` naming the extra (by
    default the one :data:`EXTRAS` gives its package, or for a module of ours, the one of the
    package it lacks)."""
    package = module.partition(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:  # it, or a package it needs (the extra installs both)
        missing = (exc.name or package).partition(".")[0]
        extra = extra or EXTRAS.get(package) or EXTRAS.get(missing)
        if extra is None:
            raise  # no extra brings it: a bug, not an install to complete
        raise MissingExtra(missing, extra) from None


def install_command(extra: str) -> str:
    """The pip command that adds ``extra`` to this install: from the directory (a checkout) or
    file this install came from, else from the package index."""
    source = _installed_from()
    if source is None:
        return f"pip install {shlex.quote(f'{DISTRIBUTION}[{extra}]')}"
    path, editable = source
    return f"pip install {'-e ' if editable else ''}{shlex.quote(f'{path}[{extra}]')}"


@cache
def _installed_from() -> tuple[str, bool] | None:
    """Where pip installed this distribution from, when that is a local directory or file:
    its path, and whether the install is editable (PEP 610's direct_url.json)."""
    # Not only the first found: a checkout on the path holds an .egg-info without it.
    recorded = (found.read_text("direct_url.json") for found in distributions(name=DISTRIBUTION))
    text = next(filter(None, recorded), None)
    if text is None:
        return None  # from the index, or not installed
    origin = json.loads(text)
    url = urlparse(origin.get("url", ""))
    if url.scheme != "file":
        return None  # the index, a VCS or a remote archive: name the index's
    return unquote(url.path), bool(origin.get("dir_info", {}).get("editable"))
