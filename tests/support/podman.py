"""podman for the image tests, with this repository's containers.conf."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "CONTAINERS_CONF": str(ROOT / "images" / "containers.conf")}


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
