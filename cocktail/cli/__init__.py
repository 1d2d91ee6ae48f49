"""The ``cocktail`` command line: a thin layer over the library, one module per command group.

This module holds the root group and the registry of commands, loaded when used (so that
`cocktail query --exact` does not import the web server or the report, and an analyst's client
install, without the owner's engine, runs `query --url`); :mod:`.contract` holds the exit
statuses and the ``--json`` contract every command keeps.
"""

from __future__ import annotations

from ..blas import before_numpy

before_numpy()  # before any command's imports load numpy

import click  # noqa: E402

from ..extras import DISTRIBUTION  # noqa: E402
from .contract import EXIT_STATUS, Cocktail  # noqa: E402

# command name -> "module:object" in this package
COMMANDS = {
    "generate": "publish:generate_cmd", "publish": "publish:publish_cmd",
    "forget": "erase:forget_cmd", "retract": "erase:retract_cmd",
    "audit": "audit:audit_cmd",
    "query": "query:query_cmd", "plan": "exact:plan_cmd",
    "republish": "chain:republish_cmd", "chain": "chain:chain_group",
    "reshare": "chain:reshare_cmd",
    "roles": "admin:roles_group", "users": "admin:users_group", "budget": "admin:budget_cmd",
    "ledger": "admin:ledger_group", "owner-token": "admin:owner_token_cmd",
    "signing-key": "admin:signing_key_cmd",
    "serve": "serve:serve_cmd", "report": "report:report_cmd", "demo": "demo:demo_cmd",
    "cluster": "cluster:cluster_group", "attack": "attack:attack_group",
    "table": "tables:table_group", "rank": "rank:rank_group",
}


@click.group(cls=Cocktail, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]},
             epilog=EXIT_STATUS)
@click.version_option(package_name=DISTRIBUTION, prog_name="cocktail")  # however started
def main() -> None:
    """Cocktail: publish set-valued data k^m-anonymously on a hybrid cloud and query it."""
