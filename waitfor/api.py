"""The library entry points: keyword-only, taking targets and durations as users write them.

asyncio and the runner are imported when a wait starts, not with this module: importing waitfor
should cost what the CLI's start-up costs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from waitfor.backoff import Backoff
from waitfor.durations import parse_duration
from waitfor.errors import UsageError, WaitTimeout
from waitfor.events import Event, EventHandler, TargetResult
from waitfor.targets import Target, parse_target

if TYPE_CHECKING:
    from waitfor.report import Reporter

DEFAULT_TIMEOUT = 60.0
DEFAULT_ATTEMPT_TIMEOUT = 5.0


async def wait_for_async(
    *targets: str | Target,
    timeout: float | str | None = DEFAULT_TIMEOUT,
    attempt_timeout: float | str = DEFAULT_ATTEMPT_TIMEOUT,
    invert: bool = False,
    backoff: Backoff | None = None,
    on_event: EventHandler | None = None,
    reporter: Reporter | None = None,
    defaults: Mapping[str, str] | None = None,
) -> list[TargetResult]:
    """Wait until every target is ready (``invert``: down); return each target's result.

    ``timeout=None`` or ``0`` waits forever (as ``--timeout 0`` does). Raises
    :class:`~waitfor.errors.WaitTimeout` (with every target's last reason) when the deadline
    passes, :class:`~waitfor.errors.UsageError` for bad input, :class:`~waitfor.errors.CheckFailed`
    when a check cannot succeed by retrying.
    """
    from waitfor.runner import run

    parsed = _targets(targets, defaults)
    deadline = _deadline(timeout)
    per_attempt = _seconds(attempt_timeout, "attempt_timeout")

    def handle(event: Event) -> None:
        for handler in (reporter, on_event):
            if handler is not None:
                handler(event)

    if reporter is not None:
        reporter.begin(parsed, deadline)
    try:
        results = await run(
            parsed,
            timeout=deadline,
            attempt_timeout=per_attempt,
            backoff=backoff or Backoff(),
            invert=invert,
            on_event=handle,
        )
    except WaitTimeout as exc:
        if reporter is not None:
            reporter.finish(exc.results)
        raise
    if reporter is not None:
        reporter.finish(results)
    return results


def wait_for(
    *targets: str | Target,
    timeout: float | str | None = DEFAULT_TIMEOUT,
    attempt_timeout: float | str = DEFAULT_ATTEMPT_TIMEOUT,
    invert: bool = False,
    backoff: Backoff | None = None,
    on_event: EventHandler | None = None,
    reporter: Reporter | None = None,
    defaults: Mapping[str, str] | None = None,
) -> list[TargetResult]:
    """Blocking form of :func:`wait_for_async`; not for use inside a running event loop."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise UsageError(
            "wait_for() blocks and cannot run inside a running event loop; "
            "use 'await wait_for_async(...)' there"
        )
    return asyncio.run(
        wait_for_async(
            *targets,
            timeout=timeout,
            attempt_timeout=attempt_timeout,
            invert=invert,
            backoff=backoff,
            on_event=on_event,
            reporter=reporter,
            defaults=defaults,
        )
    )


def _targets(targets: Sequence[str | Target], defaults: Mapping[str, str] | None) -> list[Target]:
    if not targets:
        raise UsageError("no targets given")
    parsed = []
    for target in targets:
        if isinstance(target, Target):
            parsed.append(target)
        elif isinstance(target, str):
            parsed.append(parse_target(target, defaults))
        else:
            raise UsageError(f"a target must be a string or Target, not {type(target).__name__}")
    return parsed


def _deadline(timeout: float | str | None) -> float | None:
    """Seconds to wait, or None for ever: ``None`` and ``0`` (any spelling: "0s") as in the CLI."""
    if timeout is None:
        return None
    return _seconds(timeout, "timeout", zero=True) or None


def _seconds(value: float | str, name: str, zero: bool = False) -> float:
    if isinstance(value, str):
        try:
            value = parse_duration(value)
        except ValueError as exc:
            raise UsageError(f"{name}: {exc}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"{name} must be seconds or a duration string, not {value!r}")
    if not (math.isfinite(value) and (value > 0 or (zero and value == 0))):
        raise UsageError(f"{name} must be a positive number of seconds, not {value!r}")
    return float(value)
