"""Starting a service (`cocktail serve`): its socket listens at once, and with ``--detach``
the command returns once the service is ready.

A socket bound and listening before the service loads its libraries and warms its data
queues the clients that come meanwhile (the kernel accepts them; the service answers them
once it runs) instead of refusing them.

With ``--detach`` the process forks before any work: the child does the work and serves on, in a session of its
own; the caller's process waits until the child says it is ready (or exits), relays what the
child printed on stdout (its confirmation, or its error), and exits with the child's status.
So the command on the next line of a script finds the service answering, with no wait of its
own, and a service that cannot start fails in the foreground with its usual status.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Callable

from .errors import ExitCode
from .lifetime import die_with_parent, outlive_parent

BACKLOG = 2048  # uvicorn's own default: the connections the kernel queues until it accepts


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening: a port in use is one clear error here
    (exit status 5), rather than a server that logs it and exits."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((host, port))
    except OSError as exc:
        listening.close()
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    listening.listen(BACKLOG)
    return listening


def detach(log_file: str) -> Callable[[], None]:
    """Fork. The caller's process never returns from here: it exits once the child is ready
    (0) or with the child's status. The child returns ``ready``, to call once it serves: until
    then its stdout goes to the caller and its stderr where the caller's goes (start-up logs
    and errors are seen); from then on both are appended to ``log_file`` (0600)."""
    log = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # a bad path: here
    out_r, out_w = os.pipe()
    ready_r, ready_w = os.pipe()  # not inherited: only the child itself can say it is ready
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    child = os.fork()
    if child:
        for fd in (out_w, ready_w, log):
            os.close(fd)
        sys.exit(_relay(child, out_r, ready_r))
    os.close(out_r)
    os.close(ready_r)
    # Until it serves, the child dies with the command that started it: a command killed
    # while starting (SIGKILL: no relay of Ctrl-C) leaves no service nobody heard of.
    die_with_parent(parent)
    os.setsid()  # the caller's terminal and its Ctrl-C are no longer ours
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(out_w, 1)
    os.close(out_w)

    def ready() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        outlive_parent()  # serving: the service outlives the command, as --detach says
        os.write(ready_w, b"1")
        os.close(ready_w)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
    return ready


def _relay(child: int, out_r: int, ready_r: int) -> int:
    """The child's status once it is ready (0) or gone, after copying what it printed; a
    Ctrl-C while it starts stops it too (the caller asked for no service after all)."""
    try:
        is_ready = os.read(ready_r, 1) == b"1"  # blocks until ready, or until the child exits
    except KeyboardInterrupt:
        os.kill(child, signal.SIGTERM)
        raise
    status = 0 if is_ready else os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
    os.set_blocking(out_r, False)  # all it printed is in the pipe; a grandchild may hold it
    while True:
        try:
            chunk = os.read(out_r, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        sys.stdout.buffer.write(chunk)
    sys.stdout.flush()
    return status if status >= 0 else int(ExitCode.FAILED)  # killed by a signal
