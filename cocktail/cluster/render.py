"""Render one host's Hadoop configuration directory from the cluster description.

Every host gets a complete HADOOP_CONF_DIR: the five site files, the rack topology script,
the hosts and workers files, the YARN node labels and `host.env` (its roles and paths). Only
`dfs.datanode.data.dir` differs between hosts (ARCHIVE volumes exist on private datanodes
only, which is what the COLD storage policy relies on).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from xml.sax.saxutils import escape

from ..jvm import JAVA17_OPENS, SHORT_LIVED
from ..query.backends.streaming import PRIVATE_LABEL  # what private jobs ask for, what nodes get
from .spec import SITE_FILES, ClusterSpec, Host

SHIM = "org.cocktail.hdfs.PrivateRackPlacementPolicy"
VENV = "/opt/cocktail/venv"  # where scripts/provision installs cocktail (it says the same)


def render_host(spec: ClusterSpec, host: Host, *, home: str | None = None,
                data: str | None = None, conf_dir: str | None = None,
                overrides: dict[str, dict[str, str]] | None = None) -> dict[str, str]:
    """File name -> content of `host`'s configuration directory.

    ``home``, ``data`` and ``conf_dir`` replace the spec's paths; ``overrides`` sets extra
    properties per file, over the spec's own ``hadoop.properties``.
    """
    paths = _Paths(home or spec.home, data or spec.data,
                   conf_dir or f"{home or spec.home}/etc/hadoop")
    sites = {
        "core-site.xml": _core(spec, paths),
        "hdfs-site.xml": _hdfs(spec, host, paths),
        "yarn-site.xml": _yarn(spec, paths),
        "mapred-site.xml": _mapred(spec, paths),
        "capacity-scheduler.xml": _capacity(),
    }
    for name, extra in [*spec.properties.items(), *(overrides or {}).items()]:
        if name not in sites:
            raise ValueError(f"cannot override {name}: not one of {', '.join(SITE_FILES)}")
        sites[name] = {**sites[name], **extra}
    files = {name: _xml(properties) for name, properties in sites.items()}
    files.update({
        "topology.sh": topology_script(spec),
        "hosts": hosts_file(spec),
        "workers": "".join(f"{h.name}\n" for h in spec.hosts
                           if {"datanode", "nodemanager"} & set(h.roles)),
        "node-labels": "".join(f"{h.name}={PRIVATE_LABEL}\n"
                               for h in spec.with_roles("nodemanager") if h.private),
        "host.env": host_env(spec, host, paths),
        "jvm.options": "\n".join(JAVA17_OPENS + spec.jvm_options) + "\n",
        "log4j.properties": log4j_properties(paths),
    })
    return files


def store_url(spec: ClusterSpec) -> str:
    """The webhdfs store of this cluster: zones ROOT/private and ROOT/public."""
    nn, ports = spec.namenode.name, spec.ports
    root = spec.private_root.rsplit("/", 1)[0]
    return (f"webhdfs://{nn}:{ports['namenode_http']}{root}"
            f"?fs=hdfs://{nn}:{ports['namenode_rpc']}&user={spec.user}")


CLUSTER_SETTINGS = {
    "name": lambda spec: spec.name,
    "network": lambda spec: str(spec.network),
    "hadoop.version": lambda spec: spec.version,
    "hadoop.home": lambda spec: spec.home,
    "hadoop.data": lambda spec: spec.data,
    "hadoop.placement": lambda spec: spec.placement,
    "hadoop.private_root": lambda spec: spec.private_root,
    "hadoop.user": lambda spec: spec.user,
    "overlay.tls_cert": lambda spec: spec.tls_cert or "",
    "overlay.tls_key": lambda spec: spec.tls_key or "",
    "store": store_url,
}


def host_env(spec: ClusterSpec, host: Host, paths: _Paths) -> str:
    """Shell variables the scripts source: who this host is and where everything lives."""
    overlay = spec.with_roles("overlay")
    scheme = "https" if spec.tls_cert else "http"
    values = {
        "COCKTAIL_CLUSTER_NAME": spec.name,
        "COCKTAIL_HOST": host.name,
        "COCKTAIL_SIDE": host.side,
        "COCKTAIL_ROLES": " ".join(host.roles),
        "COCKTAIL_DATA": paths.data,
        "COCKTAIL_PRIVATE_ROOT": spec.private_root,
        "COCKTAIL_USER": spec.user,
        "COCKTAIL_NAMENODE": spec.namenode.name,
        "COCKTAIL_STORE": store_url(spec),
        "COCKTAIL_OVERLAY_URL":
            f"{scheme}://{overlay[0].name}:{spec.ports['overlay']}" if overlay else "",
        "COCKTAIL_OVERLAY_PORT": str(spec.ports["overlay"]),
        "COCKTAIL_TLS_CERT": spec.tls_cert or "",
        "COCKTAIL_TLS_KEY": spec.tls_key or "",
        "HADOOP_HOME": paths.home,
        "HADOOP_CONF_DIR": paths.conf,
        "HADOOP_USER_NAME": spec.user,
        "COCKTAIL_HADOOP_BIN": f"{paths.home}/bin/hadoop",
        "COCKTAIL_HADOOP_STREAMING_JAR":
            f"{paths.home}/share/hadoop/tools/lib/hadoop-streaming-{spec.version}.jar",
    }
    values.update({f"COCKTAIL_HEAP_{role.upper()}": str(spec.heap_mb[role])
                   for role in host.roles if role in spec.heap_mb})
    lines = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in values.items())
    path = f'export PATH={shlex.quote(f"{VENV}/bin:{paths.home}/bin")}:"$PATH"\n'
    return (f"# {host.name} of cluster {spec.name}: generated by `cocktail cluster render`.\n"
            f"{lines}{path}")


def write_host(directory: Path, files: dict[str, str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        target = directory / name
        target.write_text(content)
        target.chmod(0o755 if name.endswith(".sh") else 0o644)


def render_hosts(spec: ClusterSpec, out: Path, names: tuple[str, ...] = (), *,
                 home: str | None = None, data: str | None = None,
                 overrides: dict[str, dict[str, str]] | None = None) -> dict[str, str]:
    """Write each host's configuration directory (only ``names``, if given): ``out`` itself for
    one named host, else ``out/<host>``; ``{host}`` in ``data`` is the host's name.  Returns
    where each went."""
    hosts = [spec.host(name) for name in names] if names else list(spec.hosts)
    written = {}
    for host in hosts:
        target = out if len(names) == 1 else out / host.name
        write_host(target, render_host(spec, host, home=home,
                                       data=data.replace("{host}", host.name) if data else None,
                                       conf_dir=str(target.resolve()), overrides=overrides))
        written[host.name] = str(target)
    return written


class _Paths:
    def __init__(self, home: str, data: str, conf: str) -> None:
        self.home, self.data, self.conf = home, data, conf


def _core(spec: ClusterSpec, paths: _Paths) -> dict[str, str]:
    return {
        "fs.defaultFS": f"hdfs://{spec.namenode.name}:{spec.ports['namenode_rpc']}",
        "hadoop.tmp.dir": f"{paths.data}/tmp",
        "net.topology.script.file.name": f"{paths.conf}/topology.sh",
        "hadoop.http.staticuser.user": spec.user,
    }


def _hdfs(spec: ClusterSpec, host: Host, paths: _Paths) -> dict[str, str]:
    volumes = [f"[DISK]file://{paths.data}/hdfs/disk"]
    if host.private:
        volumes.append(f"[ARCHIVE]file://{paths.data}/hdfs/archive")
    nn, ports = spec.namenode.name, spec.ports
    properties = {
        "dfs.replication": str(spec.replication),
        "dfs.namenode.rpc-address": f"{nn}:{ports['namenode_rpc']}",
        "dfs.namenode.http-address": f"{nn}:{ports['namenode_http']}",
        "dfs.namenode.name.dir": f"file://{paths.data}/hdfs/name",
        "dfs.datanode.data.dir": ",".join(volumes),
        "dfs.permissions.superusergroup": spec.user,
        "dfs.storage.policy.enabled": "true",
        "dfs.webhdfs.enabled": "true",
        # The load check counts xceivers across both sides; with two private datanodes it
        # can refuse every private target of a busy moment.
        "dfs.namenode.redundancy.considerLoad": "false",
        # Access times would tell which old chunks an append read (its extended clusters).
        "dfs.namenode.accesstime.precision": "0",
        "cocktail.private.root": spec.private_root,
        "cocktail.private.rack.prefix": "/private/",
    }
    if spec.placement == "shim":
        properties["dfs.block.replicator.classname"] = SHIM
    return properties


def _yarn(spec: ClusterSpec, paths: _Paths) -> dict[str, str]:
    rm = spec.resourcemanager.name
    return {
        "yarn.resourcemanager.hostname": rm,
        "yarn.resourcemanager.address": f"{rm}:{spec.ports['resourcemanager']}",
        "yarn.resourcemanager.webapp.address": f"{rm}:{spec.ports['resourcemanager_http']}",
        "yarn.nodemanager.aux-services": "mapreduce_shuffle",
        "yarn.nodemanager.aux-services.mapreduce_shuffle.class":
            "org.apache.hadoop.mapred.ShuffleHandler",
        "yarn.nodemanager.resource.memory-mb": str(spec.nodemanager_mb),
        "yarn.scheduler.minimum-allocation-mb": "128",
        "yarn.nodemanager.vmem-check-enabled": "false",
        "yarn.nodemanager.local-dirs": f"{paths.data}/yarn/local",
        "yarn.nodemanager.log-dirs": f"{paths.data}/yarn/logs",
        # Task logs stay on the node that ran the task: a private task's log never leaves the
        # private side (aggregation would copy it into HDFS).
        "yarn.log-aggregation-enable": "false",
        "yarn.nodemanager.env-whitelist": "JAVA_HOME,HADOOP_HOME,HADOOP_COMMON_HOME,"
            "HADOOP_HDFS_HOME,HADOOP_YARN_HOME,HADOOP_MAPRED_HOME,HADOOP_CONF_DIR,PATH,LANG,TZ",
        "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": "99",
        "yarn.node-labels.enabled": "true",
        "yarn.node-labels.configuration-type": "centralized",
        "yarn.node-labels.fs-store.root-dir": f"file://{paths.data}/yarn/node-labels",
        "yarn.node-attribute.fs-store.root-dir": f"file://{paths.data}/yarn/node-attributes",
        # A fixed port keeps a restarted nodemanager the same node (and label) to YARN.
        "yarn.nodemanager.address": "0.0.0.0:8041",
    }


def _mapred(spec: ClusterSpec, paths: _Paths) -> dict[str, str]:
    opts = " ".join((f"-Xmx{spec.container_mb * 3 // 4}m", *SHORT_LIVED) + JAVA17_OPENS)
    history = spec.with_roles("historyserver")
    jars = f"{paths.home}/share/hadoop"
    properties = {
        "mapreduce.framework.name": "yarn",
        "mapreduce.application.classpath": ",".join(
            f"{jars}/{part}/*" for part in ("common", "common/lib", "hdfs", "hdfs/lib", "yarn",
                                            "yarn/lib", "mapreduce", "mapreduce/lib")),
        # Job files (split lists name the chunks) and job history stay under the private root.
        "yarn.app.mapreduce.am.staging-dir": f"{spec.private_root}/yarn-staging",
        "yarn.app.mapreduce.am.resource.mb": str(spec.container_mb),
        "mapreduce.map.memory.mb": str(spec.container_mb),
        "mapreduce.reduce.memory.mb": str(spec.container_mb),
        "yarn.app.mapreduce.am.command-opts": opts,
        "mapreduce.map.java.opts": opts,
        "mapreduce.reduce.java.opts": opts,
    }
    for name in ("yarn.app.mapreduce.am.env", "mapreduce.map.env", "mapreduce.reduce.env"):
        properties[name] = f"HADOOP_MAPRED_HOME={paths.home}"
    if history:
        properties["mapreduce.jobhistory.address"] = \
            f"{history[0].name}:{spec.ports['historyserver']}"
        properties["mapreduce.jobhistory.intermediate-done-dir"] = \
            f"{spec.private_root}/yarn-staging/history/done_intermediate"
        properties["mapreduce.jobhistory.done-dir"] = \
            f"{spec.private_root}/yarn-staging/history/done"
    return properties


def _capacity() -> dict[str, str]:
    """One queue; it may use every node labelled `private`, which no other queue can."""
    prefix = "yarn.scheduler.capacity."
    properties = {
        prefix + "root.queues": "default",
        prefix + "root.default.capacity": "100",
        prefix + "maximum-am-resource-percent": "0.5",
    }
    for queue in ("root", "root.default"):
        properties[f"{prefix}{queue}.accessible-node-labels"] = PRIVATE_LABEL
        properties[f"{prefix}{queue}.accessible-node-labels.{PRIVATE_LABEL}.capacity"] = "100"
    return properties


def topology_script(spec: ClusterSpec) -> str:
    """Hadoop's rack script: each argument (address or name) -> its rack, one per line."""
    cases = "\n".join(f"    {h.address}|{h.name}) echo {shlex.quote(h.rack)} ;;"
                      for h in spec.hosts)
    return f"""#!/usr/bin/env bash
# Rack of every host of cluster '{spec.name}' (generated from {Path(spec.source).name}).
# HDFS calls it with datanode addresses or names and reads one rack per argument.
# An unknown host gets /unknown/rack: not under /private/, so never trusted with private data.
set -u
for host in "$@"; do
  case $host in
{cases}
    *) echo /unknown/rack ;;
  esac
done
"""


def hosts_file(spec: ClusterSpec) -> str:
    return "".join(f"{h.address} {h.name}\n" for h in spec.hosts)


def _xml(properties: dict[str, str]) -> str:
    rows = "".join(f"  <property><name>{escape(name)}</name><value>{escape(value)}</value>"
                   "</property>\n" for name, value in properties.items())
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            "<!-- Generated by `cocktail cluster render` from cluster.yaml: edit that, not this. -->\n"
            f"<configuration>\n{rows}</configuration>\n")


def log4j_properties(paths: _Paths) -> str:
    """Daemon logs go to ${hadoop.log.dir}/${hadoop.log.file}; the start script sets both per
    daemon.  Any other command (a format, a dfsadmin) logs to the host's log folder too,
    never to the directory it was started from."""
    return f"hadoop.log.dir={paths.data}/logs\nhadoop.log.file=hadoop.log\n{LOG4J}"


LOG4J = """\
log4j.rootLogger=INFO,RFA
log4j.appender.RFA=org.apache.log4j.RollingFileAppender
log4j.appender.RFA.File=${hadoop.log.dir}/${hadoop.log.file}
log4j.appender.RFA.MaxFileSize=64MB
log4j.appender.RFA.MaxBackupIndex=4
log4j.appender.RFA.layout=org.apache.log4j.PatternLayout
log4j.appender.RFA.layout.ConversionPattern=%d{ISO8601} %p %c{2}: %m%n
"""
