"""The benchmark: cold start, detection latency, probe rate, fan-out and footprint, each figure
given as a ratio to the peer measured in the same run, with medians and spread."""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bench import brokers, k8s, plots, tlsrows
from bench.scenarios import (
    DataStores,
    Postgres,
    Series,
    Tool,
    cold_start,
    count_probes,
    detection,
    dns_server,
    greeting_at,
    instructions,
    queries_logged,
    redis_ready_at,
    rejected_logged,
    run_measured,
)
from tests.support.grpcserver import grpc_server
from tests.support.ports import free_port, free_ports
from tests.support.servers import (
    Script,
    http_server,
    tcp_listener,
    unix_http_server,
)

OUT = Path("docs/bench")
SECTIONS = [
    "cold_start",
    "instructions",
    "detection",
    "probe_rate",
    "fan_out",
    "footprint",
    "brokers",
    "k8s",
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--waitfor", required=True)
    parser.add_argument("--wait-for-it", required=True)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="tiny configuration (smoke test)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--only", nargs="*", choices=SECTIONS, help="re-measure these sections, keep the rest"
    )
    args = parser.parse_args()
    trials = 2 if args.quick else args.trials
    runs = 3 if args.quick else 30
    wf, wfi = args.waitfor, args.wait_for_it
    saved = args.out / "results.json"
    results: dict[str, Any] = json.loads(saved.read_text()) if args.only and saved.exists() else {}
    results["machine"] = machine()
    wanted = args.only or SECTIONS
    args.out.mkdir(parents=True, exist_ok=True)

    def section(name: str, measure: Any) -> None:
        if name in wanted:
            print(f"bench: {name}", file=sys.stderr)
            results[name] = measure()
            saved.write_text(json.dumps(results, indent=1))  # progress survives a failure

    postgres = Postgres()
    stores = DataStores()
    try:
        with dns_server() as dns:
            section("cold_start", lambda: measure_cold_start(wf, wfi, dns.address, stores, runs))
            section("instructions", lambda: measure_instructions(wf, wfi, dns.address, args.quick))
            section("detection", lambda: measure_detection(wf, wfi, postgres, stores, trials))
            section("probe_rate", lambda: measure_probe_rates(wf, postgres, 2 if args.quick else 6))
            section("fan_out", lambda: measure_fan_out(wf, wfi, dns.address, args.quick))
        section("footprint", lambda: footprint(Path(wf).parent.parent))
        if brokers.available():
            section("brokers", lambda: brokers.measure(wf, runs, trials, as_dict))
        else:
            print("bench: brokers skipped (RabbitMQ, Mosquitto or NATS missing)", file=sys.stderr)
        if k8s.available():
            section("k8s", lambda: k8s.measure(wf, runs, trials, as_dict, args.quick))
        else:
            print("bench: k8s skipped (no lab: run scripts/k8s-lab-build)", file=sys.stderr)
    finally:
        postgres.close()
        stores.close()
    plots.draw(results, args.out)
    (args.out / "README.md").write_text(plots.tables(results))
    print(f"wrote {args.out}/README.md, results.json and plots", file=sys.stderr)


def as_dict(series: list[Series]) -> dict[str, dict[str, float]]:
    return {
        s.tool: {
            "median": s.median(),
            "p10": s.quantile(0.1),
            "p90": s.quantile(0.9),
            "p95": s.quantile(0.95),
            "max": max(s.values),
            "n": len(s.values),
        }
        for s in series
    }


def measure_cold_start(
    wf: str, wfi: str, dns: str, stores: DataStores, runs: int
) -> dict[str, Any]:
    port, my, rd, mc = free_ports(4)
    with contextlib.ExitStack() as running:
        for server in (
            running.enter_context(stores.mariadb(my)),
            running.enter_context(stores.redis(rd)),
            running.enter_context(stores.memcached(mc)),
        ):
            server.start()
        return _cold_start(wf, wfi, dns, port, my, rd, mc, runs)


def _cold_start(
    wf: str, wfi: str, dns: str, port: int, my: int, rd: int, mc: int, runs: int
) -> dict[str, Any]:
    with (
        tcp_listener(port),
        http_server(Script()) as (url, _),
        tempfile.TemporaryDirectory(prefix="waitfor-bench-") as scratch,
        grpc_server() as grpc,
        unix_http_server(f"{scratch}/app.sock"),
    ):
        sock = f"{scratch}/app.sock"
        unix_url = f"http+unix://{quote(sock, safe='')}/"
        tools = [
            Tool("python -c pass", [sys.executable, "-c", "pass"]),
            Tool("waitfor tcp", [wf, "-q", f"tcp://127.0.0.1:{port}"]),
            Tool("wait-for-it tcp", [wfi, "-q", "-s", f"127.0.0.1:{port}"]),
            Tool("waitfor postgresql", [wf, "-q", "postgresql://127.0.0.1:5432/postgres"]),
            Tool("pg_isready", ["pg_isready", "-q", "-h", "127.0.0.1", "-p", "5432"]),
            Tool("waitfor dns", [wf, "-q", f"dns://{dns}/ready.test"]),
            Tool("waitfor dns:localhost", [wf, "-q", "dns:localhost"]),
            Tool("busybox nslookup", ["busybox", "nslookup", "ready.test", dns]),
            Tool("waitfor http", [wf, "-q", url]),
            Tool("curl", ["curl", "-fsS", "-o", "/dev/null", url]),
            Tool("waitfor mysql", [wf, "-q", f"mysql://root@127.0.0.1:{my}"]),
            Tool(
                "mysqladmin ping", ["mysqladmin", "--no-defaults", "-h127.0.0.1", f"-P{my}", "ping"]
            ),
            Tool("waitfor mysql query", [wf, "-q", f"mysql://root@127.0.0.1:{my}/#mode=query"]),
            Tool("waitfor redis", [wf, "-q", f"redis://127.0.0.1:{rd}"]),
            Tool("redis-cli ping", ["redis-cli", "-h", "127.0.0.1", "-p", str(rd), "ping"]),
            Tool("waitfor memcached", [wf, "-q", f"memcached://127.0.0.1:{mc}"]),
            Tool("waitfor grpc", [wf, "-q", f"grpc://127.0.0.1:{grpc.port}"]),
            Tool("grpcio health check", [sys.executable, "-c", GRPCIO_CHECK, str(grpc.port)]),
            Tool("waitfor http+unix", [wf, "-q", unix_url]),
            Tool("curl --unix-socket", [*CURL_UNIX, sock, "http://localhost/"]),
            Tool("waitfor unix", [wf, "-q", f"unix://{sock}"]),
            Tool("waitfor file", [wf, "-q", f"file://{sock}"]),
            Tool("test -e", ["test", "-e", sock]),
            Tool("waitfor exec", [wf, "-q", "exec:true"]),
        ]
        return as_dict(cold_start(tools, runs))


def measure_instructions(wf: str, wfi: str, dns: str, quick: bool) -> dict[str, int]:
    """Instructions of one cold start with a ready target (callgrind), beside wait-for-it's;
    the TLS forms of every kind whose plain form has a quick first attempt, beside it."""
    port = free_port()
    waitfor = [wf, "-q"]
    with (
        tcp_listener(port),
        http_server(Script(body=b'{"status": "UP"}')) as (url, _),
        tls_http_server() as (https_url, ca_file),
        tempfile.TemporaryDirectory(prefix="waitfor-bench-") as scratch,
        unix_http_server(f"{scratch}/app.sock"),
        tlsrows.targets() as tls_targets,
    ):
        unix_url = f"http+unix://{quote(f'{scratch}/app.sock', safe='')}/"
        targets = {
            "waitfor tcp": f"tcp://127.0.0.1:{port}",
            "waitfor http": url,
            "waitfor http status= header=": f"{url}/#status=200&header=X-A:%20b",
            "waitfor http json=": f"{url}/#json=status==UP",
            "waitfor http+unix": unix_url,
            "waitfor https": f"{https_url}/#cacert={ca_file}",
            "waitfor dns:localhost": "dns:localhost",
            "waitfor dns://server/name": f"dns://{dns}/ready.test",
            "waitfor postgresql": "postgresql://127.0.0.1:5432/postgres",
            **tls_targets,
        }
        runs = {"wait-for-it tcp": [wfi, "-q", "-s", f"127.0.0.1:{port}"]}
        runs |= {name: [*waitfor, target] for name, target in targets.items()}
        if quick:  # the smoke test: a yardstick and one of ours, once
            return {name: instructions(argv, 1) for name, argv in list(runs.items())[:2]}
        return {name: instructions(argv) for name, argv in runs.items()}


#: what people write without grpc_health_probe: the health stub from grpcio
GRPCIO_CHECK = """\
import sys, grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
channel = grpc.insecure_channel(f"127.0.0.1:{sys.argv[1]}")
answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
sys.exit(answer.status != health_pb2.HealthCheckResponse.SERVING)
"""
CURL_UNIX = ["curl", "-fsS", "-o", "/dev/null", "--unix-socket"]


def measure_detection(
    wf: str, wfi: str, postgres: Postgres, stores: DataStores, trials: int
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    flags = ["-q", "-t", "60"]

    # TCP: a listener opens.
    port = free_port()
    up = contextlib.ExitStack()  # what a trial brought up, taken down after it

    def tcp_up() -> float:
        return up.enter_context(tcp_listener(port))[0]

    results["tcp"] = as_dict(
        detection(
            [
                Tool("waitfor", [wf, *flags, f"tcp://127.0.0.1:{port}"]),
                Tool("wait-for-it", [wfi, "-q", "-t", "60", "-s", f"127.0.0.1:{port}"]),
                Tool(
                    "bash /dev/tcp loop (sleep 1)",
                    [f"until (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; do sleep 1; done"],
                    True,
                ),
                Tool(
                    "busybox nc loop (sleep 1)",
                    [
                        f"until busybox nc -w 1 127.0.0.1 {port} </dev/null 2>/dev/null; "
                        "do sleep 1; done"
                    ],
                    True,
                ),
            ],
            trials,
            tcp_up,
            up.close,
        )
    )

    # HTTP: 503 until the switch to 200.
    with http_server(Script(status=503)) as (url, script):

        def http_up() -> float:
            script.status = 200
            return time.monotonic()

        def http_down() -> None:
            script.status = 503

        results["http"] = as_dict(
            detection(
                [
                    Tool("waitfor", [wf, *flags, f"{url}/healthz"]),
                    Tool(
                        "curl loop (sleep 1)",
                        [
                            f"until curl -fsS -o /dev/null {url}/healthz 2>/dev/null; "
                            "do sleep 1; done"
                        ],
                        True,
                    ),
                ],
                trials,
                http_up,
                http_down,
            )
        )

    # PostgreSQL: a cluster starts; readiness is when the server logs it.
    def pg_up() -> float:
        cluster = up.enter_context(postgres.cluster())
        cluster.configure(port=pg_port)
        cluster.start()
        return Postgres.ready_at(cluster)

    pg_port = free_port()
    results["postgresql"] = as_dict(
        detection(
            [
                Tool("waitfor", [wf, *flags, f"postgresql://127.0.0.1:{pg_port}/postgres"]),
                Tool(
                    "pg_isready shell loop (sleep 2)",
                    [f"until pg_isready -q -h 127.0.0.1 -p {pg_port}; do sleep 2; done"],
                    True,
                ),
            ],
            trials,
            pg_up,
            up.close,
            wall_clock=True,
        )
    )

    # MySQL: a MariaDB server starts; ready when it first greets a client.
    my_port = free_port()

    def mysql_up() -> float:
        server = up.enter_context(stores.mariadb(my_port))
        server.start(wait=False)
        return greeting_at(my_port)

    results["mysql"] = as_dict(
        detection(
            [
                Tool("waitfor", [wf, *flags, f"mysql://127.0.0.1:{my_port}"]),
                Tool(
                    "mysqladmin ping loop (sleep 1)",
                    [
                        f"until mysqladmin --no-defaults -h127.0.0.1 -P{my_port} ping "
                        ">/dev/null 2>&1; do sleep 1; done"
                    ],
                    True,
                ),
            ],
            trials,
            mysql_up,
            up.close,
            wall_clock=True,
        )
    )

    # Redis: a server starts; ready when it logs so.
    redis_port = free_port()

    def redis_up() -> float:
        server = up.enter_context(stores.redis(redis_port))
        server.start(wait=False)
        return redis_ready_at(server)

    results["redis"] = as_dict(
        detection(
            [
                Tool("waitfor", [wf, *flags, f"redis://127.0.0.1:{redis_port}"]),
                Tool(
                    "redis-cli ping loop (sleep 1)",
                    [
                        f"until redis-cli -h 127.0.0.1 -p {redis_port} ping 2>/dev/null "
                        "| grep -q PONG; do sleep 1; done"
                    ],
                    True,
                ),
            ],
            trials,
            redis_up,
            up.close,
            wall_clock=True,
        )
    )

    # DNS: a record appears (dnsmasq reloads on SIGHUP).
    with dns_server() as dns:
        name = "late.test"

        results["dns"] = as_dict(
            detection(
                [
                    Tool("waitfor", [wf, *flags, f"dns://{dns.address}/{name}"]),
                    Tool(
                        "busybox nslookup shell loop (sleep 2)",
                        [
                            f"until busybox nslookup {name} {dns.address} >/dev/null 2>&1; "
                            "do sleep 2; done"
                        ],
                        True,
                    ),
                ],
                trials,
                lambda: dns.add_host(name, "10.0.0.9"),  # when dnsmasq is told to reload
                lambda: dns.remove_host(name, "10.0.0.9"),
            )
        )
    return results


def measure_probe_rates(wf: str, postgres: Postgres, seconds: float) -> dict[str, Any]:
    rates: dict[str, Any] = {}
    with http_server(Script(status=503)) as (url, script):
        rates["http (503)"] = count_probes(
            [
                Tool("waitfor", [wf, "-q", "-t", "600", url]),
                Tool(
                    "curl loop (sleep 1)",
                    [f"until curl -fsS -o /dev/null {url} 2>/dev/null; do sleep 1; done"],
                    True,
                ),
            ],
            seconds,
            lambda: len(script.requests),
        )
    with dns_server() as dns:
        rates["dns (NXDOMAIN), queries"] = count_probes(
            [
                Tool("waitfor", [wf, "-q", "-t", "600", f"dns://{dns.address}/missing.test"]),
                Tool(
                    "busybox nslookup loop (sleep 2)",
                    [
                        f"until busybox nslookup missing.test {dns.address} >/dev/null 2>&1; "
                        "do sleep 2; done"
                    ],
                    True,
                ),
            ],
            seconds,
            lambda: queries_logged(dns),
        )
    with postgres.cluster() as cluster:
        cluster.configure(hot_standby="off")
        cluster.write_file("standby.signal", b"")
        cluster.start(wait=False)
        time.sleep(2)
        rates["postgresql (rejecting)"] = count_probes(
            [
                Tool("waitfor", [wf, "-q", "-t", "600", cluster.url()]),
                Tool(
                    "pg_isready loop (sleep 2)",
                    [f"until pg_isready -q -h 127.0.0.1 -p {cluster.port}; do sleep 2; done"],
                    True,
                ),
            ],
            seconds,
            lambda: rejected_logged(cluster),
        )
    return rates


def measure_fan_out(wf: str, wfi: str, dns: str, quick: bool) -> dict[str, Any]:
    sizes = [1, 10] if quick else [1, 10, 100, 200]
    many = 20 if quick else 300
    results: dict[str, Any] = {}
    ports = free_ports(max(sizes))
    with contextlib.ExitStack() as listeners:
        for port in ports:
            listeners.enter_context(tcp_listener(port))
        for n in sizes:
            tcp = [f"tcp://127.0.0.1:{p}" for p in ports[:n]]
            services = [arg for p in ports[:n] for arg in ("-s", f"127.0.0.1:{p}")]
            results[f"{n} tcp"] = {
                "waitfor": run_measured([wf, "-q", *tcp]),
                "wait-for-it --parallel": run_measured([wfi, "-q", "-p", *services]),
            }
        with http_server(Script()) as (url, _):
            mixed = (
                [f"tcp://127.0.0.1:{p}" for p in ports[:10]]
                + [f"{url}/{i}" for i in range(5)]
                + [f"dns://{dns}/ready.test"] * 3
                + ["postgresql://127.0.0.1:5432/postgres"] * 2
            )
            results["mixed 20 (10 tcp, 5 http, 3 dns, 2 postgresql)"] = {
                "waitfor": run_measured([wf, "-q", *mixed])
            }
            # Plain http builds no TLS context at all (each once cost a CA bundle load).
            results[f"{many} http"] = {
                "waitfor": run_measured([wf, "-q", *[f"{url}/{i}" for i in range(many)]])
            }
        with tls_http_server() as (url, ca_file):
            # One CA, one shared context, however many targets use it.
            https = [f"{url}/{i}#cacert={ca_file}" for i in range(many)]
            results[f"{many} https, one private CA"] = {"waitfor": run_measured([wf, "-q", *https])}
    return results


@contextlib.contextmanager
def tls_http_server() -> Iterator[tuple[str, str]]:
    """An https test server with a throw-away CA; yields (base URL, CA file)."""
    import ssl
    import tempfile

    import trustme

    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    with tempfile.NamedTemporaryFile(suffix=".pem") as ca_file:
        ca.cert_pem.write_to_path(ca_file.name)
        with http_server(Script(), tls=context) as (url, _):
            yield url, ca_file.name


def footprint(waitfor_venv: Path) -> dict[str, Any]:
    def site_packages(venv: Path, skip: tuple[str, ...]) -> int:
        [site] = venv.glob("lib/python3*/site-packages")
        return sum(
            f.stat().st_size
            for f in site.rglob("*")
            if f.is_file() and not f.relative_to(site).parts[0].startswith(skip)
        )

    tooling = ("pip", "setuptools", "_distutils_hack", "pkg_resources", "distutils-precedence")
    sizes: dict[str, Any] = {
        "waitfor venv site-packages (without pip/setuptools)": site_packages(waitfor_venv, tooling),
        "busybox binary": Path(shutil.which("busybox") or "/bin/busybox").stat().st_size,
        "pg_isready + libpq": Path(shutil.which("pg_isready") or "").resolve().stat().st_size
        + sum(p.stat().st_size for p in Path("/usr/lib/x86_64-linux-gnu").glob("libpq.so.5.*")),
    }
    image = subprocess.run(
        ["podman", "image", "inspect", "localhost/waitfor:latest", "--format", "{{.Size}}"],
        capture_output=True,
        text=True,
        env={"CONTAINERS_CONF": "images/containers.conf", "PATH": "/usr/bin:/bin:/usr/sbin"},
    )
    if image.returncode == 0:  # FROM scratch: the whole image is waitfor's (bench/image: more)
        sizes["image (localhost/waitfor:latest)"] = int(image.stdout)
    return sizes


def machine() -> dict[str, str]:
    return {
        "cpus": subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip(),
        "python": sys.version.split()[0],
        "date": time.strftime("%Y-%m-%d"),
    }


if __name__ == "__main__":
    main()
