"""``cocktail cluster``: the Hadoop cluster description and what is rendered from it."""

from __future__ import annotations

from pathlib import Path

import click

from ..cluster.render import CLUSTER_SETTINGS, render_hosts
from ..cluster.spec import ROLES, SIDES, load_spec
from .contract import confirm, emit
from .options import json_option


spec_option = click.option(
    "--spec", "spec_path", default="hadoop_conf/cluster.yaml", envvar="COCKTAIL_CLUSTER",
    show_default=True, type=click.Path(dir_okay=False, path_type=Path),
    help="The cluster description ($COCKTAIL_CLUSTER).")


@click.group("cluster")
def cluster_group() -> None:
    """The Hadoop cluster description (hadoop_conf/cluster.yaml) and what is rendered from it."""


@cluster_group.command("hosts")
@spec_option
@click.option("--role", type=click.Choice(ROLES), help="Only hosts with this role.")
@click.option("--side", type=click.Choice(SIDES), help="Only private or only public hosts.")
@click.option("--field", type=click.Choice(["name", "address", "rack", "side", "roles"]),
              default="name", show_default=True, help="What to print for each host.")
@json_option
def cluster_hosts(spec_path: Path, role: str | None, side: str | None, field: str,
                  as_json: bool) -> None:
    """List the hosts, one per line (for scripts), or all their fields with --json."""
    spec = load_spec(spec_path)
    hosts = [h for h in spec.hosts if (role is None or role in h.roles)
             and (side is None or h.side == side)]
    payload = {"cluster": spec.name, "network": str(spec.network),
               "hosts": [{"name": h.name, "address": h.address, "side": h.side,
                          "rack": h.rack, "roles": list(h.roles)} for h in hosts]}

    def human() -> None:
        for host in payload["hosts"]:
            value = host[field]
            click.echo(" ".join(value) if isinstance(value, list) else value)

    emit(as_json, payload, human)


@cluster_group.command("get")
@spec_option
@click.argument("key", type=click.Choice(sorted(CLUSTER_SETTINGS)))
@json_option
def cluster_get(spec_path: Path, key: str, as_json: bool) -> None:
    """Print one setting of the cluster file (for scripts)."""
    value = CLUSTER_SETTINGS[key](load_spec(spec_path))
    emit(as_json, {"key": key, "value": value}, lambda: click.echo(value))


@cluster_group.command("render")
@spec_option
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Directory to write; with --host, the host's HADOOP_CONF_DIR itself, "
                   "else one subdirectory per host.")
@click.option("--host", "host_names", multiple=True, help="Only this host (repeatable).")
@click.option("--home", help="Hadoop's directory instead of the spec's hadoop.home.")
@click.option("--data", help="State directory instead of hadoop.data; {host} is replaced by "
                             "the host name.")
@click.option("--set", "settings", multiple=True, metavar="FILE:NAME=VALUE",
              help="Set one more property, e.g. hdfs-site.xml:dfs.heartbeat.interval=1.")
@json_option
def cluster_render(spec_path: Path, out_dir: Path, host_names: tuple[str, ...],
                   home: str | None, data: str | None, settings: tuple[str, ...],
                   as_json: bool) -> None:
    """Write each host's Hadoop configuration directory (site files, topology script, hosts,
    workers, node labels, roles)."""
    spec = load_spec(spec_path)
    written = render_hosts(spec, out_dir, host_names, home=home, data=data,
                           overrides=_overrides(settings))
    confirm(as_json, {"cluster": spec.name, "written": written},
            "\n".join(f"{name}: {path}" for name, path in written.items()))


def _overrides(settings: tuple[str, ...]) -> dict[str, dict[str, str]]:
    overrides: dict[str, dict[str, str]] = {}
    for setting in settings:
        file, sep, assignment = setting.partition(":")
        name, eq, value = assignment.partition("=")
        if not (sep and eq and name):
            raise click.BadParameter(f"{setting!r} is not FILE:NAME=VALUE", param_hint="--set")
        overrides.setdefault(file, {})[name] = value
    return overrides
