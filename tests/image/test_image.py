"""The container image, built and run for real with podman."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable

import pytest

from tests.image.conftest import podman, podman_popen
from tests.pg import Cluster
from tests.servers import free_port

BASE = "localhost/waitfor-base:bookworm"


def size(name: str) -> int:
    return int(podman("image", "inspect", name, "--format", "{{.Size}}").stdout)


def test_image_metadata_and_size(image: str, capsys: pytest.CaptureFixture[str]) -> None:
    [info] = json.loads(podman("image", "inspect", image).stdout)
    config = info["Config"]
    assert config["Entrypoint"] == ["waitfor"]
    assert config["User"] == "65532:65532"
    assert "PYTHONUNBUFFERED=1" in config["Env"]
    labels = config["Labels"]
    for label in ("source", "version", "licenses"):
        assert labels[f"org.opencontainers.image.{label}"]
    total, base = size(image), size(BASE)
    with capsys.disabled():
        print(f"\nimage {image}: {total / 1e6:.1f} MB, {(total - base) / 1e6:.1f} MB over the base")
    assert total - base < 60e6  # the interpreter is the base's; waitfor + deps are small


def test_help_and_version(image: str) -> None:
    result = podman("run", "--rm", "--network=none", image, "--help")
    assert "Usage: waitfor [OPTIONS] TARGET... [-- COMMAND...]" in result.stdout
    assert podman("run", "--rm", "--network=none", image, "--version").stdout.startswith("waitfor ")


def test_read_only_root_non_root_user_and_no_shell(image: str) -> None:
    """Bytecode is compiled at build time, nothing is written, and no shell is involved."""
    masked = [f"--volume=/dev/null:{shell}:ro" for shell in ("/usr/bin/dash", "/usr/bin/bash")]
    result = podman(
        "run",
        "--rm",
        "--read-only",
        "--user=65532",
        "--network=host",
        *masked,
        image,
        "tcp://127.0.0.1:5432",
    )
    assert "tcp://127.0.0.1:5432 ready after" in result.stderr
    shebang = podman(
        "run",
        "--rm",
        "--network=none",
        "--entrypoint=/opt/waitfor/bin/python",
        image,
        "-c",
        "print(open('/opt/waitfor/bin/waitfor').readline())",
    ).stdout
    assert shebang.startswith("#!/opt/waitfor/bin/python")


def test_waits_for_postgres_started_later(image: str, pg_cluster: Callable[[], Cluster]) -> None:
    cluster = pg_cluster()
    waiter = podman_popen("run", "--rm", "--network=host", image, "-t", "60", cluster.url())
    time.sleep(2.0)  # the container is up and waiting
    assert waiter.poll() is None
    cluster.start()
    started = time.monotonic()
    assert waiter.wait(timeout=30) == 0
    assert time.monotonic() - started < 3.0
    assert f"{cluster.url()} is ready (accepting connections)" in waiter.stderr.read()  # type: ignore[union-attr]


def test_dependency_that_never_comes_times_out(image: str) -> None:
    port = free_port()
    started = time.monotonic()
    result = podman(
        "run", "--rm", "--network=host", image, "-t", "2", f"tcp://127.0.0.1:{port}", check=False
    )
    assert result.returncode == 124
    assert time.monotonic() - started < 15
    assert f"waitfor: tcp://127.0.0.1:{port} still not ready after 2.00s" in result.stderr
    assert "connection refused" in result.stderr


@pytest.mark.parametrize("init", [False, True], ids=["waitfor-is-pid-1", "with-init"])
def test_podman_stop_exits_143_at_once(image: str, init: bool) -> None:
    name = f"waitfor-stop-{'init' if init else 'pid1'}-{free_port()}"
    args = ["run", "--detach", f"--name={name}", "--network=host"]
    if init:
        args.append("--init")
    podman(*args, image, "-t", "5m", f"tcp://127.0.0.1:{free_port()}")
    try:
        time.sleep(1.5)  # waiting, handlers installed
        started = time.monotonic()
        podman("stop", "--time=10", name, timeout=60)
        took = time.monotonic() - started
        code = podman("inspect", name, "--format", "{{.State.ExitCode}}").stdout.strip()
        assert code == "143"
        assert took < 2.5, f"podman stop took {took:.2f}s"  # not the 10 s grace period
        print(f"podman stop ({'--init' if init else 'PID 1'}): {took:.2f}s")
    finally:
        podman("rm", "--force", name, check=False)


@pytest.mark.skipif(shutil.which("podman") is None, reason="podman is installed by the image build")
def test_podman_is_configured_for_this_machine(image: str) -> None:
    info = json.loads(podman("info", "--format", "json").stdout)
    assert info["host"]["cgroupManager"] == "cgroupfs"
    assert info["host"]["ociRuntime"]["name"] == "runc"
