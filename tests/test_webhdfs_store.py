"""The webhdfs store's URL and failure handling (the store against real HDFS: test_hadoop.py)."""

from __future__ import annotations

import http.server
import json
import re
import socket
import threading

import pytest

from cocktail.store import StoreError, StoreUnavailable, WebHdfsStore, open_store


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_url_selects_zones_and_job_paths():
    store = open_store("webhdfs://nn:9870/data/cocktail?fs=hdfs://nn:8020&user=owner")
    assert isinstance(store, WebHdfsStore) and store.user == "owner"
    assert store.location("private", "v000001/index/a.tsv") == \
        "hdfs://nn:8020/data/cocktail/private/v000001/index/a.tsv"
    assert store.location("public", "CURRENT") == "hdfs://nn:8020/data/cocktail/public/CURRENT"
    assert store.storage_policy == "COLD" and store.private_racks == "/private/"
    two = open_store("webhdfs://privnn:9870/cocktail?public=webhdfs://pubnn:9870/shared/pub")
    assert two.location("public", "CURRENT") == "webhdfs://pubnn:9870/shared/pub/CURRENT"
    assert two.location("private", "key") == "webhdfs://privnn:9870/cocktail/private/key"


@pytest.mark.parametrize("url,message", [
    ("webhdfs://nn:9870/c?colour=red", "unknown webhdfs store option(s) colour"),
    ("webhdfs:///c", "not a webhdfs URL"),
    ("webhdfs://a:1/c?public=webhdfs://a:1/c/private/x", "must not contain each other"),
    ("hdfs://nn:8020/c", "give a directory or a webhdfs:// URL"),
])
def test_bad_urls_are_refused_clearly(url, message):
    with pytest.raises(StoreError, match=re.escape(message)):
        open_store(url)


def test_paths_stay_inside_their_zone():
    store = open_store("webhdfs://nn:9870/cocktail")
    for path in ("/etc/passwd", "../public/x", "a/../../b"):
        with pytest.raises(ValueError, match="stay inside the zone"):
            store.location("private", path)


def test_unreachable_namenode_is_named():
    store = open_store(f"webhdfs://127.0.0.1:{closed_port()}/cocktail")
    with pytest.raises(StoreError, match="cannot reach the namenode"):
        store.write("private", "key", b"k", pri_label=True)
    with pytest.raises(StoreError, match="cannot reach the namenode"):
        store.exists("public", "CURRENT")


class _NoReplica(http.server.BaseHTTPRequestHandler):
    """A namenode whose datanodes holding every block are down: each request is answered as
    NamenodeWebHdfsMethods.bestNode answers an OPEN then."""

    def do_GET(self):  # noqa: N802 - http.server's name
        body = json.dumps({"RemoteException": {
            "exception": "IOException", "javaClassName": "java.io.IOException",
            "message": "No active nodes contain this block"}}).encode()
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_block_on_no_live_datanode_is_a_store_failure_not_bad_input():
    """Every replica's datanode down (the rehearsal met it with two datanodes failed at once):
    StoreUnavailable, which every command reports as exit 5, store/system failure
    (test_cli_contract), saying what to do; it was a StoreError, exit 2, bad usage or input."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NoReplica)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        store = open_store(f"webhdfs://127.0.0.1:{server.server_address[1]}/cocktail")
        with pytest.raises(StoreUnavailable, match="every datanode holding a replica of it is "
                                                   "down .* start one of them"):
            store.read("public", "v000001/chunks/a.tsv")
    finally:
        server.shutdown()
