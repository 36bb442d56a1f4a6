"""HTTP's quick first attempt (waitfor.kinds.http.wire) against httpx's path (HttpCheck.probe).

The quick attempt may only say what httpx's says, and only "ready": every answer here, well
formed or hostile, is asked both ways, and the quick answer must be None or the full path's
ready outcome, reason included. The well-formed ones must be answered quickly (else quick ==
full would hold trivially), and both paths must put the same bytes on the wire.
"""

from __future__ import annotations

import gzip
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.attempts import assert_quick_agrees, quick_and_full
from tests.support.servers import answering_peer as peer
from tests.support.servers import read_request
from waitfor.base.deadline import Deadline
from waitfor.core.targets import parse_target
from waitfor.kind import Outcome
from waitfor.kinds.http import wire
from waitfor.kinds.http.check import BODY_LIMIT, HttpCheck

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def gzipped(body: bytes, *headers: bytes) -> bytes:
    data = gzip.compress(body, mtime=0)  # the same bytes every run: they are in the test id
    head = b"".join(h + b"\r\n" for h in headers)
    return b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n%sContent-Length: %d\r\n\r\n%s" % (
        head,
        len(data),
        data,
    )


#: answers the quick attempt must decide itself: (answer, options, full path's reason)
READY = [
    (OK, "", "HTTP 200"),
    (OK, "#body=ok", "HTTP 200, body matches"),
    (b"HTTP/1.1 204 No Content\r\n\r\n", "#status=204", "HTTP 204"),
    (b"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok", "#body=%5Eok$", "HTTP 200, body matches"),
    (b"HTTP/1.0 200 OK\r\n\r\nok", "#body=ok", "HTTP 200, body matches"),
    (b"HTTP/1.1 200 OK\r\n\r\n", "", "HTTP 200"),  # no framing, body not needed
    (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\no\r\n1;x=y\r\nk\r\n0\r\n\r\n",
        "#body=%5Eok$",
        "HTTP 200, body matches",
    ),
    (b"HTTP/1.1 302 Found\r\nContent-Length: 0\r\n\r\n", "", "HTTP 302"),  # no Location
    (gzipped(b'{"a": 1}'), "#json=a==1", "HTTP 200, json matches"),
    (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=latin-1\r\n"
        b"Content-Length: 2\r\n\r\n\xe9t",
        "#body=%C3%A9t",
        "HTTP 200, body matches",
    ),
    (
        b'HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset="latin-1"\r\n'
        b"Content-Length: 2\r\n\r\n\xe9t",
        "#body=%C3%A9t",
        "HTTP 200, body matches",
    ),
    (
        b"HTTP/1.1 200 OK\r\nX-State: up\r\nx-state: down\r\nContent-Length: 0\r\n\r\n",
        "#expect-header=X-State:%5Edown$&expect-header=X-STATE",
        "HTTP 200",
    ),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 70000\r\n\r\n" + b"a" * 70000, "#body=a$", None),
    (b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 70000, "#body=x$", None),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "#json=a", None),  # not JSON: not ready
]


@pytest.mark.parametrize(("answer", "options", "reason"), READY)
def test_well_formed_answers_are_decided_quickly(
    answer: bytes, options: str, reason: str | None
) -> None:
    with peer(answer) as (url, _):
        quick, full = quick_and_full(f"{url}/{options}")
    if reason is None:
        assert quick is None or quick == full
        return
    assert full == Outcome.up(reason)
    assert quick == full


def test_the_body_limit_is_the_full_paths() -> None:
    """70,000 bytes sent, BODY_LIMIT read: ``a$`` does not match the cut body, either way."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 70000\r\n\r\n" + b"a" * 69999 + b"b"
    with peer(answer) as (url, _):
        quick, full = quick_and_full(f"{url}/#body=a$")
    assert full.ready
    assert quick == full
    assert BODY_LIMIT < 70000


def silent(conn: socket.socket) -> None:
    conn.recv(1)  # answers nothing until the client hangs up


def dripping(conn: socket.socket) -> None:
    for byte in OK:
        conn.sendall(bytes([byte]))
        time.sleep(0.05)


def head_only(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\n\r\npartial")
    conn.recv(1)  # a close-delimited body that never ends


def reset(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok")
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")


#: answers h11 refuses, or accepts in forms the quick reader leaves to it
HOSTILE: list[bytes | Callable[[socket.socket], None]] = [
    b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",  # bare LF
    b"HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok",  # obs-fold
    b"HTTP/1.1 200 OK\r\n b\r\nContent-Length: 2\r\n\r\nok",  # continuation first
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nX A: b\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nX : b\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nno colon\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nX-A: \xc3\xa9\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nX-A: \xe9\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nX-A: a\x01b\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * 20000 + b"\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * 200000 + b"\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nok\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 \r\nok\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n",  # no last chunk
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n"
    b"2\r\nok\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok",  # closes early
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
    b"HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 099 Odd\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 600 Odd\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\x00\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1  200 OK\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200OK\r\nContent-Length: 2\r\n\r\nok",
    b"http/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    b"\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 302 Found\r\nLocation: http://localhost:1/\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 301 Moved\r\nLocation: ftp://127.0.0.1/\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 307 Moved\r\nLocation: http://[bad/\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 503 Busy\r\nContent-Length: 2\r\n\r\nno",
    gzipped(b"x" * 1_000_000),  # a gzip bomb, cut at BODY_LIMIT
    b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\nok",  # corrupt
    b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=nope\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=base64\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nContent-Type: a/b; charset*=utf-8''latin-1\r\n\r\nok",
    b"SSH-2.0-OpenSSH_9.6\r\n",
    b"",
    silent,
    dripping,
    head_only,
    reset,
]


@pytest.mark.parametrize("answer", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("options", ["", "#body=ok", "#json=a&method=POST&data=x"])
def test_the_quick_attempt_says_only_what_httpx_says(
    answer: bytes | Callable[[socket.socket], None], options: str
) -> None:
    with peer(answer) as (url, _):
        quick, full = quick_and_full(f"{url}/{options}", budget=0.5)
    assert_quick_agrees(quick, full)


@pytest.mark.parametrize("answer", [silent, dripping, head_only])
def test_the_quick_attempt_keeps_to_its_deadline(
    answer: Callable[[socket.socket], None],
) -> None:
    with peer(answer) as (url, _):
        check = HttpCheck(parse_target(f"{url}/#body=ok"))
        started = time.monotonic()
        assert check.probe_now(Deadline.after(0.2)) is None
        assert time.monotonic() - started < 0.4


def test_a_costly_search_is_left_to_the_runner() -> None:
    """A large pattern over a large body could outlast the quick attempt's budget."""
    pattern = quote("(" + "|".join(f"w{i}x" for i in range(300)) + ")$", safe="")
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 60000\r\n\r\n" + b"w1x" * 20000
    with peer(answer) as (url, _):
        quick, full = quick_and_full(f"{url}/#body={pattern}")
    assert full.ready
    assert quick is None


# --- the request ---------------------------------------------------------------------------

HEADER_NAMES = ["X-Probe", "x-probe", "User-Agent", "user-agent", "Accept", "ACCEPT-ENCODING"]
HEADER_NAMES += ["Connection", "Authorization", "Content-Type", "X-Empty"]


@st.composite
def requests(draw: st.DrawFn) -> str:
    """The options part of a target: method, headers (repeated, in any case), data."""
    method = draw(st.sampled_from(["", "GET", "HEAD", "POST", "PUT", "PATCH", "OPTIONS"]))
    data = draw(st.sampled_from([None, "", "a=1", "caf%C3%A9%26x%3D1"]))
    if data is not None and method in ("GET", "HEAD"):
        method = "POST"
    options = [f"method={method.lower()}"] if method else []
    for name in draw(st.lists(st.sampled_from(HEADER_NAMES), max_size=4)):
        if name == "Content-Type" and data is not None:
            continue
        value = draw(st.sampled_from(["", "a", "a%3Bb", "v%20w"]))
        options.append(f"header={name}:%20{value}")
    if data is not None:
        options.append(f"data={data}")
        if draw(st.booleans()):
            options.append("content-type=application/json")
    return "#" + "&".join(options) if options else ""


PATHS = ["", "/", "/healthz", "/a/b?c=d&e=%20f", "/%7Euser/x;y", "/a?", "/?q=a/b?c", "/a%2Fb"]


@pytest.fixture(scope="module")
def capture() -> Iterator[tuple[str, list[bytes]]]:
    with peer(OK) as served:
        yield served


@settings(max_examples=60, deadline=None)
@given(
    options=requests(),
    path=st.sampled_from(PATHS),
    host=st.sampled_from(["127.0.0.1", "LocalHost"]),
)
def test_both_paths_send_the_same_bytes(
    capture: tuple[str, list[bytes]], options: str, path: str, host: str
) -> None:
    url, received = capture
    target = url.replace("127.0.0.1", host) + path + options
    received.clear()
    quick, full = quick_and_full(target)
    assert quick == full
    assert quick is not None
    assert quick.ready
    assert len(received) == 2
    assert received[0] == received[1]


@settings(max_examples=300, deadline=None)
@given(
    url=st.builds(
        "{}://{}{}{}".format,
        st.sampled_from(["http", "https", "HTTP", "HTTPS", "Https"]),
        st.sampled_from(["127.0.0.1", "Example.COM", "[::1]", "[FE80::1]", "1.2.3.4", "a_b~c"]),
        st.sampled_from(["", ":80", ":080", ":443", ":0443", ":8080", ":65535"]),
        st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12),
    )
)
def test_the_request_line_and_host_are_httpxs(url: str) -> None:
    """Where the quick attempt writes a URL, it writes what httpx does (else it leaves it)."""
    origin = wire._origin(url)
    if origin is None:
        return
    parsed = httpx.URL(url)
    netloc, target = parsed.netloc.decode(), parsed.raw_path.decode()
    # the name httpcore hands to TLS (SNI, the certificate's check): the URL's raw host
    assert origin == (parsed.scheme, parsed.raw_host.decode(), netloc, target)


def test_a_request_httpx_writes_its_own_way_is_left_to_it() -> None:
    for url in [
        "http://u:p@h/",
        "http://h/a/../b",
        "http://h/a b",
        "http://h/é",
        "http://01.2.3.4/",
    ]:
        assert wire._origin(url) is None
    for name in ["Host", "content-length", "Transfer-Encoding"]:
        assert wire.request("GET", "http://h/", {name: "1"}, None) is None


# --- http+unix ------------------------------------------------------------------------------


@contextmanager
def unix_peer(path: Path, answer: bytes) -> Iterator[list[bytes]]:
    import threading

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    received: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                received.append(read_request(conn))
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield received
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join()


@pytest.mark.parametrize("answer", [OK, b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok"])
def test_http_unix_both_ways(tmp_path: Path, answer: bytes) -> None:
    path = tmp_path / "app.sock"
    with unix_peer(path, answer) as received:
        quick, full = quick_and_full(f"http+unix://{quote(str(path), safe='')}/healthz?x=1#body=ok")
    assert_quick_agrees(quick, full)
    assert full.ready
    if answer == OK:
        assert quick == full
        assert received[0] == received[1]
        assert received[0].startswith(b"GET /healthz?x=1 HTTP/1.1\r\nHost: localhost\r\n")
    missing = tmp_path / "nothing.sock"
    assert (
        HttpCheck(parse_target(f"http+unix://{quote(str(missing), safe='')}/")).probe_now(
            Deadline.after(1)
        )
        is None
    )


#: run in a child process: every descriptor taken, then the quick attempt on an http+unix target
_NO_DESCRIPTOR_LEFT = """
import os, resource, sys
from waitfor.base.deadline import Deadline
from waitfor.kinds.http.check import HttpCheck
from waitfor.net import unixsock
from waitfor.core.targets import parse_target

check = HttpCheck(parse_target(sys.argv[1]))
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
try:
    while True:
        os.open(os.devnull, os.O_RDONLY)
except OSError:
    pass
print(check.probe_now(Deadline.after(1)))
"""


def test_http_unix_without_a_descriptor_left_is_the_runners(tmp_path: Path) -> None:
    """socket() failing (EMFILE) is not an answer: None, as for TCP, and the runner says why."""
    path = tmp_path / "app.sock"
    with unix_peer(path, OK):
        target = f"http+unix://{quote(str(path), safe='')}/"
        run = [sys.executable, "-c", _NO_DESCRIPTOR_LEFT, target]
        done = subprocess.run(run, capture_output=True, text=True, timeout=30, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "None\n", "")


# --- the judgement's reading of headers ----------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(
    parts=st.lists(
        st.one_of(
            st.sampled_from(["text/plain", " charset=UTF-8", "charset", "CharSet = Latin-1 ", ""]),
            st.sampled_from([' charset="utf-8"', " charset*=utf-8''x", " charset=<a>", "a=b=c"]),
            st.text(st.sampled_from('ab=;" \\*<>,\t\xe9-'), max_size=8),
        ),
        max_size=4,
    ),
    repeated=st.booleans(),
)
def test_the_charset_is_read_as_httpx_reads_it(parts: list[str], repeated: bool) -> None:
    from httpx._models import _parse_content_type_charset

    from waitfor.kinds.http.judge import charset

    value = ";".join(parts)
    raw = [(b"Content-Type", value.encode("latin-1"))] * (2 if repeated else 1)
    response = httpx.Response(200, headers=raw)
    assert charset(response.headers.multi_items()) == response.charset_encoding
    assert charset([("content-type", value)]) == _parse_content_type_charset(value)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b'{"a": NaN}', "NaN is not JSON"),
        (b'{"a": Infinity}', "Infinity is not JSON"),
        (b'{"a": -Infinity}', "-Infinity is not JSON"),
        (b'{"a": 1e400}', "number out of range (1e400)"),
    ],
)
def test_a_body_rfc_8259_refuses_is_not_ready_on_either_path(body: bytes, why: str) -> None:
    """Python's json module reads these (1e400 as infinity): the quick attempt must not call
    them ready, and the full path says why they are not JSON."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    with peer(answer) as (url, _):
        quick, full = quick_and_full(f"{url}/#json=a")
    assert quick is None
    assert full == Outcome.down(f"HTTP 200 but the body is not JSON: {why}")
