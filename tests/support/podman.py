"""podman for the image tests, with this repository's containers.conf."""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "CONTAINERS_CONF": str(ROOT / "images" / "containers.conf")}
#: one image build at a time on the machine: the images' names are machine-wide (xdist workers,
#: other checkouts' suites), and two builds at once would race on them and on images/.cache
BUILD_LOCK = Path(tempfile.gettempdir()) / "waitfor-podman-build.lock"


def podman(
    *args: str, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, env=ENV
    )
    if check and result.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed:\n{result.stderr}")
    return result


def podman_popen(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["podman", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
    )


def build(script: str) -> subprocess.CompletedProcess[str]:
    """Runs ``images/<script>`` (which prints the image's name), holding the build lock."""
    with open(BUILD_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return subprocess.run(
            [str(ROOT / "images" / script)], capture_output=True, text=True, timeout=1200, env=ENV
        )
