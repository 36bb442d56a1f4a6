"""Hostile peers for the kinds that speak a protocol natively: at worst "not ready", never a crash.

A real TCP server sends fuzzed bytes (after a well-formed MySQL greeting too, so the login's
answers get fuzzed as well), then hangs up; the real checks must answer with an Outcome within
the attempt's budget.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.attempts import probe
from tests.servers import scripted_peer
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
def hostile_server(answer: bytes) -> Iterator[int]:
    """Sends ``answer`` to every client, reads a little, then hangs up."""

    def say(conn: socket.socket) -> None:
        conn.settimeout(0.2)
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
