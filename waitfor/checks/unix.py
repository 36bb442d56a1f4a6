"""Unix sockets: a connection is accepted on ``unix:///path/to.sock``. Connects, then closes.

A socket file with nothing listening (left behind by a crashed server) refuses the connection;
a path that does not exist yet is "no such file or directory". Both are not ready: a server
binds its socket when it is up. A connect to a Unix socket never waits on the network, so the
probe is one non-blocking ``connect``.
"""

from __future__ import annotations

import errno
import os
import socket
import stat

from waitfor.checks.base import Address, Check, Outcome, describe_os_error
from waitfor.urlsplit import unquote

#: sun_path holds 108 bytes on Linux, the last one a NUL
MAX_PATH_BYTES = 107


class UnixCheck(Check):
    USAGE = (("unix:///path/to.sock", "a connection to the Unix socket is accepted"),)

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        path = socket_path(url, scheme)
        return Address(host=path, port=None, display=f"unix://{path}")

    async def probe(self, budget: float) -> Outcome:
        return connect_unix(self.target.host)

    def probe_now(self, budget: float) -> Outcome | None:
        outcome = connect_unix(self.target.host)  # never waits, so no event loop either
        return outcome if outcome.ready else None


def socket_path(url: str, scheme: str) -> str:
    """``unix:///run/app.sock`` (or ``unix:/run/app.sock``) -> ``/run/app.sock``."""
    rest = url[len(scheme) + 1 :]
    if rest.startswith("//"):
        authority, slash, rest = rest[2:].partition("/")
        if authority not in ("", "localhost"):
            raise ValueError(f"{scheme} targets name a local path: {scheme}:///path/to.sock")
        rest = slash + rest
    path = unquote(rest.partition("?")[0])
    if not path.startswith("/"):
        raise ValueError(f"the socket path must be absolute: {scheme}:///path/to.sock")
    if "\0" in path:
        raise ValueError("the socket path contains a NUL byte")
    if len(os.fsencode(path)) > MAX_PATH_BYTES:
        raise ValueError(f"the socket path is longer than {MAX_PATH_BYTES} bytes")
    return path


class NotAccepted(Exception):
    """The connection was not accepted; the message says why, as unix targets word it."""


def connect_unix(path: str) -> Outcome:
    """Ready when a connection to the socket at ``path`` is accepted."""
    try:
        connected(path).close()
    except NotAccepted as exc:
        return Outcome.down(f"{path}: {exc}")
    return Outcome.up(f"connected to {path}")


def connected(path: str) -> socket.socket:
    """A non-blocking socket connected to ``path`` (also for http+unix), or NotAccepted."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        sock.connect(path)
        return sock
    except BlockingIOError:
        # Linux: the listener's backlog is full. It is listening but not accepting (and an
        # event loop's connect would take the socket for connected, and fail on writing).
        why = "listening, but its backlog is full"
    except OSError as exc:
        why = _describe(path, exc)
    sock.close()
    raise NotAccepted(why)  # outside the except: the errno's words are ours, not a cause


def _describe(path: str, exc: OSError) -> str:
    if exc.errno == errno.ECONNREFUSED:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            mode = stat.S_IFSOCK
        if not stat.S_ISSOCK(mode):
            return "not a socket"
        return "connection refused (a socket file with nothing listening)"
    return describe_os_error(exc)
