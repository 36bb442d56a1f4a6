"""The interface every check kind implements, and the outcome of one probe.

A kind is one module ``waitfor/checks/<kind>.py`` holding one :class:`Check` subclass, plus one
line in the registry (:mod:`waitfor.checks`) naming its schemes. The module's top-level imports
are cheap (stdlib, no asyncio/ssl where avoidable): parsing a target imports it, so protocol
libraries (httpx, dnspython, psycopg, ...) are imported inside the probe or mode that needs them.

What a kind provides (everything but ``probe`` has a working default)::

    class MyCheck(Check):
        OPTION_NAMES = frozenset({"mode"})      # the #key=value options it accepts
        PLAIN_OPTIONS = frozenset()             # of those, named like secrets but not secret
        USAGE = (("my://HOST[:PORT]", "what ready means"),)   # rows for --help

        @classmethod
        def parse_address(cls, scheme: str, url: str) -> Address:
            # url: the target as given, less its #fragment. Default: standard_address(),
            # scheme://[user[:password]@]host[:port][/path][?query], password and
            # secret-looking query values hidden. Use waitfor.urls for the pieces.
            ...

        @classmethod
        def parse_options(cls, pairs: OptionPairs) -> object:
            # a frozen value; helpers reject_unknown(), single(), flag(). Default: refuses
            # every option not in OPTION_NAMES and returns Options(pairs), whose
            # .get(key) reads one.
            ...

        @classmethod
        def show_unparsed(cls, text: str) -> str:
            # the target as its own parse error names it; default redaction.unparsed()
            ...

        @classmethod
        def split_bare(cls, text: str) -> tuple[str, str] | None:
            # only for kinds registered with bare=True: claim a target written without a
            # scheme (libpq's "host=db dbname=app"): (address, fragment), else None.
            ...

        async def probe(self, budget: float) -> Outcome:
            # self.target.url / .host / .port / .options / .params / .param(key)
            return Outcome.up("...") | Outcome.down("why not") | Outcome.fatal("config error")

        async def aclose(self) -> None: ...   # release what is held between probes

        def probe_now(self, budget: float) -> Outcome | None:
            # optional: a synchronous first attempt for a fast cold start (no asyncio);
            # the ready Outcome that probe() would give, else None (see waitfor.quickstart)
            ...

``Address(host, port, display, secrets, params)``: ``display`` is built from the parsed parts with
secrets left out (``mysql://root:***@db:3306/app``; ``waitfor.redaction.userinfo`` / ``query``
help), ``secrets`` lists the credential values (nothing searches output for them: reasons and
errors are built from parts that are not secret, and tests assert the values never appear),
``params`` are kind-specific parts the probe reads back via ``target.param(key)``.
``parse_address`` and ``parse_options`` raise ValueError with a one-line message for bad input
that quotes nothing secret (the CLI shows it after the target's safe form, exit 2).

Third-party kinds are the same class in another package, declared as an entry point in the group
``waitfor.kinds`` (name = the URL scheme, value = ``"module:Class"``); ``waitfor.Check``,
``waitfor.Outcome``, ``waitfor.Address`` and ``waitfor.Options`` are exported for them. The
smallest plugin implements only ``probe``, reading ``self.target.url`` (and ``.host``/``.port``
when the URL has them); options are refused unless declared in ``OPTION_NAMES``. See the README's
"Writing a kind".

A check is built once per target and probed repeatedly by the runner. ``probe`` must be idempotent
and side-effect free, must translate the foreign exceptions it expects into an :class:`Outcome`
(not ready with a reason, or permanent), and lets anything unexpected propagate: that is a bug.
The runner bounds every probe with a cancellation scope, so a probe may simply await. Names are
resolved and connections opened through the shared helpers (today :func:`waitfor.checks.tcp.
connect_any`), never by a kind's own ``getaddrinfo``.
"""

from __future__ import annotations

import errno
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from waitfor import redaction, urls
from waitfor.urls import host_port
from waitfor.values import Value

if TYPE_CHECKING:
    from waitfor.targets import Target

__all__ = [
    "Address",
    "Check",
    "OptionPairs",
    "Options",
    "Outcome",
    "choice",
    "describe_os_error",
    "flag",
    "host_port",
    "reject_unknown",
    "single",
    "standard_address",
]

OptionPairs = Sequence[tuple[str, str]]


# The value types are waitfor.values.Value: every start imports them (see there why).
class Address(Value):
    """What a kind parsed from a target's address (its URL less the ``#fragment``)."""

    host: str  # "" when the kind's targets have no host (files, commands)
    port: int | None
    display: str  # the address as shown everywhere: built from parts, secrets left out
    secrets: frozenset[str] = frozenset()  # credential values: must never appear in output
    params: tuple[tuple[str, str], ...] = ()  # kind-specific parts, read back by the probe


class Outcome(Value):
    ready: bool
    reason: str  # why not ready, or what showed readiness ("HTTP 200")
    permanent: bool = False  # retrying cannot help: a configuration problem

    @classmethod
    def up(cls, detail: str) -> Outcome:
        return cls(True, detail)

    @classmethod
    def down(cls, reason: str) -> Outcome:
        return cls(False, reason)

    @classmethod
    def fatal(cls, reason: str) -> Outcome:
        return cls(False, reason, permanent=True)


class Options(Value):
    """The default options value: the declared ``#key=value`` pairs as given, in order."""

    pairs: tuple[tuple[str, str], ...] = ()

    def get(self, key: str, default: str | None = None) -> str | None:
        """The option's value (the last one given), or ``default``."""
        values = [v for k, v in self.pairs if k == key]
        return values[-1] if values else default


class Check(ABC):
    """One kind of readiness check: parses its own targets' addresses and options, and probes."""

    #: option names accepted in a target's ``#key=value`` fragment (and as global defaults)
    OPTION_NAMES: ClassVar[frozenset[str]] = frozenset()
    #: options that are names, never secrets, though named like one (redis's ``key=NAME``)
    PLAIN_OPTIONS: ClassVar[frozenset[str]] = frozenset()
    #: (form, what ready means) rows for ``waitfor --help``
    USAGE: ClassVar[tuple[tuple[str, str], ...]] = ()

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        """Parse the target less its fragment; raise ValueError if invalid."""
        return standard_address(scheme, url)

    @classmethod
    def show_unparsed(cls, text: str) -> str:
        """A target that failed to parse, as its error names it: nothing that may be secret.

        ``text`` is the whole target (the address only, for a bare target).
        """
        return redaction.unparsed(text)

    @classmethod
    def split_bare(cls, text: str) -> tuple[str, str] | None:
        """For kinds registered ``bare=True``: (address, fragment) of a scheme-less target."""
        return None

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> object:
        """Validate ``#key=value`` options into a frozen value; raise ValueError if invalid."""
        reject_unknown(pairs, cls.OPTION_NAMES)
        return Options(tuple(pairs))

    def __init__(self, target: Target) -> None:
        self.target = target

    @abstractmethod
    async def probe(self, budget: float) -> Outcome:
        """Probe once. ``budget`` is the seconds this attempt may take (the runner enforces it)."""

    def probe_now(self, budget: float) -> Outcome | None:
        """A first attempt made synchronously, before the event loop exists (a cold start).

        Return the outcome only when the target is *ready* within ``budget``; None otherwise
        (the runner then makes the attempt that counts). It must give exactly what ``probe``
        would, must not import asyncio, and releases whatever it opens. Optional: None.
        """
        return None

    async def aclose(self) -> None:  # noqa: B027 - most checks hold nothing between probes
        """Release anything held between probes."""


def reject_unknown(pairs: OptionPairs, allowed: frozenset[str]) -> None:
    for key, _ in pairs:
        if key not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            raise ValueError(f"unknown option {key!r} (known: {known})")


def single(pairs: OptionPairs, key: str) -> str | None:
    """The value of an option that may be given at most once (the last one wins is a trap)."""
    values = [v for k, v in pairs if k == key]
    if len(values) > 1:
        raise ValueError(f"option {key!r} given more than once")
    return values[0] if values else None


def choice(pairs: OptionPairs, key: str, allowed: Sequence[str], default: str) -> str:
    """An option that names one of ``allowed`` (any case), ``default`` when absent."""
    value = (single(pairs, key) or default).lower()
    if value not in allowed:
        raise ValueError(f"{key} must be {' or '.join(allowed)}, not {value!r}")
    return value


def flag(pairs: OptionPairs, key: str) -> bool:
    value = single(pairs, key)
    if value is None:
        return False
    if value.lower() in ("", "1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"option {key!r} takes true or false, not {value!r}")


def standard_address(scheme: str, url: str, default_port: int | None = None) -> Address:
    """``scheme://[user[:password]@]host[:port][/path][?query]``, or ``scheme:anything``.

    With an authority the host is validated and the port is the one given, else ``default_port``
    (None: no port); a kind with a ``default_port`` needs the authority (``scheme:x`` is
    refused). The URL's password and secret-looking query values are secrets.
    """
    parts = urls.split(url)
    hidden = urls.secrets(parts)
    if parts.netloc or url[len(scheme) + 1 :].startswith("//"):
        host = urls.host(parts)
        port = urls.port(parts, default_port) if default_port else urls.optional_port(parts)
    elif default_port:  # a kind with a default port connects somewhere: 'http:whatever' cannot
        raise ValueError(f"missing host: write {scheme}://HOST[:PORT]")
    else:
        host, port = "", None
    return Address(host, port, urls.display(scheme, parts), frozenset(hidden))


def describe_os_error(exc: OSError) -> str:
    """ "connection refused" rather than "[Errno 111] Connect call failed ('10.0.0.1', 5432)"."""
    if exc.errno is not None and exc.errno in errno.errorcode:
        return os.strerror(exc.errno).lower()
    return str(exc) or type(exc).__name__
