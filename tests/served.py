"""A real `cocktail serve` process on loopback, for the HTTP tests and the attacks on it."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serve(store: Path, *options: str, log: Path | None = None
          ) -> Iterator[tuple[str, subprocess.Popen]]:
    """Start `cocktail serve` on ``store`` and yield its URL once it answers; stop it after.
    Its output goes to ``log`` if given, else to a temporary file (a pipe nobody reads would
    fill up and block the server's logging); shown if it fails to start."""
    port = free_port()
    output = open(log, "wb") if log else tempfile.NamedTemporaryFile(prefix="cocktail-serve-")
    process = subprocess.Popen(
        [sys.executable, "-m", "cocktail.cli", "serve", "--store", str(store), "--port",
         str(port), *options], stdout=output, stderr=subprocess.STDOUT)
    tls = "--tls-cert" in options  # then the certificate is its own authority
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    verify = options[options.index("--tls-cert") + 1] if tls else True
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url + "/v1/limits", timeout=1, verify=verify)
            break
        except httpx.TransportError:
            assert process.poll() is None, Path(output.name).read_text()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
    try:
        yield url, process
    finally:
        process.terminate()
        process.wait(10)
        output.close()


def auth(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def until(condition: Callable[[], bool], seconds: float = 30, every: float = 0.2) -> bool:
    """Whether ``condition`` held within ``seconds``: for what the server picks up by polling
    (a moved CURRENT), which a loaded machine may make slower than any fixed sleep."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(every)
    return True


def in_process(store: Path, deadline_ms: float = 0.5, rank_ms: float = 100,
               search_ms: float = 20):
    """`cocktail serve`'s app on ``store`` in this process (Starlette's test client): for the
    tests that send thousands of requests or read every route.  Replies are held
    ``deadline_ms`` instead of the runner's tens of milliseconds, ranks ``rank_ms`` (a top
    k not ready by its deadline is a 503, and a worker thread needs more than 0.5 ms to
    start), and a searched strategy is due ``search_ms`` after arrival (2 s by default: a
    thousand new shapes would take half an hour; cut short, the answer takes NOQ or NOT)."""
    from starlette.testclient import TestClient

    from cocktail.dp.deadline import Deadlines
    from cocktail.dp.ledger import Ledger
    from cocktail.private_config import ledger_location
    from cocktail.rank.service import Rankings
    from cocktail.service import CurrentPublication, create_app
    from cocktail.store import LocalStore

    opened = LocalStore(str(store))
    rankings = Rankings(opened)
    rankings.warm()  # as `cocktail serve` does: a ranking's deadline needs its size
    app = create_app(CurrentPublication(opened, "fast"), Ledger(ledger_location(opened)),
                     Deadlines(deadline_ms, 0, rank_ms, search_ms), rankings, opened)
    return TestClient(app, base_url="http://127.0.0.1:8080", raise_server_exceptions=False)
