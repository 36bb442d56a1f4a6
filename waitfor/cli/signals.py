"""The ``waitfor`` command's first code: the interrupts' handlers before anything slow is imported.

Importing the command line (click, the library) takes tens of milliseconds. A signal in that
time would find Python's defaults: a KeyboardInterrupt traceback, death by SIGTERM (-15) or
SIGHUP (-1, a closed terminal or SSH session, with no line saying what was awaited), or, as
PID 1 in a container, nothing at all (the kernel drops a signal PID 1 has no handler for, and the
wait then runs to its deadline). So this module imports only the standard library's ``signal``
and installs waitfor's handlers first; only the interpreter's own start-up precedes them.

The handlers raise :class:`Signalled`, a BaseException: no ``except Exception`` on the way (a
plugin's import, a library's retry loop) can swallow it. The command turns it into exit
130/143/129. An interrupt ignored when waitfor started (``nohup``'s SIGHUP, the SIGINT of a job a
script started in the background) stays ignored, as :mod:`waitfor.__main__` leaves it from the
first moment: the user asked for it.
Python itself swallows what a weakref callback or a ``__del__`` raises (a signal landing while
an import's module lock is collected, say): such a signal is kept (:func:`pending`) instead of
printed, and the command asks for it where the wait would go on (:func:`raise_pending`).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from types import FrameType

INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: interrupts ignored when waitfor started (a background job's SIGINT): the command inherits that
INHERITED_IGNORED: list[signal.Signals] = []
#: the interrupts waitfor ends on: those not inherited ignored, which waitfor ignores too
HANDLED: list[signal.Signals] = []
_installed: list[bool] = []
#: every interrupt the handlers raised, in order: one Python swallowed is still known here.
#: Never cleared while the handlers stand: the command ends on its first interrupt.
_received: list[int] = []


class Signalled(BaseException):
    """SIGINT, SIGTERM or SIGHUP arrived while the command ran synchronous code."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    def describe(self) -> str:
        return f"interrupted by {signal.Signals(self.signum).name}"


def install() -> None:
    """waitfor's handlers for the interrupts it ends on; once per process (later calls keep
    them)."""
    if _installed:
        return
    INHERITED_IGNORED[:] = [s for s in INTERRUPTS if signal.getsignal(s) is signal.SIG_IGN]
    HANDLED[:] = [s for s in INTERRUPTS if s not in INHERITED_IGNORED]
    for signum in HANDLED:
        signal.signal(signum, interrupt)
    sys.unraisablehook = _unraisable
    _installed.append(True)


def install_for_a_call() -> Callable[[], None]:
    """:func:`install`, for one call of the command as a function (a test, a program embedding
    it): returns what puts back the handlers and ``sys.unraisablehook`` it found, and forgets the
    call's interrupts. A no-op pair where they are installed already (the console script's own
    run, whose process ends with the command)."""
    if _installed:
        return lambda: None
    handlers = [(signum, signal.getsignal(signum)) for signum in INTERRUPTS]
    hook = sys.unraisablehook
    install()

    def restore() -> None:
        for signum, handler in handlers:
            if handler is not None:  # None: installed from C, not Python's to put back
                signal.signal(signum, handler)
        sys.unraisablehook = hook
        _installed.clear()
        _received.clear()

    return restore


def interrupt(signum: int, frame: FrameType | None) -> None:
    ignore_interrupts()
    _received.append(signum)
    raise Signalled(signum)


def pending() -> Signalled | None:
    """The first interrupt received, if any (the command is then on its way out, or Python
    swallowed the exception the handler raised)."""
    return Signalled(_received[0]) if _received else None


def raise_pending() -> None:
    """Raise the interrupt Python swallowed, if one was: the wait must not go on after it."""
    signalled = pending()
    if signalled is not None:
        raise signalled


def _unraisable(unraisable: sys.UnraisableHookArgs) -> None:
    """Python's report of an exception it could not raise, except our own interrupt's, which
    :func:`pending` keeps: no "Exception ignored ... Traceback" for a signal. Once interrupted,
    none at all: what the signal cut in half (an event loop still being made) fails in its
    ``__del__`` on the way out, and the one line saying why waitfor ended is enough."""
    if not isinstance(unraisable.exc_value, Signalled) and not _received:
        sys.__unraisablehook__(unraisable)


def exiting(signum: int, frame: FrameType | None) -> None:
    """Interrupted already and on the way out: a second Ctrl-C changes nothing."""


def ignore_interrupts() -> None:
    for signum in HANDLED:
        signal.signal(signum, exiting)


def signalled_in(exc: BaseException) -> Signalled | None:
    """The :class:`Signalled` an exception is, or was raised from: Python wraps what a class
    body's ``__set_name__`` raises (a signal landing while a module defines a class) in a
    RuntimeError, with the signal as its cause."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        if isinstance(found, Signalled):
            return found
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return None
