"""docker: against an engine that answers what no engine should (a scripted Unix socket): the
check says why it is not ready, through the quick first attempt and the runner's, and never
fails with a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kinds.docker.test_docker import probe
from tests.support.servers import Script, unix_http_server

NESTED = b"[" * 100_000 + b"]" * 100_000  # the json parser recurses: a RecursionError


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (200, NESTED, "the engine's answer is not JSON"),
        (200, b'{"State": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_001, "not JSON"),
        (500, NESTED, "the engine answered HTTP 500"),
    ],
)
def test_deeply_nested_json_is_not_json(
    tmp_path: Path, status: int, body: bytes, reason: str
) -> None:
    sock = tmp_path / "engine.sock"
    with unix_http_server(str(sock), Script(status=status, body=body)):
        assert probe("docker:app", {"DOCKER_HOST": f"unix://{sock}"}).reason.endswith(reason)
        run = subprocess.run(
            [sys.executable, "-m", "waitfor", "-t", "1", "docker:app"],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "DOCKER_HOST": f"unix://{sock}"},
        )
    assert run.returncode == 124, run.stderr
    assert "Traceback" not in run.stderr
    assert reason in run.stderr
