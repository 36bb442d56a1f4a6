"""The benchmark still runs: bench/run in its tiny configuration (timings are not asserted)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(os.geteuid() != 0, reason="the benchmark's PostgreSQL runs as root's helper")
@pytest.mark.timeout(900)  # every kind adds detection trials with real servers: minutes, not 120 s
def test_bench_smoke(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(ROOT / "bench" / "run"), "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results) >= {"cold_start", "detection", "probe_rate", "fan_out", "footprint"}
    assert set(results["detection"]) == {"tcp", "http", "postgresql", "mysql", "redis", "dns"}
    report = (tmp_path / "README.md").read_text()
    assert "| waitfor tcp |" in report
    for plot in ("cold_start.png", "detection.png", "fan_out.png"):
        assert (tmp_path / plot).stat().st_size > 1000
