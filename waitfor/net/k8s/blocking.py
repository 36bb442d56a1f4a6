"""One GET to the API server over a blocking socket, for the first attempt (no event loop, httpx).

It only answers a status, with the JSON object of a 200, or None: a body that is not plain JSON,
too large or too slow, anything unusual — the watching path asks again and says
what happened. The request is the one httpx sends for the same credentials: the server URL's
path prefix, ``Authorization``, ``Accept: application/json``, SNI ``tls-server-name`` when set,
the certificate checked by the credentials' TLS context.
"""

from __future__ import annotations

import socket
import ssl
from urllib.parse import urlencode, urlsplit

from waitfor.base import jsonexpect as expect
from waitfor.base.values import Value
from waitfor.net import blocking
from waitfor.net.k8s.limits import MAX_ANSWER, MAX_CONTAINERS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from waitfor.base.deadline import Deadline
    from waitfor.net.k8s.config import Credentials

    Json = dict[str, Any]
#: a response's head larger than this is not an API server's
MAX_HEAD = 64 * 1024


class Answer(Value):
    status: int
    document: Json | None  # a 200's JSON object (None: not one)
    fields: dict[str, str]  # the head's fields, names in lower case


def get_json(
    credentials: Credentials, path: str, params: dict[str, str], deadline: Deadline
) -> Answer | None:
    """How ``path?params`` is answered (the JSON object of a 200); None if no plain answer came
    in time."""
    try:
        parts = urlsplit(credentials.server)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host or parts.scheme not in ("http", "https"):
        return None
    port = port or (443 if parts.scheme == "https" else 80)
    target = parts.path.rstrip("/") + path + (f"?{urlencode(params)}" if params else "")
    authority = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        authority += f":{port}"
    headers = {
        "Host": authority,
        **credentials.headers,
        "Accept": "application/json",
        "User-Agent": "waitfor",
        "Connection": "close",
    }
    request = f"GET {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    raw = blocking.connect(host, port, deadline)
    if raw is None:
        return None
    sock = raw = blocking.as_socket(raw)  # for wrap_socket: ssl imported socket already
    try:
        # The request follows the handshake's last flight at once: without this, Nagle holds
        # it until that flight is acknowledged, 40 ms later (the server's delayed ACK).
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if parts.scheme == "https":
            sock.settimeout(max(deadline.left(), 0.001))
            # bytes: a str name would load the IDNA codec (the names here are ASCII, or None)
            name = credentials.sni or host
            sock = credentials.context.wrap_socket(
                raw, server_hostname=name.encode("ascii") if name.isascii() else name
            )
        if not _send(sock, (request + "\r\n").encode("latin-1"), deadline):
            return None
        answer = _receive(sock, deadline)
    except (OSError, ssl.SSLError, UnicodeError):
        return None
    finally:
        sock.close()
        raw.close()
    return _answer(answer) if answer is not None else None


def _send(sock: socket.socket, data: bytes, deadline: Deadline) -> bool:
    left = deadline.left()
    if left <= 0:
        return False
    sock.settimeout(left)
    sock.sendall(data)
    return True


def _receive(sock: socket.socket, deadline: Deadline) -> bytes | None:
    """Everything the server sends until it closes (``Connection: close``), within bounds."""
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline.left()
        if left <= 0:
            return None
        sock.settimeout(left)
        chunk = sock.recv(1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_ANSWER + MAX_HEAD:
            return None


def _answer(answer: bytes) -> Answer | None:
    head, separator, body = answer.partition(b"\r\n\r\n")
    if not separator or len(head) > MAX_HEAD:
        return None
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ", 2)
    if len(status) < 2 or not status[0].startswith("HTTP/1.") or not status[1].isdigit():
        return None
    fields: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or name.lower() in fields:
            return None  # malformed or repeated: not worth judging
        fields[name.lower()] = value.strip()
    code = int(status[1])
    return Answer(code, _document(fields, body) if code == 200 else None, fields)


def _document(fields: dict[str, str], body: bytes) -> Json | None:
    if fields.get("content-encoding", "identity").lower() != "identity":
        return None
    encoding = fields.get("transfer-encoding", "").lower()
    if encoding == "chunked":
        decoded = _unchunked(body)
        if decoded is None:
            return None
        body = decoded
    elif encoding:
        return None
    elif "content-length" in fields:
        length = fields["content-length"]
        if not (length.isascii() and length.isdigit()) or int(length) != len(body):
            return None
    if len(body) > MAX_ANSWER or body.count(b"{") + body.count(b"[") > MAX_CONTAINERS:
        return None
    try:
        document = expect.load(body.decode("utf-8", "replace"))
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def _unchunked(body: bytes) -> bytes | None:
    parts: list[bytes] = []
    at = 0
    while True:
        end = body.find(b"\r\n", at)
        if end < 0:
            return None
        size_text = body[at:end].split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            return None
        if size == 0:
            return b"".join(parts)
        start = end + 2
        if body[start + size : start + size + 2] != b"\r\n":
            return None
        parts.append(body[start : start + size])
        at = start + size + 2
