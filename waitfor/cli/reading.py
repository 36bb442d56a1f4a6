"""What both readings of the command line share (the quick one in :mod:`.command`, click's in
:mod:`.clickparse`): the options' defaults, the ``--`` split, and how a usage error ends the
command."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from waitfor.cli import termination
from waitfor.cli.report import error_line
from waitfor.core.backoff import MIN_DELAY

MIN_INTERVAL = MIN_DELAY  # the library holds the same floor
#: the options' defaults, as --help shows them; click's and quick_params' values both come from here
DEFAULTS: dict[str, Any] = {
    "timeout": "60s",
    "attempt_timeout": "5s",
    "max_interval": "0.6s",
    "invert": False,
    "stable": "0s",
    "any_ready": False,
    "output": "auto",
    "quiet": False,
    "insecure": False,
    "cacert": None,
    "cert": None,
    "key": None,
    "key_password": None,
    "resolv_conf": None,
    "termination_log": None,
    "events": False,
}
#: the variables waitfor reads: WAITFOR_TARGETS and one per option (click's auto_envvar_prefix)
VARIABLES = frozenset(
    {"WAITFOR_TARGETS", "WAITFOR_ANY"}
    | {f"WAITFOR_{name.upper()}" for name in DEFAULTS if name != "any_ready"}
)


def split_command(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(waitfor's own words, the command after the first ``--``)."""
    if "--" in args:
        split = list(args).index("--")
        return list(args[:split]), list(args[split + 1 :])
    return list(args), []


#: errors are JSON lines when the output asked for is json (known before click has parsed it)
ERRORS = {"json": False}


def die(message: str, code: int) -> NoReturn:
    first_line = " ".join(message.split())
    termination.current.failed(first_line)
    sys.stderr.write(error_line(first_line, code, as_json=ERRORS["json"]))
    sys.exit(code)
