"""Memory while waiting on a TLS peer whose handshake fails: nothing kept from attempt to attempt.

An https target with an untrusted certificate fails every handshake; each failure used to leave
its connection (SSLObject, MemoryBIOs, socket) in a reference cycle, freed only when the cyclic
collector ran: OpenSSL's C heap grew and fragmented attempt after attempt (34 KB/min at 45
minutes of a real wait). The long-run measurement of every kind is ``python -m bench.rss``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import ssl
import subprocess
import sys

import pytest
import trustme

from tests.support.servers import scripted_peer
from waitfor import parse_target
from waitfor.base.deadline import Deadline
from waitfor.core.registry import check_class


def untrusted_peer(conn: socket.socket) -> None:
    """A TLS server whose certificate no client trusts (a CA of its own, never shared)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _CERT.configure_cert(context)
    with context.wrap_socket(conn, server_side=True) as tls:
        tls.recv(1)


_CERT = trustme.CA().issue_cert("localhost", "127.0.0.1")


@pytest.mark.parametrize("scheme", ["https", "rediss", "amqps", "grpcs"])
def test_a_failed_handshake_leaves_nothing_for_the_collector(scheme: str) -> None:
    """Freed when the attempt ends, by reference counting: no cycle holds the TLS objects."""

    async def attempts(port: int) -> int:
        target = parse_target(f"{scheme}://localhost:{port}/")
        check = check_class(target.scheme)(target)
        try:
            outcome = await check.probe(Deadline.after(5.0))  # imports, first-use caches
            assert "not trusted" in outcome.reason, outcome
            gc.collect()
            gc.disable()
            try:
                for _ in range(5):
                    outcome = await check.probe(Deadline.after(5.0))
                    assert "not trusted" in outcome.reason, outcome
                await asyncio.sleep(0.05)  # the last connection's close, scheduled by its abort
                return sum(isinstance(o, ssl.SSLObject | ssl.MemoryBIO) for o in gc.get_objects())
            finally:
                gc.enable()
        finally:
            await check.aclose()

    with scripted_peer(untrusted_peer) as port:
        assert asyncio.run(attempts(port)) == 0


#: run in a fresh process: the runner's own loop, as fast as the backoff allows, RSS and glibc's
#: heap read after the warm-up attempts and again after the measured ones. The cyclic collector
#: is off meanwhile: memory an attempt leaves to it is counted as kept (it is kept, in a real
#: wait, until a collection happens to run, and the heap fragments around it meanwhile).
ACCELERATED = """
import asyncio, ctypes, gc, json, os, sys
from waitfor import parse_target
from waitfor.core import runner
from waitfor.base.backoff import Backoff
from waitfor.errors import WaitTimeout

url, warm, measured = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split())]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2

def sample():
    with open("/proc/self/statm") as f:
        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return {"rss": rss, "heap": libc.mallinfo2().arena}

samples, seen = [], [0]
def on_event(event):
    if event.type.name == "NOT_READY":
        seen[0] += 1
        if seen[0] == warm:
            gc.collect()
            gc.disable()  # what an attempt holds must be freed with it, not by a collection
        if seen[0] in (warm, warm + measured):
            samples.append(sample())
            if len(samples) == 2:
                raise SystemExit(json.dumps(samples))

backoff = Backoff(initial=0.001, maximum=0.001)
try:
    asyncio.run(runner.run([parse_target(url)], timeout=120, attempt_timeout=5,
                           backoff=backoff, on_event=on_event))
except WaitTimeout:
    raise SystemExit("too slow: " + str(seen[0]) + " attempts")
"""


@pytest.mark.timeout(120)
def test_rss_stays_flat_across_failed_handshakes() -> None:
    """300 failed handshakes after 100 of warm-up: each kept ~65 KiB before the fix (21 MiB in
    all), now RSS grows by about 300 KiB and glibc's heap not at all."""
    warm, measured = 100, 300
    with scripted_peer(untrusted_peer) as port:
        url = f"https://localhost:{port}/"
        done = subprocess.run(
            [sys.executable, "-c", ACCELERATED, url, str(warm), str(measured)],
            capture_output=True,
            text=True,
            timeout=110,
        )
    assert done.returncode == 1, done.stderr[-2000:]  # SystemExit(the samples)
    assert done.stderr.startswith("["), done.stderr[-2000:]
    before, after = json.loads(done.stderr)
    grown = {name: after[name] - before[name] for name in before}
    assert grown["heap"] < 1024 * 1024, grown
    assert grown["rss"] < 2 * 1024 * 1024, grown
