"""What the runner tells the world: events while waiting, and each target's result at the end.

Its own module so the reporters, the errors and the library's callers can name these types
without importing the runner (and asyncio with it).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from waitfor.base.values import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from waitfor.core.target import Target


class EventType(StrEnum):
    ATTEMPT = "attempt"  # an attempt started
    NOT_READY = "not_ready"  # an attempt ended without readiness; reason says why
    READY = "ready"  # the target is ready (or, inverted, down); no more attempts
    FAILED = "failed"  # a permanent problem; the wait ends with a configuration error
    TIMED_OUT = "timed_out"  # the deadline passed before this target was ready


class Event(Value):
    type: EventType
    target: Target
    attempt: int
    elapsed: float  # seconds since the wait began
    reason: str = ""  # not ready / failed / timed out: why; ready: what showed it
    #: not ready only because ``--stable``'s window is not full yet: every answer was ready
    holding: bool = False


class TargetResult(Value):
    target: Target
    ready: bool
    attempts: int
    elapsed: float  # when it became ready, or how long it was awaited
    reason: str  # the last reason seen
    cancelled: bool = False  # --any: still waiting when another target was ready first


EventHandler = Callable[[Event], None]
