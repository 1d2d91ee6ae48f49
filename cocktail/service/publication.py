"""The publication every request reads: the store's current version, opened and warmed once,
swapped in whole when CURRENT changes."""

from __future__ import annotations

import gc
import logging
import threading
import time

from ..dp.session import Source
from ..private_config import store_identity
from ..query import BACKENDS, Engine, Publication
from ..releases import current_version
from ..store import Store, StoreError

log = logging.getLogger("cocktail.serve")


class NoPublication(Exception):
    pass


class CurrentPublication:
    """The store's current version, opened and warmed once and shared by every request;
    a watcher opens a new version when CURRENT changes and swaps it in whole."""

    def __init__(self, store: Store, runner: str, interval: float = 1.0) -> None:
        self._store, self._runner, self._interval = store, runner, interval
        self.identity = store_identity(store)
        self._source: Source | None = None
        self._stop = threading.Event()
        self.refresh()
        threading.Thread(target=self._watch, name="publication-watcher", daemon=True).start()

    def refresh(self) -> None:
        version = current_version(self._store)
        if version is None or (self._source and self._source.version == version):
            return
        started = time.perf_counter()
        publication = Publication.open(self._store, version).warm(BACKENDS[self._runner].READS)
        # Millions of warm objects live as long as the version: keep the cyclic collector off
        # them, or its full passes stall every request for tens of milliseconds (and miss
        # deadlines).  They are still freed by reference counting when the version goes.
        gc.collect()
        gc.freeze()
        self._source = Source(version, Engine(publication, self._runner).counts,  # one swap
                              self.identity, publication.public_terms)
        log.info("serving %s (opened in %.2f s)", version, time.perf_counter() - started)

    def _watch(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.refresh()
            except (StoreError, OSError, ValueError) as exc:
                log.warning("cannot open the new version yet: %s", exc)

    def get(self) -> Source:
        source = self._source
        if source is None:
            raise NoPublication("the store holds no publication yet")
        return source

    def close(self) -> None:
        self._stop.set()
