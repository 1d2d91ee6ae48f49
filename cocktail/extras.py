"""Optional dependencies: every import of one goes through :func:`require`, so that a missing
package is one line naming the extra that installs it, never a traceback.

The core install publishes, audits and queries a local store and answers with differential
privacy; each extra adds one capability (docs/install.md lists them, setup.cfg declares them).
"""

from __future__ import annotations

import importlib
from types import ModuleType

# The extra that brings each optional package (by its import name).
EXTRAS = {
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
    "pyarrow": "parquet",   # Parquet input, DataFrames (cocktail.dataset.from_frame)
}


class MissingExtra(ModuleNotFoundError):
    """An optional package is not installed; the message names the extra that installs it."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(f"this needs {package}: pip install 'cocktail[{extra}]'", name=package)
        self.extra = extra


def require(module: str, extra: str | None = None) -> ModuleType:
    """``module`` (a dotted name) imported, or :class:`MissingExtra` naming the extra (by
    default the one :data:`EXTRAS` gives its package)."""
    package = module.partition(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:  # it, or a package it needs (the extra installs both)
        missing = (exc.name or package).partition(".")[0]
        raise MissingExtra(missing, extra or EXTRAS[package]) from None
