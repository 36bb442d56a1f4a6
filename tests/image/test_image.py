"""The container image, built and run for real with podman."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import stat
import subprocess
import tarfile
import time
from collections.abc import Callable

import pytest

from tests.support.pg import Cluster
from tests.support.podman import ENV, podman, podman_popen
from tests.support.ports import free_port


def size(name: str) -> int:
    return int(podman("image", "inspect", name, "--format", "{{.Size}}").stdout)


def gzipped_size(name: str) -> int:
    """The image as a registry would ship it: its layers, gzipped."""
    archive = subprocess.run(
        ["podman", "image", "save", "--format=docker-archive", name],
        capture_output=True,
        check=True,
        env=ENV,
        timeout=120,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        layers = [
            tar.extractfile(m) for m in tar.getmembers() if m.isfile() and m.name.endswith(".tar")
        ]
        return sum(len(gzip.compress(layer.read(), 6)) for layer in layers if layer)


def test_image_metadata_and_size(image: str, capsys: pytest.CaptureFixture[str]) -> None:
    [info] = json.loads(podman("image", "inspect", image).stdout)
    config = info["Config"]
    assert config["Entrypoint"] == ["waitfor"]
    assert config["User"] == "65532:65532"
    assert "PYTHONUNBUFFERED=1" in config["Env"]
    labels = config["Labels"]
    for label in ("source", "version", "licenses"):
        assert labels[f"org.opencontainers.image.{label}"]
    assert len(info["RootFS"]["Layers"]) == 1  # FROM scratch: one layer, nothing beneath
    total, packed = size(image), gzipped_size(image)
    with capsys.disabled():
        print(f"\nimage {image}: {total / 1e6:.2f} MB, {packed / 1e6:.2f} MB gzipped")
    assert total <= 36e6
    assert packed <= 13.5e6


# Run by the image's own interpreter (there is nothing else in it): every file in the image.
LIST_FILES = """
import json, os
entries = []
for top in os.listdir("/"):
    if top in ("proc", "sys", "dev"):
        continue
    for folder, dirs, files in os.walk("/" + top):
        for name in dirs + files:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            entries.append([path, info.st_uid, info.st_mode])
print(json.dumps(entries))
"""


WRITABLE = ("/tmp", "/home/nonroot")  # noqa: S108 (mount points for emptyDir volumes)


def test_no_shell_no_package_manager_nothing_writable(image: str) -> None:
    listing = podman(
        "run",
        "--rm",
        "--network=none",
        "--entrypoint=/opt/waitfor/bin/python",
        image,
        "-c",
        LIST_FILES,
    ).stdout
    entries = json.loads(listing)
    names = {os.path.basename(path) for path, _, _ in entries}
    assert {"waitfor", "os.pyc"} <= names  # the listing saw the image
    for tool in ("sh", "bash", "dash", "busybox", "apt", "apt-get", "dpkg", "pip", "perl"):
        assert tool not in names
    assert not [path for path, _, _ in entries if path.endswith(".py")]  # bytecode only
    for path, uid, mode in entries:
        if path not in WRITABLE and not stat.S_ISLNK(mode):
            assert (uid, mode & 0o002) == (0, 0), path  # user 65532 can change nothing


def test_help_and_version(image: str) -> None:
    result = podman("run", "--rm", "--network=none", image, "--help")
    assert "Usage: waitfor [OPTIONS] TARGET... [-- COMMAND...]" in result.stdout
    assert podman("run", "--rm", "--network=none", image, "--version").stdout.startswith("waitfor ")


def test_read_only_root_non_root_user(image: str) -> None:
    """Bytecode is compiled at build time and nothing is written."""
    result = podman(
        "run",
        "--rm",
        "--read-only",
        "--user=65532",
        "--network=host",
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
    assert f"{cluster.url()} is ready: accepting connections" in waiter.stderr.read()  # type: ignore[union-attr]


def test_dependency_that_never_comes_times_out(image: str) -> None:
    port = free_port()
    started = time.monotonic()
    result = podman(
        "run", "--rm", "--network=host", image, "-t", "2", f"tcp://127.0.0.1:{port}", check=False
    )
    assert result.returncode == 124
    assert time.monotonic() - started < 15
    # the time is measured: a loaded machine may print 2.01s
    assert re.search(rf"tcp://127.0.0.1:{port} still not ready after 2\.\d\ds", result.stderr)
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


def test_podman_is_configured_for_this_machine(image: str) -> None:
    info = json.loads(podman("info", "--format", "json").stdout)
    assert info["host"]["cgroupManager"] == "cgroupfs"
    assert info["host"]["ociRuntime"]["name"] == "runc"
