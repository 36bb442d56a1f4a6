"""Regular expressions from users (``#body=``), matched within the attempt's time, never hanging.

Python's ``re`` backtracks: ``(a|a)+b`` against 41 bytes runs for minutes, cannot be interrupted,
and blocks the event loop, so neither the deadline nor SIGTERM can end the wait. Patterns are
therefore compiled with RE2 (the ``google-re2`` binding), which matches in time linear in the text,
so ``.*UP`` over a 64 KiB line takes microseconds and no pattern is catastrophic. Linear still
scales with the pattern's size (a 12,000-instruction program takes ~0.7 s over 64 KiB), so the
search also runs in a daemon thread (RE2 releases the GIL): the event loop keeps serving signals
and deadlines, and a search cut short is abandoned to finish on its own within that bound.

Alternatives weighed: the ``regex`` module's ``timeout=`` keeps Python's syntax but still
backtracks, so a catastrophic pattern ends as "gave up" after burning the whole budget on every
attempt instead of being answered; a killable worker process costs a fork or an interpreter start
per attempt. RE2's syntax is the one Go tools use (Prometheus, Kubernetes); it lacks look-around
and backreferences, which are refused when the target is parsed. The module is imported only when
a target has a body regex, so other runs do not pay its ~15 ms import.
"""

from __future__ import annotations

import contextlib
import threading

from waitfor.base.values import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from typing import Any, ClassVar

#: instructions in the compiled program; health-check patterns use a few dozen
MAX_PROGRAM_SIZE = 5000


class Pattern(Value):
    """A compiled pattern (a :class:`Value`, not a dataclass: a quick start does not pay for
    the dataclasses module); equal to another of the same text."""

    pattern: str  # as the user wrote it
    _compiled: Any
    _uncompared: ClassVar[tuple[str, ...]] = ("_compiled",)

    @property
    def size(self) -> int:
        """RE2's program size: a search's cost grows with it times the text's length."""
        return int(self._compiled.programsize)

    def search_now(self, data: bytes) -> bool:
        """Whether the pattern occurs in UTF-8 ``data``; blocks for up to ~1 s (see above)."""
        return self._compiled.search(data) is not None

    async def search(self, data: bytes) -> bool:
        """:meth:`search_now` off the event loop; cancelling returns at once."""
        import asyncio  # not at import: a quick first attempt searches without an event loop

        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()

        def settle(found: bool | None, error: BaseException | None) -> None:
            if future.done():
                return  # cancelled: nobody waits for this answer any more
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(bool(found))

        def work() -> None:
            found: bool | None = None
            error: BaseException | None = None
            try:
                found = self.search_now(data)
            except Exception as exc:  # delivered to the awaiting task: a bug shows there
                error = exc
            # A closed loop means the wait ended while this search ran: nobody to tell.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, found, error)

        threading.Thread(target=work, name="waitfor-regex", daemon=True).start()
        return await future


def compile_pattern(pattern: str) -> Pattern:
    """Compile with RE2; ValueError (one line, naming the pattern) if RE2 cannot run it."""
    import re2  # only targets with a body regex pay for it

    options = re2.Options()
    options.log_errors = False  # RE2 would print its own copy of the error on stderr
    try:
        compiled = re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0].decode("utf-8", "replace") if exc.args else "invalid"
        hint = ""
        if "perl operator" in detail or "escape sequence" in detail:
            hint = " (RE2 syntax: no look-around or backreferences; \\z, not \\Z)"
        raise ValueError(f"regex {pattern!r} is invalid: {detail}{hint}") from None
    except UnicodeError:
        raise ValueError("regex is not valid UTF-8") from None
    if compiled.programsize > MAX_PROGRAM_SIZE:
        shown = pattern if len(pattern) <= 60 else pattern[:60] + "..."
        raise ValueError(
            f"regex {shown!r} is too large "
            f"({compiled.programsize} RE2 instructions; at most {MAX_PROGRAM_SIZE})"
        )
    return Pattern(pattern, compiled)


def option_pattern(option: str, pattern: str) -> Pattern:
    """:func:`compile_pattern` for the option ``option`` (``body``, ``log``): its errors begin
    with the option's name."""
    try:
        return compile_pattern(pattern)
    except ValueError as exc:
        raise ValueError(f"{option} {exc}") from None
