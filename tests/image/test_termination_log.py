"""The termination message inside the image, run as the kubelet runs it: user 65532, a read-only
root, and /dev/termination-log a writable file mounted into the container."""

from __future__ import annotations

from pathlib import Path

from tests.support.podman import podman
from tests.support.ports import free_port
from tests.support.servers import tcp_listener


def run(image: str, log: Path, *args: str) -> int:
    result = podman(
        "run",
        "--rm",
        "--read-only",
        "--user=65532",
        "--network=host",
        f"--volume={log}:/dev/termination-log",
        image,
        *args,
        check=False,
    )
    return result.returncode


def test_the_reasons_are_written_where_the_kubelet_reads_them(image: str, tmp_path: Path) -> None:
    log = tmp_path / "termination-log"
    log.write_text("")
    log.chmod(0o666)  # the kubelet makes it writable for the container's user
    port = free_port()
    assert run(image, log, "-t", "1", f"tcp://127.0.0.1:{port}") == 124
    assert log.read_text() == (
        f"timed out after 1s\ntcp://127.0.0.1:{port}: 127.0.0.1:{port} connection refused\n"
    )


def test_nothing_on_success(image: str, tmp_path: Path) -> None:
    log = tmp_path / "termination-log"
    log.write_text("")
    log.chmod(0o666)
    port = free_port()
    with tcp_listener(port):
        assert run(image, log, "-t", "10", f"tcp://127.0.0.1:{port}") == 0
    assert log.read_text() == ""
