"""The peak RSS of one waitfor run, measured so that it can exceed nothing but its own.

A process's peak RSS starts at its parent's when it is spawned (Linux carries the high-water
mark over fork and exec), so a command started by pytest reports at least pytest's peak. The run
is therefore started by a fresh, small helper process, which reads its child's peak
(RUSAGE_CHILDREN).
"""

from __future__ import annotations

import subprocess
import sys

MEASURE = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "print(done.returncode, peak, done.stderr[-500:])\n"
)


def peak_rss_kib(*args: str, timeout: float = 120) -> tuple[int, int, str]:
    """(exit code, peak RSS in KiB, the end of stderr) of ``python -m waitfor ARGS``."""
    command = [sys.executable, "-m", "waitfor", *args]
    result = subprocess.run(
        [sys.executable, "-c", MEASURE, *command],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    code, peak, stderr = result.stdout.split(" ", 2)
    return int(code), int(peak), stderr
