"""TCP: a connection is accepted on HOST:PORT. Connects, then closes; sends nothing."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

from waitfor.checks.base import Check, Outcome, describe_os_error, host_port

SockAddr = tuple[Any, ...]  # (host, port) or (host, port, flowinfo, scope_id)


class TcpCheck(Check):
    async def probe(self, budget: float) -> Outcome:
        return await connect_any(self.target.host, self.target.port or 0, budget)


async def connect_any(host: str, port: int, budget: float) -> Outcome:
    """Try every address ``host`` resolves to, in order, sharing ``budget`` between them."""
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + budget
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return Outcome.down(f"cannot resolve {host}: {exc.strerror}")
    reasons = []
    for index, (family, kind, proto, _, address) in enumerate(infos):
        # Split what is left evenly, so one silent address cannot starve the others.
        share = (deadline - time.monotonic()) / (len(infos) - index)
        error = await _connect(loop, family, kind, proto, address, max(share, 0.0))
        shown = host_port(str(address[0]), int(address[1]))
        if error is None:
            return Outcome.up(f"connected to {shown}")
        reasons.append(f"{shown} {error}")
    return Outcome.down("; ".join(reasons))


async def _connect(
    loop: asyncio.AbstractEventLoop,
    family: int,
    kind: int,
    proto: int,
    address: SockAddr,
    timeout: float,
) -> str | None:
    """None when connected, else a short reason; the socket is closed either way."""
    sock = socket.socket(family, kind, proto)
    try:
        sock.setblocking(False)
        async with asyncio.timeout(timeout):
            await loop.sock_connect(sock, address)
        return None
    except TimeoutError:
        return f"timed out after {timeout:.1f}s"
    except OSError as exc:
        return describe_os_error(exc)
    finally:
        sock.close()
