"""The library entry points: keyword-only, taking targets and durations as users write them.

One path for every caller: :class:`Wait` validates, :meth:`Wait.run_sync` makes the quick first
attempt and, if that does not settle it, runs the event loop; :func:`wait_for`, the CLI and the
testcontainers strategy all go through it (the last two with a ``guard`` of their own: signals,
a container that exits). asyncio and the runner are imported when a wait needs them, not with
this module: importing waitfor should cost what the CLI's start-up costs.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar

from waitfor.base.backoff import MIN_DELAY, Backoff
from waitfor.core.durations import MAX_SECONDS, parse_duration
from waitfor.core.events import Event, EventHandler, TargetResult
from waitfor.core.targets import Target, parse_target
from waitfor.errors import UsageError, WaitTimeout

TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging
    from typing import Any

    from waitfor.cli.report import Reporter
    from waitfor.core.check import Check

DEFAULT_TIMEOUT = 60.0
DEFAULT_ATTEMPT_TIMEOUT = 5.0
#: the least of the timeout a --delay must leave for the first attempt (or the attempt timeout,
#: if shorter): an attempt begun just before the deadline ends without an answer (importing its
#: client alone, httpx's, takes ~0.1-0.4 s), a wait that could never say anything
FIRST_ATTEMPT_ROOM = 1.0
#: set while a wait runs on the event loop: the tasks it starts (its checks' requests) inherit it
_IN_WAIT: ContextVar[bool] = ContextVar("waitfor_in_wait", default=False)


class Wait:
    """One wait, validated and ready to run: the first attempt without the event loop, then all.

    :meth:`run_sync` calls :meth:`ready_now` first: when every target is ready at once (the
    common case for an init container) the wait ends there, without importing asyncio.
    Otherwise :meth:`run` waits as usual, against the same deadline and clock. The parameters
    are those of :func:`wait_for`; ``log`` also sends the events to the ``waitfor`` logger (as
    :func:`wait_for` does).
    """

    def __init__(
        self,
        *targets: str | Target,
        timeout: float | str | None = DEFAULT_TIMEOUT,
        attempt_timeout: float | str = DEFAULT_ATTEMPT_TIMEOUT,
        invert: bool = False,
        backoff: Backoff | None = None,
        on_event: EventHandler | None = None,
        reporter: Reporter | None = None,
        defaults: Mapping[str, str | bool] | None = None,
        stable: float | str = 0.0,
        any_ready: bool = False,
        interval: float | str | None = None,
        delay: float | str = 0.0,
        log: bool = False,
    ) -> None:
        self.targets = _targets(targets, _defaults(defaults))
        self.once = timeout is not None and _seconds(timeout, "timeout", zero=True) == 0
        self.timeout = None if self.once else _deadline(timeout)
        self.attempt_timeout = _seconds(attempt_timeout, "attempt_timeout")
        if not isinstance(invert, bool):
            raise UsageError(f"invert must be True or False, not {type(invert).__name__}")
        self.invert = invert
        self.stable = _seconds(stable, "stable", zero=True)
        if self.once and any(self._stable(target) for target in self.targets):
            raise UsageError("timeout=0 makes one attempt per target: no stable window can pass")
        if not isinstance(any_ready, bool):
            raise UsageError(f"any_ready must be True or False, not {type(any_ready).__name__}")
        self.any_ready = any_ready
        self.backoff = _backoff(backoff) if interval is None else _interval(interval, backoff)
        self.delay = _seconds(delay, "delay", zero=True)
        if self.timeout is not None and self.delay:
            _check_delay(self.delay, self.timeout, self.attempt_timeout)
        if on_event is not None and not callable(on_event):
            raise UsageError(f"on_event must be callable, not {type(on_event).__name__}")
        self.on_event = on_event
        self.reporter = reporter
        self.log = _logger(self.targets) if log else None
        self.started: float | None = None
        #: when each target's synchronous attempt began (seconds after ``started``): an attempt
        #: left without an answer is continued by the runner's first, and counted as one
        self.quick: list[float] = []
        #: the checks those attempts asked: the runner goes on with them (what they learnt stays)
        self.quick_checks: list[Check[Any]] = []

    def ready_now(self) -> list[TargetResult] | None:
        """Every target's result if a first, synchronous attempt finds them all ready, else None.

        Nothing is reported unless all are ready; then the events and lines are the ones the
        runner would have produced. Inverted waits, and kinds without a synchronous probe, are
        left to :meth:`run`.
        """
        from waitfor.core import first_attempt as quickstart

        started = self._begin()
        if self.once:
            return None  # one attempt per target: the runner's, whose "not ready" says why
        if self.invert or self.any_ready or any(self._stable(t) for t in self.targets):
            return None  # "ready now" is not stable yet; --any reports as the runner does
        if self.delay:
            return None  # the first attempt comes later, on the event loop
        budget = min(self.attempt_timeout, self.timeout or self.attempt_timeout)
        results = quickstart.all_ready_now(
            self.targets,
            started=started,
            budget=budget,
            emit=self._emit,
            began_at=self.quick,
            made=self.quick_checks,
        )
        if results is not None and self.reporter is not None:
            self.reporter.finish(results)
        return results

    async def run(self) -> list[TargetResult]:
        """Wait until every target is ready (``invert``: down), on the event loop."""
        from waitfor.core.runner import run

        started = self._begin()
        _quiet_own_requests()
        in_wait = _IN_WAIT.set(True)
        try:
            results = await run(
                self.targets,
                timeout=self.timeout,
                attempt_timeout=self.attempt_timeout,
                backoff=self.backoff,
                invert=self.invert,
                on_event=self._emit,
                # since the start: the synchronous first attempt and the event loop's start
                # (importing asyncio) count against the deadline
                spent=time.monotonic() - started,
                first_began=self.quick,
                first_checks=self.quick_checks,
                once=self.once,
                stable=self.stable,
                any_ready=self.any_ready,
                delay=self.delay,
            )
        except WaitTimeout as exc:
            if self.reporter is not None:
                self.reporter.finish(exc.results)
            raise
        finally:
            _IN_WAIT.reset(in_wait)
        if self.reporter is not None:
            self.reporter.finish(results)
        return results

    def run_sync(
        self, guard: Callable[[], AbstractAsyncContextManager[object]] | None = None
    ) -> list[TargetResult]:
        """The whole wait, blocking: :meth:`ready_now`, else :meth:`run` in a new event loop.

        ``guard``: an async context manager entered on the loop around the wait (the CLI's
        signal handlers, the testcontainers strategy's container watcher); the wait's coroutine
        is made only once it is entered, so nothing is left "never awaited" if it fails.
        """
        results = self.ready_now()
        if results is not None:
            return results
        import asyncio

        async def main() -> list[TargetResult]:
            if guard is None:
                return await self.run()
            async with guard():
                return await self.run()

        running = main()
        try:
            return asyncio.run(running)
        except BaseException:  # no descriptor for the loop, a signal: not "never awaited"
            running.close()
            raise

    def _stable(self, target: Target) -> float:
        return self.stable if target.stable is None else target.stable

    def _begin(self) -> float:
        if self.started is None:
            self.started = time.monotonic()
            if self.reporter is not None:
                self.reporter.invert = self.invert
                self.reporter.begin(self.targets, self.timeout)
        return self.started

    def _emit(self, event: Event) -> None:
        for handler in (self.reporter, self.on_event):
            if handler is not None:
                handler(event)
        if self.log is not None:
            self.log(event)


async def wait_for_async(
    *targets: str | Target,
    timeout: float | str | None = DEFAULT_TIMEOUT,
    attempt_timeout: float | str = DEFAULT_ATTEMPT_TIMEOUT,
    invert: bool = False,
    backoff: Backoff | None = None,
    on_event: EventHandler | None = None,
    reporter: Reporter | None = None,
    defaults: Mapping[str, str | bool] | None = None,
    stable: float | str = 0.0,
    any_ready: bool = False,
    interval: float | str | None = None,
    delay: float | str = 0.0,
) -> list[TargetResult]:
    """Wait until every target is ready (``invert``: down), on the running event loop.

    The parameters, the result and the errors are those of :func:`wait_for`.
    """
    return await _wait(targets, locals()).run()


def wait_for(
    *targets: str | Target,
    timeout: float | str | None = DEFAULT_TIMEOUT,
    attempt_timeout: float | str = DEFAULT_ATTEMPT_TIMEOUT,
    invert: bool = False,
    backoff: Backoff | None = None,
    on_event: EventHandler | None = None,
    reporter: Reporter | None = None,
    defaults: Mapping[str, str | bool] | None = None,
    stable: float | str = 0.0,
    any_ready: bool = False,
    interval: float | str | None = None,
    delay: float | str = 0.0,
) -> list[TargetResult]:
    """Wait until every target is ready (``invert``: down); blocks, so not inside an event loop.

    Parameters:
        targets: target strings (``"postgresql://db:5432/app"``,
            ``"https://api/healthz#status=204"``) or :class:`~waitfor.Target` values from
            :func:`~waitfor.parse_target`.
        timeout: seconds or a duration (``90``, ``"90s"``, ``"5m"``) for the whole wait; ``None``
            waits forever; ``0`` makes one attempt per target and returns or raises at once
            (an "is it ready now?" check; the CLI's ``-t 0`` instead means forever).
        attempt_timeout: the most one attempt may take (seconds or a duration).
        invert: wait until every target is *down* instead.
        backoff: the delays between attempts (:class:`~waitfor.Backoff`; at least 10 ms).
        on_event: called with every :class:`~waitfor.Event` (attempt, not ready, ready, ...).
        reporter: a :class:`~waitfor.Reporter` writing progress lines, as the CLI does.
        defaults: option values applied to every target whose kind takes them and that does
            not set them itself, as the CLI's ``--insecure``/``--cacert`` do
            (``{"insecure": True}``); a name no kind takes is refused.
        stable: seconds or a duration a target must keep answering ready (every attempt, a
            failure starts again) before it counts; a target's own ``#stable=`` wins. 0: at once.
        any_ready: done as soon as any one target is ready (the others are cancelled); raises
            WaitTimeout only when none was. Every target's result says which were.
        interval: seconds or a duration between one target's attempts, fixed, instead of
            ``backoff``'s growing, jittered delays (at least 10 ms; not with ``backoff``).
        delay: seconds or a duration before the first attempt; the timeout counts from the
            call, so the delay must leave at least 1 s of it (or ``attempt_timeout``, if
            shorter) for the first attempt, else :class:`~waitfor.UsageError`.

    Every event also goes to the ``logging`` logger ``waitfor`` (at INFO a new or changed reason,
    paced as the CLI's text output, one progress line for all targets, and readiness; a timeout
    as a WARNING; the rest at DEBUG), which is silent unless the application configures logging.

    Returns each target's :class:`~waitfor.TargetResult`, in order. Raises
    :class:`~waitfor.WaitTimeout` (also a ``TimeoutError``; every target's last reason) when
    the deadline passes, :class:`~waitfor.UsageError` for bad input, and
    :class:`~waitfor.CheckFailed` when a check cannot succeed by retrying.
    """
    if _in_event_loop():
        raise UsageError(
            "wait_for() blocks and cannot run inside a running event loop; "
            "use 'await wait_for_async(...)' there"
        )
    return _wait(targets, locals()).run_sync()


def _wait(targets: Sequence[str | Target], parameters: dict[str, Any]) -> Wait:
    """The :class:`Wait` of a call of :func:`wait_for` or :func:`wait_for_async`, given its
    ``locals()`` on entry (its parameters, which are Wait's: tests/cli/test_options.py), logging."""
    keywords = {name: value for name, value in parameters.items() if name != "targets"}
    return Wait(*targets, **keywords, log=True)


def _in_event_loop() -> bool:
    asyncio = sys.modules.get("asyncio")  # not imported: no loop can be running
    if asyncio is None:
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


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
    for key in defaults or {}:
        if not _takes_option(key, parsed):
            raise UsageError(f"defaults: no kind takes an option {key!r}")
    return parsed


def _takes_option(key: str, targets: Sequence[Target]) -> bool:
    """Whether a kind of these targets, or any built-in kind, takes option ``key``."""
    from waitfor.core import registry as kinds

    if any(key in kinds.check_class(target.scheme).OPTION_NAMES for target in targets):
        return True
    return any(key in kinds.load(kind).OPTION_NAMES for kind in kinds.BUILTIN)


def _logger(targets: Sequence[Target]) -> EventHandler | None:
    """Events to the ``waitfor`` logger, when the application has logging (else nothing to do).

    An application that configures logging has imported it; one that has not cannot see the
    records, so the cost of importing logging is not paid for them. A NullHandler keeps the
    logger quiet (no "lastResort" lines on stderr) until the application adds handlers.
    INFO and above are paced as the CLI's text output is (:mod:`waitfor.core.pacing`): a target's
    first reason, changed reasons at a decaying pace within a byte budget, one progress line
    for all the targets still awaited, readiness; the rest is DEBUG.
    """
    logging = sys.modules.get("logging")
    if logging is None:
        return None
    from waitfor.core.events import EventType
    from waitfor.core.pacing import Pacer, progress_text

    logger = logging.getLogger("waitfor")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    pacer = Pacer()
    pacer.begin(targets)
    levels = {
        EventType.ATTEMPT: logging.DEBUG,
        EventType.READY: logging.INFO,
        EventType.TIMED_OUT: logging.WARNING,
        EventType.FAILED: logging.ERROR,
    }

    def log(event: Event) -> None:
        pacer.see(event)
        level = levels.get(event.type, logging.DEBUG)
        if event.type is EventType.NOT_READY and pacer.is_news(event):
            # the cost counted: the message and basicConfig's "INFO:waitfor:" before it
            cost = len(str(event.target)) + len(event.reason) + 26
            if pacer.tell(event, cost):
                level = logging.INFO
        if logger.isEnabledFor(level):
            words = event.type.value.replace("_", " ")
            detail = f": {event.reason}" if event.reason else ""
            logger.log(level, "%s %s%s", event.target, words, detail)
        progress = pacer.progress(event.elapsed) if event.type is EventType.NOT_READY else None
        if progress is not None and logger.isEnabledFor(logging.INFO):
            logger.info("%s", progress_text(progress))

    return log


def _quiet_own_requests() -> None:
    """httpx logs every request at INFO ("HTTP Request: GET ..."): with the README's
    ``logging.basicConfig(level=logging.INFO)`` that is a line per attempt of each http (and
    Kubernetes) target. A filter on httpx's logger drops the records of the requests a wait
    makes (made in its context, :data:`_IN_WAIT`), below WARNING, and nothing else: the
    application's own requests and its logging configuration are left as they are."""
    import logging  # the event loop's path: asyncio has imported it already

    logger = logging.getLogger("httpx")
    if _not_in_wait not in logger.filters:
        logger.addFilter(_not_in_wait)


def _not_in_wait(record: logging.LogRecord) -> bool:
    return record.levelno >= 30 or not _IN_WAIT.get()  # 30: logging.WARNING


def _defaults(defaults: Mapping[str, str | bool] | None) -> dict[str, str] | None:
    """Option defaults as the CLI gives them (strings); ``True``/``False`` as "true"/"false"."""
    if defaults is None:
        return None
    if not isinstance(defaults, Mapping):
        kind = type(defaults).__name__
        raise UsageError(f"defaults must be a mapping of option names, not {kind}")
    given: dict[str, str] = {}
    for key, value in defaults.items():
        if not isinstance(key, str):
            raise UsageError(f"defaults: an option name must be a string, not {key!r}")
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif not isinstance(value, str):
            raise UsageError(
                f"defaults: option {key!r} must be a string, not {type(value).__name__}"
            )
        given[key] = value
    return given


def _backoff(backoff: Backoff | None) -> Backoff:
    """The backoff, held to the CLI's floor: attempts in a tight loop are a flood, not a wait."""
    if backoff is None:
        return Backoff()
    if not isinstance(backoff, Backoff):
        raise UsageError(f"backoff must be a waitfor.Backoff, not {type(backoff).__name__}")
    if min(backoff.initial, backoff.maximum) < MIN_DELAY:
        raise UsageError(
            f"backoff initial and maximum must be at least {MIN_DELAY:g}s, not "
            f"{backoff.initial:g}s and {backoff.maximum:g}s (thousands of attempts a second)"
        )
    return backoff


def _interval(interval: float | str, backoff: Backoff | None) -> Backoff:
    """A fixed interval as a backoff that neither grows nor jitters."""
    if backoff is not None:
        raise UsageError("give interval or backoff, not both")
    seconds = _seconds(interval, "interval")
    if seconds < MIN_DELAY:
        raise UsageError(f"interval must be at least {MIN_DELAY:g}s, not {seconds:g}s")
    return Backoff(initial=seconds, multiplier=1.0, maximum=seconds, jitter=0.0)


def _check_delay(delay: float, timeout: float, attempt_timeout: float) -> None:
    """The delay is part of the timeout: refused unless it leaves the first attempt its room."""
    if delay >= timeout:
        raise UsageError(
            f"delay {delay:g}s is not shorter than the timeout {timeout:g}s:"
            " no attempt could be made"
        )
    room = min(FIRST_ATTEMPT_ROOM, attempt_timeout)
    if timeout - delay < room:
        raise UsageError(
            f"delay {delay:g}s leaves {timeout - delay:.2g}s of the timeout {timeout:g}s:"
            f" the first attempt needs at least {room:g}s (a shorter delay or a longer timeout)"
        )


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
    if isinstance(value, int) and value > MAX_SECONDS:
        value = math.inf  # float() of a huge int overflows; it is too long either way
    if not (value == value and (value > 0 or (zero and value == 0))):
        raise UsageError(f"{name} must be a positive number of seconds, not {value!r}")
    if value > MAX_SECONDS:
        raise UsageError(f"{name} is too long (at most {MAX_SECONDS:g}s, as in the CLI)")
    return float(value)
