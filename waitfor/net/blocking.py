"""Resolving and connecting synchronously, for the first attempt before the event loop exists.

The blocking twin of :func:`waitfor.net.aio.connect` for :meth:`Check.probe_now`: the same
getaddrinfo call, the same addresses in the same order, IP literals answered without a lookup,
a name's lookup in a daemon thread that is abandoned (never waited for) when the deadline
passes. It only answers "connected" (a socket) or None: every failure, and every reason, is left to
the runner's attempt, which makes the same calls and names what went wrong.

On ``_socket``, the socket module's C half: the sockets are the same, but importing ``socket``
(its enums of every constant, selectors) costs a ready start-up ~10 M instructions, a sixth of
what waitfor adds to the interpreter's own. :func:`as_socket` gives a caller that needs the full
object (ssl's wrap_socket, ``with``) one, where the socket module is imported anyway.
"""

from __future__ import annotations

import _socket
import errno
import math
import select

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import Any

    from waitfor.base.deadline import Deadline

    AddrInfo = tuple[int, int, int, tuple[Any, ...]]  # family, type, proto, sockaddr


def connect(host: str, port: int, deadline: Deadline) -> _socket.socket | None:
    """A connected (blocking) socket to the first of ``host``'s addresses that accepts in time."""
    for address in resolve(host, port, deadline) or []:
        left = deadline.left()
        if left <= 0:
            return None
        sock = connect_address(address, left)
        if sock is not None:
            return sock
    return None


def resolve(host: str, port: int, deadline: Deadline) -> list[AddrInfo] | None:
    """Every address of ``host``, in getaddrinfo's order; None if not known before ``deadline``."""
    # bytes: a str host would load the IDNA codec, and parsed hosts are ASCII already
    name: str | bytes = host.encode("ascii") if host.isascii() else host
    try:  # an IP literal needs no lookup (as net._literal)
        infos = _socket.getaddrinfo(
            name, port, type=_socket.SOCK_STREAM, flags=_socket.AI_NUMERICHOST
        )
    except (OSError, UnicodeError):
        return _lookup(name, port, deadline.left())
    return [(f, k, p, a) for f, k, p, _, a in infos]


def _lookup(host: str | bytes, port: int, budget: float) -> list[AddrInfo] | None:
    import threading  # only names need it; a literal's start-up does not pay for it

    found: list[list[AddrInfo]] = []

    def run() -> None:
        try:
            infos = _socket.getaddrinfo(host, port, type=_socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            return
        found.append([(f, k, p, a) for f, k, p, _, a in infos])

    thread = threading.Thread(target=run, name="waitfor-resolve", daemon=True)
    try:
        thread.start()
    except RuntimeError:
        return None
    thread.join(budget)  # a silent nameserver: abandoned, the runner will ask (and say so)
    return found[0] if found else None


def connect_address(address: AddrInfo, timeout: float) -> _socket.socket | None:
    """A connected blocking socket, or None if the address did not accept within ``timeout``."""
    family, kind, proto, sockaddr = address
    try:
        sock = _socket.socket(family, kind, proto)
    except OSError:
        return None
    try:
        sock.setblocking(False)
        if sock.connect_ex(sockaddr) not in (0, errno.EINPROGRESS):
            sock.close()
            return None
        # poll, not select: select() refuses a descriptor past 1023 (a busy application that
        # calls wait_for, a shell with a high ulimit -n)
        poller = select.poll()
        poller.register(sock, select.POLLOUT)
        writable = poller.poll(max(math.ceil(timeout * 1000), 0))
        if not writable or sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_ERROR) != 0:
            sock.close()
            return None
    except BaseException:
        sock.close()
        raise
    sock.setblocking(True)
    return sock


def as_socket(sock: _socket.socket) -> socket.socket:
    """``sock`` as a :class:`socket.socket` (the same descriptor and timeout; ``sock`` is left
    detached, its close a no-op), for ssl's wrap_socket and other users of the full object."""
    import socket

    if isinstance(sock, socket.socket):
        return sock
    timeout = sock.gettimeout()
    full = socket.socket(sock.family, sock.type, sock.proto, sock.detach())
    full.settimeout(timeout)
    return full
