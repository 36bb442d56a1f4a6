"""TCP: a connection is accepted on HOST:PORT. Connects, then closes; sends nothing."""

from __future__ import annotations

from waitfor.kind import Address, Check, Options, Outcome, describe_os_error, host_port, urls

TYPE_CHECKING = False
if TYPE_CHECKING:
    import _socket

    from waitfor.kind import Deadline


class TcpCheck(Check[Options]):
    USAGE = (("tcp://HOST:PORT", "a connection is accepted (IPv6: tcp://[::1]:5432)"),)

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        parts = urls.split(url)
        if parts.username is not None or parts.password is not None:
            raise ValueError("tcp targets take no user or password")
        if parts.path not in ("", "/") or parts.query:
            raise ValueError("tcp targets are only tcp://HOST:PORT")
        host = urls.host(parts)
        port = urls.port(parts, default=None)
        return Address(host, port, f"tcp://{host_port(host, port)}")

    async def probe(self, deadline: Deadline) -> Outcome:
        return await connect_any(self.target.host, self.target.port or 0, deadline)

    def probe_now(self, deadline: Deadline) -> Outcome | None:
        from waitfor.net import blocking

        host, port = self.target.host, self.target.port or 0
        sock = blocking.connect(host, port, deadline)
        if sock is None:
            return None
        outcome = _connected(sock, host, port)
        return outcome if outcome.ready else None


async def connect_any(host: str, port: int, deadline: Deadline) -> Outcome:
    """Try every address ``host`` resolves to, in order, sharing the time left between them."""
    from waitfor.net import aio  # asyncio: not imported when a target is only parsed

    try:
        sock = await aio.connect(host, port, deadline)
    except aio.NetError as exc:
        return Outcome.down(str(exc))
    return _connected(sock, host, port)


def _connected(sock: _socket.socket, host: str, port: int) -> Outcome:
    """Ready, naming the address that accepted; the socket is closed either way."""
    try:
        peer = sock.getpeername()
        return Outcome.up(f"connected to {host_port(str(peer[0]), int(peer[1]))}")
    except OSError as exc:  # reset between connecting and asking
        return Outcome.down(f"{host}:{port} {describe_os_error(exc)}")
    finally:
        sock.close()
