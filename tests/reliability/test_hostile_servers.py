"""Hostile peers for the kinds that speak a protocol natively: at worst "not ready", never a crash.

A real TCP server sends fuzzed bytes (after a well-formed MySQL greeting too, so the login's
answers get fuzzed as well), then hangs up; the real checks must answer with an Outcome within
the attempt's budget.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.attempts import probe
from tests.support.servers import scripted_peer
from waitfor import WaitTimeout, wait_for
from waitfor.kind import Outcome

EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "400")) // 4
BUDGET = 2.0


def mysql_packet(sequence: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([sequence]) + payload


GREETING = mysql_packet(
    0,
    b"\x0a8.0.99-fuzz\0"
    + struct.pack("<I", 7)
    + b"abcdefgh\0"
    + struct.pack("<HBHH", 0xF7FF, 33, 2, 0x81FF)
    + bytes([21])
    + bytes(10)
    + b"ijklmnopqrst\0mysql_native_password\0",
)


@contextmanager
def hostile_server(answer: bytes, listen: float = 0.2) -> Iterator[int]:
    """Sends ``answer`` to every client, reads a little (up to ``listen`` seconds for the client's
    first words), then hangs up."""

    def say(conn: socket.socket) -> None:
        conn.settimeout(listen)
        conn.sendall(answer)
        conn.recv(4096)

    with scripted_peer(say) as port:
        yield port


def attempt(url: str) -> tuple[Outcome, float]:
    started = time.monotonic()
    return probe(url, BUDGET), time.monotonic() - started


AMQP_START = bytes.fromhex(  # Connection.Start offering PLAIN: the login's answers get fuzzed
    "0100000000002a000a000a00090000000e0770726f647563745300000001"
    "4600000005504c41494e00000005656e5f5553ce"
)
NATS_INFO = b'INFO {"version":"9.9.9","auth_required":true,"headers":true}\r\n'
MQTT_CONNACK = b"\x20\x02\x00\x00"

answers = st.one_of(
    st.binary(max_size=200),
    st.binary(max_size=200).map(lambda tail: GREETING + tail),
    st.sampled_from([AMQP_START, NATS_INFO, MQTT_CONNACK]).flatmap(
        lambda head: st.binary(max_size=200).map(lambda tail: head + tail)
    ),
    st.lists(
        st.sampled_from([b"PONG", b"PING", b"+OK", b"-ERR 'x'", b"MSG a 1 5", b"HMSG a 1 9 2"]),
        max_size=4,
    ).map(lambda lines: NATS_INFO + b"\r\n".join(lines) + b"\r\n"),
    st.lists(
        st.sampled_from([b"+PONG", b"-LOADING x", b"$-1", b"$99999999", b"*3", b":x", b"VERSION"]),
        max_size=4,
    ).map(lambda lines: b"\r\n".join(lines) + b"\r\n"),
)
urls = st.sampled_from(
    [
        "mysql://u:p@127.0.0.1:{port}",
        "mysql://127.0.0.1:{port}",
        "redis://:p@127.0.0.1:{port}#key=k&role=master",
        "redis://127.0.0.1:{port}",
        "memcached://u:p@127.0.0.1:{port}",
        "memcached://127.0.0.1:{port}",
        "amqp://u:p@127.0.0.1:{port}/vhost",
        "amqp://127.0.0.1:{port}#mode=ping",
        "mqtt://u:p@127.0.0.1:{port}",
        "nats://u:p@127.0.0.1:{port}#jetstream",
        "nats://t0ken@127.0.0.1:{port}",
    ]
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(answers, urls)
def test_fuzzed_answers_are_an_outcome_in_time(answer: bytes, url: str) -> None:
    with hostile_server(answer) as port:
        outcome, took = attempt(url.format(port=port))
    assert isinstance(outcome, Outcome)
    assert outcome.reason
    assert "\n" not in outcome.reason
    assert took < BUDGET + 1.0
    if not outcome.ready:
        assert not outcome.permanent  # a hostile peer is never the user's configuration error


@pytest.mark.parametrize("scheme", ["amqp", "mqtt", "nats"])
def test_a_listener_that_never_speaks_times_out(scheme: str) -> None:
    """For the kinds whose client speaks first: a listener that accepts and never answers ends a
    1 s wait of 0.4 s attempts in under 3 s, its reason "timed out ..."."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(WaitTimeout) as info:
            wait_for(f"{scheme}://127.0.0.1:{port}", timeout=1, attempt_timeout=0.4)
    assert time.monotonic() - started < 3
    assert info.value.results[0].reason.startswith("timed out")


def malformed_greetings() -> list[bytes]:
    """MySQL greetings cut at every byte, with versions no server has, and garbage: each a
    complete packet, so the client has to parse it."""
    payload = GREETING[4:]
    cut = [payload[:size] for size in range(len(payload))]
    versions = [b"\x0a" + version + payload[payload.index(b"\0") :] for version in (b"", b"x.1")]
    versions += [b"\x0a\xb2" + payload[2:], b"\x09" + payload[1:]]  # "²", protocol 9
    garbage = [random.Random(seed).randbytes(size) for seed, size in enumerate((1, 8, 40, 90))]
    garbage += [b"\x0a" + random.Random(seed).randbytes(60) for seed in range(8)]
    return [mysql_packet(0, greeting) for greeting in cut + versions + garbage]


def test_query_mode_on_malformed_greetings_through_the_cli() -> None:
    """Query mode (PyMySQL) gives each a reason, as ping mode does: the CLI times out (124) with
    one line per target, no traceback."""
    greetings = malformed_greetings()
    with contextlib.ExitStack() as stack:
        # the client's login read before the hang-up (one coming after 0.2 s met a reset)
        ports = [stack.enter_context(hostile_server(g, listen=5)) for g in greetings]
        run = subprocess.run(
            [sys.executable, "-m", "waitfor", "-t", "8", "-q"]
            + [f"mysql://u:pw-x9@127.0.0.1:{port}/#mode=query" for port in ports],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert "Traceback" not in run.stderr
    assert run.returncode == 124, run.stderr
    reasons = set()
    for port in ports:
        [line] = [line for line in run.stderr.splitlines() if f":{port}#" in line]
        reason = line.partition("attempts): ")[2] or line.partition("attempt): ")[2]
        if in_flight := re.fullmatch(r"timed out after [\d.]+s; previous attempt: (.*)", reason):
            reason = in_flight[1]  # one more attempt was under way at the deadline
        reasons.add(reason)
    # Cut greetings PyMySQL can still log in with meet the peer's hang-up; no attempt is stuck.
    assert reasons <= {
        "not a MySQL server (malformed greeting)",
        "not a MySQL server (malformed packet during the login)",
        "Lost connection to MySQL server during query (2013)",
        *(
            f"not a MySQL server (its greeting is protocol {n}, not protocol 10)"
            for n in range(256)
        ),
    }


def flooding(greeting: bytes, frame: bytes) -> Callable[[socket.socket], None]:
    """A peer that greets, then sends ``frame`` without end (until the client hangs up)."""

    def answer(conn: socket.socket) -> None:
        conn.sendall(greeting)
        chunk = frame * (65536 // len(frame))
        while True:
            conn.sendall(chunk)

    return answer


FLOODS = {
    "nats://u:pw-x9@127.0.0.1:{port}": flooding(NATS_INFO, b"+OK\r\n"),
    "amqp://u:pw-x9@127.0.0.1:{port}/": flooding(AMQP_START, bytes([8, 0, 0, 0, 0, 0, 0, 0xCE])),
}


@pytest.mark.parametrize("url", FLOODS)
def test_a_flood_leaves_the_deadline_and_signals_alone(url: str) -> None:
    """A peer that sends heartbeats or +OK without end: each attempt gives up after a bounded
    number of reads, the deadline holds and SIGTERM is heard at once."""
    with scripted_peer(FLOODS[url]) as port:
        command = [sys.executable, "-m", "waitfor", "-q", url.format(port=port)]
        started = time.monotonic()
        run = subprocess.run([*command, "-t", "2"], capture_output=True, text=True, timeout=30)
        took = time.monotonic() - started
        assert run.returncode == 124, run.stderr
        assert "the server kept sending without answering" in run.stderr
        assert took < 2 + 0.5 + 0.3  # the deadline, the allowance, and the interpreter's start
        waiting = subprocess.Popen([*command, "-t", "30"], stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1.0)  # attempts under way
            signalled = time.monotonic()
            waiting.send_signal(signal.SIGTERM)
            assert waiting.wait(timeout=10) == 143
            assert time.monotonic() - signalled < 0.3
        finally:
            waiting.kill()
            waiting.wait()
