"""Where counts are computed, chosen by name: one module per backend, one registry (the mrjob
model).  ``fast`` intersects the publication's term bitmaps in-process; ``inline``, ``local``,
``spark`` and ``hadoop`` run the planned map tasks over the chunks as a MapReduce job (the
public cloud matches the public chunks); ``index-<runner>`` counts over the term index's
parts, a map task each, for versions beyond one machine.  Every backend returns the same
answers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ...querylang import CountQuery
from ..names import BACKEND_NAMES
from ..view import Publication
from . import fast
from .mapreduce import MapReduce
from .shards import IndexShards
from .streaming import check_ready


class Backend(Protocol):
    READS: str  # what to read ahead of the queries: Publication.warm's ``reads``

    def counts(self, publication: Publication, queries: Sequence[CountQuery],
               log: Callable[[str], None] | None = None) -> list[int]: ...


def _backend(name: str) -> Backend:
    runner = name.removeprefix("index-")
    return fast if name == "fast" else IndexShards(runner) if runner != name else MapReduce(name)


BACKENDS: dict[str, Backend] = {name: _backend(name) for name in BACKEND_NAMES}


def check_backend(name: str, store) -> None:
    """Refuse, before any work, a backend this store or this machine cannot run."""
    if name != "fast":
        check_ready(name.removeprefix("index-"), store, name)
