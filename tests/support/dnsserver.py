"""A real DNS server for tests: dnsmasq on its own loopback address, records changed at run time.

Each server listens on port 53 of an address of its own (127.53.x.1), so a test resolv.conf can
point at it exactly as a pod's does (resolv.conf cannot name a port). Addresses live in an
addn-hosts file reloaded by SIGHUP; SRV, CNAME and TXT records live in dnsmasq's configuration,
which it reads only at start, so changing those restarts it on the same address.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import dns.exception
import dns.message
import dns.rcode

from tests.support.ports import claim_block


def _reserved_addresses() -> Iterator[str]:
    """127.53.B.1-250 for each block B this process claims (no two processes share one)."""
    while True:
        block = claim_block("dns-addresses", 250)
        for host in range(1, 251):
            yield f"127.53.{block}.{host}"


_addresses = _reserved_addresses()


def next_address() -> str:
    """A loopback address of this process's own, for a server on port 53."""
    return next(_addresses)


class DnsServer:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.address = next_address()
        self.hosts_file = root / "hosts"
        self.hosts_file.write_text("")
        self.conf_file = root / "dnsmasq.conf"
        self.hosts: list[tuple[str, str]] = []
        self.extra: list[str] = []
        self.process: subprocess.Popen[bytes] | None = None

    # records ------------------------------------------------------------------------------
    def add_host(self, name: str, address: str) -> float:
        """An A/AAAA record; takes effect at once (SIGHUP). Returns when it was signalled."""
        self.hosts.append((address, name))
        return self._reload_hosts()

    def remove_host(self, name: str, address: str) -> float:
        self.hosts.remove((address, name))
        return self._reload_hosts()

    def _reload_hosts(self) -> float:
        self.hosts_file.write_text("".join(f"{a} {n}\n" for a, n in self.hosts))
        signalled = time.monotonic()
        if self.process is not None:
            self.process.send_signal(signal.SIGHUP)
            time.sleep(0.2)  # dnsmasq re-reads the file on its next loop
        return signalled

    def add_config(self, *lines: str) -> None:
        """srv-host=..., cname=..., txt-record=...; restarts the server if running."""
        self.extra.extend(lines)
        if self.process is not None:
            self.stop()
            self.start()

    def resolv_conf(self, search: str = "", ndots: int = 1, timeout: int = 1) -> Path:
        path = self.root / "resolv.conf"
        text = f"nameserver {self.address}\noptions ndots:{ndots} timeout:{timeout} attempts:1\n"
        path.write_text(text + (f"search {search}\n" if search else ""))
        return path

    # process ------------------------------------------------------------------------------
    def start(self) -> None:
        self.conf_file.write_text("".join(f"{line}\n" for line in self.extra))
        command = [
            shutil.which("dnsmasq") or "/usr/sbin/dnsmasq",
            "--keep-in-foreground",
            "--no-resolv",
            "--no-hosts",
            "--no-daemon",
            f"--listen-address={self.address}",
            "--bind-interfaces",
            "--port=53",
            f"--addn-hosts={self.hosts_file}",
            f"--conf-file={self.conf_file}",
            "--cache-size=0",
            "--no-negcache",
            "--pid-file=",
            "--log-facility=-",
            # answer everything from local data: NXDOMAIN rather than REFUSED (no upstream)
            "--local=/#/",
        ]
        if os.geteuid() == 0:
            command.append("--user=root")
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"dnsmasq exited: {self.process.stderr.read().decode()}")  # type: ignore[union-attr]
            if self._answers():
                return
            time.sleep(0.05)
        raise RuntimeError("dnsmasq did not start answering")

    def _answers(self) -> bool:
        import dns.message
        import dns.query

        try:
            query = dns.message.make_query("probe.invalid.", "A")
            dns.query.udp(query, self.address, timeout=0.2)
            return True
        except Exception:
            return False

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None


class UdpResponder:
    """A scripted DNS server: ``answer(query)`` returns the reply (a message, or its bytes as
    they are to be sent: a hostile server's), or None to stay silent.

    For what dnsmasq will not do: answer SERVFAIL as an upstream, drop the first query.
    Listens on ``address`` port ``port`` (0: a free one) until stopped.
    """

    def __init__(
        self,
        answer: Callable[[dns.message.Message], dns.message.Message | bytes | None],
        address: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.answer = answer
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((address, port))
        self.sock.settimeout(0.1)
        self.address, self.port = self.sock.getsockname()
        self.received: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                wire, client = self.sock.recvfrom(65535)
                query = dns.message.from_wire(wire)
            except (TimeoutError, dns.exception.DNSException):
                continue
            except OSError:
                return
            self.received.append(f"{query.question[0].name} {query.question[0].rdtype.name}")
            reply = self.answer(query)
            if isinstance(reply, dns.message.Message):
                reply = reply.to_wire()
            if reply is not None:
                self.sock.sendto(reply, client)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def servfail(query: dns.message.Message) -> dns.message.Message:
    reply = dns.message.make_response(query)
    reply.set_rcode(dns.rcode.SERVFAIL)
    return reply
