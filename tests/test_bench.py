"""The benchmark still runs: bench/run in its tiny configuration (timings are not asserted)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(os.geteuid() != 0, reason="the benchmark's PostgreSQL runs as root's helper")
@pytest.mark.timeout(900)  # every kind adds detection trials with real servers: minutes, not 120 s
def test_bench_smoke(tmp_path: Path) -> None:
    # A session of its own, killed whole at the end: a bench cut short must not leave its
    # servers (PostgreSQL, dnsmasq, brokers) running.
    bench = subprocess.Popen(
        [str(ROOT / "bench" / "run"), "--quick", "--out", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        _, stderr = bench.communicate(timeout=840)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(bench.pid, signal.SIGKILL)
        bench.wait()
    assert bench.returncode == 0, stderr[-2000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results) >= {"cold_start", "detection", "probe_rate", "fan_out", "footprint"}
    # callgrind's counts: real runs of both, and the yardstick well above bare start-up
    assert set(results["instructions"]) == {"wait-for-it tcp", "waitfor tcp"}
    assert all(count > 50e6 for count in results["instructions"].values())
    assert set(results["detection"]) == {"tcp", "http", "postgresql", "mysql", "redis", "dns"}
    report = (tmp_path / "README.md").read_text()
    assert "| waitfor tcp |" in report
    assert "## Cold start in instructions" in report
    for plot in ("cold_start.png", "detection.png", "fan_out.png"):
        assert (tmp_path / plot).stat().st_size > 1000
