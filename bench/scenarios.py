"""What is measured: each scenario runs waitfor and its peers side by side in the same run."""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from tests.support import mysqld
from tests.support.dnsserver import DnsServer
from tests.support.pg import Cluster, make_template
from tests.support.redisd import Memcached, RedisServer
from waitfor.core.first_attempt import BUDGET_SCALE


@dataclass
class Tool:
    name: str
    command: list[str]
    shell: bool = False  # a shell loop, as people write it

    def popen(self) -> subprocess.Popen[bytes]:
        """Started in a session of its own, so that a loop and its children stop together."""
        argv = ["bash", "-c", self.command[0]] if self.shell else self.command
        return subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@dataclass
class Series:
    tool: str
    values: list[float] = field(default_factory=list)

    def median(self) -> float:
        return statistics.median(self.values)

    def quantile(self, q: float) -> float:
        ordered = sorted(self.values)
        return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


# --- the dependencies ------------------------------------------------------------------------


class Postgres:
    def __init__(self) -> None:
        self.template = make_template()

    @contextmanager
    def cluster(self) -> Iterator[Cluster]:
        cluster = Cluster(self.template, Path(tempfile.mkdtemp(prefix="waitfor-bench-pg-")))
        cluster.configure(log_line_prefix="'%m '", log_connections="on")
        try:
            yield cluster
        finally:
            cluster.stop("immediate")
            shutil.rmtree(cluster.root, ignore_errors=True)

    @staticmethod
    def ready_at(cluster: Cluster) -> float:
        """Wall-clock time the server logged it accepts connections."""
        for line in cluster.log.read_text().splitlines():
            if "database system is ready to accept connections" in line:
                stamp = " ".join(line.split()[:2])
                return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").timestamp()
        raise RuntimeError("the server did not log readiness")

    def close(self) -> None:
        shutil.rmtree(self.template.parent, ignore_errors=True)


class DataStores:
    """Throw-away MariaDB, Redis and memcached servers (the test suite's helpers), each in a temp
    dir of its own and on a given port, so waiters started before it know where to look."""

    def __init__(self) -> None:
        self.mariadb_template = mysqld.make_template()

    @contextmanager
    def mariadb(self, port: int) -> Iterator[mysqld.MariaDB]:
        root = Path(tempfile.mkdtemp(prefix="waitfor-bench-mariadb-"))
        server = mysqld.MariaDB(self.mariadb_template, root)
        server.port = port
        try:
            yield server
        finally:
            server.stop()
            shutil.rmtree(root, ignore_errors=True)

    @contextmanager
    def redis(self, port: int) -> Iterator[RedisServer]:
        root = Path(tempfile.mkdtemp(prefix="waitfor-bench-redis-"))
        server = RedisServer(root)
        server.port = port
        try:
            yield server
        finally:
            server.stop()
            shutil.rmtree(root, ignore_errors=True)

    @contextmanager
    def memcached(self, port: int) -> Iterator[Memcached]:
        root = Path(tempfile.mkdtemp(prefix="waitfor-bench-memcached-"))
        server = Memcached(root)
        server.port = port
        try:
            yield server
        finally:
            server.stop()
            shutil.rmtree(root, ignore_errors=True)

    def close(self) -> None:
        shutil.rmtree(self.mariadb_template.parent, ignore_errors=True)


def greeting_at(port: int, timeout: float = 60) -> float:
    """Wall-clock time a server on ``port`` first sends a greeting, polled every 5 ms (MariaDB
    logs readiness to the second only; it listens once ready, and greets at once)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1) as s:
            if s.recv(1):
                return time.time()
        time.sleep(0.005)
    raise RuntimeError(f"nothing greeted on port {port}")


def redis_ready_at(server: RedisServer, timeout: float = 60) -> float:
    """Wall-clock time redis-server logged "Ready to accept connections" (to the millisecond)."""
    deadline = time.monotonic() + timeout
    log = server.root / "server.log"
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines() if log.exists() else []:
            if "Ready to accept connections" in line:
                stamp = " ".join(line.split()[1:5])  # 29 Nov 2026 20:31:02.123
                return datetime.strptime(stamp, "%d %b %Y %H:%M:%S.%f").timestamp()
        time.sleep(0.01)
    raise RuntimeError("redis-server did not log readiness")


@contextmanager
def dns_server() -> Iterator[DnsServer]:
    root = Path(tempfile.mkdtemp(prefix="waitfor-bench-dns-"))
    server = DnsServer(root)
    server.extra.append(f"log-queries\nlog-facility={root / 'queries.log'}")
    server.add_host("ready.test", "10.0.0.1")
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


# --- cold start ------------------------------------------------------------------------------


def cold_start(tools: list[Tool], runs: int) -> list[Series]:
    """Whole-process wall time for a ready target, the tools interleaved run by run."""
    series = [Series(t.name) for t in tools]
    for _ in range(runs):
        for tool, s in zip(tools, series, strict=True):
            started = time.perf_counter()
            code = tool.popen().wait()
            s.values.append(time.perf_counter() - started)
            if code != 0:
                raise RuntimeError(f"{tool.name} failed on a ready target: {tool.command}")
    return series


#: the environment of a run under callgrind: waitfor's quick first attempt's budget (0.25 s of
#: wall time) scaled by valgrind's slowdown (~50x), so that the run takes the path it takes at
#: full speed (a TLS handshake alone outlasts 0.25 s under callgrind, and the event loop's path
#: would then add its imports); the other tools read none of it. waitfor runs as its console
#: script: callgrind follows the ``#!`` to the interpreter
UNDER_CALLGRIND = {BUDGET_SCALE: "50"}


def instructions(argv: list[str], runs: int = 3) -> int:
    """Instructions one run executes (callgrind), the least of ``runs``: unlike wall time, the
    same under any load (the environment: :data:`UNDER_CALLGRIND`)."""
    counts = []
    for _ in range(runs):
        result = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
            env={**os.environ, "PYTHONHASHSEED": "0", **UNDER_CALLGRIND},
            capture_output=True,
            text=True,
        )
        refs = re.search(r"I\s+refs:\s+([\d,]+)", result.stderr)
        if result.returncode != 0 or refs is None:
            raise RuntimeError(f"failed under callgrind: {argv[:4]}...: {result.stderr[-300:]!r}")
        counts.append(int(refs.group(1).replace(",", "")))
    return min(counts)


# --- detection latency -----------------------------------------------------------------------


def detection(
    tools: list[Tool],
    trials: int,
    bring_up: Callable[[], float],
    take_down: Callable[[], object],
    wall_clock: bool = False,
) -> list[Series]:
    """All tools wait at once; the dependency comes up 1-5 s later; exit minus ready time."""
    series = [Series(t.name) for t in tools]
    clock = time.time if wall_clock else time.monotonic
    rng = random.Random(7)
    for _ in range(trials):
        exits: dict[str, float] = {}
        processes = [(t, t.popen()) for t in tools]

        def watch(
            tool: Tool, process: subprocess.Popen[bytes], exits: dict[str, float] = exits
        ) -> None:
            process.wait()
            exits[tool.name] = clock()

        watchers = [threading.Thread(target=watch, args=p) for p in processes]
        for w in watchers:
            w.start()
        time.sleep(rng.uniform(1, 5))
        ready = bring_up()
        for w in watchers:
            w.join(timeout=30)
        for (tool, process), s in zip(processes, series, strict=True):
            if process.returncode != 0 or tool.name not in exits:
                stop(process)
                raise RuntimeError(f"{tool.name} did not notice readiness")
            s.values.append(exits[tool.name] - ready)
        take_down()
    return series


def count_probes(tools: list[Tool], seconds: float, count: Callable[[], int]) -> dict[str, float]:
    """Probes per second against a dependency that stays down, each tool alone, after 2 s."""
    rates = {}
    for tool in tools:
        process = tool.popen()
        time.sleep(2)
        before = count()
        time.sleep(seconds)
        rates[tool.name] = (count() - before) / seconds
        stop(process)
    return rates


def queries_logged(server: DnsServer) -> int:
    log = server.root / "queries.log"
    return log.read_text().count("query[") if log.exists() else 0


def rejected_logged(cluster: Cluster) -> int:
    return len(re.findall(r"not accepting connections", cluster.log.read_text()))


# --- fan-out ---------------------------------------------------------------------------------


def run_measured(argv: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one process, through GNU time: a child of this
    (large) process would inherit its high-water mark."""
    with tempfile.NamedTemporaryFile("r") as report:
        started = time.perf_counter()
        result = subprocess.run(
            ["/usr/bin/time", "-o", report.name, "-f", "%M", *argv], capture_output=True
        )
        elapsed = time.perf_counter() - started
        if result.returncode != 0:
            raise RuntimeError(f"failed: {argv[:4]}...: {result.stderr[-300:]!r}")
        return elapsed, int(report.read().split()[-1])
