"""Ports reserved for this test process, so that parallel runs never pick the same one.

Picking a port by binding port 0 and closing the socket (the old ``free_port``) races: between
the close and the server's own bind, another pytest-xdist worker, another worktree's suite or
any connect() may take it, and a test "waiting for a closed port" can meet someone else's server.

Here the ports come from blocks of ``BLOCK`` below the kernel's ephemeral range (where bind(0)
and outgoing connections take theirs); a block is this process's while it holds an exclusive
flock on the block's lock file (released by the kernel when the process ends, however it ends).
Within its blocks a process hands each port out once, after checking nothing listens on it.
"""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
import threading
from pathlib import Path

#: 20000-31999: below 32768, where Linux's default ip_local_port_range begins
FIRST, END, BLOCK = 20000, 32000, 100
LOCKS = Path(tempfile.gettempdir()) / "waitfor-test-reservations"

_lock = threading.Lock()
_held: list[int] = []  # lock file descriptors, kept open for the life of the process
_ports: list[int] = []  # the ports left in the blocks held


def claim_block(space: str, count: int) -> int:
    """A block number in 0..count-1 of ``space`` that no other process holds, this process's
    until it ends (an exclusive flock on the block's lock file)."""
    folder = LOCKS / space
    folder.mkdir(parents=True, exist_ok=True)
    start = os.getpid() % count  # processes start their search at different blocks
    for step in range(count):
        block = (start + step) % count
        fd = os.open(folder / f"{block}.lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _held.append(fd)
        return block
    raise RuntimeError(f"all {count} blocks of {space} are held by other processes")


def _take_block() -> None:
    block = claim_block("ports", (END - FIRST) // BLOCK)
    _ports.extend(range(FIRST + block * BLOCK, FIRST + (block + 1) * BLOCK))


def _unused(port: int, family: int, host: str) -> bool:
    """Nothing listens there now (a server outside the scheme may own a port of the range)."""
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(family: int = socket.AF_INET, host: str = "127.0.0.1") -> int:
    """A port reserved for this process that nothing listens on; never handed out twice."""
    with _lock:
        while True:
            if not _ports:
                _take_block()
            port = _ports.pop(0)
            if _unused(port, family, host):
                return port


def free_ports(count: int, family: int = socket.AF_INET, host: str = "127.0.0.1") -> list[int]:
    """Distinct reserved ports nothing listens on."""
    return [free_port(family, host) for _ in range(count)]
