"""Unix sockets: a connection is accepted on ``unix:///path/to.sock``. Connects, then closes.

A socket file with nothing listening (left behind by a crashed server) refuses the connection;
a path that does not exist yet is "no such file or directory". Both are not ready: a server
binds its socket when it is up. A connect to a Unix socket never waits on the network, so the
probe is one non-blocking ``connect``.
"""

from __future__ import annotations

import os

from waitfor.kind import Address, Check, Options, Outcome, unquote
from waitfor.net.unixsock import NotAccepted, connected

TYPE_CHECKING = False
if TYPE_CHECKING:
    from waitfor.kind import Deadline

#: sun_path holds 108 bytes on Linux, the last one a NUL
MAX_PATH_BYTES = 107


class UnixCheck(Check[Options]):
    USAGE = (("unix:///path/to.sock", "a connection to the Unix socket is accepted"),)

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        path = socket_path(url, scheme)
        return Address(host=path, port=None, display=f"unix://{path}")

    async def probe(self, deadline: Deadline) -> Outcome:
        return connect_unix(self.target.host)

    def probe_now(self, deadline: Deadline) -> Outcome | None:
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


def connect_unix(path: str) -> Outcome:
    """Ready when a connection to the socket at ``path`` is accepted."""
    try:
        connected(path).close()
    except NotAccepted as exc:
        return Outcome.down(f"{path}: {exc}")
    return Outcome.up(f"connected to {path}")
