"""When "notices readiness within about half a second" holds: after the attempt in flight ends.

An attempt that hangs (a command that does not exit, a nameserver that does not answer) is not
raced by a second one: it runs to its end, at most ``--attempt-timeout``, and the next attempt,
at most one backoff delay (0.6 s) later, notices. An exec check is never run twice at once.
The README says exactly this; these tests hold it to that bound.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.support.command import waitfor

#: a command that hangs on its first run and exits 0 on every later one; it records whether two
#: runs ever overlapped (a lock directory taken and left by each run)
SCRIPT = """#!/bin/sh
state="$1"
# a run still alive (its pid recorded and answering) while this one starts is an overlap; a run
# killed at the attempt timeout is not
if [ -e "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then
    echo overlap >> "$state/log"
fi
echo $$ > "$state/pid"
echo run >> "$state/log"
if [ ! -e "$state/ran" ]; then
    : > "$state/ran"
    sleep 30 & wait
fi
"""


def test_a_hanging_attempt_is_noticed_half_a_second_after_its_timeout(tmp_path: Path) -> None:
    script = tmp_path / "check.sh"
    script.write_text(SCRIPT)
    script.chmod(0o755)
    target = f"exec:{script} {tmp_path}"
    began = time.monotonic()
    done = waitfor("-t", "20s", "--attempt-timeout", "2s", target)
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    # ready as soon as the first run is killed at 2 s: the next attempt follows within the
    # backoff's first delays (0.05 s), and start-up is a fraction of a second
    assert 2.0 <= took < 2.0 + 1.5, took
    runs = (tmp_path / "log").read_text().split()
    assert "overlap" not in runs, runs
    assert runs == ["run", "run"], runs
