"""The command: read the words, call the library, map errors to exit codes, exec.

This module never touches a socket. Everything after ``--`` is the command to exec once all
targets are ready; it replaces waitfor's process, so it gets signals and exit code directly.

The command line is click's (:mod:`waitfor.cli.clickparse`), but importing click is about half of a
ready wait's start-up, and most command lines are only targets: ``waitfor tcp://db:5432 --
./app``. :func:`quick_params` reads those without click, and only those: targets, ``-q``,
``-t``/``--timeout``, ``--`` and no ``WAITFOR_*`` variable it reads. Anything else (any other
option, --help, a bad value, the environment) goes to click, which reads it whole; for the words
quick_params takes, click's parameters are the same (tests/cli/test_cli.py compares the two).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence

from waitfor import api
from waitfor.base.backoff import Backoff
from waitfor.cli import termination
from waitfor.cli.reading import (
    DEFAULTS,
    DURATION,
    ERRORS,
    FLAG,
    OPTIONS,
    READ_ELSEWHERE,
    VARIABLES,
    die,
    split_command,
)
from waitfor.cli.report import Reporter, Tee, error_line, exit_line, json_line, make_reporter
from waitfor.cli.signals import (
    HANDLED,
    INHERITED_IGNORED,
    Signalled,
    exiting,
    ignore_interrupts,
    install,
    install_for_a_call,
    interrupt,
    pending,
    raise_pending,
    signalled_in,
)
from waitfor.cli.stdio import flush_stdio, harden_stdio
from waitfor.core.durations import parse_duration
from waitfor.errors import Interrupted, WaitforError, WaitTimeout
from waitfor.net.errors import describe_os_error

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

DURATIONS = tuple(option.name for option in OPTIONS if option.value == DURATION)
#: the words quick_params reads: flags, and options followed by their value
QUICK_FLAGS = {f: o.name for o in OPTIONS if o.quick and o.value == FLAG for f in o.flags}
QUICK_VALUED = {f: o.name for o in OPTIONS if o.quick and o.value != FLAG for f in o.flags}


def quick_params(args: Sequence[str], environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The parameters click would give these words, for the plainest command lines; else None.

    Only targets (words not starting with '-'), -q/--quiet and -t/--timeout DURATION (or
    --timeout=DURATION; each at most once), before ``--``, with no WAITFOR_* variable (click
    reads them all; unknown ones are ignored by both) and no shell completion asked for.
    Whatever else click would have to decide, it decides.
    """
    if any(name in VARIABLES or name.startswith("_WAITFOR_") for name in environ):
        return None
    words, command = split_command(args)
    if command and not command[0]:
        return None  # click's usage error
    params = dict(DEFAULTS)
    targets: list[str] = []
    given: set[str] = set()
    values = iter(words)
    for word in values:
        if not word.startswith("-"):
            targets.append(word)
            continue
        option, attached, value = word.partition("=")  # --timeout=5m: a long option's value
        name = QUICK_FLAGS.get(word) or QUICK_VALUED.get(option)
        if name is None or name in given or (attached and not option.startswith("--")):
            return None
        given.add(name)
        if word in QUICK_FLAGS:
            params[name] = True
            continue
        if not attached:
            value = next(values, "-")
        if value.startswith("-"):
            return None
        params[name] = value
    if not targets:
        return None
    for name in DURATIONS:
        if params[name] is None:
            continue  # no default (--interval): not given
        try:
            params[name] = parse_duration(params[name])
        except ValueError:
            return None  # click's message for it
    return {"targets": tuple(targets), **params, "command": command}


def wait(*, targets: tuple[str, ...], command: list[str], **options: Any) -> None:
    """Wait until every target is ready, then return or exec ``command``: the command's work,
    once its words are read and checked (the termination log is set already). ``options``:
    every declared option's value (:mod:`waitfor.cli.reading`) but the termination log's."""
    raise_pending()  # a signal Python swallowed while the words were read
    keywords = {o.keyword: options[o.name] for o in OPTIONS if o.keyword is not None}
    keywords["timeout"] = keywords["timeout"] or None  # the command's 0 is forever
    max_interval = options["max_interval"]
    backoff = None  # --interval: fixed, no backoff (the library makes it)
    if options["interval"] is None:
        backoff = Backoff(initial=min(0.05, max_interval), maximum=max_interval)
    shown = make_reporter("quiet" if options["quiet"] else options["output"], sys.stderr)
    guard: Callable[[], contextlib.AbstractAsyncContextManager[None]] = signals_cancel
    final = termination.current
    reporter: Reporter = Tee(shown, final)
    if options["events"]:
        from waitfor.cli.podevents import PodEvents

        poster = PodEvents(shown.note)
        reporter = Tee(shown, final, poster)
        guard = lambda: _nested(signals_cancel(), poster.running())  # noqa: E731
    if os.environ.get("POD_NAME") and os.environ.get("POD_NAMESPACE"):
        from waitfor.cli.meshhint import MeshHint  # in a pod: a blocked connection's mesh hint

        hint = MeshHint(reporter)
        reporter, outer = hint, guard
        guard = lambda: _nested(outer(), hint.running())  # noqa: E731

    wait = api.Wait(
        *targets, **keywords, backoff=backoff, reporter=reporter, defaults=target_defaults(options)
    )
    try:
        wait.run_sync(guard=guard)  # all ready at once: no event loop, no asyncio import
    except KeyboardInterrupt:  # raised here, not click's Abort (and its empty line)
        raise Interrupted(signal.SIGINT) from None
    except EOFError as exc:  # nothing reads the terminal: a library's end of stream, a bug
        # (click, around this call, would make it an Abort: "interrupted by SIGINT")
        raise RuntimeError("EOFError escaped a check") from exc
    raise_pending()  # a signal Python swallowed on the way: interrupted, not ready
    if command:
        exec_command(command)


def target_defaults(options: Mapping[str, Any]) -> dict[str, str]:
    """The options that are defaults for every target's ``#option`` (``--insecure``: insecure=true),
    under the targets' names; those not given are left out."""
    defaults: dict[str, str] = {}
    for option in OPTIONS:
        name = option.target_option
        value = None if name is None else options[option.name]
        if name is not None and value is not None and value is not False:
            defaults[name] = "true" if value is True else value
    return defaults


@contextlib.asynccontextmanager
async def _nested(
    outer: contextlib.AbstractAsyncContextManager[None],
    inner: contextlib.AbstractAsyncContextManager[None],
) -> AsyncIterator[None]:
    async with outer, inner:
        yield


@contextlib.asynccontextmanager
async def signals_cancel() -> AsyncIterator[None]:
    """On the event loop: SIGINT/SIGTERM/SIGHUP cancel the wait (pending attempts included) and
    end it as :class:`Interrupted`; waitfor's own handlers are back afterwards."""
    import asyncio  # only a wait that was not over at its first attempt needs the event loop

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        task.cancel()

    for signum in HANDLED:
        loop.add_signal_handler(signum, on_signal, signum)
    swallowed = pending()  # by Python, before the loop took the signals over
    if swallowed is not None:
        on_signal(swallowed.signum)
    try:
        yield
    except asyncio.CancelledError:
        if received:
            raise Interrupted(received[0]) from None
        raise
    finally:
        # The loop's removal restores the *default* handlers, which a PID 1 never gets:
        # put waitfor's own back, with the signals held meanwhile so none is lost.
        signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
        try:
            for signum in HANDLED:
                loop.remove_signal_handler(signum)
                signal.signal(signum, exiting if received else interrupt)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED)


def exec_command(command: Sequence[str]) -> NoReturn:
    """Become the command, started as a shell would start it."""
    flush_stdio()
    # Python ignores SIGPIPE and SIGXFSZ for itself; the command must get the defaults (else
    # `yes | head -1` says "Broken pipe"), and the interrupts ignored if waitfor inherited them so.
    # Handlers waitfor installed are reset by exec itself.
    for signum in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(signum, signal.SIG_DFL)
    for signum in INHERITED_IGNORED:
        signal.signal(signum, signal.SIG_IGN)
    if ERRORS["json"]:  # JSON's last word before the command's: waitfor's part ended well
        sys.stderr.write(exit_line(0, command[0]))
        flush_stdio()
    try:
        os.execvp(command[0], list(command))
    except OSError as exc:
        for signum in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(signum, signal.SIG_IGN)  # back to Python's, to report safely
        if isinstance(exc, FileNotFoundError):
            die(f"command not found: {command[0]}", 127)
        die(f"cannot run {command[0]}: {exc.strerror}", 126)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The command, ending in SystemExit. Called as a function, it leaves the signal handlers
    and ``sys.unraisablehook`` as it found them."""
    # Installed first thing (by waitfor.cli.entry, before this module was imported, for the
    # command): as PID 1 in a container, a signal without a handler is ignored.
    restore = install_for_a_call()
    try:
        _main(argv)
    finally:
        restore()


def _main(argv: Sequence[str] | None) -> NoReturn:
    termination.current = termination.TerminationLog()  # until the options are read
    args = list(argv) if argv is not None else sys.argv[1:]
    try:
        harden_stdio()
        ERRORS["json"] = _json_output(args)
        for warning in unknown_variables(os.environ):  # whichever reads the words
            sys.stderr.write(_note_line(warning, as_json=ERRORS["json"]))
        params = quick_params(args, os.environ)
        if params is None:
            from waitfor.cli import clickparse as clickcli

            wait(**clickcli.main(args))  # click's own errors end there, in their exit codes
        else:
            termination.current = termination.TerminationLog(params.pop("termination_log"))
            wait(**params)
    except KeyboardInterrupt:  # as click's Abort: only the quick reading meets it
        ignore_interrupts()
        die(str(Interrupted(signal.SIGINT)), Interrupted(signal.SIGINT).exit_code)
    except WaitTimeout as exc:
        termination.current.timed_out(f"timed out after {exc.timeout:g}s", exc.results)
        sys.exit(WaitTimeout.exit_code)  # the reporter has said what was still not ready
    except Signalled as exc:  # during the synchronous part: parsing, a plugin's import, ...
        ignore_interrupts()
        die(exc.describe(), 128 + exc.signum)
    except Interrupted as exc:
        ignore_interrupts()
        die(str(exc), exc.exit_code)
    except WaitforError as exc:
        die(str(exc), exc.exit_code)
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            sys.exit(1)  # as click's main ends on a broken pipe, whichever read the words
        if exc.errno not in (errno.EMFILE, errno.ENFILE):
            raise
        message = f"{describe_os_error(exc)}: raise the limit (ulimit -n) or wait for fewer targets"
        termination.current.failed(message)
        sys.stderr.write(error_line(message, 2, as_json=ERRORS["json"]))
        flush_stdio()
        # Not sys.exit: a half-made event loop's finalizer would print asyncio's traceback.
        os._exit(2)
    sys.exit(0)


def run() -> NoReturn:
    """The ``waitfor`` command (console script, ``python -m waitfor``): :func:`main`, then the
    process ends at once, without the interpreter's shutdown.

    An attempt cut off by the deadline or a signal abandons its thread (a name lookup, a body
    regex search) where it stands, maybe inside C++ code; shutdown would unwind such a thread
    mid-call and RE2 aborts with "terminate called without an active exception" (exit -6, not 143).
    """
    install()
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException as exc:  # a signal before main's own handling began, maybe wrapped
        # or lost: CPython replaces what a handler raised while it formats an ImportError's
        # message (`from _ssl import RAND_egd` in asyncio's import: "TypeError: expected a
        # message argument"); the interrupt was received all the same
        signalled = signalled_in(exc) or pending()
        if signalled is None:
            raise
        ignore_interrupts()
        code = 128 + signalled.signum
        sys.stderr.write(error_line(signalled.describe(), code, as_json=ERRORS["json"]))
    if ERRORS["json"] and code in (0, 124):  # else an error event ended it, with the code
        sys.stderr.write(exit_line(code))
    flush_stdio()
    os._exit(code)


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """A warning for each ``WAITFOR_*`` variable waitfor does not read: a misspelt one would
    silently leave its default (``WAITFOR_TIMOUT=1s`` waits 60 s). Only names are said, never
    values (``WAITFOR_TARGETS`` may hold a password). A warning, not an error: other tools may
    set ``WAITFOR_``-prefixed variables of their own."""
    unknown = sorted(
        n
        for n in environ
        if n.startswith("WAITFOR_") and n not in VARIABLES and n not in READ_ELSEWHERE
    )
    if not unknown:
        return []
    import difflib  # only when there is something to suggest

    warnings = []
    for name in unknown:
        near = difflib.get_close_matches(name, sorted(VARIABLES | READ_ELSEWHERE), n=1, cutoff=0.8)
        hint = f" (did you mean {near[0]}?)" if near else ""
        warnings.append(f"unknown variable {name} ignored{hint}")
    return warnings


def _note_line(text: str, *, as_json: bool) -> str:
    """A line said before any reporter exists: a ``note`` event with -o json, as reporters write."""
    return json_line({"event": "note", "message": text}) if as_json else f"waitfor: {text}\n"


def _json_output(args: Sequence[str]) -> bool:
    """Whether -o json (or WAITFOR_OUTPUT=json) is asked for, without -q: read from the words
    themselves, so that an error click finds before it has parsed --output is JSON too."""
    output = os.environ.get("WAITFOR_OUTPUT", "")
    quiet = False
    if os.environ.get("WAITFOR_QUIET"):
        import click  # its reading of a boolean, as for the option itself

        try:
            quiet = bool(click.BOOL.convert(os.environ["WAITFOR_QUIET"], None, None))
        except click.BadParameter:
            quiet = False
    words = iter(args[: args.index("--")] if "--" in args else args)
    for word in words:
        if word in ("-o", "--output"):
            output = next(words, "")
        elif word.startswith("--output="):
            output = word.removeprefix("--output=")
        elif word.startswith("-o"):
            output = word.removeprefix("-o")
        elif word in ("-q", "--quiet"):
            quiet = True
    return output == "json" and not quiet
