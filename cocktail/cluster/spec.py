"""The cluster description (`hadoop_conf/cluster.yaml`): hosts, addresses, roles, sides, racks.

Everything an operator deploys is rendered from one validated `ClusterSpec`, so a bad file is
refused here with the key that is wrong, never half-rendered.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

ROLES = ("namenode", "resourcemanager", "historyserver", "overlay", "datanode", "nodemanager")
SINGLETONS = ("namenode", "resourcemanager")
SIDES = ("private", "public")
PLACEMENTS = ("shim", "cold")
HEAPS = ("namenode", "resourcemanager", "historyserver", "datanode", "nodemanager")
HOSTNAME = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
PORTS = {"namenode_rpc": 8020, "namenode_http": 9870, "resourcemanager": 8032,
         "resourcemanager_http": 8088, "historyserver": 10020, "overlay": 8080}
SITE_FILES = ("core-site.xml", "hdfs-site.xml", "yarn-site.xml", "mapred-site.xml",
              "capacity-scheduler.xml")


class SpecError(ValueError):
    """The cluster file is unusable; the message names the file and the key."""


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    side: str
    rack: str
    roles: tuple[str, ...]

    @property
    def private(self) -> bool:
        return self.side == "private"


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    network: ipaddress.IPv4Network
    version: str
    home: str
    data: str
    user: str
    placement: str
    private_root: str
    replication: int
    heap_mb: dict[str, int]
    container_mb: int
    nodemanager_mb: int
    jvm_options: tuple[str, ...]  # more flags for every daemon's JVM
    hosts: tuple[Host, ...]
    properties: dict[str, dict[str, str]]  # site file -> name -> value, set on every host
    tls_cert: str | None  # the overlay service's certificate and key; none: plain HTTP
    tls_key: str | None
    source: str = ""

    def with_roles(self, role: str) -> list[Host]:
        return [h for h in self.hosts if role in h.roles]

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise SpecError(f"{self.source}: no host named {name!r} "
                        f"(hosts: {', '.join(h.name for h in self.hosts)})")

    @property
    def namenode(self) -> Host:
        return self.with_roles("namenode")[0]

    @property
    def resourcemanager(self) -> Host:
        return self.with_roles("resourcemanager")[0]

    @property
    def ports(self) -> dict[str, int]:
        return dict(PORTS)


def load_spec(path: str | Path) -> ClusterSpec:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise SpecError(f"cannot read the cluster file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {exc}") from None
    return parse_spec(raw, str(path))


def parse_spec(raw: object, source: str = "cluster.yaml") -> ClusterSpec:
    def fail(key: str, what: str) -> SpecError:
        return SpecError(f"{source}: {key}: {what}")

    if not isinstance(raw, dict):
        raise fail("(top)", "expected a mapping with name, network, hadoop and hosts")
    hadoop = _mapping(raw.get("hadoop"), "hadoop", fail)
    try:
        network = ipaddress.IPv4Network(str(raw.get("network")))
    except ValueError as exc:
        raise fail("network", f"not an IPv4 network ({exc})") from None
    heap = _mapping(hadoop.get("heap_mb"), "hadoop.heap_mb", fail)
    missing = [d for d in HEAPS if not isinstance(heap.get(d), int) or heap[d] < 128]
    if missing:
        raise fail("hadoop.heap_mb", f"needs a size of at least 128 for {', '.join(missing)}")
    spec = ClusterSpec(
        name=_text(raw.get("name"), "name", fail),
        network=network,
        version=_text(hadoop.get("version"), "hadoop.version", fail),
        home=_absolute(hadoop.get("home"), "hadoop.home", fail),
        data=_absolute(hadoop.get("data"), "hadoop.data", fail),
        user=_text(hadoop.get("user"), "hadoop.user", fail),
        placement=_choice(hadoop.get("placement"), PLACEMENTS, "hadoop.placement", fail),
        private_root=_absolute(hadoop.get("private_root"), "hadoop.private_root", fail),
        replication=_positive(hadoop.get("replication"), "hadoop.replication", fail),
        heap_mb={d: heap[d] for d in HEAPS},
        container_mb=_positive(hadoop.get("container_mb"), "hadoop.container_mb", fail),
        nodemanager_mb=_positive(hadoop.get("nodemanager_mb"), "hadoop.nodemanager_mb", fail),
        jvm_options=_jvm_options(hadoop.get("jvm_options"), fail),
        hosts=tuple(_host(h, i, network, fail) for i, h in enumerate(raw.get("hosts") or [])),
        properties=_properties(hadoop.get("properties"), fail),
        **_tls(raw.get("overlay"), fail),
        source=source,
    )
    _check_cluster(spec, fail)
    return spec


def _properties(raw, fail) -> dict[str, dict[str, str]]:
    """hadoop.properties: more site properties, for every host (they win over the rendered)."""
    if raw is None:
        return {}
    raw = _mapping(raw, "hadoop.properties", fail)
    out = {}
    for file, values in raw.items():
        if file not in SITE_FILES:
            raise fail(f"hadoop.properties.{file}", f"not one of {', '.join(SITE_FILES)}")
        values = _mapping(values, f"hadoop.properties.{file}", fail)
        out[file] = {str(k): str(v).lower() if isinstance(v, bool) else str(v)
                     for k, v in values.items()}
    return out


def _jvm_options(raw, fail) -> tuple[str, ...]:
    """hadoop.jvm_options: a list of JVM flags (each starting with -), after the rendered ones."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise fail("hadoop.jvm_options", "expected a list of JVM flags")
    for flag in raw:
        if not isinstance(flag, str) or not flag.startswith("-") or flag != flag.strip():
            raise fail("hadoop.jvm_options", f"{flag!r} is not a JVM flag (one word from -)")
    return tuple(raw)


def _tls(raw, fail) -> dict[str, str | None]:
    """overlay.tls_cert and overlay.tls_key: both absolute paths, or neither."""
    raw = {} if raw is None else _mapping(raw, "overlay", fail)
    unknown = sorted(set(raw) - {"tls_cert", "tls_key"})
    if unknown:
        raise fail(f"overlay.{unknown[0]}", "unknown key (known: tls_cert, tls_key)")
    if ("tls_cert" in raw) != ("tls_key" in raw):
        raise fail("overlay", "give both tls_cert and tls_key, or neither")
    return {key: _absolute(raw[key], f"overlay.{key}", fail) if key in raw else None
            for key in ("tls_cert", "tls_key")}


def _host(raw: object, index: int, network, fail) -> Host:
    key = f"hosts[{index}]"
    raw = _mapping(raw, key, fail)
    name = _text(raw.get("name"), f"{key}.name", fail)
    if not HOSTNAME.match(name):
        raise fail(f"{key}.name", f"{name!r} is not a lower-case host name")
    try:
        address = ipaddress.IPv4Address(str(raw.get("address")))
    except ValueError:
        raise fail(f"{key}.address", f"{raw.get('address')!r} is not an IPv4 address") from None
    if address not in network or address in (network.network_address,
                                             network.broadcast_address):
        raise fail(f"{key}.address", f"{address} is not a host address of {network}")
    side = _choice(raw.get("side"), SIDES, f"{key}.side", fail)
    rack = _text(raw.get("rack"), f"{key}.rack", fail)
    if not re.fullmatch(rf"/{side}/[A-Za-z0-9_.-]+", rack):
        raise fail(f"{key}.rack", f"{rack!r} must be /{side}/NAME (one level under /{side}/, "
                                  "so private and public racks have the same depth)")
    roles = raw.get("roles")
    if not isinstance(roles, list) or not roles or any(r not in ROLES for r in roles):
        raise fail(f"{key}.roles", f"a non-empty list of {', '.join(ROLES)}")
    return Host(name, str(address), side, rack, tuple(roles))


def _check_cluster(spec: ClusterSpec, fail) -> None:
    if not spec.hosts:
        raise fail("hosts", "no hosts")
    for field in ("name", "address"):
        values = [getattr(h, field) for h in spec.hosts]
        duplicates = sorted({v for v in values if values.count(v) > 1})
        if duplicates:
            raise fail("hosts", f"duplicate {field}: {', '.join(duplicates)}")
    for role in SINGLETONS:
        holders = spec.with_roles(role)
        if len(holders) != 1:
            raise fail("hosts", f"exactly one host must have the {role} role "
                                f"(found {len(holders)})")
    for role in ("namenode", "resourcemanager", "historyserver", "overlay"):
        for host in spec.with_roles(role):
            if not host.private:
                raise fail("hosts", f"{host.name} is public but runs the {role}: "
                                    "it holds private-cloud state, so it must be private")
    private_dn = [h for h in spec.with_roles("datanode") if h.private]
    if len({h.rack for h in private_dn}) < 2:
        raise fail("hosts", "needs private datanodes in at least two /private/ racks")
    if not any(not h.private for h in spec.with_roles("datanode")):
        raise fail("hosts", "needs at least one public datanode")
    for side in SIDES:
        if not any(h.side == side for h in spec.with_roles("nodemanager")):
            raise fail("hosts", f"needs a {side} nodemanager (map tasks run on both sides)")
    if not spec.private_root.endswith("/private") or spec.private_root.count("/") < 2:
        raise fail("hadoop.private_root", f"{spec.private_root!r} must be ROOT/private: the "
                                          "store keeps its zones in ROOT/private and ROOT/public")
    if spec.replication > len(private_dn):
        raise fail("hadoop.replication", f"{spec.replication} replicas, but only "
                                         f"{len(private_dn)} private datanodes can hold them")


def _mapping(value, key, fail) -> dict:
    if not isinstance(value, dict):
        raise fail(key, "expected a mapping")
    return value


def _text(value, key, fail) -> str:
    if not isinstance(value, (str, int, float)) or not str(value).strip():
        raise fail(key, "missing")
    return str(value).strip()


def _absolute(value, key, fail) -> str:
    text = _text(value, key, fail)
    if not text.startswith("/") or text != "/" and text.endswith("/"):
        raise fail(key, f"{text!r} must be an absolute path without a trailing /")
    return text


def _choice(value, choices, key, fail) -> str:
    if value not in choices:
        raise fail(key, f"{value!r} is not one of {', '.join(choices)}")
    return value


def _positive(value, key, fail) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise fail(key, f"{value!r} is not a positive integer")
    return value
