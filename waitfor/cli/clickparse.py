"""The whole command line with click: every option, environment variable, --help and usage error.

:mod:`waitfor.cli.command` comes here for any command line its quick reading does not take
(importing click is about half of a ready wait's start-up); the wait itself, the exit codes and
the exec are :mod:`waitfor.cli.command`'s, whichever read the words.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from waitfor.cli import termination
from waitfor.cli.reading import (
    CHOICE,
    DURATION,
    FILE,
    FLAG,
    MIN_INTERVAL,
    OPTIONS,
    PATH,
    Option,
    die,
    split_command,
)
from waitfor.cli.signals import ignore_interrupts
from waitfor.core import registry as kinds
from waitfor.core.durations import parse_duration
from waitfor.errors import Interrupted

COMMAND_KEY = "waitfor.command"
F = TypeVar("F", bound=Callable[..., Any])

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
configuration, 130/143/129 interrupted by SIGINT/SIGTERM/SIGHUP, 126/127 the command cannot be
run / was not found.
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


class Flag(click.types.BoolParamType):
    """A flag's value from its variable (WAITFOR_INVERT=yes): click's words for true and false,
    listed as pairs; its own message put the empty value (false) first, as ``, 0, 1, f, ...``."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if self.str_to_bool(value) is None:
            self.fail(f"{value!r} is not true or false (yes/no, on/off, 1/0, t/f, y/n)", param, ctx)
        return super().convert(value, param, ctx)


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
        args, ctx.meta[COMMAND_KEY] = split_command(args)
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


def click_option(option: Option) -> Callable[[F], F]:
    """The click option for one declared option (:mod:`waitfor.cli.reading`)."""
    kwargs: dict[str, Any] = {"help": option.help, "envvar": option.envvar}
    if option.value == FLAG:
        kwargs.update(is_flag=True, type=Flag())
    else:
        kwargs.update(default=option.default, show_default=option.show_default)
        kwargs["type"] = {
            DURATION: Duration(),
            CHOICE: click.Choice(option.choices),
            FILE: click.Path(exists=True, dir_okay=False),
            PATH: click.Path(dir_okay=False),  # FILE in --help
        }.get(option.value)
    if option.metavar is not None:
        kwargs["metavar"] = option.metavar
    return click.option(*option.flags, option.name, **kwargs)


def with_options(command: F) -> F:
    """Every declared option on the command, in their order (the last decorator comes first)."""
    for option in reversed(OPTIONS):
        command = click_option(option)(command)
    return command


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
@with_options
# not from WAITFOR_VERSION: a variable some tool sets would end the wait at once, exit 0
@click.version_option(
    package_name="waitfor", message="%(prog)s %(version)s", allow_from_autoenv=False
)
@click.pass_context
def cli(ctx: click.Context, /, targets: tuple[str, ...], **options: Any) -> dict[str, Any]:
    """Wait until every TARGET is ready, then exit 0 or exec COMMAND."""
    termination.current = termination.TerminationLog(options.pop("termination_log"))
    command: list[str] = ctx.meta.get(COMMAND_KEY, [])
    if command and not command[0]:
        raise click.UsageError("the command after -- is empty")
    if not targets:
        raise click.UsageError("no targets given (as arguments or in WAITFOR_TARGETS)")
    if options["attempt_timeout"] <= 0:
        raise click.BadParameter("must be more than 0", param_hint="--attempt-timeout")
    if options["max_interval"] < MIN_INTERVAL:
        # A zero cap would probe in a tight loop: thousands of connections a second.
        raise click.BadParameter(f"must be at least {MIN_INTERVAL:g}s", param_hint="--max-interval")
    if options["interval"] is not None:
        from click.core import ParameterSource

        if options["interval"] < MIN_INTERVAL:
            param = next(p for p in ctx.command.params if p.name == "interval")
            raise click.BadParameter(f"must be at least {MIN_INTERVAL:g}s", ctx, param)
        if ctx.get_parameter_source("max_interval") is not ParameterSource.DEFAULT:
            raise click.UsageError("--interval is fixed: it does not go with --max-interval")
    if options["proxy"] is not None:  # refused even when no target would take it
        try:
            kinds.check_class("http").parse_options([("proxy", options["proxy"])])
        except ValueError as exc:
            param = next(p for p in ctx.command.params if p.name == "proxy")
            raise click.BadParameter(str(exc), ctx, param) from None
    # click's values under wait()'s own names, as quick_params gives them
    return {"targets": targets, **options, "command": command}


def main(args: Sequence[str]) -> dict[str, Any]:
    """Read the words with click: the wait's parameters, under :func:`waitfor.cli.command.wait`'s
    names; click's own errors end here (the wait, and its errors, are the caller's)."""
    try:
        params = cli.main(
            args=list(args),
            prog_name="waitfor",
            standalone_mode=False,
            auto_envvar_prefix="WAITFOR",
        )
        if not isinstance(params, dict):  # --help, --version: click returns their exit code
            sys.exit(params)
        return params
    except click.exceptions.Exit as exc:  # --help, --version
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:  # click's word for a KeyboardInterrupt it caught
        ignore_interrupts()
        die(str(Interrupted(signal.SIGINT)), Interrupted(signal.SIGINT).exit_code)
    except click.BadParameter as exc:
        die(_name_the_variable(exc).format_message(), 2)
    except click.ClickException as exc:
        die(exc.format_message(), 2)


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
