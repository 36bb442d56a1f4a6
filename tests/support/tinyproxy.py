"""Debian's tinyproxy, a real HTTP proxy (forwarding and CONNECT), unprivileged on a free
loopback port, with optional Basic credentials; the requests it saw are read from its log."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.servers import ServerProcess

TINYPROXY = shutil.which("tinyproxy") or "/usr/bin/tinyproxy"
#: a request line as tinyproxy logs it: "Request (file descriptor 6): GET http://h/ HTTP/1.1"
_REQUEST = re.compile(r"Request \(file descriptor \d+\): (\S+) (\S+) HTTP/1\.[01]")


class Tinyproxy(ServerProcess):
    def __init__(self, root: Path, user: str | None = None, password: str | None = None) -> None:
        super().__init__(root)
        self.credentials = (user, password) if user is not None else None

    def command(self) -> list[str]:
        log = self.root / "tinyproxy.log"
        lines = [
            f"Port {self.port}",
            "Listen 127.0.0.1",
            "Timeout 30",
            f'LogFile "{log}"',
            "LogLevel Info",
            "MaxClients 50",
            "Allow 127.0.0.1",
            "DisableViaHeader Yes",
            # no ConnectPort line: CONNECT to any port (the test servers' free ones)
        ]
        if self.credentials is not None:
            lines.append(f"BasicAuth {self.credentials[0]} {self.credentials[1]}")
        config = self.root / "tinyproxy.conf"
        config.write_text("\n".join(lines) + "\n")
        return [TINYPROXY, "-d", "-c", str(config)]

    @property
    def url(self) -> str:
        if self.credentials is None:
            return f"http://127.0.0.1:{self.port}"
        user, password = self.credentials
        return f"http://{user}:{password}@127.0.0.1:{self.port}"

    def requests(self) -> list[tuple[str, str]]:
        """(method, target) of every request the proxy read, in order: ``GET http://h:p/x``
        (absolute form), ``CONNECT h:p``."""
        log = self.root / "tinyproxy.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        return _REQUEST.findall(text)


@contextmanager
def tinyproxy(
    root: Path, user: str | None = None, password: str | None = None
) -> Iterator[Tinyproxy]:
    root.mkdir(parents=True, exist_ok=True)
    proxy = Tinyproxy(root, user, password)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
