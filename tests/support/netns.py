"""Two network namespaces joined by a veth pair: the test's own client and server hosts.

Nothing leaves them: neither has a default route, so an address outside 10.253.0.0/30 is
"network is unreachable" rather than a packet sent anywhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

CLIENT_ADDRESS = "10.253.0.1"
SERVER_ADDRESS = "10.253.0.2"


@dataclass(frozen=True)
class Hosts:
    client: str  # namespace names, for `ip netns exec`
    server: str

    def in_client(self, *command: str) -> list[str]:
        return ["ip", "netns", "exec", self.client, *command]

    def in_server(self, *command: str) -> list[str]:
        return ["ip", "netns", "exec", self.server, *command]


def unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (the test command installs iproute2 and iptables)"
    return None


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True)


@contextmanager
def two_hosts() -> Iterator[Hosts]:
    tag = f"wf{os.getpid() % 100000}"
    hosts = Hosts(client=f"{tag}c", server=f"{tag}s")
    veth_c, veth_s = f"{tag}vc", f"{tag}vs"
    try:
        _run("ip", "netns", "add", hosts.client)
        _run("ip", "netns", "add", hosts.server)
        _run("ip", "link", "add", veth_c, "type", "veth", "peer", "name", veth_s)
        for veth, namespace, address in (
            (veth_c, hosts.client, CLIENT_ADDRESS),
            (veth_s, hosts.server, SERVER_ADDRESS),
        ):
            _run("ip", "link", "set", veth, "netns", namespace)
            _run("ip", "-n", namespace, "addr", "add", f"{address}/30", "dev", veth)
            _run("ip", "-n", namespace, "link", "set", veth, "up")
            _run("ip", "-n", namespace, "link", "set", "lo", "up")
        yield hosts
    finally:
        for namespace in (hosts.client, hosts.server):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


def drop(hosts: Hosts, protocol: str, port: int) -> None:
    """Silently drop what arrives at the server on this port: a blackholed service."""
    _run(
        *hosts.in_server(
            "iptables", "-A", "INPUT", "-p", protocol, "--dport", str(port), "-j", "DROP"
        )
    )


def reject_with_reset(hosts: Hosts, port: int) -> None:
    _run(
        *hosts.in_server(
            "iptables",
            "-A",
            "INPUT",
            "-p",
            "tcp",
            "--dport",
            str(port),
            "-j",
            "REJECT",
            "--reject-with",
            "tcp-reset",
        )
    )
