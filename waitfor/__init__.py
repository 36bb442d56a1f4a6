"""waitfor: wait until dependencies are really ready.

from waitfor import wait_for
wait_for("postgresql://db:5432/app", "https://api/healthz", timeout="2m")
"""

from waitfor.api import wait_for, wait_for_async
from waitfor.backoff import Backoff
from waitfor.errors import (
    CheckFailed,
    Interrupted,
    TargetError,
    UsageError,
    WaitforError,
    WaitTimeout,
)
from waitfor.runner import Event, EventType, TargetResult
from waitfor.targets import Target, parse_target

__all__ = [
    "Backoff",
    "CheckFailed",
    "Event",
    "EventType",
    "Interrupted",
    "Target",
    "TargetError",
    "TargetResult",
    "UsageError",
    "WaitTimeout",
    "WaitforError",
    "parse_target",
    "wait_for",
    "wait_for_async",
]
__version__ = "0.1.0"
