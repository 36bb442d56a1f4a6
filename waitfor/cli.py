"""The command line: parse and validate, call the library, map errors to exit codes, exec.

This module never touches a socket. Everything after ``--`` is the command to exec once all
targets are ready; it replaces waitfor's process, so it gets signals and exit code directly.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, NoReturn

import click

from waitfor import api, kinds, termination
from waitfor.backoff import MIN_DELAY, Backoff
from waitfor.durations import parse_duration
from waitfor.entry import (
    INHERITED_IGNORED,
    INTERRUPTS,
    Signalled,
    exiting,
    ignore_interrupts,
    install,
    interrupt,
    signalled_in,
)
from waitfor.errors import Interrupted, WaitforError, WaitTimeout
from waitfor.kind import describe_os_error
from waitfor.report import OUTPUTS, Tee, error_line, make_reporter
from waitfor.stdio import flush_stdio, harden_stdio

COMMAND_KEY = "waitfor.command"
MIN_INTERVAL = MIN_DELAY  # the library holds the same floor

EPILOG = """\
\b
Examples:
  waitfor tcp://localhost:5432
  waitfor -t 2m https://api/healthz http://cache:8080/ready \\
      -- ./start-app --port 80
  waitfor --invert tcp://old-server:80        # wait until it is down
  waitfor postgresql://postgres-svc:5432 \\
      'dns:mydb.{namespace}.svc.cluster.local'
  WAITFOR_TARGETS="tcp://db:5432 http://api/healthz" WAITFOR_TIMEOUT=5m \\
      waitfor

Every option can also be set as WAITFOR_<OPTION> (e.g. WAITFOR_TIMEOUT=90s); targets as
whitespace-separated WAITFOR_TARGETS, where quotes keep one together ('exec:pg_isready -h db').
Command-line values win.

Exit status: 0 all ready (or the command's own status), 124 timed out, 2 bad usage or
configuration, 130/143 interrupted by SIGINT/SIGTERM, 126/127 the command cannot be run / was
not found.
"""
FORM_WIDTH = 34  # a usage row's target form; longer forms put their meaning on the next line


class Duration(click.ParamType):  # type: ignore[type-arg]  # generic only in click>=8.3
    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float | int):
            return float(value)
        try:
            return parse_duration(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class TargetWords(click.ParamType):  # type: ignore[type-arg]  # generic only in click>=8.3
    """Targets; from WAITFOR_TARGETS split at whitespace, where quotes keep words together."""

    name = "target"

    def split_envvar_value(self, rv: str) -> list[str]:
        # Quotes as in a shell ('exec:pg_isready -h db'), but no backslash escapes: regexes in
        # #body= options keep theirs. Unquoted text splits exactly as before.
        import shlex

        lexer = shlex.shlex(rv or "", posix=True)
        lexer.whitespace_split = True
        lexer.commenters = ""
        lexer.escape = ""
        try:
            return list(lexer)
        except ValueError:
            raise click.UsageError("WAITFOR_TARGETS has an unclosed quote") from None


def target_help(width: int) -> str:
    """The targets part of --help, from each kind's own usage rows (built-in kinds, then
    installed ones), wrapped to ``width`` columns."""
    import textwrap

    rows = [row for kind in kinds.BUILTIN for row in kinds.load(kind).USAGE]
    for scheme, kind in sorted(kinds.installed().items()):
        try:
            rows += kinds.load(kind).USAGE or [(f"{scheme}:...", f"from {kind.origin}")]
        except kinds.KindError as exc:
            rows.append((f"{scheme}:...", str(exc)))
    rows.append(
        ("{namespace}", "in a target, the pod's namespace (POD_NAMESPACE or the service account's)")
    )
    indent = " " * (2 + FORM_WIDTH + 2)
    lines = []
    for form, meaning in rows:
        # one spelling of the ellipsis: the kinds' rows are written with both
        form, meaning = form.replace("\u2026", "..."), meaning.replace("\u2026", "...")
        if len(form) > FORM_WIDTH:
            lines += _split_form(form, width)
            first = indent
        else:
            first = f"  {form:<{FORM_WIDTH}}  "
        wrapped = textwrap.wrap(
            meaning,
            max(width, len(indent) + 20),
            initial_indent=first,
            subsequent_indent=indent,
            break_on_hyphens=False,
        )
        lines += wrapped if meaning else []
    return "\b\nTargets (options for one target go after '#'):\n" + "\n".join(lines) + "\n\n"


def _split_form(form: str, width: int) -> list[str]:
    """A long target form on lines of at most ``width`` columns where it can: broken after
    its option separators ('&'), continued with 4 more spaces."""
    lines, line = [], "  "
    for piece in form.replace("&", "&\n").splitlines():
        if len(line) + len(piece) > width and line.strip():
            lines.append(line)
            line = "      "
        line += piece
    return [*lines, line]


class WaitforCommand(click.Command):
    """Splits ``-- COMMAND...`` off before click sees it, so targets and command stay apart."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # built only when --help is asked for; the epilog is indented by 2
        self.epilog = target_help(formatter.width - 2) + EPILOG
        super().format_epilog(ctx, formatter)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            split = args.index("--")
            ctx.meta[COMMAND_KEY] = args[split + 1 :]
            args = args[:split]
        return super().parse_args(ctx, self._long_names(args))

    def _long_names(self, args: list[str]) -> list[str]:
        """``-q`` -> ``--quiet``, for a word that is exactly a short option (not its value).

        click tries every ``-x`` as a long option first and builds a "did you mean" error for
        it (importing difflib and gettext) before trying it as a short one: ~3 ms of a cold
        start. Only whole words are renamed; ``-qt5`` and values are click's as before.
        """
        short: dict[str, str] = {}
        takes_value: set[str] = set()
        for param in self.params:
            if isinstance(param, click.Option):
                longs = [o for o in param.opts if o.startswith("--")]
                for opt in param.opts:
                    if len(opt) == 2 and longs:
                        short[opt] = longs[0]
                if not param.is_flag and not param.count:
                    takes_value.update(param.opts)
        renamed = []
        for index, word in enumerate(args):
            after_option = index > 0 and args[index - 1] in takes_value
            renamed.append(short.get(word, word) if not after_option else word)
        return renamed


@click.command(
    cls=WaitforCommand,
    epilog=EPILOG,
    # the terminal's width, at most 100 columns; -h as wait-for-it users type it
    context_settings={"max_content_width": 100, "help_option_names": ["-h", "--help"]},
)
@click.argument(
    "targets",
    nargs=-1,
    type=TargetWords(),
    envvar="WAITFOR_TARGETS",
    metavar="TARGET... [-- COMMAND...]",
)
@click.option(
    "-t",
    "--timeout",
    type=Duration(),
    default="60s",
    show_default=True,
    help="Give up after this long (90, 90s, 5m; 0 = wait forever). Exit 124.",
)
@click.option(
    "--attempt-timeout",
    type=Duration(),
    default="5s",
    show_default=True,
    help="Longest a single attempt may take (never more than the time left).",
)
@click.option(
    "--max-interval",
    type=Duration(),
    default="0.6s",
    show_default=True,
    help="Cap of the jittered exponential backoff between attempts (from 50ms; at least 10ms).",
)
@click.option("--invert", is_flag=True, help="Wait until the targets are down instead.")
@click.option(
    "--stable",
    type=Duration(),
    default="0s",
    help="Ready only after answering ready this long without a failure (a target's #stable= wins).",
)
@click.option(
    "--any",
    "any_ready",
    is_flag=True,
    envvar="WAITFOR_ANY",
    help="Done as soon as any one target is ready; the others are cancelled.",
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(OUTPUTS),
    default="auto",
    show_default=True,
    help=(
        "Progress on stderr: auto (tty when stderr is a terminal, else text), text, tty, json"
        " (one JSON object per line), quiet (only why the wait failed)."
    ),
)
@click.option("-q", "--quiet", is_flag=True, help="Print only why the wait failed.")
@click.option(
    "--insecure",
    is_flag=True,
    help="TLS targets (https, grpcs, rediss, amqps, ...): skip TLS verification.",
)
@click.option(
    "--cacert",
    type=click.Path(exists=True, dir_okay=False),
    help="TLS targets (https, grpcs, rediss, amqps, ...): trust this CA bundle (PEM).",
)
@click.option(
    "--cert",
    help="TLS targets: client certificate (PEM) for servers that require one (mutual TLS).",
)
@click.option("--key", help="TLS targets: the client certificate's private key (PEM).")
@click.option(
    "--key-password",
    help="The private key's passphrase (better: WAITFOR_KEY_PASSWORD); never shown.",
)
@click.option(
    "--resolv-conf",
    type=click.Path(exists=True, dir_okay=False),
    help="dns: resolver configuration to use instead of /etc/resolv.conf.",
)
@click.option(
    "--termination-log",
    metavar="PATH",
    help=(
        "On failure, write why here (default: /dev/termination-log when it exists, where"
        " kubectl describe pod shows it)."
    ),
)
@click.option(
    "--events",
    is_flag=True,
    help=(
        "In a pod: post Kubernetes Events on it (Waiting, NotReady, Ready, TimedOut); needs"
        " create, patch on events."
    ),
)
@click.version_option(package_name="waitfor", message="%(prog)s %(version)s")
@click.pass_context
def cli(
    ctx: click.Context,
    targets: tuple[str, ...],
    timeout: float,
    attempt_timeout: float,
    max_interval: float,
    invert: bool,
    stable: float,
    any_ready: bool,
    output: str,
    quiet: bool,
    insecure: bool,
    cacert: str | None,
    cert: str | None,
    key: str | None,
    key_password: str | None,
    resolv_conf: str | None,
    termination_log: str | None,
    events: bool,
) -> None:
    """Wait until every TARGET is ready, then exit 0 or exec COMMAND."""
    final = termination.TerminationLog(termination_log)
    termination.current = final
    command: list[str] = ctx.meta.get(COMMAND_KEY, [])
    if command and not command[0]:
        raise click.UsageError("the command after -- is empty")
    if not targets:
        raise click.UsageError("no targets given (as arguments or in WAITFOR_TARGETS)")
    if attempt_timeout <= 0:
        raise click.BadParameter("must be more than 0", param_hint="--attempt-timeout")
    if max_interval < MIN_INTERVAL:
        # A zero cap would probe in a tight loop: thousands of connections a second.
        raise click.BadParameter(f"must be at least {MIN_INTERVAL:g}s", param_hint="--max-interval")
    defaults = {}
    if insecure:
        defaults["insecure"] = "true"
    if cacert:
        defaults["cacert"] = cacert
    if resolv_conf:
        defaults["resolv_conf"] = resolv_conf
    # client_key: key's other name, as redis's key=NAME is a key, not a file
    for name, value in (("cert", cert), ("client_key", key), ("key_password", key_password)):
        if value is not None:
            defaults[name] = value
    backoff = Backoff(initial=min(0.05, max_interval), maximum=max_interval)
    shown = make_reporter("quiet" if quiet else output, sys.stderr)
    guard: Callable[[], contextlib.AbstractAsyncContextManager[None]] = signals_cancel
    reporter = Tee(shown, final)
    if events:
        from waitfor.podevents import PodEvents

        poster = PodEvents(shown.note)
        reporter = Tee(shown, final, poster)
        guard = lambda: _nested(signals_cancel(), poster.running())  # noqa: E731

    wait = api.Wait(
        *targets,
        timeout=timeout or None,
        attempt_timeout=attempt_timeout,
        invert=invert,
        backoff=backoff,
        reporter=reporter,
        stable=stable,
        any_ready=any_ready,
        defaults=defaults,
    )
    wait.run_sync(guard=guard)  # all ready at once: no event loop, no asyncio import
    if command:
        exec_command(command)


@contextlib.asynccontextmanager
async def _nested(
    outer: contextlib.AbstractAsyncContextManager[None],
    inner: contextlib.AbstractAsyncContextManager[None],
) -> AsyncIterator[None]:
    async with outer, inner:
        yield


@contextlib.asynccontextmanager
async def signals_cancel() -> AsyncIterator[None]:
    """On the event loop: SIGINT/SIGTERM cancel the wait (pending attempts included) and end it
    as :class:`Interrupted`; waitfor's own handlers are back afterwards."""
    import asyncio  # only a wait that was not over at its first attempt needs the event loop

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        task.cancel()

    for signum in INTERRUPTS:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        yield
    except asyncio.CancelledError:
        if received:
            raise Interrupted(received[0]) from None
        raise
    finally:
        # The loop's removal restores the *default* handlers, which a PID 1 never gets:
        # put waitfor's own back, with the signals held meanwhile so none is lost.
        signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTS)
        try:
            for signum in INTERRUPTS:
                loop.remove_signal_handler(signum)
                signal.signal(signum, exiting if received else interrupt)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, INTERRUPTS)


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
    try:
        os.execvp(command[0], list(command))
    except OSError as exc:
        for signum in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(signum, signal.SIG_IGN)  # back to Python's, to report safely
        if isinstance(exc, FileNotFoundError):
            _die(f"command not found: {command[0]}", 127)
        _die(f"cannot run {command[0]}: {exc.strerror}", 126)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    # Installed first thing (by waitfor.entry, before this module was imported, for the
    # command): as PID 1 in a container, a signal without a handler is ignored.
    install()
    termination.current = termination.TerminationLog()  # until the options are read
    args = list(argv) if argv is not None else sys.argv[1:]
    try:
        harden_stdio()
        _ERRORS["json"] = _json_output(args)
        cli.main(
            args=args,
            prog_name="waitfor",
            standalone_mode=False,
            auto_envvar_prefix="WAITFOR",
        )
    except click.exceptions.Exit as exc:  # --help, --version
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:  # click's word for a KeyboardInterrupt it caught
        ignore_interrupts()
        _die(str(Interrupted(signal.SIGINT)), Interrupted(signal.SIGINT).exit_code)
    except click.BadParameter as exc:
        _die(_name_the_variable(exc).format_message(), 2)
    except click.ClickException as exc:
        _die(exc.format_message(), 2)
    except WaitTimeout as exc:
        termination.current.timed_out(f"timed out after {exc.timeout:g}s", exc.results)
        sys.exit(WaitTimeout.exit_code)  # the reporter has said what was still not ready
    except Signalled as exc:  # during the synchronous part: parsing, a plugin's import, ...
        ignore_interrupts()
        _die(exc.describe(), 128 + exc.signum)
    except Interrupted as exc:
        ignore_interrupts()
        _die(str(exc), exc.exit_code)
    except WaitforError as exc:
        _die(str(exc), exc.exit_code)
    except OSError as exc:
        if exc.errno not in (errno.EMFILE, errno.ENFILE):
            raise
        message = f"{describe_os_error(exc)}: raise the limit (ulimit -n) or wait for fewer targets"
        termination.current.failed(message)
        sys.stderr.write(error_line(message, 2, as_json=_ERRORS["json"]))
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
        signalled = signalled_in(exc)
        if signalled is None:
            raise
        ignore_interrupts()
        code = 128 + signalled.signum
        sys.stderr.write(error_line(signalled.describe(), code, as_json=_ERRORS["json"]))
    flush_stdio()
    os._exit(code)


def _name_the_variable(exc: click.BadParameter) -> click.BadParameter:
    """A bad value that came from the environment is named by its variable, not its option."""
    from click.core import ParameterSource

    param, ctx = exc.param, exc.ctx
    if param is None or ctx is None or param.name is None:
        return exc
    if ctx.get_parameter_source(param.name) is ParameterSource.ENVIRONMENT:
        envvar = param.envvar or f"{ctx.auto_envvar_prefix}_{param.name.upper()}"
        exc.param_hint = envvar if isinstance(envvar, str) else envvar[0]
    return exc


def _die(message: str, code: int) -> NoReturn:
    first_line = " ".join(message.split())
    termination.current.failed(first_line)
    sys.stderr.write(error_line(first_line, code, as_json=_ERRORS["json"]))
    sys.exit(code)


#: errors are JSON lines when the output asked for is json (known before click has parsed it)
_ERRORS = {"json": False}


def _json_output(args: Sequence[str]) -> bool:
    """Whether -o json (or WAITFOR_OUTPUT=json) is asked for, without -q: read from the words
    themselves, so that an error click finds before it has parsed --output is JSON too."""
    output = os.environ.get("WAITFOR_OUTPUT", "")
    try:
        quiet = bool(click.BOOL.convert(os.environ.get("WAITFOR_QUIET") or "0", None, None))
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
