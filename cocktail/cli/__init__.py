"""The ``cocktail`` command line: a thin layer over the library, one module per command group.

Every command that reports results takes ``--json`` and then prints exactly one JSON object on
stdout; progress and errors go to stderr.
"""

from __future__ import annotations

import click

from .admin import (budget_cmd, ledger_group, owner_token_cmd, roles_group, signing_key_cmd,
                    users_group)
from .attack import attack_group
from .audit import audit_cmd
from .chain import chain_group, republish_cmd, reshare_cmd
from .cluster import cluster_group
from .contract import EXIT_STATUS
from .demo import demo_cmd
from .publish import generate_cmd, publish_cmd
from .query import plan_cmd, query_cmd
from .rank import rank_group
from .report import report_cmd
from .serve import serve_cmd
from .tables import table_group


@click.group(context_settings={"help_option_names": ["-h", "--help"]},
             epilog=EXIT_STATUS)
@click.version_option(package_name="cocktail")
def main() -> None:
    """Cocktail: publish set-valued data k^m-anonymously on a hybrid cloud and query it."""


for command in (generate_cmd, publish_cmd, owner_token_cmd, report_cmd, audit_cmd, republish_cmd,
                signing_key_cmd, chain_group, query_cmd, roles_group, users_group, budget_cmd,
                reshare_cmd, ledger_group, serve_cmd, plan_cmd, demo_cmd, cluster_group,
                table_group, rank_group, attack_group):
    main.add_command(command)
