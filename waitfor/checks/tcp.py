"""TCP: a connection is accepted on HOST:PORT. Connects, then closes; sends nothing."""

from __future__ import annotations

from waitfor.checks import net
from waitfor.checks.base import Check, Outcome, describe_os_error, host_port


class TcpCheck(Check):
    async def probe(self, budget: float) -> Outcome:
        return await connect_any(self.target.host, self.target.port or 0, budget)


async def connect_any(host: str, port: int, budget: float) -> Outcome:
    """Try every address ``host`` resolves to, in order, sharing ``budget`` between them."""
    try:
        sock = await net.connect(host, port, budget)
    except net.NetError as exc:
        return Outcome.down(str(exc))
    try:
        peer = sock.getpeername()
        return Outcome.up(f"connected to {host_port(str(peer[0]), int(peer[1]))}")
    except OSError as exc:  # reset between connecting and asking
        return Outcome.down(f"{host}:{port} {describe_os_error(exc)}")
    finally:
        sock.close()
