"""Throw-away PostgreSQL clusters made from the installed binaries, on free loopback ports.

initdb runs once per test session into a template; each cluster is a copy of it (about 0.1 s),
configured per test and started when the test says, so a waiter can be started first.
initdb refuses to run as root, so as root the binaries run as the ``postgres`` user.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import trustme

from tests.support.ports import free_port


def bindir() -> Path:
    found = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
    if found.returncode == 0 and Path(found.stdout.strip(), "initdb").exists():
        return Path(found.stdout.strip())
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[4]))
    if not candidates:
        raise RuntimeError("PostgreSQL server binaries not found (apt-get install postgresql)")
    return Path(candidates[-1])


def as_owner(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def chown_to_owner(path: Path) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")


def make_template() -> Path:
    root = Path(tempfile.mkdtemp(prefix="waitfor-pg-template-"))
    root.chmod(0o755)
    data = root / "data"
    data.mkdir()
    chown_to_owner(data)
    subprocess.run(
        as_owner(
            [
                str(bindir() / "initdb"),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "--no-instructions",
            ]
        ),
        check=True,
        capture_output=True,
    )
    return data


class Cluster:
    def __init__(self, template: Path, root: Path) -> None:
        root.chmod(0o755)
        chown_to_owner(root)  # the server writes its log here
        self.root = root
        self.data = root / "data"
        self.sockets = root / "sockets"
        subprocess.run(["cp", "-a", str(template), str(self.data)], check=True)
        self.sockets.mkdir()
        chown_to_owner(self.sockets)
        self.port = free_port()
        self.log = root / "server.log"
        self.configure(
            port=self.port,
            listen_addresses="'127.0.0.1'",
            unix_socket_directories=f"'{self.sockets}'",
            fsync="off",
            logging_collector="off",
        )

    def configure(self, **settings: object) -> None:
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{key} = {value}\n" for key, value in settings.items())

    def hba(self, *lines: str) -> None:
        (self.data / "pg_hba.conf").write_text("".join(f"{line}\n" for line in lines))

    def write_file(self, name: str, content: bytes, mode: int = 0o600) -> Path:
        path = self.data / name
        path.write_bytes(content)
        path.chmod(mode)
        chown_to_owner(path)
        return path

    def pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        command = [str(bindir() / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), *args]
        result = subprocess.run(as_owner(command), capture_output=True, timeout=60)
        if check and result.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"pg_ctl {args} failed: {result.stderr.decode()}\n{log}")
        return result

    def start_tls_only(self, ca: trustme.CA, *names: str) -> None:
        """Starts it serving TCP clients over TLS only, with a certificate of ``ca`` for
        ``names``; local (Unix socket) clients are trusted."""
        cert = ca.issue_cert(*names)
        self.write_file("server.crt", b"".join(b.bytes() for b in cert.cert_chain_pems), 0o644)
        self.write_file("server.key", cert.private_key_pem.bytes())
        self.configure(ssl="on", ssl_cert_file="'server.crt'", ssl_key_file="'server.key'")
        self.hba("local all all trust", "hostssl all all 127.0.0.1/32 trust")
        self.start()

    def start(self, wait: bool = True) -> None:
        self.pg_ctl("start", "-w" if wait else "-W")

    def stop(self, mode: str = "fast", wait: bool = True) -> None:
        self.pg_ctl("stop", "-m", mode, "-w" if wait else "-W", check=False)

    def psql(self, sql: str, database: str = "postgres") -> str:
        command = [
            str(bindir() / "psql"),
            "-h",
            str(self.sockets),
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-d",
            database,
            "-Atc",
            sql,
        ]
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout

    def url(self, database: str = "postgres", user: str = "postgres", extra: str = "") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}{extra}"
