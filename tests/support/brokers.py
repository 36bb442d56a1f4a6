"""Message brokers for tests: our own Mosquitto and nats-server instances, RabbitMQ users/vhosts.

The machine's shared brokers (RabbitMQ 5672, Mosquitto 1883, NATS 4222 with JetStream) are never
reconfigured. A test needing another state starts its own Mosquitto or nats-server from the
installed binaries on a free port in a temp dir. A RabbitMQ node is too heavy to start per test,
so RabbitMQ states are made with users and vhosts of unique random names, which nothing else
uses, deleted afterwards pass or fail (:class:`RabbitScratch`), on the machine's broker, or on one
node of our own per test module where none runs (:class:`RabbitNode`, a fresh machine).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.ports import free_port
from tests.support.servers import ServerProcess, listening, scripted_peer

RABBITMQ_PORT, MOSQUITTO_PORT, NATS_PORT = 5672, 1883, 4222


class Broker(ServerProcess):
    """A broker process of our own (its output in ``broker.log``)."""

    LOG = "broker.log"


class Mosquitto(Broker):
    """``users`` set: a password file and ``allow_anonymous false``; else anonymous."""

    def __init__(
        self,
        root: Path,
        users: dict[str, str] | None = None,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        super().__init__(root)
        self.users = users
        self.tls = tls  # (certificate chain, key)

    def command(self) -> list[str]:
        # As root, mosquitto would switch to its own user, which cannot read our temp dir.
        lines = [f"user {getpass.getuser()}", f"listener {self.port} 127.0.0.1"]
        if self.tls is not None:
            lines += [f"certfile {self.tls[0]}", f"keyfile {self.tls[1]}"]
        if self.users is None:
            lines.append("allow_anonymous true")
        else:
            passwords = self.root / "passwords"
            passwords.write_text("")
            for user, password in self.users.items():
                subprocess.run(
                    ["mosquitto_passwd", "-b", str(passwords), user, password], check=True
                )
            lines += ["allow_anonymous false", f"password_file {passwords}"]
        conf = self.root / "mosquitto.conf"
        conf.write_text("\n".join(lines) + "\n")
        return ["mosquitto", "-c", str(conf)]


class NatsServer(Broker):
    def __init__(
        self,
        root: Path,
        *,
        user: str | None = None,
        password: str | None = None,
        token: str | None = None,
        jetstream: bool = False,
        tls: tuple[Path, Path] | None = None,
        monitor: bool = False,
    ) -> None:
        super().__init__(root)
        self.options: list[str] = []
        if user is not None and password is not None:
            self.options += ["--user", user, "--pass", password]
        if token is not None:
            self.options += ["--auth", token]
        if jetstream:
            self.options += ["-js", "-sd", str(root / "jetstream")]
        if tls is not None:
            self.options += ["--tls", "--tlscert", str(tls[0]), "--tlskey", str(tls[1])]
        self.monitor_port = free_port() if monitor else None
        if self.monitor_port is not None:
            self.options += ["-m", str(self.monitor_port)]

    def command(self) -> list[str]:
        return ["nats-server", "-a", "127.0.0.1", "-p", str(self.port), *self.options]

    def client_count(self) -> int:
        """Connections the server holds now, from its monitoring endpoint (/connz)."""
        import json
        import urllib.request

        assert self.monitor_port is not None
        url = f"http://127.0.0.1:{self.monitor_port}/connz"
        with urllib.request.urlopen(url, timeout=5) as answer:
            return int(json.load(answer)["num_connections"])


def jetstream_greeting(conn: socket.socket) -> None:
    """A scripted NATS peer's part up to the JetStream question: INFO, PONG to the client's
    PING, then read until it asks $JS.API.INFO (what it answers is the caller's)."""
    conn.sendall(b'INFO {"version":"9.9.9"}\r\n')
    buffer = b""
    while b"PING" not in buffer:
        buffer += conn.recv(1000)
    conn.sendall(b"PONG\r\n")
    while b"$JS.API.INFO" not in buffer:
        buffer += conn.recv(1000)


def rabbitmqctl(*args: str, node: str | None = None) -> str:
    named = ["-n", node] if node else []
    result = subprocess.run(
        ["rabbitmqctl", *named, "-q", *args], capture_output=True, text=True, timeout=60
    )
    if result.returncode != 0:
        raise RuntimeError(f"rabbitmqctl {args[0]} failed: {result.stderr.strip()}")
    return result.stdout


class RabbitNode:
    """The RabbitMQ tests use: the machine's on 5672 when it runs, else a node of our own.

    A fresh machine has RabbitMQ installed (by the test command) but maybe not running; then a
    node is started in a temp dir on free ports (~15 s) and stopped afterwards, with the epmd it
    may have started. ``node`` is None for the machine's broker (rabbitmqctl's default node).
    """

    def __init__(self) -> None:
        self.root: Path | None = None
        self.node: str | None = None
        self.port = RABBITMQ_PORT
        self.started_epmd = False

    def start(self) -> None:
        # WAITFOR_TEST_OWN_RABBITMQ=1 tries the fresh-machine path on a machine with RabbitMQ
        if listening(RABBITMQ_PORT) and not os.environ.get("WAITFOR_TEST_OWN_RABBITMQ"):
            return
        if not have("rabbitmq-server", "rabbitmqctl"):
            raise RuntimeError("RabbitMQ is not installed (the test command installs it)")
        self.started_epmd = not listening(4369)
        self.port, dist = free_port(), free_port()
        self.node = f"waitfor-test-{secrets.token_hex(3)}@localhost"
        # the server runs as the rabbitmq user: a dir of its own that it can reach and write
        self.root = root = Path(tempfile.mkdtemp(prefix="waitfor-rabbitmq-"))
        root.chmod(0o777)
        (root / "rabbitmq.conf").write_text(f"listeners.tcp.default = 127.0.0.1:{self.port}\n")
        env = {
            **os.environ,
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(dist),
            "RABBITMQ_MNESIA_BASE": str(root / "mnesia"),
            "RABBITMQ_LOG_BASE": str(root / "log"),
            "RABBITMQ_CONFIG_FILE": str(root / "rabbitmq"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(root / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(root / "pid"),
        }
        subprocess.run(["rabbitmq-server", "-detached"], env=env, check=True, timeout=60)
        deadline = time.monotonic() + 90
        while not listening(self.port):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"our RabbitMQ node did not listen in 90 s; see {root}/log")
            time.sleep(0.2)

    def ctl(self, *args: str) -> str:
        return rabbitmqctl(*args, node=self.node)

    def stop(self) -> None:
        if self.node is None:
            return
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self.ctl("stop")
        if self.started_epmd:
            subprocess.run(["epmd", "-kill"], capture_output=True, check=False)
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
        self.node = self.root = None


@contextmanager
def rabbit_node() -> Iterator[RabbitNode]:
    """A RabbitMQ node of its own, started; stopped afterwards, pass or fail."""
    node = RabbitNode()
    try:
        node.start()
        yield node
    finally:
        node.stop()


class RabbitScratch:
    """Users and vhosts with unique random names on a RabbitMQ, removed by cleanup().

    On the machine's shared broker, touching nothing anyone else uses is what makes this
    acceptable.
    """

    def __init__(self, rabbit: RabbitNode | None = None) -> None:
        self.node = rabbit.node if rabbit else None
        self.tag = secrets.token_hex(4)
        self.users: list[str] = []
        self.vhosts: list[str] = []

    def ctl(self, *args: str) -> str:
        return rabbitmqctl(*args, node=self.node)

    def name(self, what: str) -> str:
        return f"waitfor-test-{what}-{self.tag}"

    def add_user(self, user: str, password: str) -> None:
        self.users.append(user)
        self.ctl("add_user", user, password)

    def add_vhost(self, vhost: str) -> None:
        if vhost not in self.vhosts:
            self.vhosts.append(vhost)
        self.ctl("add_vhost", vhost)

    def permit(self, user: str, vhost: str) -> None:
        self.ctl("set_permissions", "-p", vhost, user, ".*", ".*", ".*")

    def connections(self, user: str) -> list[str]:
        """The broker's connection list, for one user: what a leak would leave behind."""
        output = self.ctl("list_connections", "user", "state", "--no-table-headers")
        return [line for line in output.splitlines() if line.split("\t")[0] == user]

    def cleanup(self) -> None:
        for vhost in self.vhosts:
            with contextlib.suppress(RuntimeError):
                self.ctl("delete_vhost", vhost)
        for user in self.users:
            with contextlib.suppress(RuntimeError):
                self.ctl("delete_user", user)


@contextmanager
def tls_terminator(backend_port: int, certificate: tuple[Path, Path]) -> Iterator[int]:
    """A TLS-terminating proxy (as stunnel or a load balancer would be) in front of a port.

    Yields the TLS port. Each accepted connection is handshaken and relayed in its own thread.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(certificate[0]), str(certificate[1]))

    def relay(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def serve_one(client: socket.socket) -> None:
        client.settimeout(10)
        with (
            context.wrap_socket(client, server_side=True) as tls,
            socket.create_connection(("127.0.0.1", backend_port)) as backend,
        ):
            tls.settimeout(None)
            back = threading.Thread(target=relay, args=(backend, tls), daemon=True)
            back.start()
            relay(tls, backend)
            back.join(10)

    with scripted_peer(serve_one) as port:
        yield port


def have(*binaries: str) -> bool:
    return all(shutil.which(b) for b in binaries)
