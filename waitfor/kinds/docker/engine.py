"""The Docker Engine API (and Podman's, which speaks it) over the local socket: where the engine
listens, one container's inspection, and its logs as lines.

No Docker SDK: httpx over waitfor's network layer (:mod:`waitfor.net.httptransport`), the http
kind's transport, on the engine's Unix socket (or plain TCP when ``DOCKER_HOST`` says
``tcp://``). Paths are unversioned (``/containers/NAME/json``): every engine answers them in
its own current version, and no engine refuses them as too new or too old.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncGenerator, Iterator

from waitfor.kind import Value, sanitize, unquote

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from waitfor.kind import Deadline

#: where an engine listens when DOCKER_HOST is not set: Docker's socket, then rootful Podman's
DEFAULT_SOCKETS = ("/var/run/docker.sock", "/run/podman/podman.sock")
#: an inspection is a few KiB; one with thousands of labels or mounts stays well under this
INSPECT_LIMIT = 4 * 1024 * 1024
#: log bytes searched at once; the next attempt goes on from the last line searched
LOG_BATCH = 256 * 1024


class Endpoint(Value):
    """How to reach the engine: a Unix socket path, or a host and port (plain HTTP)."""

    socket: str = ""  # "" with DOCKER_HOST=tcp://, or when the default sockets are looked for
    host: str = ""
    port: int = 0

    @property
    def shown(self) -> str:
        return self.socket if self.socket else f"tcp://{self.host}:{self.port}"


class EngineError(Exception):
    """The engine could not be asked, or answered other than the API says; the text says why."""


class NoSuchContainer(EngineError):
    """The engine answered 404: it has no container of that name (yet)."""


def endpoint_from_env(environ: Any = os.environ) -> Endpoint | None:
    """DOCKER_HOST as the docker CLI reads it; None when unset (look for the default sockets).

    ValueError (one line, quoting nothing of the variable but its scheme: an ``ssh://`` one
    names a user) for a form this kind does not speak.
    """
    value = environ.get("DOCKER_HOST", "").strip()
    if not value:
        return None
    scheme, sep, rest = value.partition("://")
    scheme = scheme.lower()
    if not sep:
        raise ValueError("DOCKER_HOST must be unix:///path/to.sock or tcp://HOST:PORT")
    if scheme == "unix":
        path = unquote(rest)
        if not path.startswith("/") or "\0" in path or len(os.fsencode(path)) > 107:
            raise ValueError("DOCKER_HOST unix:// must name an absolute socket path")
        return Endpoint(socket=path)
    if scheme == "tcp":
        if environ.get("DOCKER_TLS_VERIFY", "").strip() not in ("", "0"):
            raise ValueError(
                "DOCKER_HOST tcp:// with DOCKER_TLS_VERIFY: TLS to the engine is not supported "
                "(use its Unix socket)"
            )
        from waitfor.kind import standard_address

        if "@" in rest or rest.rstrip("/").count("/"):
            raise ValueError("DOCKER_HOST tcp:// must be tcp://HOST[:PORT]")
        try:
            address = standard_address("tcp", f"tcp://{rest}", default_port=2375)
        except ValueError:
            raise ValueError("DOCKER_HOST tcp:// must be tcp://HOST[:PORT]") from None
        return Endpoint(host=address.host, port=address.port or 2375)
    shown = scheme if scheme.isascii() and scheme.isalnum() and len(scheme) <= 10 else "this"
    raise ValueError(f"DOCKER_HOST {shown}:// is not supported (unix:// or tcp:// only)")


def find_socket() -> Endpoint | str:
    """The first default socket that exists, or why there is none (not ready: it may start)."""
    for path in DEFAULT_SOCKETS:
        if os.path.exists(path):
            return Endpoint(socket=path)
    return f"no engine socket: neither {' nor '.join(DEFAULT_SOCKETS)} exists (set DOCKER_HOST)"


class Engine:
    """One engine's client, kept for the whole wait (one connection per request)."""

    def __init__(self, endpoint: Endpoint) -> None:
        import httpx

        from waitfor.kind import host_port
        from waitfor.net import tls
        from waitfor.net.httptransport import NetTransport

        self.endpoint = endpoint
        base = f"http://{host_port(endpoint.host, endpoint.port) if endpoint.host else 'localhost'}"
        self.client = httpx.AsyncClient(
            transport=NetTransport(tls.plaintext_only_context(), uds=endpoint.socket or None),
            base_url=base,
            follow_redirects=False,
            trust_env=False,
            headers={"User-Agent": "waitfor"},
        )

    async def inspect(self, name: str, deadline: Deadline) -> dict[str, Any] | None:
        """``GET /containers/NAME/json``: the container, or None if there is no such container."""
        import json

        status, body = await self._get(f"/containers/{name}/json", deadline, INSPECT_LIMIT)
        if status == 404:
            return None
        if status != 200:
            raise self._answered(status, body)
        try:
            found = json.loads(body)
        except (ValueError, RecursionError):  # thousands of brackets: RecursionError
            raise EngineError("the engine's answer is not JSON") from None
        if not isinstance(found, dict) or not isinstance(found.get("State"), dict):
            raise EngineError("the engine's answer has no container State")
        return found

    async def log_lines(
        self, name: str, since: str, tty: bool, deadline: Deadline
    ) -> AsyncGenerator[list[bytes], None]:
        """``GET /containers/NAME/logs`` from ``since``, in batches of whole lines as they come
        (``TIMESTAMP MESSAGE`` each), at most about LOG_BATCH bytes held; NoSuchContainer."""
        import httpx

        from waitfor.net.httptransport import read_raw

        query = {"stdout": "1", "stderr": "1", "timestamps": "1"}
        if since:
            query["since"] = since
        with self._errors():
            request = self.client.build_request(
                "GET", f"/containers/{name}/logs", params=query, timeout=_left(deadline)
            )
            response = await self.client.send(request, stream=True)
            try:
                if response.status_code != 200:
                    raise self._answered(response.status_code, await read_raw(response, 65536))
                frames, text = bytearray(), bytearray()
                async for chunk in response.aiter_raw():
                    if tty:
                        text += chunk
                    else:
                        frames += chunk
                        text += demultiplex(frames)
                    if len(text) >= LOG_BATCH:
                        lines = bytes(text).split(b"\n")
                        rest = lines.pop()
                        if not lines:  # one line longer than a batch: searched as it is
                            lines, rest = [rest], b""
                        text[:] = rest
                        yield lines
                lines = bytes(text).split(b"\n")
                if not lines[-1]:
                    lines.pop()  # the last message's newline
                yield lines
            except httpx.StreamError:
                raise EngineError(f"the engine at {self.endpoint.shown} ended its logs") from None
            finally:
                await response.aclose()

    async def _get(self, path: str, deadline: Deadline, limit: int) -> tuple[int, bytes]:
        from waitfor.net.httptransport import read_raw

        with self._errors():
            request = self.client.build_request("GET", path, timeout=_left(deadline))
            response = await self.client.send(request, stream=True)
            try:
                return response.status_code, await read_raw(response, limit)
            finally:
                await response.aclose()

    def _answered(self, status: int, body: bytes) -> EngineError:
        return NoSuchContainer() if status == 404 else EngineError(_refused(status, body))

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """httpx's errors as EngineError, worded: the socket refused, the engine is slow."""
        import httpx

        from waitfor.kind import host_port
        from waitfor.net.httptransport import describe_transport_error

        where = self.endpoint.shown
        try:
            yield
        except httpx.TimeoutException:
            raise EngineError(f"the engine at {where} did not answer in time") from None
        except httpx.RemoteProtocolError:
            raise EngineError(f"the engine at {where} answered with invalid HTTP") from None
        except httpx.TransportError as exc:
            reason = describe_transport_error(exc)
            if self.endpoint.socket and reason.startswith(where):  # the socket names itself
                raise EngineError(f"engine socket {reason}") from None
            named = f"{host_port(self.endpoint.host, self.endpoint.port)} "
            reason = reason.removeprefix(named)  # as does the address, once is enough
            raise EngineError(f"engine at {where}: {reason}") from None

    async def aclose(self) -> None:
        await self.client.aclose()


def _refused(status: int, body: bytes) -> str:
    """``the engine answered HTTP 500: MESSAGE``, the message as the engine put it in JSON."""
    import json

    message = ""
    try:
        found = json.loads(body)
        if isinstance(found, dict) and isinstance(found.get("message"), str):
            message = found["message"]
    except (ValueError, RecursionError):
        pass
    message = sanitize.shown(message)[:200]
    return f"the engine answered HTTP {status}" + (f": {message}" if message else "")


def demultiplex(frames: bytearray) -> bytes:
    """The payloads of the whole frames at the start of ``frames`` (taken out of it), from the
    engine's multiplexed stream (a container without a TTY): frames of an 8-byte header
    (stream, 0, 0, 0, big-endian size) and the size's bytes. Of a cut frame, its payload so far
    once it is a batch long (its header then counts the rest): nothing held grows unbounded."""
    out = bytearray()
    offset = 0
    while offset + 8 <= len(frames):
        size = int.from_bytes(frames[offset + 4 : offset + 8], "big")
        if offset + 8 + size > len(frames):
            have = len(frames) - offset - 8
            if have >= LOG_BATCH:  # a frame larger than a batch (up to 4 GiB): as it comes
                out += frames[offset + 8 :]
                frames[offset + 4 : offset + 8] = (size - have).to_bytes(4, "big")
                del frames[offset + 8 :]
            break
        out += frames[offset + 8 : offset + 8 + size]
        offset += 8 + size
    del frames[:offset]
    return bytes(out)


def _left(deadline: Deadline) -> float:
    return max(deadline.left(), 0.001)


def since_after(stamp: bytes) -> str | None:
    """An RFC 3339 timestamp (Docker's ``...Z``, Podman's may carry an offset) as the engines'
    ``since`` (``SECONDS.NANOSECONDS``), a microsecond early: Podman reads it as a float, and
    the line it stamps is read again rather than a next one missed. None if it is not one."""
    import calendar
    import re

    match = re.fullmatch(
        rb"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)", stamp
    )
    if match is None:
        return None
    fields = [int(match.group(i)) for i in range(1, 7)]
    seconds = calendar.timegm((*fields, 0, 0, 0))
    zone = match.group(8)
    if zone != b"Z":
        sign = 1 if zone[:1] == b"+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    nanos = int((match.group(7) or b"").ljust(9, b"0")) - 1000
    if nanos < 0:
        seconds, nanos = seconds - 1, nanos + 1_000_000_000
    return f"{seconds}.{nanos:09d}"
