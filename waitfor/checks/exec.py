"""exec: run a command; ready when it exits 0. The kubelet's exec probe, run locally.

``exec:COMMAND ARG...`` is split into words the way a POSIX shell splits them (quotes and
backslashes), but no shell runs it. Each attempt starts the command in a process group of its
own, with no standard input, and reads its standard output and error together; the last line
is the reason. An attempt that outlives its budget is killed with its whole process group, and so
is anything the command left running in its group after exiting: a check leaves nothing behind.

Secrets do not belong on a command line (``ps`` shows it to every user): pass them in the
environment, which the command inherits. What looks like one is hidden all the same: the value
of a ``--password=X`` / ``--token X`` / ``PGPASSWORD=X`` word and a URL's password.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from waitfor.checks.base import Address, Check, Outcome
from waitfor.redaction import MASK, is_secret_name, userinfo
from waitfor.urlsplit import urlsplit

#: stands for a hidden value while the words are quoted (quoting would wrap "***" in quotes)
_HOLE = "WAITFORHIDDENVALUE"
_OPTION = re.compile(r"-{0,2}([A-Za-z_][A-Za-z0-9_.-]*)=(.*)", re.DOTALL)


class ExecCheck(Check):
    USAGE = (
        ("exec:COMMAND ARG...", "the command exits 0 (no shell; killed at the attempt timeout)"),
    )

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

    async def probe(self, budget: float) -> Outcome:
        from waitfor.checks.execrun import run_command  # asyncio's subprocesses: when probing

        argv = [value for key, value in self.target.params if key == "arg"]
        # Our own timeout fires just before the runner's, so the reason can say what happened.
        # The reason quotes the command's output: a secret it prints is removed, with its
        # control characters, where every reason is (waitfor.sanitize).
        return await run_command(argv, max(budget - 0.05, budget * 0.9))


def masked_argv(argv: Sequence[str]) -> tuple[list[str], set[str]]:
    """The words as shown, with what looks like a credential as ``_HOLE``, and those values.

    ``--password=X``, ``PGPASSWORD=X`` (an option or assignment named like a secret), the word
    after ``--token`` / ``-password`` (a dashed option named like one), a URL's password.
    """
    shown, secrets = [], set()
    hide_next = False
    for arg in argv:
        if hide_next and arg:
            shown.append(_HOLE)
            secrets.add(arg)
            hide_next = False
            continue
        hide_next = False
        match = _OPTION.fullmatch(arg)
        if match and is_secret_name(match.group(1)) and match.group(2):
            shown.append(arg[: match.start(2)] + _HOLE)
            secrets.add(match.group(2))
        elif not match and arg.startswith("-") and is_secret_name(arg):
            shown.append(arg)
            hide_next = True
        elif "://" in arg and "@" in arg and (url := _url_with_password(arg)):
            shown.append(url[0])
            secrets.add(url[1])
        else:
            shown.append(arg)
    return shown, secrets


def _url_with_password(arg: str) -> tuple[str, str] | None:
    """(the URL with its password as ``_HOLE``, the password), if it has one."""
    try:
        parts = urlsplit(arg)
        password = parts.password
    except ValueError:
        return None
    if not password:
        return None
    netloc = userinfo(parts.username, password).replace(MASK, _HOLE)
    netloc += parts.hostport
    scheme = f"{parts.scheme}:" if parts.scheme else ""
    query = f"?{parts.query}" if parts.query else ""
    fragment = f"#{parts.fragment}" if parts.fragment else ""
    return f"{scheme}//{netloc}{parts.path}{query}{fragment}", password  # as urlunsplit joins
