"""Every kind, in every mode, inside the image, against real servers on this machine.

The image keeps only the stdlib modules and shared libraries its code can reach, so a module or
library it lacks must fail here, not in a pod. Containers run as they would in a locked-down
pod: read-only root, user 65532, no shell; host networking reaches the servers on loopback.
Each registered scheme needs a row: a kind added without one fails test_every_scheme_has_a_row.
"""

from __future__ import annotations

import json
import ssl
import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.support.brokers import (
    MOSQUITTO_PORT,
    NATS_PORT,
    RABBITMQ_PORT,
    Mosquitto,
    NatsServer,
    tls_terminator,
)
from tests.support.dnsserver import DnsServer
from tests.support.grpcserver import grpc_server
from tests.support.pg import Cluster
from tests.support.podman import podman
from tests.support.ports import free_port
from tests.support.redisd import RedisServer, unavailable_reason
from tests.support.servers import Script, http_server, unix_http_server
from tests.support.tinyproxy import Tinyproxy, tinyproxy
from waitfor.core.registry import KINDS

CA_IN_IMAGE = "/run/test-ca.crt"
SYSTEM_CAFILE = ssl.get_default_verify_paths().cafile  # the image has Debian's, like this host


class Servers:
    """The real servers a row needs, started on first use, all with one test CA."""

    def __init__(self, request: pytest.FixtureRequest, tmp_path: Path, stack: ExitStack) -> None:
        self.request, self.tmp_path, self.stack = request, tmp_path, stack
        self.ca = trustme.CA()
        self.cert = self.ca.issue_cert("localhost", "127.0.0.1")
        self.ca_file = tmp_path / "ca.crt"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        (tmp_path / "server.crt").write_bytes(
            b"".join(b.bytes() for b in self.cert.cert_chain_pems)
        )
        self.cert.private_key_pem.write_to_path(str(tmp_path / "server.key"))
        self.volumes = [f"--volume={self.ca_file}:{CA_IN_IMAGE}:ro"]

    def fixture(self, name: str) -> Any:
        return self.request.getfixturevalue(name)

    def postgres_tls(self) -> Cluster:
        cluster: Cluster = self.fixture("pg_cluster")()
        cluster.write_file("server.crt", (self.tmp_path / "server.crt").read_bytes(), 0o644)
        cluster.write_file("server.key", (self.tmp_path / "server.key").read_bytes())
        cluster.configure(ssl="on", ssl_cert_file="'server.crt'", ssl_key_file="'server.key'")
        cluster.hba("local all all trust", "hostssl all all 127.0.0.1/32 trust")
        cluster.start()
        return cluster

    def system_ca_is_the_test_ca(self) -> None:
        """Inside the container only: the test CA is the system's bundle."""
        self.volumes.append(f"--volume={self.ca_file}:{SYSTEM_CAFILE}:ro")

    def mariadb_tls(self) -> Any:
        server = self.fixture("mariadb")()
        server.settings += [
            f"--ssl-cert={self.tmp_path / 'server.crt'}",
            f"--ssl-key={self.tmp_path / 'server.key'}",
        ]
        server.start()
        server.sql("CREATE USER 'app'@'%' IDENTIFIED BY 'app-pw'")
        return server

    def redis_tls(self) -> RedisServer:
        if reason := unavailable_reason("redis-server"):
            pytest.skip(reason)
        root = self.tmp_path / "redis"
        root.mkdir()
        server = RedisServer(
            root,
            *("--tls-cert-file", str(self.tmp_path / "server.crt")),
            *("--tls-key-file", str(self.tmp_path / "server.key")),
            *("--tls-ca-cert-file", str(self.ca_file)),
            *("--tls-auth-clients", "no"),
        )
        server.tls = True
        self.stack.callback(server.stop)
        server.start()
        return server

    def memcached(self) -> Any:
        from tests.support.redisd import Memcached

        if reason := unavailable_reason("memcached"):
            pytest.skip(reason)
        root = self.tmp_path / "memcached"
        root.mkdir()
        server = Memcached(root)
        self.stack.callback(server.stop)
        server.start()
        return server

    def http(self, tls: bool = False) -> str:
        context = None
        if tls:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self.cert.configure_cert(context)
        url, _ = self.stack.enter_context(http_server(Script(status=200), tls=context))
        return str(url)

    def proxy(self) -> Tinyproxy:
        """Debian's tinyproxy with credentials, on the host's loopback (host networking)."""
        return self.stack.enter_context(tinyproxy(self.tmp_path / "proxy", "img", "proxy-pw"))

    def dns(self) -> DnsServer:
        server: DnsServer = self.fixture("dns_server")
        server.add_host("db.example.test", "10.0.0.1")
        server.start()
        resolv = self.tmp_path / "resolv.conf"
        resolv.write_text(f"nameserver {server.address}\noptions ndots:1\n")
        self.volumes.append(f"--volume={resolv}:/etc/resolv.conf:ro")
        return server


@dataclass(frozen=True)
class Row:
    schemes: tuple[str, ...]  # the registry schemes this row proves
    targets: Callable[[Servers], list[str]]


def _postgres(s: Servers) -> list[str]:
    tls = s.postgres_tls()
    s.system_ca_is_the_test_ca()
    user = f"postgres@localhost:{tls.port}/postgres"
    return [
        "postgresql://127.0.0.1:5432",
        "postgres://postgres@127.0.0.1:5432/postgres#mode=query",
        "postgresql://postgres@127.0.0.1:5432/postgres#table=pg_catalog.pg_class&sql=SELECT%20true",
        f"postgresql://{user}?sslmode=require",
        f"postgresql://{user}?sslmode=verify-full&sslrootcert={CA_IN_IMAGE}",
        f"postgresql://{user}?sslmode=verify-full&sslrootcert={CA_IN_IMAGE}#mode=query",
        f"postgresql://{user}?sslrootcert=system#mode=query",  # the system bundle: the test CA
        f"host=localhost port={tls.port} user=postgres sslmode=require dbname=postgres#mode=query",
    ]


def _mysql(s: Servers) -> list[str]:
    tls = s.mariadb_tls()
    app = f"app:app-pw@127.0.0.1:{tls.port}/"
    return [
        "mysql://127.0.0.1:3306",
        "mariadb://root@127.0.0.1:3306/mysql#mode=query",
        "mysql://root@127.0.0.1:3306/mysql#table=user&sql=SELECT%20COUNT(*)%20%3E%200%20FROM%20user",
        f"mysql://{app}?ssl-mode=REQUIRED#mode=query",
        f"mysql://{app}?ssl-mode=VERIFY_IDENTITY&ssl-ca={CA_IN_IMAGE}#mode=query",
    ]


def _redis(s: Servers) -> list[str]:
    tls = s.redis_tls()
    tls_cli = ["redis-cli", "--tls", "--cacert", str(s.ca_file), "-h", "localhost"]
    subprocess.run([*tls_cli, "-p", str(tls.port), "SET", "phase", "seeded"], check=True)
    return [
        "redis://127.0.0.1:6379",
        "redis://127.0.0.1:6379/0#mode=query",
        f"rediss://localhost:{tls.port}#cacert={CA_IN_IMAGE}",
        f"rediss://127.0.0.1:{tls.port}#insecure&key=phase&value=%5Eseeded$",
    ]


def _http(s: Servers) -> list[str]:
    plain, tls = s.http(), s.http(tls=True)
    tls = tls.replace("127.0.0.1", "localhost")
    proxy = s.proxy().url  # through it: absolute-form http, CONNECT for https (httpcore's)
    return [
        f"{plain}/",
        f"{tls}/#cacert={CA_IN_IMAGE}",
        f"{tls}/health#insecure",
        f"{plain}/proxied#proxy={proxy}",
        f"{tls}/proxied#cacert={CA_IN_IMAGE}&proxy={proxy}",
    ]


def _dns(s: Servers) -> list[str]:
    server = s.dns()
    server.add_config("mx-host=example.test,mail.example.test,10")  # restarts it
    return [
        "dns:db.example.test",  # through the mounted resolv.conf
        f"dns://{server.address}/db.example.test?type=A",
        "dns:example.test?type=MX#expect=mail.example.test",
    ]


def _brokers_tls(s: Servers) -> tuple[Path, Path]:
    return s.tmp_path / "server.crt", s.tmp_path / "server.key"


def _amqp(s: Servers) -> list[str]:
    # amqps through a TLS terminator in front of the machine's RabbitMQ
    port = s.stack.enter_context(tls_terminator(RABBITMQ_PORT, _brokers_tls(s)))
    return [
        f"amqp://127.0.0.1:{RABBITMQ_PORT}",
        f"amqp://guest:guest@127.0.0.1:{RABBITMQ_PORT}/%2F#mode=ping",
        f"amqps://localhost:{port}/#cacert={CA_IN_IMAGE}",
    ]


def _mqtt(s: Servers) -> list[str]:
    root = s.tmp_path / "mosquitto"
    root.mkdir()
    broker = Mosquitto(root, tls=_brokers_tls(s))
    s.stack.callback(broker.stop)
    broker.start()
    return [
        f"mqtt://127.0.0.1:{MOSQUITTO_PORT}",
        f"mqtts://localhost:{broker.port}#cacert={CA_IN_IMAGE}",
    ]


def _nats(s: Servers) -> list[str]:
    root = s.tmp_path / "nats"
    root.mkdir()
    server = NatsServer(root, tls=_brokers_tls(s))
    s.stack.callback(server.stop)
    server.start()
    return [
        f"nats://127.0.0.1:{NATS_PORT}#jetstream",
        f"tls://localhost:{server.port}#cacert={CA_IN_IMAGE}",
    ]


def _grpc(s: Servers) -> list[str]:
    key = s.cert.private_key_pem.bytes()
    chain = b"".join(pem.bytes() for pem in s.cert.cert_chain_pems)
    plain = s.stack.enter_context(grpc_server())
    tls = s.stack.enter_context(grpc_server(tls=(key, chain)))
    return [
        f"grpc://127.0.0.1:{plain.port}",
        f"grpcs://localhost:{tls.port}#cacert={CA_IN_IMAGE}",
    ]


def _unix(s: Servers) -> list[str]:
    """An HTTP server on a Unix socket, mounted into the container as /run/app/app.sock."""
    folder = s.tmp_path / "sockets"
    folder.mkdir()
    folder.chmod(0o755)
    sock = folder / "app.sock"
    s.stack.enter_context(unix_http_server(str(sock)))
    sock.chmod(0o777)  # connecting takes write permission; the container runs as 65532
    s.volumes.append(f"--volume={folder}:/run/app:ro")
    return ["unix:///run/app/app.sock", "http+unix://%2Frun%2Fapp%2Fapp.sock/healthz#status=200"]


def _docker(s: Servers) -> list[str]:
    """Podman's API service, its socket mounted where rootful Podman's is (/run/podman), and
    real containers: running, exited 0, one that printed a line, one that prints one later."""
    from tests.support import engine

    sock = s.stack.enter_context(engine.api_service("podman.sock"))
    made = s.stack.enter_context(engine.containers(engine.base_image()))
    running = made.run("running", "sh", "-c", "echo hello; exec sleep infinity")
    done = made.run("done", "true")
    # its second line comes after an attempt read the first: the next reads on from there
    later = made.run("later", "sh", "-c", "echo first; sleep 3; echo second; exec sleep infinity")
    Path(sock).parent.chmod(0o755)
    Path(sock).chmod(0o777)  # connecting takes write permission; the container runs as 65532
    s.volumes.append(f"--volume={Path(sock).parent}:/run/podman:ro")
    return [
        f"docker:{running}",
        f"container:{done}#exited=0",
        f"docker:{running}#log=^hello$",
        f"docker:{later}#log=^second$",
    ]


def _kafka(s: Servers) -> list[str]:
    """librdkafka's mock cluster (the stand-in for Kafka); kafka+ssl through a TLS terminator."""
    from tests.support.kafkamock import mock_cluster

    cluster = s.stack.enter_context(mock_cluster(brokers=2))
    cluster.create_topic("orders", partitions=2)
    first = cluster.addresses[0]
    port = s.stack.enter_context(tls_terminator(int(first.rpartition(":")[2]), _brokers_tls(s)))
    return [
        f"kafka://{cluster.bootstraps}#brokers=2&topic=orders",
        f"kafka+ssl://localhost:{port}#cacert={CA_IN_IMAGE}",
    ]


def _mongodb(s: Servers) -> list[str]:
    """mockupdb (the stand-in for mongod) answering hello; TLS through a terminator."""
    from tests.kinds.mongodb.test_mongodb import Server

    server = Server()
    s.stack.callback(server.mock.stop)
    port = s.stack.enter_context(tls_terminator(server.port, _brokers_tls(s)))
    return [
        f"mongodb://127.0.0.1:{server.port}/app#primary",
        f"mongodb://localhost:{port}/?tls=true&tlsCAFile={CA_IN_IMAGE}",
    ]


ROWS: dict[str, Row] = {
    "tcp": Row(("tcp",), lambda s: ["tcp://127.0.0.1:5432", "tcp://localhost:6379"]),
    "http": Row(("http", "https"), _http),
    "postgresql": Row(("postgresql", "postgres"), _postgres),
    "dns": Row(("dns",), _dns),
    "mysql": Row(("mysql", "mariadb"), _mysql),
    "redis": Row(("redis", "rediss"), _redis),
    "memcached": Row(("memcached",), lambda s: [f"memcached://127.0.0.1:{s.memcached().port}"]),
    "amqp": Row(("amqp", "amqps"), _amqp),
    "mqtt": Row(("mqtt", "mqtts"), _mqtt),
    "nats": Row(("nats", "tls"), _nats),
    "grpc": Row(("grpc", "grpcs"), _grpc),
    "unix": Row(("unix", "http+unix"), _unix),
    "file": Row(
        ("file",),
        lambda s: [
            f"file://{CA_IN_IMAGE}#nonempty",
            f"file://{CA_IN_IMAGE}#min-size=100&contains=(%3Fm)%5E-----BEGIN%20CERTIFICATE-----$",
        ],
    ),
    # no shell or tools in the image: the command is waitfor itself (subprocesses work there)
    "exec": Row(
        ("exec",),
        lambda s: [
            "exec:waitfor -q -t 30 tcp://127.0.0.1:5432",
            "exec:waitfor tcp://db#exit-code=2",  # a refusal awaited: exit 2, missing port
        ],
    ),
    "kafka": Row(("kafka", "kafka+ssl"), _kafka),
    "mongodb": Row(("mongodb",), _mongodb),
    "docker": Row(("docker", "container"), _docker),
}


#: schemes proved in the image by a file of their own (they need more than a server)
ELSEWHERE = {"k8s": "tests/image/test_k8s_in_image.py (the in-cluster path, the lab)"}
#: schemes not run in the image, and why (each needs what the image test cannot give it)
NOT_IN_IMAGE = {
    "mongodb+srv": "SRV and TXT records from the container's own resolver; the seeds it finds "
    "are probed as mongodb:// targets are (a row above)",
}


def registered_schemes() -> set[str]:
    return set(KINDS)


def test_every_scheme_has_a_row() -> None:
    covered = {scheme for row in ROWS.values() for scheme in row.schemes}
    covered |= set(ELSEWHERE) | set(NOT_IN_IMAGE)
    assert registered_schemes() - covered == set(), "a kind without a row in ROWS"


@pytest.fixture
def servers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Servers]:
    tmp_path.chmod(0o755)  # the container's user 65532 reads the mounted files
    with ExitStack() as stack:
        yield Servers(request, tmp_path, stack)


def run(image: str, servers: Servers, *args: str, env: tuple[str, ...] = ()) -> Any:
    return podman(
        "run",
        "--rm",
        "--read-only",
        "--user=65532:65532",
        "--network=host",
        *servers.volumes,
        *(f"--env={variable}" for variable in env),
        image,
        *args,
        check=False,
    )


@pytest.mark.parametrize("kind", sorted(ROWS))
def test_kind_in_the_image(image: str, servers: Servers, kind: str) -> None:
    row = ROWS[kind]
    targets = row.targets(servers)
    used = {target.partition(":")[0] for target in targets}
    assert set(row.schemes) <= used, "every scheme of the row is exercised"
    result = run(image, servers, "-t", "60", *targets)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count(" ready after ") == len(targets), result.stderr


def test_output_modes_exec_and_environment(image: str, servers: Servers) -> None:
    target = "tcp://127.0.0.1:5432"
    text = run(image, servers, "--output=text", target)
    assert text.returncode == 0
    assert f"{target} ready after" in text.stderr
    tty = run(image, servers, "--output=tty", target)
    assert tty.returncode == 0
    assert target in tty.stderr
    lines = run(image, servers, "--output=json", target).stderr.splitlines()
    events = [json.loads(line)["event"] for line in lines]
    assert events[0] == "begin"
    assert events[-2:] == ["summary", "exit"]  # the last line carries the exit code
    assert "ready" in events
    # exec: waitfor becomes the command (found on PATH, no shell involved)
    executed = run(image, servers, target, "--", "waitfor", "--version")
    assert executed.returncode == 0
    assert executed.stdout.startswith("waitfor ")
    from_env = run(image, servers, env=(f"WAITFOR_TARGETS={target} tcp://localhost:5432",))
    assert from_env.returncode == 0, from_env.stderr
    assert from_env.stderr.count(" ready after ") == 2
    closed = f"tcp://127.0.0.1:{free_port()}"
    inverted = run(image, servers, "--invert", "-t", "10", closed)
    assert inverted.returncode == 0, inverted.stderr
    timed_out = run(image, servers, "-t", "1", closed)
    assert timed_out.returncode == 124
    assert "connection refused" in timed_out.stderr
    usage = run(image, servers, "nosuch://x")
    assert usage.returncode == 2
    assert "Traceback" not in usage.stderr
