"""One home for a store's layout and its commit step.

* :mod:`.layout`: what a store may hold (the basket publication, tables, rankings, derived
  views), read by every writer, the auditor and the report;
* :mod:`.versions`: the ``CURRENT`` pointer, the committed versions, sweep and prune;
* :mod:`.commit`: the one commit step (lock, sweep, random-order write, release-log entry,
  pointer swap, prune) every writer goes through;
* :mod:`.log`: the release log, what each release showed the public cloud.
"""

from .commit import Builder, Release, Staged, begin, commit_release
from .layout import Refused
from .log import (ERASURES, RebaseRefused, ReleaseBuilder, chunk_record, decode_multiset,
                  entry_path, forget_members, has_entry, member_hash, member_key, read_log,
                  refuse_rebase, write_entry)
from .versions import committed_versions, current_version, next_version, prune, sweep

__all__ = ["ERASURES", "Builder", "RebaseRefused", "Refused", "Release", "ReleaseBuilder",
           "Staged", "begin", "chunk_record", "commit_release", "committed_versions",
           "current_version", "decode_multiset", "entry_path", "forget_members", "has_entry",
           "member_hash", "member_key", "next_version", "prune", "read_log", "refuse_rebase",
           "sweep", "write_entry"]
