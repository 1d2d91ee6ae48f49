"""Where counts are computed, chosen by name: one module per backend, one registry (the mrjob
model).  ``fast`` intersects the publication's term bitmaps in-process; the others run the
planned map tasks as a MapReduce job.  Every backend returns the same answers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ...querylang import CountQuery
from ..view import Publication
from . import fast
from .mapreduce import MapReduce
from .streaming import RUNNERS


class Backend(Protocol):
    def counts(self, publication: Publication, queries: Sequence[CountQuery],
               log: Callable[[str], None] | None = None) -> list[int]: ...


BACKENDS: dict[str, Backend] = {"fast": fast, **{name: MapReduce(name) for name in RUNNERS}}
