"""The quick first attempt's HTTP/1.1 exchange: strict, blocking, and only ever "ready".

Before the event loop exists (:meth:`~waitfor.kind.Check.probe_now`), an ``http://``,
``https://`` or ``http+unix://`` target is asked once over a blocking socket, written as a
conversation for :mod:`waitfor.net.conversation`'s driver, without h11, httpx or asyncio (their
imports cost a ready start-up more than the rest of it). For https the handshake comes first, on
the context httpx's client is given (the one TLS path's, offering ALPN ``http/1.1`` as httpcore
does), to the server name httpcore gives, within the attempt's deadline; a failed handshake is
the runner's to word. The request is byte for byte the one httpx sends
(:func:`request`); the answer is read strictly: an HTTP/1.1 or 1.0 status line, CRLF-ended
header lines of token names and printable ASCII values, a body framed by one Content-Length, by
``Transfer-Encoding: chunked`` or by the connection's close, at most BODY_LIMIT of it. Its status
and headers go to the one judgement (:func:`~waitfor.kinds.http.judge.judge`), which says what
it means.

Anything this reader does not fully understand is :class:`Undecided`: what h11 refuses (a bad
status line, a duplicate or conflicting Content-Length, a transfer coding other than chunked, a
bad chunk, an early close, a head too long), what it accepts that is rare in a health check
(bare LF, obs-fold, non-ASCII header bytes, trailers, 1xx answers), any redirect (httpx follows
the same-host ones), a request it cannot write exactly as httpx does, and a regex search too
long to run within the attempt's budget. So is an answer that is not ready, and running out of
time. The runner's attempt then asks again through httpx, and says why.
"""

from __future__ import annotations

from collections.abc import Generator

from waitfor.kind import Outcome
from waitfor.kinds.http.judge import BODY_LIMIT, Search, advance, judge, values_of
from waitfor.net import blocking, conversation  # with the kind: the attempt's budget is for I/O
from waitfor.net.conversation import Closed, Read, ReadLine, Send

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket

    from waitfor.kind import Deadline
    from waitfor.kinds.http.judge import Headers
    from waitfor.kinds.http.options import HttpOptions
    from waitfor.net.conversation import Conversation, Step, TlsFactory

#: status line and headers together; a longer head is the runner's (httpcore allows 100 KiB)
HEAD_LIMIT = 16 * 1024
#: a chunk-size line, extensions included
CHUNK_LINE_LIMIT = 1024
#: RE2 program size times text length one quick search may cost (~20 ms): a larger search runs
#: on the runner's attempt, off the event loop, where the deadline and signals still reach
SEARCH_WORK = 20_000_000
#: body framings besides a length: chunked, or until the server closes the connection
CHUNKED, UNTIL_CLOSE = -1, -2

#: httpx's default headers, in its order; the client's own (User-Agent, Accept-Encoding, the
#: target's ``header=``) replace those of the same name and follow them
_HTTPX_DEFAULTS = (
    ("Accept", "*/*"),
    ("Accept-Encoding", "gzip, deflate"),
    ("Connection", "keep-alive"),
    ("User-Agent", "python-httpx"),
)
#: headers httpx writes or checks itself: a target that sets one is left to httpx
_HTTPX_OWN = frozenset({"host", "content-length", "transfer-encoding"})
#: the schemes asked here, and the port httpx leaves out of the Host header for each
_DEFAULT_PORTS = {"http": 80, "https": 443}
_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_IPV6 = frozenset("0123456789abcdefABCDEF:.")
#: host name characters httpx keeps as they are (in lower case)
_NAME = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-_~")
#: a path's and a query's characters that httpx sends as they are (its PATH_SAFE, QUERY_SAFE)
_PATH = frozenset(chr(c) for c in range(0x21, 0x7F)) - set('"#<>?`{}')
_QUERY = frozenset(chr(c) for c in range(0x21, 0x7F)) - set('"#<>')


class Undecided(Exception):
    """Not an answer this strict reader may call ready: the runner's attempt decides."""


def first_attempt(
    options: HttpOptions,
    url: str,
    headers: dict[str, str],
    deadline: Deadline,
    *,
    address: tuple[str, int] | None = None,
    socket_path: str | None = None,
    tls: TlsFactory | None = None,
) -> Outcome | None:
    """Ask ``url`` once, at ``address`` or over the Unix socket ``socket_path``, with the
    client's ``headers`` (``tls``: the context of an https URL's handshake): the ready outcome,
    or None for anything else."""
    origin = _origin(url)
    data = request(options.method, url, headers, options.data)
    if origin is None or data is None or (origin[0] == "https") != (tls is not None):
        return None
    sock = blocking.connect(*address, deadline) if address else _unix(socket_path or "")
    if sock is None:
        return None
    asked = exchange(options, data)
    if tls is None:
        return conversation.answer_now(sock, asked, deadline, (Undecided,))
    handshaken = conversation.over_tls(asked)
    return conversation.answer_now(
        sock, handshaken, deadline, (Undecided,), tls=tls, server_hostname=origin[1]
    )


def _unix(path: str) -> socket.socket | None:
    from waitfor.net.unixsock import NotAccepted, connected

    try:
        return connected(path)
    except (NotAccepted, OSError):  # socket() itself may fail (EMFILE): the runner says so
        return None


def request(method: str, url: str, headers: dict[str, str], data: bytes | None) -> bytes | None:
    """The bytes httpx sends for this request (the client's ``headers``), None when the URL or
    the headers are not ones whose writing this can be sure of."""
    origin = _origin(url)
    if origin is None or any(name.lower() in _HTTPX_OWN for name in headers):
        return None
    _, _, host, target = origin
    given = {name.lower() for name in headers}
    lines = [(name, value) for name, value in _HTTPX_DEFAULTS if name.lower() not in given]
    lines += headers.items()
    body = data or b""
    if body:
        lines.append(("Content-Length", str(len(body))))
    elif method in ("POST", "PUT", "PATCH"):
        lines.insert(0, ("Content-Length", "0"))
    lines.insert(0, ("Host", host))
    head = "".join(f"{name}: {value}\r\n" for name, value in lines)
    try:
        return f"{method} {target} HTTP/1.1\r\n{head}\r\n".encode("ascii") + body
    except UnicodeError:
        return None


def _origin(url: str) -> tuple[str, str, str, str] | None:
    """(scheme, host name, Host header, request target) of an ``http://`` or ``https://`` URL
    as httpx writes them (the name as httpcore gives it to TLS: lower case, an IPv6 literal
    without brackets), for URLs httpx sends as they are (no credentials, dot segments, spaces,
    non-ASCII); None for others."""
    written, sep, rest = url.partition("://")
    scheme = written.lower()
    if scheme not in _DEFAULT_PORTS or not sep or not rest.isascii() or "#" in rest:
        return None
    cut = min([at for at in (rest.find("/"), rest.find("?")) if at >= 0] or [len(rest)])
    authority, path_query = rest[:cut], rest[cut:]
    # httpx leaves the default port out only after a scheme written in lower case
    found = _netloc(authority, _DEFAULT_PORTS[scheme] if written == scheme else 0)
    path, question, query = path_query.partition("?")
    segments = path.split("/")
    if found is None or "." in segments or ".." in segments:
        return None
    if not set(path) <= _PATH or not set(query) <= _QUERY:
        return None
    name, netloc = found
    return scheme, name, netloc, (path or "/") + question + query


def _netloc(authority: str, default_port: int) -> tuple[str, str] | None:
    """(the host, httpx's ``url.netloc``): the host in lower case, the port unless it is the
    scheme's default."""
    if authority.startswith("["):  # an IPv6 literal, kept as written
        end = authority.find("]") + 1
        host, port = authority[:end], authority[end:]
        if not end or not set(host[1:-1]) <= _IPV6:
            return None
        name = host[1:-1]
    else:
        name, colon, digits = authority.partition(":")
        host, port = name.lower(), colon + digits
        if not host or not set(host) <= _NAME:
            return None
        if host[0].isdigit() and host[-1].isdigit() and not _ipv4(host):
            return None  # httpx checks what looks like an IPv4 address
        name = host
    if not port:
        return name, host
    digits = port[1:]
    if port[0] != ":" or not digits.isdigit() or not 0 < int(digits) < 65536:
        return None
    return name, host if int(digits) == default_port else f"{host}:{int(digits)}"


def _ipv4(host: str) -> bool:
    parts = host.split(".")
    return len(parts) == 4 and all(
        p.isdigit() and len(p) <= 3 and int(p) <= 255 and (p == "0" or p[0] != "0") for p in parts
    )


def exchange(options: HttpOptions, data: bytes) -> Conversation:
    """Send the request, read the answer's head strictly, and judge it (reading the body when the
    judgement asks for it)."""
    yield Send(data)
    left = HEAD_LIMIT
    line = yield ReadLine(left)
    left -= len(line)
    status = _status(line)
    headers: list[tuple[str, str]] = []
    while (line := (yield ReadLine(left))) != b"\r\n":
        left -= len(line)
        if left <= 2:
            raise Undecided("head too long")
        headers.append(_header(line))
    framing = _framing(status, headers, options.method)
    if 300 <= status < 400 and values_of(headers, "location"):
        raise Undecided("a redirect: httpx follows those to the same host")
    judgement = judge(options, status, headers)
    answer: bytes | bool | None = None
    while not isinstance(step := advance(judgement, answer), Outcome):
        if isinstance(step, Search):
            if step.pattern.size * max(len(step.data), 1) > SEARCH_WORK:
                raise Undecided("a long search")
            answer = step.pattern.search_now(step.data)
        else:
            answer = yield from _body(framing)
    return step


def _status(line: bytes) -> int:
    """``HTTP/1.1 200 OK``: the status of a final answer (a 1xx is the runner's)."""
    version, code, rest = line[:9], line[9:12], line[12:-2]
    if version not in (b"HTTP/1.1 ", b"HTTP/1.0 ") or not code.isdigit():
        raise Undecided("status line")
    if rest and (rest[:1] != b" " or not _printable(rest)):
        raise Undecided("status line")
    status = int(code)
    if status < 200:
        raise Undecided("an informational answer")
    return status


def _header(line: bytes) -> tuple[str, str]:
    """``Name: value`` as httpx has it: the name in lower case, the value without its OWS."""
    name, colon, value = line[:-2].partition(b":")
    value = value.strip(b" \t")
    if not colon or not name or not set(name) <= _TOKEN or not _printable(value):
        raise Undecided("header line")
    return name.decode("ascii").lower(), value.decode("ascii")


def _printable(data: bytes) -> bool:
    """Printable ASCII and tabs only (no CR, LF, NUL, other controls or non-ASCII)."""
    return data.isascii() and all(0x20 <= byte < 0x7F or byte == 0x09 for byte in data)


def _framing(status: int, headers: Headers, method: str) -> int:
    """How the body ends: its length, CHUNKED or UNTIL_CLOSE (h11's rules, the plain cases)."""
    lengths = values_of(headers, "content-length")
    codings = values_of(headers, "transfer-encoding")
    if len(lengths) + len(codings) > 1:
        raise Undecided("framing")
    if lengths and not (lengths[0].isdigit() and len(lengths[0]) <= 18):
        raise Undecided("Content-Length")
    if codings and codings[0] != "chunked":
        raise Undecided("Transfer-Encoding")
    if status in (204, 304) or method == "HEAD":
        return 0
    if codings:
        return CHUNKED
    return int(lengths[0]) if lengths else UNTIL_CLOSE


def _body(framing: int) -> Generator[Step, bytes, bytes]:
    """At most BODY_LIMIT bytes of the body, as h11 hands them to httpx."""
    if framing >= 0:
        return (yield Read(min(framing, BODY_LIMIT)))  # Closed early: the runner's
    if framing == UNTIL_CLOSE:
        try:
            return (yield Read(BODY_LIMIT))
        except Closed as closed:
            return closed.partial
    body = b""
    while len(body) < BODY_LIMIT:
        size = _chunk_size((yield ReadLine(CHUNK_LINE_LIMIT)))
        if size == 0:
            if (yield ReadLine(2)) != b"\r\n":
                raise Undecided("trailers")
            break
        body += yield Read(min(size, BODY_LIMIT - len(body)))
        if len(body) < BODY_LIMIT and (yield Read(2)) != b"\r\n":
            raise Undecided("chunk end")
    return body


def _chunk_size(line: bytes) -> int:
    size, _, extension = line[:-2].partition(b";")
    if not size or len(size) > 16 or not set(size) <= _HEX or not _printable(extension):
        raise Undecided("chunk size")
    return int(size, 16)
