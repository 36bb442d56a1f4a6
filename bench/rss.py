"""RSS while waiting: one waitfor process per kind on a target that stays down, RSS slope per kind.

A forgotten init container waits for days, so memory must be flat once warmed up, whatever the
kind and whatever makes its attempts fail (refused, an untrusted certificate, a silent
nameserver, a 503). Each process is the real CLI; RSS is read from /proc every few seconds and
the slope is fitted over the samples after the warm-up (the first third).

    python -m bench.rss                      # 10 minutes at the default backoff
    python -m bench.rss --minutes 45 --kinds https-untrusted tcp
    python -m bench.rss --minutes 2 --max-interval 0.01    # hours of attempts in minutes

Prints one line per kind (RSS after warm-up, at the end, KB/min) and writes --json if asked.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import trustme  # the peers' venv (bench/run) and the dev group have it

from tests.support.ports import free_port
from tests.support.servers import scripted_peer

#: made once: every connection of the untrusted peer shows it
_CERT = trustme.CA().issue_cert("localhost", "127.0.0.1")


def _untrusted(conn: socket.socket) -> None:
    """A TLS peer whose certificate no client trusts: every handshake fails."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _CERT.configure_cert(context)
    with context.wrap_socket(conn, server_side=True) as tls:
        tls.recv(1)


@contextlib.contextmanager
def _peers() -> Iterator[dict[str, int]]:
    """The misbehaving peers the targets point at: a port nothing listens on, an untrusted TLS
    server, an HTTP server answering 503, a nameserver that never answers."""
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))

    def unavailable(conn: socket.socket) -> None:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")

    with silent, scripted_peer(_untrusted) as tls, scripted_peer(unavailable) as http503:
        yield {
            "closed": free_port(),
            "tls": tls,
            "http503": http503,
            "silent": silent.getsockname()[1],
        }


def targets(ports: dict[str, int]) -> dict[str, list[str]]:
    """Per kind, the arguments of a waitfor run whose target never becomes ready."""
    closed, tls = ports["closed"], ports["tls"]
    return {
        "tcp": [f"tcp://127.0.0.1:{closed}"],
        "tcp-json": ["-o", "json", f"tcp://127.0.0.1:{closed}"],
        "http": [f"http://127.0.0.1:{closed}/"],
        "http-503": [f"http://127.0.0.1:{ports['http503']}/"],
        "https-untrusted": [f"https://localhost:{tls}/"],
        "rediss-untrusted": [f"rediss://localhost:{tls}"],
        "postgresql": [f"postgresql://127.0.0.1:{closed}/db"],
        "mysql": [f"mysql://127.0.0.1:{closed}"],
        "redis": [f"redis://127.0.0.1:{closed}"],
        "memcached": [f"memcached://127.0.0.1:{closed}"],
        "amqp": [f"amqp://127.0.0.1:{closed}"],
        "mqtt": [f"mqtt://127.0.0.1:{closed}"],
        "nats": [f"nats://127.0.0.1:{closed}"],
        "grpc": [f"grpc://127.0.0.1:{closed}"],
        "kafka": [f"kafka://127.0.0.1:{closed}"],
        "mongodb": [f"mongodb://127.0.0.1:{closed}"],
        "dns-silent": ["--attempt-timeout", "1s", f"dns://127.0.0.1:{ports['silent']}/db.example"],
        "file": ["file:///nonexistent/waitfor-bench"],
        "exec": ["exec:false"],
    }


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def slope_per_minute(samples: list[tuple[float, int]]) -> float:
    """Least-squares KiB per minute."""
    n = len(samples)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in samples) / n
    mean_r = sum(r for _, r in samples) / n
    var = sum((t - mean_t) ** 2 for t, _ in samples)
    cov = sum((t - mean_t) * (r - mean_r) for t, r in samples)
    return 60 * cov / var if var else 0.0


def measure(
    runs: dict[str, list[str]],
    *,
    seconds: float,
    every: float,
    waitfor: list[str],
    max_interval: float | None,
    progress: Callable[[str], None] = lambda line: None,
) -> dict[str, dict[str, float]]:
    extra = [] if max_interval is None else ["--max-interval", f"{max_interval}s"]
    processes = {
        kind: subprocess.Popen(
            [*waitfor, "-t", f"{seconds + 60:.0f}s", *extra, *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for kind, args in runs.items()
    }
    samples: dict[str, list[tuple[float, int]]] = {kind: [] for kind in runs}
    began = time.monotonic()
    try:
        while (now := time.monotonic() - began) < seconds:
            for kind, process in processes.items():
                rss = rss_kib(process.pid)
                if rss is not None and process.poll() is None:
                    samples[kind].append((now, rss))
            progress(f"{now:5.0f}s " + " ".join(f"{k}={s[-1][1]}" for k, s in samples.items() if s))
            time.sleep(every)
    finally:
        for process in processes.values():
            process.kill()
            process.wait()
    results = {}
    for kind, series in samples.items():
        warm = [s for s in series if s[0] >= seconds / 3]
        results[kind] = {
            "rss_after_warmup_kib": warm[0][1] if warm else 0,
            "rss_end_kib": series[-1][1] if series else 0,
            "kib_per_minute": round(slope_per_minute(warm), 1),
            "exited_early": processes[kind].returncode not in (None, -9) or len(series) < 2,
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--every", type=float, default=5.0, help="seconds between RSS samples")
    parser.add_argument("--kinds", nargs="*", help="only these (default: every kind)")
    parser.add_argument("--max-interval", type=float, help="the backoff's cap (default: waitfor's)")
    parser.add_argument("--waitfor", help="the waitfor executable (default: this Python's -m)")
    parser.add_argument("--json", type=Path, help="write the results here too")
    parser.add_argument("--verbose", action="store_true", help="print every sample")
    args = parser.parse_args()
    waitfor = [args.waitfor] if args.waitfor else [sys.executable, "-m", "waitfor"]
    with _peers() as ports:
        runs = targets(ports)
        unknown = set(args.kinds or ()) - set(runs)
        if unknown:
            parser.error(f"unknown kinds: {', '.join(sorted(unknown))} (known: {', '.join(runs)})")
        if args.kinds:
            runs = {kind: runs[kind] for kind in args.kinds}
        results = measure(
            runs,
            seconds=args.minutes * 60,
            every=args.every,
            waitfor=waitfor,
            max_interval=args.max_interval,
            progress=print if args.verbose else lambda line: None,
        )
    print(f"{'kind':<18} {'RSS warm':>9} {'RSS end':>9} {'KB/min':>8}")
    for kind, result in results.items():
        note = "  (exited early)" if result["exited_early"] else ""
        print(
            f"{kind:<18} {result['rss_after_warmup_kib']:>8}K {result['rss_end_kib']:>8}K"
            f" {result['kib_per_minute']:>8.1f}{note}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
