"""What the service does to a request before and after its route: a body over the limit
refused (413) before it is read, and each held reply released at its time.  Rankings'
admission (their schedule and lanes) is :mod:`cocktail.rank.admission`."""

from __future__ import annotations

import asyncio
import heapq
import threading
import time

from .. import problems


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes (413) before they are read into memory."""

    def __init__(self, app, limit: int) -> None:
        self.app, self.limit = app, limit

    @staticmethod
    def document(openapi: dict) -> dict:
        """Every operation that takes a body lists the 413 this limit answers it with."""
        for methods in openapi["paths"].values():
            for operation in methods.values():
                if "requestBody" in operation:
                    operation["responses"]["413"] = problems.documented(413)[413]
        return openapi

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            return await _too_large(send, self.limit)
        seen = 0

        async def counted():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _BodyTooLarge
            return message
        try:
            await self.app(scope, counted, send)
        except _BodyTooLarge:
            await _too_large(send, self.limit)


class _BodyTooLarge(Exception):
    pass


async def _too_large(send, limit: int) -> None:
    response = problems.problem(413, f"the request body is over {limit:,} bytes",
                                limit="body_bytes")
    await response({"type": "http"}, None, send)


class Releaser:
    """Wakes each held reply at its time.  The event loop's timers wake on whole milliseconds
    counted from when the loop went idle, so the work done before the wait would shift the
    wake-up by up to 1 ms (a test caught it); one thread sleeps on the OS's precise timer
    instead and hands each due reply back to the loop."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, asyncio.AbstractEventLoop, asyncio.Future]] = []
        self._changed = threading.Condition()
        self._count = 0
        threading.Thread(target=self._run, name="releaser", daemon=True).start()

    def at(self, when: float) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._changed:
            self._count += 1
            heapq.heappush(self._due, (when, self._count, loop, future))
            self._changed.notify()
        return future

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._due:
                    self._changed.wait()
                delay = self._due[0][0] - time.monotonic()
                if delay > 0:
                    self._changed.wait(delay)  # woken early by a sooner reply, or on time
                    continue
                _, _, loop, future = heapq.heappop(self._due)
            loop.call_soon_threadsafe(_release, future)


def _release(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)
