"""The first attempt, before the event loop: one inspection on a blocking socket.

``GET /containers/NAME/json`` as HTTP/1.0 (the engine answers and closes: no chunks, no
keep-alive), judged by the same rules as the runner's attempts. Only ever "ready": anything
else (not running, a 404, an answer it does not fully understand, a socket that refuses) is
left to the runner, which asks again through httpx and says why.
"""

from __future__ import annotations

import socket

from waitfor.kinds.docker.engine import INSPECT_LIMIT, Endpoint

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from waitfor.kind import Deadline, Outcome


def inspect_now(endpoint: Endpoint, name: str, deadline: Deadline) -> dict[str, Any] | None:
    """The container's inspection, or None for anything but a plain 200 with JSON in time."""
    import json

    sock = _connected(endpoint, deadline)
    if sock is None:
        return None
    with sock:
        try:
            sock.settimeout(max(deadline.left(), 0.001))
            sock.sendall(
                f"GET /containers/{name}/json HTTP/1.0\r\nHost: localhost\r\n"
                "User-Agent: waitfor\r\n\r\n".encode("ascii")
            )
            data = bytearray()
            while len(data) <= INSPECT_LIMIT:
                sock.settimeout(max(deadline.left(), 0.001))
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
            else:
                return None
        except OSError:  # timeouts too
            return None
    head, sep, body = bytes(data).partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    if not sep or not lines[0].startswith((b"HTTP/1.0 200 ", b"HTTP/1.1 200 ")):
        return None
    for line in lines[1:]:
        field, _, value = line.partition(b":")
        field, value = field.strip().lower(), value.strip()
        if field == b"transfer-encoding" or (
            field == b"content-length" and value != b"%d" % len(body)
        ):
            return None
    try:
        found = json.loads(body)
    except (ValueError, RecursionError):  # thousands of brackets: RecursionError
        return None
    return found if isinstance(found, dict) and isinstance(found.get("State"), dict) else None


def _connected(endpoint: Endpoint, deadline: Deadline) -> socket.socket | None:
    if endpoint.socket:
        from waitfor.net.unixsock import NotAccepted, connected

        try:
            sock = connected(endpoint.socket)
        except (NotAccepted, OSError):
            return None
        sock.setblocking(True)
        return sock
    from waitfor.net import blocking

    raw = blocking.connect(endpoint.host, endpoint.port, deadline)
    return None if raw is None else blocking.as_socket(raw)  # for `with`


def first_attempt(
    endpoint: Endpoint, name: str, exited: int | None, deadline: Deadline
) -> Outcome | None:
    from waitfor.kinds.docker import ready

    container = inspect_now(endpoint, name, deadline)
    if container is None:
        return None
    outcome = (
        ready.running(name, container) if exited is None else ready.exited(name, container, exited)
    )
    return outcome if outcome.ready else None
