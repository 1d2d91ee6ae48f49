"""The webhdfs store's URL and failure handling (the store against real HDFS: test_hadoop.py)."""

from __future__ import annotations

import re
import socket

import pytest

from cocktail.store import StoreError, WebHdfsStore, open_store


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
