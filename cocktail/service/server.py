"""`cocktail serve`: the app made on a listening socket, uvicorn serving it."""

from __future__ import annotations

import datetime
import ipaddress
import logging
import socket
import sys

from fastapi import FastAPI

from ..dp.deadline import Deadlines
from ..guards import Protocol
from ..private_config import open_ledger
from ..rank.service import Rankings
from ..store import Store
from .app import create_app
from .publication import CurrentPublication
from .tls import EXPIRY_WARNING, Tls

log = logging.getLogger("cocktail.serve")


class Server:
    """`cocktail serve`: on a socket already listening (:func:`cocktail.daemon.listen`), the
    rankings opened and the app made; :meth:`run` serves until Ctrl-C, over HTTPS when given
    :class:`Tls`."""

    def __init__(self, app: FastAPI, listening: socket.socket, tls: Tls | None = None) -> None:
        self.app, self._listening, self._tls = app, listening, tls
        bound = listening.getsockname()
        host = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        self.url = f"{'https' if tls else 'http'}://{host}:{bound[1]}"

    @classmethod
    def start(cls, store: Store, runner: str, deadlines: Deadlines, listening: socket.socket,
              tls: Tls | None = None) -> Server:
        """``listening``: :func:`cocktail.daemon.listen`'s socket, which queues clients
        while this opens and warms the publication."""
        logging.basicConfig(level=logging.INFO,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        if tls is None and not ipaddress.ip_address(listening.getsockname()[0]).is_loopback:
            log.warning("serving plain HTTP on %s: tokens and answers cross the network in "
                        "the clear (give --tls-cert and --tls-key)", listening.getsockname()[0])
        if tls is not None and tls.expires - datetime.datetime.now(datetime.timezone.utc) < \
                EXPIRY_WARNING:
            log.warning("the TLS certificate %s expires on %s UTC: renew it before then, or "
                        "clients refuse this server", tls.cert, f"{tls.expires:%Y-%m-%d %H:%M}")
        rankings = Rankings(store)
        log.info("rankings open: %s", ", ".join(rankings.warm()) or "none")
        return cls(create_app(CurrentPublication(store, runner), open_ledger(store), deadlines,
                              rankings, store), listening, tls)

    def run(self, access_log: bool = False) -> None:
        import uvicorn

        sys.setswitchinterval(0.001)  # many short requests: hand the GIL over often (tails)
        host, port = self._listening.getsockname()[:2]
        config = uvicorn.Config(self.app, host=host, port=port, log_level="info",
                                access_log=access_log, http=Protocol,
                                ssl_certfile=self._tls.cert if self._tls else None,
                                ssl_keyfile=self._tls.key if self._tls else None,
                                ssl_keyfile_password=self._tls.password if self._tls else None)
        uvicorn.Server(config).run(sockets=[self._listening])

