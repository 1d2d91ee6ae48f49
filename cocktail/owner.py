"""The owner's side of the library: :class:`OwnerStore`, a store opened (or created) by its
owner, to publish and append records, audit what the public cloud holds, answer exactly, list
the versions and write the report.

Each method calls what the matching ``cocktail`` command calls, so both give the same results
and raise the same exceptions; :func:`cocktail.exit_status` gives the exit status the command
would end with.  docs/python-api.md has an example of each.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from .audit import (DEFAULT_MAX_ITEMSETS, AuditReport, ReleaseAuditReport, StoreAudit,
                    audit_as_asked)
from .inputs import as_dataset
from .private_config import open_ledger, require_set_up
from .publish import PublishParams, PublishReport, publish, timed_from
from .publish.append import AppendReport, append
from .publish.forget import ErasureReport, forget, retract
from .query import Engine, Publication
from .query.engine import ExactAnswers
from .querylang import parse_batch
from .releases import committed_versions, current_version
from .store import open_store

Progress = Callable[[str, int, int], None]  # (phase, done, total), as the commands' bars


@dataclass(frozen=True)
class Versions:
    """The store's releases, oldest first: each one's kind (fresh, append, rebase, imported),
    input, records and public chunks, whether the store still keeps its files (older ones are
    pruned), and which one is current."""

    current: str | None
    kept: list[str]
    releases: list[dict]

    COLUMNS = ("version", "kind", "input", "created", "k", "m", "records", "appended",
               "buffered", "public_chunks", "public_subrecords", "kept", "current")

    def to_pandas(self):
        """A row per release (version, kind, input, created, k, m, records, appended, buffered,
        public_chunks, public_subrecords, kept, current)."""
        from .frames import to_frame

        rows = [r | {"kept": r["version"] in self.kept, "current": r["version"] == self.current}
                for r in self.releases]
        return to_frame(rows, list(self.COLUMNS))


class OwnerStore:
    """A store, as its owner uses it.

    ``where`` is what ``--store`` takes: a directory (the embedded local store), ``local:PATH``
    or ``webhdfs://NAMENODE:9870/PATH?fs=hdfs://NAMENODE:8020``.  A store that holds nothing
    yet is refused (:class:`cocktail.NoPublication`, exit status 2: most often a mistyped
    path) unless ``create=True`` says making it is meant.
    """

    def __init__(self, where: str | os.PathLike = "cocktail-store", *, create: bool = False):
        self.backend = open_store(os.fspath(where))
        require_set_up(self.backend, create, create_hint="create=True")

    def __repr__(self) -> str:
        return f"OwnerStore({self.backend.url!r})"

    @property
    def current_version(self) -> str | None:
        """The version analysts are answered from (``v000001``, ...); None before a publish."""
        return current_version(self.backend)

    def publish(self, data, *, format: str | None = None, skip_bad_lines: bool = False,
                rebase: bool = False, progress: Progress | None = None,
                **params) -> PublishReport:
        """Partition ``data`` and publish it as the store's first release, k^m-anonymously.

        ``data``: a path (FIMI, SPMF, CSV, JSON Lines; ``format`` and ``skip_bad_lines`` as
        ``cocktail publish`` takes them), a :class:`cocktail.dataset.Dataset`, an iterable
        of term collections, a mapping of record id to terms, or a pandas DataFrame (long
        form ``record_id, term``, or a column ``terms``).  ``params``: any field of
        :class:`cocktail.publish.PublishParams` (``k``, ``m``, ``method``, ``cluster_size``,
        ``workers``, ...).  A store that has released before refuses a second fresh
        partition (:class:`cocktail.Refused`, exit status 3) unless ``rebase=True``:
        :meth:`append` adds records safely.
        """
        started = time.perf_counter()  # its seconds count reading ``data`` too
        dataset = as_dataset(data, format, skip_bad_lines=skip_bad_lines,
                             progress=progress)
        return timed_from(publish(dataset, self.backend, PublishParams(**params), progress,
                                  rebase=rebase), started)

    def append(self, data, *, format: str | None = None, skip_bad_lines: bool = False,
               min_new: int | None = None, progress: Progress | None = None,
               allow_duplicate: bool = False) -> AppendReport:
        """Add ``data``'s records (as :meth:`publish` takes them) to the current release, as
        a new release that cannot compose with the earlier ones; ``min_new``: the records
        needed to form new clusters (fewer wait in the private buffer).  A FIMI or SPMF batch
        an earlier release added already is refused (``DuplicateBatch``, a
        :class:`cocktail.Refused`) unless ``allow_duplicate``."""
        started = time.perf_counter()
        dataset = as_dataset(data, format, skip_bad_lines=skip_bad_lines,
                             progress=progress)
        return timed_from(append(dataset, self.backend, min_new, progress=progress,
                                 allow_duplicate=allow_duplicate), started)

    def forget(self, record_ids: Iterable[str], *, reason: str, keep: int = 1
               ) -> ErasureReport:
        """Erase the records named by ``record_ids`` as a new release (``cocktail forget``):
        nothing of them stays in either zone, and no two consecutive versions can be diffed to
        re-associate their terms; ``keep``: versions kept afterwards (1: every older file that
        held them is deleted on return).  The receipt counts, never names."""
        return forget(self.backend, record_ids, reason, keep)

    def retract(self, version: str, *, reason: str, keep: int = 1) -> ErasureReport:
        """Take back every record release ``version`` added, as :meth:`forget` erases them
        (``cocktail retract``)."""
        return retract(self.backend, version, reason, keep)

    def audit(self, *, releases: bool = False, version: str | None = None,
              k: int | None = None, m: int | None = None,
              max_itemsets: int = DEFAULT_MAX_ITEMSETS, trust: str | None = None
              ) -> StoreAudit | AuditReport | ReleaseAuditReport:
        """The independent verifier, as ``cocktail audit``: the whole store (by default),
        one ``version`` or a stricter ``k``/``m``, or with ``releases=True`` every release
        against the release invariant.  The result has ``ok`` and ``to_pandas()`` (its
        violations); ``trust`` pins the owner's key (a fingerprint ``ed25519:...``)."""
        return audit_as_asked(self.backend, releases=releases, version=version, k=k, m=m,
                              max_itemsets=max_itemsets, trust=trust)

    def exact(self, query: str, *, runner: str = "fast", version: str | None = None
              ) -> int | float:
        """The exact answer to one query (``count(a & b)``, ``2*count(a) - count(b)``) from
        the private zone: the owner's only, never to be given to analysts."""
        answers = self.exact_batch(query, runner=runner, version=version)
        if len(answers.answers) != 1:
            raise ValueError(f"{query!r} holds {len(answers.answers)} queries: use exact_batch")
        return answers.answers[0]

    def exact_batch(self, queries: str | Iterable[str], *, runner: str = "fast",
                    version: str | None = None) -> ExactAnswers:
        """Exact answers to a batch (a text of queries separated by newlines or ``;``, or an
        iterable of queries), in one job for all its counting queries; ``runner`` as
        ``cocktail query --exact --runner``, ``version`` one that the store keeps."""
        text = queries if isinstance(queries, str) else "\n".join(queries)
        engine = Engine(Publication.open(self.backend, version), runner)
        return engine.exact(parse_batch(text, "queries"))

    @property
    def ledger(self):
        """The store's budget ledger (:class:`cocktail.dp.ledger.Ledger`), as ``cocktail
        roles``/``users``/``budget`` change it: ``add_role``, ``add_user`` (returns the
        token, shown once), ``rotate_token`` (a new token; the old one is refused from then
        on), ``remove_user``, ``set_active``, ``users``, ``budget_status``."""
        return open_ledger(self.backend)

    def versions(self) -> Versions:
        """Every release of the store, from its release log, and which are kept and current."""
        from .report.numbers import release_history

        current = self.current_version
        return Versions(current, committed_versions(self.backend),
                        release_history(self.backend, current) if current else [])

    def report(self, path: str | os.PathLike) -> Path:
        """Write the owner's HTML report (coverage, shape, audit, releases, budget, tables) to
        ``path``, readable by the owner only; needs the ``report`` extra (plotly)."""
        from .report import write_report

        write_report(self.backend, Path(path))
        return Path(path)
