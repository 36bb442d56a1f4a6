"""The command run as users run it: ``python -m waitfor`` in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys


def waitfor(
    *args: str, env: dict[str, str] | None = None, timeout: float = 30, clean: bool = False
) -> subprocess.CompletedProcess[str]:
    """``waitfor ARGS``, its output captured; ``env`` is added to this process's environment,
    from which ``clean`` first takes the WAITFOR_ variables a developer may have set."""
    base = {k: v for k, v in os.environ.items() if not (clean and k.startswith("WAITFOR_"))}
    return subprocess.run(
        [sys.executable, "-m", "waitfor", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**base, **(env or {})},
    )
