"""Throw-away MariaDB servers made from the installed binaries, on free loopback ports.

mariadb-install-db runs once per test session into a template (well under a second with small
InnoDB logs); each server is a copy of it, configured per test and started when the test says, so
a waiter can be started first. As root the server runs as root (``--user=root``). The test talks
to it as root over its own unix socket, so what a test does over TCP never depends on that.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.ports import free_port

SMALL = ("--innodb-log-file-size=4M", "--innodb-buffer-pool-size=8M")


def server_binary() -> str | None:
    for name in ("mariadbd", "mysqld"):
        for folder in ("/usr/sbin", "/usr/libexec", "/usr/bin"):
            if Path(folder, name).exists():
                return str(Path(folder, name))
    return shutil.which("mariadbd") or shutil.which("mysqld")


def unavailable_reason() -> str | None:
    if server_binary() is None or shutil.which("mariadb-install-db") is None:
        return "MariaDB server is not installed (the test command installs mariadb-server)"
    if shutil.which("mysqladmin") is None:
        return "mysqladmin is not installed (the test command installs mariadb-client)"
    return None


def make_template() -> Path:
    root = Path(tempfile.mkdtemp(prefix="waitfor-mariadb-template-"))
    data = root / "data"
    subprocess.run(
        [
            "mariadb-install-db",
            "--no-defaults",
            f"--datadir={data}",
            "--user=root",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            *SMALL,
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return data


class MariaDB:
    """One server in its own temp dir; ``netns`` runs it inside that network namespace."""

    def __init__(self, template: Path, root: Path, netns: str | None = None) -> None:
        self.root = root
        self.data = root / "data"
        subprocess.run(["cp", "-a", str(template), str(self.data)], check=True)
        self.socket = root / "mysqld.sock"
        self.log = root / "error.log"
        self.port = 3306 if netns else free_port()
        self.netns = netns
        self.settings: list[str] = []
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        binary = server_binary()
        assert binary is not None
        command = [
            binary,
            "--no-defaults",
            f"--datadir={self.data}",
            "--user=root",
            f"--port={self.port}",
            f"--bind-address={'0.0.0.0' if self.netns else '127.0.0.1'}",
            f"--socket={self.socket}",
            f"--pid-file={self.root / 'mysqld.pid'}",
            f"--log-error={self.log}",
            "--skip-log-bin",
            "--skip-name-resolve" if not self.netns else "--host-cache-size=128",
            *SMALL,
            *self.settings,
        ]
        return ["ip", "netns", "exec", self.netns, *command] if self.netns else command

    def start(self, wait: bool = True) -> None:
        self.process = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL)
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not self.alive():
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"mariadbd exited:\n{self.log.read_text()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"mariadbd did not start:\n{self.log.read_text()}")
            time.sleep(0.05)

    def alive(self) -> bool:
        ping = ["mysqladmin", "--no-defaults", f"--socket={self.socket}", "-uroot", "ping"]
        return subprocess.run(ping, capture_output=True, timeout=30).returncode == 0

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def sql(self, text: str) -> str:
        command = ["mysql", "--no-defaults", f"--socket={self.socket}", "-uroot", "-NBe", text]
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout

    def status(self, *names: str) -> dict[str, int]:
        quoted = ", ".join(f"'{name}'" for name in names)
        rows = self.sql(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({quoted})")
        return {name: int(value) for name, value in (r.split("\t") for r in rows.splitlines())}

    def url(self, database: str = "", user: str = "root", extra: str = "") -> str:
        return f"mysql://{user}@127.0.0.1:{self.port}/{database}{extra}"
