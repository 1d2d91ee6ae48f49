"""The owner's administration: roles, users, budgets, the ledger, the owner token and the signing
key.  Each refuses a store that holds no publication yet, unless --create says making one is
meant (roles and users may be set up before the first publish)."""

from __future__ import annotations

from pathlib import Path

import click

from ..dp.ledger import dataset_budget_text, private_file
from ..dp.noise import PARAMETER, PURE, SYMBOL, ZCDP
from ..private_config import (ledger_location, open_ledger, require_set_up,
                              set_ledger_location)
from ..releases import signing
from ..store import open_store
from .contract import confirm, emit, out, warn
from .options import OWNER, create_option, json_option, store_option


token_out_option = click.option(
    "--out", "out_path", type=click.Path(dir_okay=False, path_type=Path),
    help="Write the token to this file, readable by you only (0600), instead of printing it.")


def _hand_over(token: str, out_path: Path | None, as_json: bool, payload: dict,
               message: str) -> None:
    """A token shown once: into ``out_path`` (0600, whatever the umask) or on stdout, and what
    was done on stderr (or the one JSON object)."""
    if out_path is not None:
        private_file(out_path)
        out_path.write_text(token + "\n")
        confirm(as_json, payload | {"out": str(out_path)}, f"{message}; token in {out_path}")
        return
    if not as_json:
        click.echo(token)  # the result, on stdout; the confirmation goes to stderr
    confirm(as_json, payload | {"token": token},
            f"{message}; its token, above, is shown once: only its hash is kept")


@click.command("owner-token")
@token_out_option
@store_option
@create_option
@json_option
def owner_token_cmd(out_path: Path | None, store_spec: str, create: bool, as_json: bool) -> None:
    """A new credential for the owner's dashboard (`cocktail serve`, /owner); the previous one
    stops working.  Shown once (or written to --out): only its hash is kept, in the ledger.
    Owner command."""
    token = open_ledger(open_store(store_spec), create).new_owner_token()
    _hand_over(token, out_path, as_json, {}, "a new owner token; the previous one stops working")


@click.command("signing-key", help="Show the key that signs the store's versions: its "
               "fingerprint and public key, for recipients to pin with --trust-key (made on "
               f"first use; the private key stays in private/{signing.KEY_FILE}). {OWNER}")
@store_option
@click.option("--out", "out_path", type=click.Path(dir_okay=False),
              help="Also write the public key (PEM) there, to hand to recipients.")
@create_option
@json_option
def signing_key_cmd(store_spec: str, out_path: str | None, create: bool,
                    as_json: bool) -> None:
    store = open_store(store_spec)
    require_set_up(store, create)
    key = signing.signing_key(store)
    pem = signing.public_pem(key)
    if out_path:
        Path(out_path).write_bytes(pem)
    fingerprint = signing.fingerprint(key.public_key())
    emit(as_json, {"store": store_spec, "fingerprint": fingerprint,
                   "public_key_pem": pem.decode(), "out": out_path},
         lambda: out.print(f"{fingerprint}\n{pem.decode().rstrip()}", highlight=False,
                           markup=False))


@click.group("roles", help=f"Roles: the per-query α and total budget their users get. {OWNER}")
def roles_group() -> None:
    pass


@roles_group.command("add")
@click.argument("name")
@click.option("--alpha", type=click.FloatRange(min=0, min_open=True),
              help="Pure differential privacy: the α each query spends (Laplace noise).")
@click.option("--rho", type=click.FloatRange(min=0, min_open=True),
              help="Zero-concentrated DP instead: the ρ each query spends (Gaussian noise); "
              "the budget is then in ρ. Give --alpha or --rho.")
@click.option("--budget", type=click.FloatRange(min=0), required=True,
              help="Total α (or ρ) each user of the role may spend.")
@store_option
@create_option
@json_option
def roles_add(name: str, alpha: float | None, rho: float | None, budget: float,
              store_spec: str, create: bool, as_json: bool) -> None:
    """Create or update a role (owner command)."""
    if (alpha is None) == (rho is None):
        raise click.UsageError("give one of --alpha (pure DP) and --rho (zCDP)")
    definition, per_query = (PURE, alpha) if rho is None else (ZCDP, rho)
    open_ledger(open_store(store_spec), create).add_role(name, per_query, budget, definition)
    confirm(as_json, {"role": name, PARAMETER[definition]: per_query, "budget": budget,
                      "definition": definition},
            f"role {name}: {SYMBOL[definition]}={per_query:g} per query, budget {budget:g} "
            f"per user ({definition})")


@roles_group.command("list")
@store_option
@json_option
def roles_list(store_spec: str, as_json: bool) -> None:
    """List roles (owner command)."""
    roles = open_ledger(open_store(store_spec)).roles()
    emit(as_json, {"roles": roles}, lambda: [out.print(
        f"{r['name']}: {SYMBOL[r['definition']]}={r['alpha']:g} per query, budget "
        f"{r['budget']:g} ({r['definition']})", markup=False) for r in roles])


@click.group("users", help=f"Analysts: each has a role and a token. {OWNER}")
def users_group() -> None:
    pass


@users_group.command("add")
@click.argument("name")
@click.option("--role", required=True, help="The role (`cocktail roles add`) it spends under.")
@token_out_option
@store_option
@create_option
@json_option
def users_add(name: str, role: str, out_path: Path | None, store_spec: str, create: bool,
              as_json: bool) -> None:
    """Create a user and print its token (or write it to --out), shown once: it is stored only
    as a hash (owner command)."""
    token = open_ledger(open_store(store_spec), create).add_user(name, role)
    _hand_over(token, out_path, as_json, {"user": name, "role": role},
               f"user {name} added (role {role})")


@users_group.command("rotate")
@click.argument("name")
@token_out_option
@store_option
@json_option
def users_rotate(name: str, out_path: Path | None, store_spec: str, as_json: bool) -> None:
    """Give the user a new token (a lost or leaked one) and print it (or write it to --out),
    shown once; the old token is refused from now on, the budget spent stays (owner
    command)."""
    token = open_ledger(open_store(store_spec)).rotate_token(name)
    _hand_over(token, out_path, as_json, {"user": name},
               f"user {name}: new token; the old one is refused from now on")


@users_group.command("remove")
@click.argument("name")
@store_option
@json_option
def users_remove(name: str, store_spec: str, as_json: bool) -> None:
    """Remove the user: its token is refused from now on; its charges stay counted in the
    dataset's budget (owner command)."""
    open_ledger(open_store(store_spec)).remove_user(name)
    confirm(as_json, {"user": name, "removed": True}, f"user {name} removed")


@users_group.command("list")
@store_option
@json_option
def users_list(store_spec: str, as_json: bool) -> None:
    """List users with the α they have spent (owner command)."""
    users = open_ledger(open_store(store_spec)).users()
    emit(as_json, {"users": users}, lambda: [out.print(
        f"{u['name']} ({u['role']}{'' if u['active'] else ', disabled'}): spent {u['spent']:g}",
        markup=False) for u in users])


def _set_active(name: str, store_spec: str, active: bool, as_json: bool) -> None:
    open_ledger(open_store(store_spec)).set_active(name, active)
    confirm(as_json, {"user": name, "active": active},
            f"user {name} {'enabled' if active else 'disabled'}")


@users_group.command("disable")
@click.argument("name")
@store_option
@json_option
def users_disable(name: str, store_spec: str, as_json: bool) -> None:
    """Refuse the user's token from now on, 403 (owner command)."""
    _set_active(name, store_spec, False, as_json)


@users_group.command("enable")
@click.argument("name")
@store_option
@json_option
def users_enable(name: str, store_spec: str, as_json: bool) -> None:
    """Accept the user's token again (owner command)."""
    _set_active(name, store_spec, True, as_json)


@click.command("budget", help="Show (or --set) the dataset-wide privacy budget and what has been "
               f"spent. {OWNER}")
@click.option("--set", "total", type=click.FloatRange(min=0),
              help="Set the dataset-wide α budget that caps all users of pure-DP roles "
              "together.")
@click.option("--set-rho", "rho_total", type=click.FloatRange(min=0),
              help="Set the dataset-wide ρ budget that caps all users of zCDP roles together.")
@store_option
@create_option
@json_option
def budget_cmd(total: float | None, rho_total: float | None, store_spec: str, create: bool,
               as_json: bool) -> None:
    ledger = open_ledger(open_store(store_spec), create)
    if total is not None:
        ledger.set_dataset_budget(total)
    if rho_total is not None:
        ledger.set_dataset_budget(rho_total, ZCDP)
    status = ledger.budget_status()
    emit(as_json, status, lambda: out.print(dataset_budget_text(status), highlight=False))


@click.group("ledger", help=f"Where the budget ledger lives, its backups and restores. {OWNER}")
def ledger_group() -> None:
    pass


@ledger_group.command("path")
@click.argument("path", required=False, type=click.Path(dir_okay=False, path_type=Path))
@store_option
@create_option
@json_option
def ledger_path_cmd(path: Path | None, store_spec: str, create: bool, as_json: bool) -> None:
    """Print the ledger's path, or record PATH as the ledger of this store (in its private
    zone; needed once for HDFS stores, whose ledger is a file on the overlay host: there, before
    the first publish, with --create). Owner command."""
    store = open_store(store_spec)
    require_set_up(store, create)
    location = set_ledger_location(store, path) if path else ledger_location(store)
    emit(as_json, {"ledger": str(location)}, lambda: click.echo(str(location)))


@ledger_group.command("backup")
@click.argument("target", type=click.Path(dir_okay=False, path_type=Path))
@store_option
@json_option
def ledger_backup_cmd(target: Path, store_spec: str, as_json: bool) -> None:
    """Copy the ledger to TARGET, consistently while `cocktail serve` answers (SQLite's online
    backup), readable by the owner only, read back, and tagged: TARGET.sig holds the store's
    signing key's signature of its bytes (the key stays in private/signing.key), without which
    `ledger restore` refuses it. Never over an existing file or through a link. Charges made
    after it are not in it: back up often, and keep backups off the overlay host. Owner
    command."""
    store = open_store(store_spec)
    summary = open_ledger(store).backup(target, signing.signing_key(store))
    emit(as_json, summary, lambda: out.print(
        f"backed up {len(summary['users'])} users, {summary['charges']} charges "
        f"(dataset spent {summary['dataset_spent']:g}) to {target}, tagged in "
        f"{summary['tag']}", markup=False))


@ledger_group.command("restore")
@click.argument("source", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--allow-grants", is_flag=True,
              help="Apply what the backup grants that the ledger does not (a new role or user, "
              "a larger budget, α or dataset cap, a token the ledger did not issue, a disabled "
              "user enabled), each named on stderr. Only for grants you made yourself.")
@store_option
@create_option
@json_option
def ledger_restore_cmd(source: Path, allow_grants: bool, store_spec: str, create: bool,
                       as_json: bool) -> None:
    """Restore the ledger from the backup SOURCE, once its tag (SOURCE.sig) shows the store's
    signing key tagged exactly these bytes: onto a lost ledger, or over one that has spent no
    more than the backup and grants no less. Exit status 3, nothing applied, for a backup with
    no tag or another's, one that would hand budget back (an older backup), or one that grants
    more than the ledger (without --allow-grants). Owner command."""
    from ..dp.ledger import Ledger

    store = open_store(store_spec)
    require_set_up(store, create)
    key = signing.stored_key(store)  # never made here: a new key would vouch for nothing
    summary = Ledger.restore(source, ledger_location(store),
                             None if key is None else key.public_key(), allow_grants)
    for grant in summary["grants"]:
        warn(f"the restore granted: {grant}")
    emit(as_json, summary, lambda: out.print(
        f"restored {len(summary['users'])} users, {summary['charges']} charges "
        f"(dataset spent {summary['dataset_spent']:g}) from {source}", markup=False))
