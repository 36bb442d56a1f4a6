"""Throw-away redis-server and memcached processes on free loopback ports, in temp dirs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.support.servers import ServerProcess


def unavailable_reason(*tools: str) -> str | None:
    for tool in tools:
        if shutil.which(tool) is None:
            package = {"memcached": "memcached", "redis-cli": "redis-tools"}.get(
                tool, "redis-server"
            )
            return f"{tool} is not installed (the test command installs {package})"
    return None


class RedisServer(ServerProcess):
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


class Memcached(ServerProcess):
    def __init__(self, root: Path, *settings: str) -> None:
        super().__init__(root)
        self.settings = list(settings)

    def command(self) -> list[str]:
        command = ["memcached", "-l", "127.0.0.1", "-p", str(self.port), "-U", "0", "-u", "root"]
        return [*command, *self.settings]
