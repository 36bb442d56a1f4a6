"""The interface for kind authors: everything a kind imports from waitfor comes from here.

Built-in kinds and third-party ones alike: a kind is a :class:`Check` subclass in its own module
(``waitfor/kinds/<kind>.py``) or, when it has protocol modules too, its own folder
(``waitfor/kinds/<kind>/__init__.py`` is the front module: address, options, secrets, probe;
``wire.py`` and the like hold the protocol), plus one line in the registry
(:mod:`waitfor.kinds`). Third-party kinds are the same class in another package, declared as an
entry point in the group ``waitfor.kinds`` (name = the URL scheme, value = ``"module:Class"``).
Nothing else in waitfor is a published interface: modules may move; this one keeps its names.

What a kind provides (everything but ``probe`` has a working default)::

    from waitfor.kind import Address, Check, NetError, Outcome, open_stream, standard_address

    class MyCheck(Check):
        OPTION_NAMES = frozenset({"mode"})      # the #key=value options it accepts
        PLAIN_OPTIONS = frozenset()             # of those, named like secrets but not secret
        USAGE = (("my://HOST[:PORT]", "what ready means"),)   # rows for --help

        @classmethod
        def parse_address(cls, scheme: str, url: str) -> Address:
            # url: the target as given, less its #fragment. Default: standard_address(), which
            # accepts scheme://[user[:password]@][host[:port]][/path][?query] and scheme:opaque,
            # password and secret-looking query values hidden; a kind that needs a host says
            # so: standard_address(scheme, url, default_port=2181) (or require_host=True).
            ...

        @classmethod
        def parse_options(cls, pairs: OptionPairs) -> object:
            # a frozen value; helpers reject_unknown(), single(), choice(), flag(). Default:
            # refuses every option not in OPTION_NAMES and returns Options(pairs), whose
            # .get(key) reads one.
            ...

        async def probe(self, deadline: Deadline) -> Outcome:
            # self.target.url / .host / .port / self.options / .params / .param(key);
            # deadline: when this attempt ends (the runner enforces it); .left() is what is
            # left, and the networking calls take it as it is
            return Outcome.up("...") | Outcome.down("why not") | Outcome.fatal("config error")

        async def aclose(self) -> None: ...   # release what is held between probes

        def probe_now(self, deadline: Deadline) -> Outcome | None:
            # optional: a synchronous first attempt for a fast cold start (no asyncio);
            # the ready Outcome that probe() would give, else None (see waitfor.core.first_attempt)
            ...

``Address(host, port, display, secrets, params)``: ``display`` is built from the parsed parts with
secrets left out (``mysql://root:***@db:3306/app``; ``waitfor.base.redaction.userinfo`` / ``query``
help), ``secrets`` lists the credential values, ``params`` are kind-specific parts the probe reads
back via ``target.param(key)``. ``parse_address`` and ``parse_options`` raise ValueError with a
one-line message for bad input that quotes nothing secret (shown after the target's safe form,
exit 2). ``show_unparsed`` and ``split_bare`` (scheme-less targets, libpq's ``host=db``) are for
kinds with unusual addresses.

A check is built once per target and probed repeatedly by the runner. ``probe`` must be idempotent
and side-effect free, must translate the foreign exceptions it expects into an :class:`Outcome`
(not ready with a reason, or permanent), and lets anything unexpected propagate: that is a bug.
The runner bounds every probe with a cancellation scope, so a probe may simply await.

Networking: names are resolved and connections opened through :func:`resolve`, :func:`connect`,
:func:`open_stream` and :func:`start_tls` (all from :mod:`waitfor.net.aio`, imported when first
used: they need asyncio), never by a kind's own ``getaddrinfo``: they are bounded by the deadline,
cancellable, and raise :class:`NetError` whose text is the reason to show.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar, cast

from waitfor.base import redaction, urls
from waitfor.base.deadline import Deadline
from waitfor.base.urls import host_port
from waitfor.base.values import Value
from waitfor.net.errors import describe_os_error

if TYPE_CHECKING:
    from waitfor.core.targets import Target
    from waitfor.net.aio import (
        ConnectError,
        NetError,
        ResolveError,
        TlsError,
        connect,
        open_stream,
        resolve,
        start_tls,
    )

__all__ = [
    "Address",
    "Check",
    "ConnectError",
    "Deadline",
    "NetError",
    "OptionPairs",
    "Options",
    "Outcome",
    "ResolveError",
    "TlsError",
    "choice",
    "connect",
    "describe_os_error",
    "flag",
    "host_port",
    "open_stream",
    "reject_unknown",
    "resolve",
    "single",
    "standard_address",
    "start_tls",
]

#: the networking names, from waitfor.net.aio on first use (it imports asyncio)
_NETWORKING = frozenset(
    {"ConnectError", "NetError", "ResolveError", "TlsError", "connect", "open_stream", "resolve"}
    | {"start_tls"}
)


def __getattr__(name: str) -> object:
    if name not in _NETWORKING:
        raise AttributeError(f"module 'waitfor.kind' has no attribute {name!r}")
    from waitfor.net import aio

    return getattr(aio, name)


OptionPairs = Sequence[tuple[str, str]]


# The value types are waitfor.base.values.Value: every start imports them (see there why).
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


#: a kind's own parsed options type (what its parse_options returns)
OptionsT = TypeVar("OptionsT")


class Check(ABC, Generic[OptionsT]):
    """One kind of readiness check: parses its own targets' addresses and options, and probes.

    ``Check[MyOptions]``: ``parse_options`` returns ``MyOptions`` and ``self.options`` reads it
    back, typed (``Check[Options]`` for the default options value).
    """

    #: option names accepted in a target's ``#key=value`` fragment (and as global defaults)
    OPTION_NAMES: ClassVar[frozenset[str]] = frozenset()
    #: options that are names, never secrets, though named like one (redis's ``key=NAME``)
    PLAIN_OPTIONS: ClassVar[frozenset[str]] = frozenset()
    #: (form, what ready means) rows for ``waitfor --help``
    USAGE: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: set by the runner when the wait is for "down" (``--invert``), for a kind whose "down" is
    #: not just "not ready" (a Kubernetes object: deleted, whatever its status)
    inverted: bool = False
    #: an attempt watches for changes for most of its budget (a Kubernetes watch): the runner
    #: counts the backoff delay from the attempt's start, so a watch that ran its course is
    #: followed by the next at once (a change is never missed between watches), while an
    #: attempt that failed at once still waits its backoff
    WATCHES: ClassVar[bool] = False

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
    def parse_options(cls, pairs: OptionPairs) -> OptionsT:
        """Validate ``#key=value`` options into a frozen value; raise ValueError if invalid.

        The default: :class:`Options` holding the declared pairs (for ``Check[Options]``).
        """
        reject_unknown(pairs, cls.OPTION_NAMES)
        return cast(OptionsT, Options(tuple(pairs)))

    @property
    def options(self) -> OptionsT:
        """This target's options, as this kind's :meth:`parse_options` made them."""
        return cast(OptionsT, self.target.options)

    def __init__(self, target: Target) -> None:
        self.target = target

    @abstractmethod
    async def probe(self, deadline: Deadline) -> Outcome:
        """Probe once, before ``deadline`` (the runner enforces it: a probe may simply await)."""

    def probe_now(self, deadline: Deadline) -> Outcome | None:
        """A first attempt made synchronously, before the event loop exists (a cold start).

        Return the outcome only when the target is *ready* before ``deadline``; None otherwise
        (the runner then makes the attempt that counts). It must give exactly what ``probe``
        would, must not import asyncio, and releases whatever it opens. Optional: None.
        """
        return None

    async def aclose(self) -> None:
        """Release anything held between probes."""


def spelt(key: str) -> str:
    """An option's name as documented and written (``expect-header``): targets are read with
    '-' as '_' (``expect_header``), the name every check sees."""
    return key.replace("_", "-")


def reject_unknown(pairs: OptionPairs, allowed: frozenset[str]) -> None:
    for key, _ in pairs:
        if key not in allowed:
            known = ", ".join(sorted(spelt(name) for name in allowed)) or "none"
            raise ValueError(f"unknown option {spelt(key)!r} (known: {known})")


def single(pairs: OptionPairs, key: str) -> str | None:
    """The value of an option that may be given at most once (the last one wins is a trap)."""
    values = [v for k, v in pairs if k == key]
    if len(values) > 1:
        raise ValueError(f"option {spelt(key)!r} given more than once")
    return values[0] if values else None


def choice(pairs: OptionPairs, key: str, allowed: Sequence[str], default: str) -> str:
    """An option that names one of ``allowed`` (any case), ``default`` when absent."""
    value = (single(pairs, key) or default).lower()
    if value not in allowed:
        raise ValueError(f"{spelt(key)} must be {' or '.join(allowed)}, not {value!r}")
    return value


def flag(pairs: OptionPairs, key: str) -> bool:
    value = single(pairs, key)
    if value is None:
        return False
    if value.lower() in ("", "1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"option {spelt(key)!r} takes true or false, not {value!r}")


def standard_address(
    scheme: str, url: str, default_port: int | None = None, *, require_host: bool = False
) -> Address:
    """``scheme://[user[:password]@][host[:port]][/path][?query]``, or ``scheme:anything``.

    A host, when there is one, is validated, and the port is the one given, else ``default_port``
    (None: no port). A kind that needs a host says so with ``require_host`` or a
    ``default_port``; otherwise ``scheme:///path`` and ``scheme:opaque`` have none (host "").
    The URL's password and secret-looking query values are secrets.
    """
    parts = urls.split(url)
    hidden = urls.secrets(parts)
    authority = url[len(scheme) + 1 :].startswith("//")
    if parts.netloc:
        host = urls.host(parts)
        port = urls.port(parts, default_port) if default_port else urls.optional_port(parts)
    elif require_host or default_port is not None:  # 'http:whatever' connects nowhere
        raise ValueError(f"missing host: write {scheme}://HOST[:PORT]")
    else:
        host, port = "", None
    return Address(host, port, urls.display(scheme, parts, authority=authority), frozenset(hidden))
