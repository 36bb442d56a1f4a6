"""exec: run a command; ready when it exits 0. The kubelet's exec probe, run locally.

``exec:COMMAND ARG...`` is split into words the way a POSIX shell splits them (quotes and
backslashes), but no shell runs it. Each attempt starts the command in a process group of its
own, with no standard input, and reads its standard output and error together; the last line
is the reason. ``#exit-code=N``: ready when it exits N (0 to 255) instead of 0. ``#stdout=RE2``:
that exit is ready only when the first 64 KiB of standard output (alone) match. An attempt that
outlives its budget is killed with its whole process group, and so is anything the command left
running in its group after exiting: a check leaves nothing behind.

Secrets do not belong on a command line (``ps`` shows it to every user): pass them in the
environment, which the command inherits. What looks like one is hidden all the same: the value
of a ``--password=X`` / ``--token X`` / ``PGPASSWORD=X`` word and a URL's password.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from waitfor.kind import (
    MASK,
    Address,
    Check,
    OptionPairs,
    Outcome,
    Value,
    is_secret_name,
    reject_unknown,
    single,
    unquote,
    urlsplit,
    userinfo,
)
from waitfor.kind import query as redaction_query

TYPE_CHECKING = False
if TYPE_CHECKING:
    from waitfor.kind import Pattern

if TYPE_CHECKING:
    from waitfor.kind import Deadline

#: stands for a hidden value while the words are quoted (quoting would wrap "***" in quotes)
_HOLE = "WAITFORHIDDENVALUE"
_OPTION = re.compile(r"-{0,2}([A-Za-z_][A-Za-z0-9_.-]*)=(.*)", re.DOTALL)


class ExecOptions(Value):
    stdout: Pattern | None = None  # the exit counts only if the first 64 KiB of stdout match
    exit_code: int = 0  # the exit status that is ready


class ExecCheck(Check[ExecOptions]):
    OPTION_NAMES = frozenset({"stdout", "exit_code"})
    USAGE = (
        ("exec:COMMAND ARG...", "the command exits 0 (no shell; killed at the attempt timeout)"),
        ("exec:COMMAND ARG...#stdout=RE2", "exits 0 and its stdout (first 64 KiB) matches"),
        ("exec:COMMAND ARG...#exit-code=N", "the command exits N (0-255)"),
    )

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> ExecOptions:
        reject_unknown(pairs, cls.OPTION_NAMES)
        code = exit_code(single(pairs, "exit_code"))
        pattern = single(pairs, "stdout")
        if pattern is None:
            return ExecOptions(exit_code=code)
        from waitfor.kind import option_pattern

        return ExecOptions(option_pattern("stdout", pattern), code)

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        text = url[len(scheme) + 1 :]
        try:
            argv = shlex.split(text)
        except ValueError as exc:  # "No closing quotation"
            raise ValueError(f"cannot split the command: {str(exc).lower()}") from None
        if not argv:
            raise ValueError("missing command: exec:COMMAND ARG...")
        shown, secrets = masked_argv(argv)
        # Quoted as a shell would need, with the mask itself left bare: exec:cli --token ***
        display = "exec:" + shlex.join(shown).replace(_HOLE, MASK)
        return Address(
            host=argv[0],
            port=None,
            display=display,
            secrets=frozenset(secrets),
            params=tuple(("arg", arg) for arg in argv),
        )

    async def probe(self, deadline: Deadline) -> Outcome:
        from waitfor.kinds.exec.run import run_command  # asyncio's subprocesses: when probing

        argv = [value for key, value in self.target.params if key == "arg"]
        # Our own timeout fires just before the runner's, so the reason can say what happened.
        # The reason quotes the command's output: a secret it prints is removed, with its
        # control characters, where every reason is (waitfor.base.sanitize).
        left = deadline.left()
        budget = max(left - 0.05, left * 0.9)
        return await run_command(argv, budget, self.options.stdout, self.options.exit_code)


def exit_code(value: str | None) -> int:
    """``#exit-code=N``: an exit status a process can have, 0 to 255 (a signal is not one)."""
    if value is None:
        return 0
    if not (value.isascii() and value.isdigit() and len(value) <= 3 and int(value) <= 255):
        raise ValueError(f"exit-code must be a number from 0 to 255, not {value[:20]!r}")
    return int(value)


def masked_argv(argv: Sequence[str]) -> tuple[list[str], set[str]]:
    """The words as shown, with what looks like a credential as ``_HOLE``, and those values.

    ``--password=X``, ``PGPASSWORD=X`` (an option or assignment named like a secret), the word
    after ``--token`` / ``-password`` (a dashed option named like one), a URL's password; the
    short options clients take credentials with: ``-pX`` / ``-p X`` (mysql, mongosh, sshpass;
    not a port after redis-cli or psql), ``-a X`` (redis-cli); a ``user:password`` after ``-u`` /
    ``--user`` (curl); every header's value after ``-H`` / ``--header``.
    """
    shown: list[str] = []
    secrets: set[str] = set()
    pending = ""  # what the next word is the value of: "secret", "-p", "user", "header"
    command = ""  # the last word naming a client whose -p is known (env, sshpass run others)
    for arg in argv:
        if pending and arg:
            kind, pending = pending, ""
            if kind == "-p" and command in _PORT_P and _is_port(arg):
                shown.append(arg)
            elif kind == "-p" and command in _MYSQL:
                shown.append(arg)  # mysql -p DB: -p asks for the password, DB is a database
            else:
                shown.append(_hidden(kind, arg, secrets))
            continue
        pending = ""
        if (program := arg.rpartition("/")[2]) in _PORT_P | _MYSQL:
            command = program
        match = _OPTION.fullmatch(arg)
        name = match.group(1).lower() if match else ""
        if match and is_secret_name(name) and match.group(2):
            shown.append(arg[: match.start(2)] + _HOLE)
            secrets.add(match.group(2))
        elif match and arg.startswith("-") and name in ("user", "header", "proxy-user"):
            value = match.group(2)
            shown.append(arg[: match.start(2)] + _hidden(_VALUE_OF[name], value, secrets))
        elif _attached_p(arg):  # -pPASS, whatever PASS holds (-psecretpw is no option name)
            if command in _PORT_P and _is_port(arg[2:]):
                shown.append(arg)
                continue
            shown.append("-p" + _HOLE)  # mysql -pPASS
            secrets.add(arg[2:])
        elif arg[:2] in _ATTACHED and len(arg) > 2:  # -uUSER:PASS, -HName:value (curl)
            shown.append(arg[:2] + _hidden(_SHORT[arg[:2]], arg[2:], secrets))
        elif not match and arg.startswith("-") and is_secret_name(arg) and ":" not in arg:
            shown.append(arg)
            pending = "secret"
        elif arg in _SHORT:
            shown.append(arg)
            pending = _SHORT[arg]
        elif "://" in arg and (url := _url_with_password(arg)):
            shown.append(url[0])
            secrets.update(value for value in url[1:] if value)
        else:
            shown.append(arg)
    return shown, secrets


#: short options whose next word is (or holds) a credential, and which kind of value it is
_SHORT = {"-p": "-p", "-a": "secret", "-u": "user", "-U": "user", "-H": "header"}
_SHORT.update({"--user": "user", "--proxy-user": "user", "--header": "header"})
_VALUE_OF = {"user": "user", "proxy-user": "user", "header": "header"}
#: short options whose value may be attached (``-uapp:pw``); -a and -p are handled apart
_ATTACHED = frozenset({"-u", "-U", "-H"})
#: commands whose ``-p`` is a port (a port number after it is shown)
_PORT_P = frozenset(
    {"redis-cli", "valkey-cli", "keydb-cli", "pg_isready", "psql", "ssh", "nc", "ncat", "netcat"}
)
#: commands whose ``-p`` takes the password attached only (``-pPASS``)
_MYSQL = frozenset({"mysql", "mariadb", "mysqladmin", "mariadb-admin", "mysqldump", "mysqlshow"})


#: single-dash options spelled out, whose value is the next word (-password X, not -pPASS)
_PASSWORD_OPTIONS = frozenset({"-password", "-passwd", "-pass", "-pwd"})


def _attached_p(arg: str) -> bool:
    return (
        arg.startswith("-p")
        and len(arg) > 2
        and not arg.startswith("--")
        and arg.lower() not in _PASSWORD_OPTIONS
    )


def _hidden(kind: str, value: str, secrets: set[str]) -> str:
    """``value`` as shown: ``user:***``, ``Authorization: ***``, or wholly hidden."""
    if kind == "user":  # -u root is a name; -u app:pw holds a password
        user, colon, password = value.partition(":")
        if not colon:
            return value
        secrets.add(password)
        return f"{user}:{_HOLE}" if password else value
    if kind == "header":
        name, colon, header_value = value.partition(":")
        if colon and header_value.strip():
            secrets.add(header_value.strip())
            return f"{name}: {_HOLE}"
        return value
    secrets.add(value)
    return _HOLE


def _is_port(word: str) -> bool:
    return word.isascii() and word.isdigit() and 0 < int(word[:6]) < 65536


def _url_with_password(arg: str) -> tuple[str, ...] | None:
    """(the URL with its password and secret-named query values as ``_HOLE``, those values), if
    it has any."""
    try:
        parts = urlsplit(arg)
        password = parts.password
    except ValueError:  # a fullwidth slash in a password: hide all that may be user information
        scheme, _, rest = arg.partition("://")
        user_info, _, hostpart = rest.rpartition("@")
        return f"{scheme}://{_HOLE}@{hostpart}", user_info, user_info.partition(":")[2]
    hidden = [unquote(value) for name, value in _query_items(parts.query) if is_secret_name(name)]
    if not password and not hidden:
        return None
    netloc = userinfo(parts.username, password).replace(MASK, _HOLE) if password else ""
    netloc += parts.hostport if password else parts.netloc
    scheme = f"{parts.scheme}:" if parts.scheme else ""
    query = f"?{redaction_query(parts.query).replace(MASK, _HOLE)}" if parts.query else ""
    fragment = f"#{parts.fragment}" if parts.fragment else ""
    shown = f"{scheme}//{netloc}{parts.path}{query}{fragment}"  # as urlunsplit joins
    return (shown, *([password] if password else []), *hidden)


def _query_items(query: str) -> list[tuple[str, str]]:
    return [(unquote(n), v) for n, eq, v in (i.partition("=") for i in query.split("&")) if eq]
