"""Against a dependency that is down, waitfor probes no faster than its documented backoff
(at most 2 probes a second per target once settled), and waiters started together drift apart."""

from __future__ import annotations

import itertools
import statistics
import subprocess
import sys
import time
from collections import defaultdict

from tests.support.servers import Script, http_server


def request_times(script: Script) -> dict[str, list[float]]:
    per_waiter: dict[str, list[float]] = defaultdict(list)
    for _, _, headers, at in script.timed_requests():
        per_waiter[headers.get("X-Waiter", "")].append(at)
    return per_waiter


def test_probe_rate_stays_within_the_backoff_limits() -> None:
    with http_server(Script(status=503)) as (url, script):
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "waitfor", "-q", "-t", "5", url], capture_output=True, timeout=30
        )
        assert result.returncode == 124
        times = [at - started for at in request_times(script)[""]]
    # 0.05 + 0.1 + 0.2 + 0.4 s, then every 0.5-0.6 s: at most 5 in the first second, 2/s after
    assert 8 <= len(times) <= 15, times
    settled = [b - a for a, b in itertools.pairwise(times[5:])]
    assert settled, times
    assert all(0.45 <= gap <= 0.8 for gap in settled), settled
    print(
        f"\n{len(times)} probes in 5 s; settled intervals {min(settled):.3f}-{max(settled):.3f} s"
    )


def test_waiters_started_together_do_not_probe_in_lockstep() -> None:
    with http_server(Script(status=503)) as (url, script):
        waiters = [
            subprocess.Popen(
                [sys.executable, "-m", "waitfor", "-q", "-t", "8", f"{url}#header=X-Waiter:%20{n}"]
            )
            # 8 s: eight interpreters starting at once on a busy 2-core machine can take seconds
            # before their first probe, and each needs several settled intervals after it.
            for n in range(8)
        ]
        for waiter in waiters:
            assert waiter.wait(timeout=30) == 124
        per_waiter = request_times(script)
    assert len(per_waiter) == 8
    intervals = [b - a for times in per_waiter.values() for a, b in itertools.pairwise(times[5:])]
    assert len(intervals) >= 8, per_waiter
    spread = statistics.pstdev(intervals)
    print(
        f"\nsettled intervals across 8 waiters: mean {statistics.mean(intervals):.3f} s, "
        f"stdev {spread * 1000:.0f} ms"
    )
    # Fixed intervals would repeat to the millisecond; the jitter spreads them over 0.5-0.6 s.
    assert spread > 0.01
    assert max(intervals) - min(intervals) > 0.04
