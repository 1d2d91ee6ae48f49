"""The exit statuses of ``cocktail`` commands, on the library's side: the typed errors of
:mod:`cocktail.client` carry the status the CLI exits with (``exit_status``), so a script on
the library and one on the CLI tell failures apart alike.  What each means, and the JSON
``type`` of each, are the CLI's (:mod:`cocktail.cli.contract`, docs/cli.md)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    DONE = 0
    PROBLEMS = 1
    USAGE = 2
    REFUSED = 3
    BUDGET = 4
    FAILED = 5
    INTERNAL = 70       # sysexits' EX_SOFTWARE
    INTERRUPTED = 130   # 128 + SIGINT
