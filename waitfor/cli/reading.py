"""The command's options, declared once, and what both readings of the command line share (the
quick one in :mod:`.command`, click's in :mod:`.clickparse`): the defaults and variables, the
``--`` split, and how a usage error ends the command.

Click's options (:mod:`.clickparse`), the quick reading's words, defaults and variables, and what
each option is passed to the library as (:func:`waitfor.cli.command.wait`) all follow from
:data:`OPTIONS`. Adding an option is one :class:`Option` there (and its line in the docs). One
that is a library keyword (``keyword=``) is also one parameter of ``Wait``, ``wait_for`` and
``wait_for_async`` (tests/cli/test_options.py holds the three signatures and their docs to the
list); one that is a default for every target's ``#option`` (``target_option=``) needs nothing
else; any other is read by its name where it is used (:func:`waitfor.cli.command.wait`).

The declaration is plain classes and literals, here rather than in a module of its own: the
quick reading imports it without click, and a module more is start-up time.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from waitfor.base.backoff import MIN_DELAY
from waitfor.cli import termination
from waitfor.cli.report import OUTPUTS, error_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

#: how an option's value is read (click's type for it, in :mod:`.clickparse`)
DURATION = "duration"  # 90, 90s, 5m: seconds (a float)
FLAG = "flag"  # no value; from its variable, true/false words
CHOICE = "choice"  # one of ``choices``
FILE = "file"  # a file that must exist
PATH = "path"  # a file's name, checked by whoever opens it (FILE in --help)
TEXT = "text"  # any string


class Option:
    """One command-line option: its words, value, default, help, variable, and where it goes."""

    __slots__ = (
        "choices",
        "default",
        "envvar",
        "flags",
        "help",
        "keyword",
        "metavar",
        "name",
        "quick",
        "show_default",
        "target_option",
        "value",
    )

    def __init__(
        self,
        *flags: str,
        value: str,
        help: str,  # click's word
        default: str | bool | None = None,
        name: str | None = None,
        show_default: bool = False,
        choices: tuple[str, ...] = (),
        metavar: str | None = None,
        keyword: str | None = None,
        target_option: str | None = None,
        quick: bool = False,
    ) -> None:
        self.flags = flags
        long_name = flags[-1].removeprefix("--").replace("-", "_")
        #: the parameter's name (click's, the quick reading's, :func:`command.wait`'s)
        self.name = name or long_name
        #: the variable it is read from too: WAITFOR_ and its long name (``--any``: WAITFOR_ANY)
        self.envvar = "WAITFOR_" + long_name.upper()
        self.value = value
        self.help = help
        self.default = False if value == FLAG else default
        self.show_default = show_default
        self.choices = choices
        self.metavar = metavar
        #: the library keyword (``Wait``, ``wait_for``) its value is passed as, if one
        self.keyword = keyword
        #: the target ``#option`` it is a default for (every target whose kind takes it)
        self.target_option = target_option
        #: read by the quick reading too (without click): only the plainest options are
        self.quick = quick


_TLS = "TLS targets (https, grpcs, rediss, amqps, ...)"

#: every option, in --help's order
OPTIONS = (
    Option(
        "-t",
        "--timeout",
        value=DURATION,
        default="60s",
        show_default=True,
        keyword="timeout",
        quick=True,
        help="Give up after this long (90, 90s, 5m; 0 = wait forever). Exit 124.",
    ),
    Option(
        "--attempt-timeout",
        value=DURATION,
        default="5s",
        show_default=True,
        keyword="attempt_timeout",
        help="Longest a single attempt may take (never more than the time left).",
    ),
    Option(
        "--max-interval",
        value=DURATION,
        default="0.6s",
        show_default=True,
        help="Cap of the jittered exponential backoff between attempts (from 50ms; at least 10ms).",
    ),
    Option(
        "--interval",
        value=DURATION,
        keyword="interval",
        help=(
            "A fixed interval between attempts instead of the backoff (at least 10ms; not with"
            " --max-interval)."
        ),
    ),
    Option(
        "--delay",
        value=DURATION,
        default="0s",
        keyword="delay",
        help=(
            "Make the first attempt only after this long (counted in --timeout, which must"
            " leave the first attempt at least 1s, or --attempt-timeout if shorter)."
        ),
    ),
    Option(
        "--invert",
        value=FLAG,
        keyword="invert",
        help="Wait until the targets are down instead.",
    ),
    Option(
        "--stable",
        value=DURATION,
        default="0s",
        keyword="stable",
        help=(
            "Ready only after answering ready this long without a failure"
            " (a target's #stable= wins)."
        ),
    ),
    Option(
        "--any",
        name="any_ready",
        value=FLAG,
        keyword="any_ready",
        help="Done as soon as any one target is ready; the others are cancelled.",
    ),
    Option(
        "-o",
        "--output",
        value=CHOICE,
        choices=OUTPUTS,
        default="auto",
        show_default=True,
        help=(
            "Progress on stderr: auto (tty when stderr is a terminal, else text), text, tty, json"
            " (one JSON object per line), quiet (only why the wait failed)."
        ),
    ),
    Option("-q", "--quiet", value=FLAG, quick=True, help="Print only why the wait failed."),
    Option(
        "--insecure",
        value=FLAG,
        target_option="insecure",
        help=f"{_TLS}: skip TLS verification.",
    ),
    Option(
        "--cacert",
        value=FILE,
        target_option="cacert",
        help=f"{_TLS}: trust this CA bundle (PEM).",
    ),
    Option(
        "--cert",
        value=PATH,  # a missing one is the target's error
        target_option="cert",
        help="TLS targets: client certificate (PEM) for servers that require one (mutual TLS).",
    ),
    Option(
        "--key",
        value=PATH,
        target_option="client_key",  # redis's key=NAME is a key, not a file
        help="TLS targets: the client certificate's private key (PEM).",
    ),
    Option(
        "--key-password",
        value=TEXT,
        target_option="key_password",
        help="The private key's passphrase (better: WAITFOR_KEY_PASSWORD); never shown.",
    ),
    Option(
        "--proxy",
        value=TEXT,
        metavar="URL",
        target_option="proxy",
        help=(
            "http, https targets: go through this HTTP proxy (http://[USER:PASSWORD@]HOST[:PORT];"
            " https by CONNECT); credentials never shown. Default: direct."
        ),
    ),
    Option(
        "--proxy-from-env",
        value=FLAG,
        target_option="proxy_from_env",
        help="http, https targets: the proxies https_proxy, http_proxy, no_proxy name (as curl).",
    ),
    Option(
        "--resolv-conf",
        value=FILE,
        target_option="resolv_conf",
        help="dns: resolver configuration to use instead of /etc/resolv.conf.",
    ),
    Option(
        "--termination-log",
        value=TEXT,
        metavar="PATH",
        help=(
            "On failure, write why here (default: /dev/termination-log when it exists, where"
            " kubectl describe pod shows it)."
        ),
    ),
    Option(
        "--events",
        value=FLAG,
        help=(
            "In a pod: post Kubernetes Events on it (Waiting, NotReady, Ready, TimedOut); needs"
            " create, patch on events."
        ),
    ),
)


MIN_INTERVAL = MIN_DELAY  # the library holds the same floor
#: the options' defaults, as --help shows them; click's and quick_params' values both come from here
DEFAULTS: dict[str, Any] = {option.name: option.default for option in OPTIONS}
#: the variables waitfor reads: WAITFOR_TARGETS and one per option
VARIABLES = frozenset({"WAITFOR_TARGETS"} | {option.envvar for option in OPTIONS})
#: variables read where they are used, not options: no "unknown variable" warning, and the quick
#: reading still reads the words (the first attempt's budget scale, waitfor.core.first_attempt)
READ_ELSEWHERE = frozenset({"WAITFOR_QUICK_BUDGET_SCALE"})


def split_command(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(waitfor's own words, the command after the first ``--``)."""
    if "--" in args:
        split = list(args).index("--")
        return list(args[:split]), list(args[split + 1 :])
    return list(args), []


#: errors are JSON lines when the output asked for is json (known before click has parsed it)
ERRORS = {"json": False}


def die(message: str, code: int) -> NoReturn:
    first_line = " ".join(message.split())
    termination.current.failed(first_line)
    sys.stderr.write(error_line(first_line, code, as_json=ERRORS["json"]))
    sys.exit(code)
