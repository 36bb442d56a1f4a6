"""Cluster DNS that is not ready yet: a nameserver that reads every query and never answers.

It listens on port 53 of an address of its own in 127.0.0.0/8 (parallel runs pick different
ones), and is put in front of waitfor by a resolv.conf, Kubernetes style (search list,
``ndots:5``), bind-mounted over /etc/resolv.conf in a private mount namespace: the machine's own
file is never touched.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

SEARCH = "ns.svc.cluster.local svc.cluster.local cluster.local"


def unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "a private mount namespace and port 53 need root"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    return None


@dataclass
class SilentNameserver:
    address: str
    resolv_conf: Path
    queries: int = 0
    asked: threading.Event = field(default_factory=threading.Event)

    def run(self, *command: str) -> list[str]:
        """``command`` in a private mount namespace whose /etc/resolv.conf names this server."""
        return [*self.in_namespace("unshare", "-m"), *command]

    def in_namespace(self, *unshare: str) -> list[str]:
        """An ``unshare`` prefix (with its own options) that mounts the resolv.conf, then execs."""
        script = 'mount --bind "$0" /etc/resolv.conf && exec "$@"'
        return [*unshare, "sh", "-c", script, str(self.resolv_conf)]


@contextmanager
def silent_nameserver(directory: Path) -> Iterator[SilentNameserver]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(20):
        address = (
            f"127.{random.randint(100, 250)}.{random.randint(0, 255)}.{random.randint(1, 254)}"
        )
        try:
            sock.bind((address, 53))
            break
        except OSError:
            continue
    else:
        sock.close()
        raise RuntimeError("no free 127.x address for the silent nameserver")
    resolv_conf = directory / "resolv.conf"
    options = "ndots:5 timeout:5 attempts:2"  # Kubernetes' ndots; glibc's defaults spelled out
    resolv_conf.write_text(f"nameserver {address}\nsearch {SEARCH}\noptions {options}\n")
    server = SilentNameserver(address, resolv_conf)
    sock.settimeout(0.05)
    stop = threading.Event()

    def swallow() -> None:
        while not stop.is_set():
            try:
                sock.recvfrom(4096)
            except TimeoutError:
                continue
            server.queries += 1
            server.asked.set()

    thread = threading.Thread(target=swallow, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        thread.join()
        sock.close()
