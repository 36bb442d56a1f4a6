"""Which modules a run of the command imported: the cold-start tests' evidence."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from waitfor.core.first_attempt import BUDGET_SCALE

#: lists sys.modules at exit (atexit) after main(argv)
AT_EXIT = (
    "import atexit, sys\n"
    "atexit.register(lambda: open(sys.argv[1], 'w').write(' '.join(sys.modules)))\n"
    "from waitfor.cli.command import main\n"
    "main(sys.argv[2:])\n"
)
#: the console script's run(), which ends with os._exit (no atexit): lists them there
AT_OS_EXIT = (
    "import os, sys\n"
    "from waitfor.cli import command as cli\n"
    "listing = sys.argv.pop(1)\n"
    "def listed(code):\n"
    "    open(listing, 'w').write(' '.join(sys.modules))\n"
    "    real(code)\n"
    "real, os._exit = os._exit, listed\n"
    "cli.run()\n"
)


def run_listing_imports(
    folder: Path,
    *args: str,
    env: dict[str, str] | None = None,
    os_exit: bool = False,
    timeout: float = 30,
    unhurried: bool = False,
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """The command with ``args`` in a fresh interpreter, and the modules it had imported by its
    end (none listed when it did not get there).

    ``unhurried``: the quick first attempt's budget times 20, for a test of what a ready target's
    quick path imports, not of its speed (a TLS handshake on a loaded machine outlasts 0.25 s,
    and the runner's path then imports the event loop)."""
    listing = folder / "modules"
    script = AT_OS_EXIT if os_exit else AT_EXIT
    if unhurried:
        env = {**(os.environ if env is None else env), BUDGET_SCALE: "20"}
    result = subprocess.run(
        [sys.executable, "-c", script, str(listing), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    imported = set(listing.read_text().split()) if listing.exists() else set()
    return result, imported
