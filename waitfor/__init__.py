"""waitfor: wait until dependencies are really ready.

from waitfor import wait_for
wait_for("postgresql://db:5432/app", "https://api/healthz", timeout="2m")

Names are imported on first use (``waitfor.wait_for`` imports asyncio; ``import waitfor`` alone
does not): start-up time is what an init container is made of.
"""

# Nothing is imported here at run time, not even typing (~20 ms of a cold start): the command's
# signal handlers (waitfor.__main__) come after this module, and a Ctrl-C in that time would
# find Python's default, a KeyboardInterrupt traceback. mypy reads TYPE_CHECKING as True.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from waitfor.api import wait_for, wait_for_async
    from waitfor.base.backoff import Backoff
    from waitfor.cli.report import Reporter
    from waitfor.core.events import Event, EventHandler, EventType, TargetResult
    from waitfor.core.registry import KindError
    from waitfor.core.targets import Target, parse_target
    from waitfor.errors import (
        CheckFailed,
        Interrupted,
        TargetError,
        UsageError,
        WaitforError,
        WaitTimeout,
    )
    from waitfor.kind import Address, Check, Deadline, Options, Outcome

_WHERE = {
    "Address": "waitfor.kind",
    "Backoff": "waitfor.base.backoff",
    "Check": "waitfor.kind",
    "CheckFailed": "waitfor.errors",
    "Deadline": "waitfor.kind",
    "Event": "waitfor.core.events",
    "EventHandler": "waitfor.core.events",
    "EventType": "waitfor.core.events",
    "Interrupted": "waitfor.errors",
    "KindError": "waitfor.core.registry",
    "Options": "waitfor.kind",
    "Outcome": "waitfor.kind",
    "Reporter": "waitfor.cli.report",
    "Target": "waitfor.core.targets",
    "TargetError": "waitfor.errors",
    "TargetResult": "waitfor.core.events",
    "UsageError": "waitfor.errors",
    "WaitTimeout": "waitfor.errors",
    "WaitforError": "waitfor.errors",
    "parse_target": "waitfor.core.targets",
    "wait_for": "waitfor.api",
    "wait_for_async": "waitfor.api",
}
__all__ = [
    "Address",
    "Backoff",
    "Check",
    "CheckFailed",
    "Deadline",
    "Event",
    "EventHandler",
    "EventType",
    "Interrupted",
    "KindError",
    "Options",
    "Outcome",
    "Reporter",
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


def __getattr__(name: str) -> "Any":
    if name not in _WHERE:
        raise AttributeError(f"module 'waitfor' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(_WHERE[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> "list[str]":
    return sorted({*globals(), *__all__})
