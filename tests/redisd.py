"""Throw-away redis-server and memcached processes on free loopback ports, in temp dirs."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.servers import free_port


def unavailable_reason(*tools: str) -> str | None:
    for tool in tools:
        if shutil.which(tool) is None:
            package = {"memcached": "memcached", "redis-cli": "redis-tools"}.get(
                tool, "redis-server"
            )
            return f"{tool} is not installed (the test command installs {package})"
    return None


class Server:
    """A server process; ``start`` returns once it accepts TCP connections on ``port``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, wait: bool = True) -> None:
        log = (self.root / "server.log").open("ab")
        self.process = subprocess.Popen(self.command(), stdout=log, stderr=log)
        if wait:
            self.wait_listening()

    def wait_listening(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.process is not None and self.process.poll() is not None:
                    log = (self.root / "server.log").read_text()
                    raise RuntimeError(f"{self.command()[0]} exited:\n{log}") from None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class RedisServer(Server):
    def __init__(self, root: Path, *settings: str) -> None:
        super().__init__(root)
        self.settings = list(settings)
        self.tls = False

    def command(self) -> list[str]:
        ports = (
            ["--port", "0", "--tls-port", str(self.port)]
            if self.tls
            else ["--port", str(self.port)]
        )
        return [
            "redis-server",
            *ports,
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.root),
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            *self.settings,
        ]

    def cli(self, *args: str, password: str = "", user: str = "") -> str:
        """redis-cli's output for one command (the oracle, and the tests' admin client)."""
        command = ["redis-cli", "-h", "127.0.0.1", "-p", str(self.port)]
        command += ["--user", user] if user else []
        command += ["-a", password, "--no-auth-warning"] if password else []
        return subprocess.run(
            [*command, *args], capture_output=True, text=True, timeout=30
        ).stdout.strip()


class Memcached(Server):
    def __init__(self, root: Path, *settings: str) -> None:
        super().__init__(root)
        self.settings = list(settings)

    def command(self) -> list[str]:
        command = ["memcached", "-l", "127.0.0.1", "-p", str(self.port), "-U", "0", "-u", "root"]
        return [*command, *self.settings]
