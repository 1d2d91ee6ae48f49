"""HDFS through WebHDFS: the private zone under a private root, the public zone under a public one.

    webhdfs://NAMENODE:HTTPPORT/ROOT[?user=..&fs=hdfs://NAMENODE:RPCPORT&public=URL
                                      &storage_policy=COLD|none&private_racks=/private/
                                      &datanode_host=HOST]

* zones: ``ROOT/private`` and ``ROOT/public`` on one namenode, or the public zone on a second
  namenode (``public=webhdfs://OTHER:PORT/PUBROOT``, whose path is the zone root itself);
* private uploads exclude the public datanodes (listed from the namenode's JMX), so private
  bytes never even transit one; every file gets the ``user.priLabel`` xattr; the private root gets the COLD storage policy
  (ARCHIVE volumes exist only on private datanodes), unless ``storage_policy=none``;
* versions switch by an overwriting rename, which HDFS does atomically on the namenode;
* ``fs`` is the namenode's RPC URI that job runners read the chunks through (default: the
  ``webhdfs://`` URI itself);
* ``datanode_host`` rewrites the host of the namenode's redirects to datanodes: an in-process
  cluster names its datanodes ``host<N>.foo.com``, which resolve only inside its own JVM;
* ``replicas()`` gives each block's rack paths, for the placement audit.
"""

from __future__ import annotations

import json
import posixpath
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO
from urllib.parse import parse_qs, urlsplit, urlunsplit

from ..extras import require

require("hdfs")  # first: a missing [hadoop] extra is one line, not a traceback
import requests  # noqa: E402 - hdfs's own dependency
from hdfs import HdfsError, InsecureClient  # noqa: E402
from hdfs.client import _Request  # noqa: E402

from .base import Store, StoreError, StoreUnavailable, check_zone

PRI_LABEL = "user.priLabel"
LOCK = ".publish.lock"
OPTIONS = ("user", "fs", "public", "storage_policy", "private_racks", "datanode_host")


class _RedirectSession(requests.Session):
    """Sends datanode requests (redirect targets) to ``host`` instead of the name given."""

    def __init__(self, datanode_host: str | None, namenodes: set[str]) -> None:
        super().__init__()
        self.datanode_host, self.namenodes = datanode_host, namenodes

    def _rewrite(self, url: str) -> str:
        parts = urlsplit(url)
        if not self.datanode_host or parts.netloc in self.namenodes:
            return url
        netloc = f"{self.datanode_host}:{parts.port}" if parts.port else self.datanode_host
        return urlunsplit(parts._replace(netloc=netloc))

    def request(self, method, url, *args, **kwargs):
        return super().request(method, self._rewrite(url), *args, **kwargs)

    def get_redirect_target(self, resp):
        target = super().get_redirect_target(resp)
        return self._rewrite(target) if target else target


class WebHdfsClient(InsecureClient):
    """The `hdfs` package's client with the WebHDFS operations it lacks, declared its way."""

    _set_x_attr = _Request("PUT")
    _get_x_attrs = _Request("GET")
    _set_storage_policy = _Request("PUT")
    _get_storage_policy = _Request("GET")
    _get_file_block_locations = _Request("GET")

    def set_xattr(self, path: str, name: str, value: str) -> None:
        for flag in ("CREATE", "REPLACE"):
            response = self._set_x_attr(path, strict=False, **{
                "xattr.name": name, "xattr.value": f'"{value}"', "flag": flag})
            if response.ok:
                return
        raise HdfsError(f"cannot set {name} on {path}: {response.text}")

    def xattrs(self, path: str) -> dict[str, str]:
        found = self._get_x_attrs(path, encoding="text").json()["XAttrs"]
        return {x["name"]: (x["value"] or "").strip('"') for x in found}

    def set_storage_policy(self, path: str, policy: str) -> None:
        self._set_storage_policy(path, storagepolicy=policy)

    def storage_policy(self, path: str) -> str:
        return self._get_storage_policy(path).json()["BlockStoragePolicy"]["name"]

    def block_racks(self, path: str) -> list[list[str]]:
        """Each block's replicas as topology paths, ``/<rack>/<ip>:<port>``."""
        found = self._get_file_block_locations(path).json()["BlockLocations"]["BlockLocation"]
        return [list(block["topologyPaths"]) for block in found]

    def create(self, path: str, data: bytes | BinaryIO, *, overwrite: bool,
               exclude: tuple[str, ...] = ()) -> None:
        """CREATE (two steps: the namenode names a datanode, the bytes go there), keeping the
        upload off the ``exclude``d datanodes (``ip:xferPort``), which `write` cannot."""
        params = {"excludedatanodes": ",".join(exclude)} if exclude else {}
        location = self._create(path, overwrite=overwrite, **params).headers["location"]
        if not isinstance(data, bytes):
            data.seek(0)  # streamed by requests; from the start again when retried
        response = self._request(method="PUT", url=location, data=data)
        if not response.ok:
            raise HdfsError(f"cannot write {path}: {response.status_code} {response.text[:300]}")

    def read_all(self, path: str) -> bytes:
        """OPEN, excluding a datanode the namenode names but that does not answer: one that is
        down but not yet declared dead (up to 10.5 minutes with Hadoop's defaults) is still
        offered first for its replicas, and a redirect would keep failing on it."""
        excluded: list[str] = []
        while True:
            params = {"excludedatanodes": ",".join(excluded)} if excluded else {}
            location = self._open(path, noredirect="true", **params).json()["Location"]
            try:
                response = self._session.get(location, timeout=self._timeout)
            except requests.ConnectionError:
                address = self._xfer_address(location)
                if address in excluded:
                    raise
                excluded.append(address)
                continue
            if not response.ok:
                raise HdfsError(f"cannot read {path}: {response.status_code} "
                                f"{response.text[:300]}")
            return response.content

    def _xfer_address(self, location: str) -> str:
        """How the namenode names the datanode serving ``location`` in an exclusion:
        ``ip:xferPort`` (its live-node entry with that HTTP address), else its IP."""
        parts = urlsplit(location)
        ip = socket.gethostbyname(parts.hostname)
        for node in self._live_nodes().values():
            if node.get("infoAddr") == f"{ip}:{parts.port}":
                return node["xferaddr"]
        return ip

    def datanodes(self) -> dict[str, str]:
        """Live datanodes, ``ip:xferPort`` -> rack, from the namenode's JMX."""
        return {node["xferaddr"]: node["location"] for node in self._live_nodes().values()}

    def _live_nodes(self) -> dict[str, dict]:
        beans = self._session.get(f"{self.url}/jmx", timeout=60, params={
            "qry": "Hadoop:service=NameNode,name=NameNodeInfo"}).json()["beans"]
        return json.loads(beans[0]["LiveNodes"])

    def replace(self, src: str, dst: str) -> None:
        """Rename, replacing a file at ``dst`` in the same namenode operation."""
        self._rename(src, destination=self.resolve(dst), renameoptions="OVERWRITE")


@dataclass(frozen=True)
class _Zone:
    client: WebHdfsClient
    root: str
    fs: str  # URI prefix job runners read through


def _single(query: dict[str, list[str]], key: str, default: str | None = None) -> str | None:
    values = query.get(key)
    return values[-1] if values else default


class WebHdfsStore(Store):
    concurrent_writes = 8  # within the 10 connections requests pools per host

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme != "webhdfs" or not parts.netloc:
            raise StoreError(f"not a webhdfs URL: {url!r} (webhdfs://namenode:port/root)")
        query = parse_qs(parts.query)
        unknown = set(query) - set(OPTIONS)
        if unknown:
            raise StoreError(f"unknown webhdfs store option(s) {', '.join(sorted(unknown))}; "
                             f"known: {', '.join(OPTIONS)}")
        self.url = url
        self.user = _single(query, "user")
        self.storage_policy = _single(query, "storage_policy", "COLD")
        self.private_racks = _single(query, "private_racks", "/private/")
        self._datanode_host = _single(query, "datanode_host")
        root = posixpath.normpath(parts.path or "/cocktail")
        fs = _single(query, "fs", f"webhdfs://{parts.netloc}")
        public_url = _single(query, "public")
        self._namenodes = {parts.netloc}
        private = self._zone(parts.netloc, posixpath.join(root, "private"), fs)
        if public_url:
            other = urlsplit(public_url)
            self._namenodes.add(other.netloc)
            public = self._zone(other.netloc, posixpath.normpath(other.path or "/"),
                                f"webhdfs://{other.netloc}")
        else:
            public = self._zone(parts.netloc, posixpath.join(root, "public"), fs)
        if public.client.url == private.client.url and (
                _inside(public.root, private.root) or _inside(private.root, public.root)):
            raise StoreError(f"the public root {public.root} and the private root "
                             f"{private.root} must not contain each other")
        self._zones = {"private": private, "public": public}
        self._ready = False
        self._excluded: tuple[str, ...] | None = None

    def _zone(self, netloc: str, root: str, fs: str) -> _Zone:
        session = _RedirectSession(self._datanode_host, self._namenodes)
        client = WebHdfsClient(f"http://{netloc}", user=self.user, session=session, timeout=60)
        return _Zone(client, root, fs)

    # paths and errors

    def _full(self, zone: str, path: str) -> tuple[WebHdfsClient, str]:
        check_zone(zone)
        if path.startswith("/") or ".." in path.split("/"):
            raise ValueError(f"store paths are relative and stay inside the zone: {path!r}")
        z = self._zones[zone]
        return z.client, posixpath.join(z.root, path) if path else z.root

    @contextmanager
    def _errors(self, action: str, where: str) -> Iterator[None]:
        """HDFS and network failures as one clear StoreError naming what failed."""
        try:
            yield
        except HdfsError as exc:
            raise (StoreUnavailable if _system_failure(exc) else StoreError)(
                f"{action} {where}: {_explain(exc)}") from None
        except requests.ConnectionError as exc:
            raise StoreUnavailable(f"{action} {where}: cannot reach the namenode or a datanode "
                                   f"({_unreachable(exc, self.url)} is down or unreachable)"
                                   ) from None
        except requests.Timeout:
            raise StoreUnavailable(f"{action} {where}: HDFS did not answer within 60 s") from None

    def ensure_zones(self) -> None:
        """Create both roots; COLD on the private one (ARCHIVE volumes live only there)."""
        if self._ready:
            return
        for name, z in self._zones.items():
            with self._errors("cannot create", z.root):
                z.client.makedirs(z.root, permission="700" if name == "private" else "755")
        if self.storage_policy.lower() != "none":
            private = self._zones["private"]
            with self._errors(f"cannot set storage policy {self.storage_policy} on",
                              private.root):
                private.client.set_storage_policy(private.root, self.storage_policy)
        self._ready = True

    # the Store interface

    def _public_datanodes(self) -> tuple[str, ...]:
        """Datanodes outside the private racks: private bytes must not even pass through them.

        (The namenode picks the datanode that receives a WebHDFS upload; it asks the placement
        policy only when the client runs on a datanode, and then with the default storage
        policy.)  Fail closed: without the list, no private write."""
        if self._excluded is None:
            client = self._zones["private"].client
            with self._errors("cannot list the datanodes (NameNodeInfo JMX) of", client.url):
                try:
                    racks = client.datanodes()
                except (KeyError, IndexError, ValueError) as exc:
                    raise StoreError(f"unexpected NameNodeInfo JMX answer from {client.url} "
                                     f"({exc!r}), so cannot keep private uploads off public "
                                     "datanodes") from None
            self._excluded = tuple(sorted(a for a, rack in racks.items()
                                          if not rack.startswith(self.private_racks)))
        return self._excluded

    def _write(self, zone: str, path: str, data: bytes | BinaryIO, pri_label: bool) -> None:
        self.ensure_zones()
        client, full = self._full(zone, path)
        exclude = self._public_datanodes() if zone == "private" else ()
        with self._errors("cannot write", full):
            _retry_transient(lambda: client.create(full, data, overwrite=True, exclude=exclude))
            client.set_xattr(full, PRI_LABEL, "true" if pri_label else "false")

    def read(self, zone: str, path: str) -> bytes:
        client, full = self._full(zone, path)
        with self._errors("cannot read", full):
            return _retry_transient(lambda: client.read_all(full))

    def exists(self, zone: str, path: str) -> bool:
        client, full = self._full(zone, path)
        with self._errors("cannot stat", full):
            return _retry_transient(lambda: client.status(full, strict=False)) is not None

    def list(self, zone: str, path: str = "") -> list[str]:
        client, full = self._full(zone, path)
        with self._errors("cannot list", full):
            status = _retry_transient(lambda: client.status(full, strict=False))
            return sorted(_retry_transient(lambda: client.list(full))) \
                if status and status["type"] == "DIRECTORY" else []

    def walk(self, zone: str, path: str) -> Iterator[str]:
        client, full = self._full(zone, path)
        root = self._zones[zone].root
        with self._errors("cannot walk", full):
            if _retry_transient(lambda: client.status(full, strict=False)) is None:
                return
            listing = _retry_transient(lambda: [(d, f) for d, _, f in client.walk(full)])
        for dirpath, files in listing:
            for name in files:
                yield posixpath.relpath(posixpath.join(dirpath, name), root)

    def rename(self, zone: str, src: str, dst: str) -> None:
        client, full_src = self._full(zone, src)
        _, full_dst = self._full(zone, dst)
        with self._errors("cannot rename", f"{full_src} to {full_dst}"):
            client.replace(full_src, full_dst)

    def remove(self, zone: str, path: str) -> None:
        client, full = self._full(zone, path)
        with self._errors("cannot remove", full):
            client.delete(full, recursive=True)

    def stamp(self, zone: str, path: str, mtime: float) -> None:
        client, full = self._full(zone, path)
        with self._errors("cannot set the times of", full):
            millis = int(mtime * 1000)
            client.set_times(full, access_time=millis, modification_time=millis)

    def location(self, zone: str, path: str) -> str:
        _, full = self._full(zone, path)
        return self._zones[zone].fs.rstrip("/") + full

    @contextmanager
    def publish_lock(self) -> Iterator[None]:
        """A lock file created exclusively on the namenode; a crashed publish leaves it."""
        self.ensure_zones()
        self._excluded = None  # datanodes come and go between publishes
        client, full = self._full("private", LOCK)
        try:
            client.create(full, b"locked\n", overwrite=False, exclude=self._public_datanodes())
        except HdfsError as exc:
            if client.status(full, strict=False) is not None:
                raise StoreError(f"another publish holds {full} (remove it if none is "
                                 "running)") from None
            raise StoreError(f"cannot take the publish lock {full}: {_explain(exc)}") from None
        try:
            yield
        finally:
            client.delete(full)

    def sync(self) -> None:
        """Nothing to do: a WebHDFS write returns once the datanode pipeline has the data."""

    # metadata for the audit

    def pri_label(self, zone: str, path: str) -> str | None:
        client, full = self._full(zone, path)
        with self._errors("cannot read the xattrs of", full):
            return _retry_transient(lambda: client.xattrs(full)).get(PRI_LABEL)

    def zone_storage_policy(self, zone: str) -> str:
        client, full = self._full(zone, "")
        with self._errors("cannot read the storage policy of", full):
            return _retry_transient(lambda: client.storage_policy(full))

    def replicas(self, zone: str) -> Iterator[tuple[str, list[list[str]]]]:
        """(path, each block's replica topology paths) for every file of the zone."""
        for path in self.walk(zone, ""):
            client, full = self._full(zone, path)
            with self._errors("cannot locate the blocks of", full):
                racks = _retry_transient(lambda: client.block_racks(full))
            yield path, racks


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _retry_transient(call, attempts: int = 3):
    """Run an idempotent call again when the datanode serving it hit a transient failure.

    After a namenode restart, a datanode's cached connection to it fails once with
    EOFException (or is refused while the namenode starts) before it reconnects; and a
    heavily loaded host may refuse or reset one connection (seen once in the rehearsal's
    audit).  A service that is really down still fails, after about 1.5 s."""
    for attempt in range(attempts):
        try:
            return call()
        except HdfsError as exc:
            text = str(exc)
            transient = "java.io.EOFException" in text or "ConnectException" in text
            if not transient or attempt == attempts - 1:
                raise
        except requests.ConnectionError:
            if attempt == attempts - 1:
                raise
        time.sleep(0.5 * 2 ** attempt)


def _unreachable(exc: requests.ConnectionError, store_url: str) -> str:
    """The host that refused: a datanode the namenode redirected to, or the namenode."""
    request = getattr(exc, "request", None)
    if request is not None and request.url:
        parts = urlsplit(request.url)
        return f"{parts.scheme}://{parts.netloc}"
    return store_url.split("?")[0]


# The namenode's words when every datanode holding a block's replicas is down or excluded
# (NamenodeWebHdfsMethods.bestNode, JspHelper.bestNode): the cluster's failure, not the request's.
_NO_REPLICA = ("No active nodes contain this block", "No nodes contain this block")


def _no_replica(text: str) -> bool:
    return any(words in text for words in _NO_REPLICA)


def _system_failure(exc: HdfsError) -> bool:
    return exc.exception == "AccessControlException" or _no_replica(str(exc))


def _explain(exc: HdfsError) -> str:
    """The namenode's message, with what it means for the common failures."""
    text = str(exc).split("\n")[0]
    if exc.exception == "AccessControlException":
        return f"permission denied ({text})"
    if "could only be written to 0" in text or "minReplication" in text \
            or "Failed to find datanode" in text:
        return (f"HDFS found no datanode allowed to store it ({text}); for a private file "
                "this means no private datanode could take a replica")
    if _no_replica(text):
        return (f"every datanode holding a replica of it is down ({text}); start one of them, "
                "or wait for HDFS to re-replicate from a live one")
    return text
