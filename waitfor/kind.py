"""The interface for kind authors: everything a kind imports from waitfor comes from here.

Built-in kinds and third-party ones alike: a kind is a :class:`Check` subclass in its own module
(``waitfor/kinds/<kind>.py``) or, when it has protocol modules too, its own folder
(``waitfor/kinds/<kind>/check.py`` is the front module: address, options, secrets, probe;
``wire.py`` and the like hold the protocol), plus one line in the registry
(:mod:`waitfor.core.registry`). Third-party kinds are the same class in another package,
declared as an entry point in the group ``waitfor.kinds`` (name = the URL scheme, value =
``"module:Class"``).
Nothing else in waitfor is a published interface: modules may move; this one keeps its names.
It defines nothing: the names live where the engine and the networking layer use them
(:mod:`waitfor.core.check`, :mod:`waitfor.base`), and a kind imports them from here, from
:mod:`waitfor.net` and from its own folder only (tests/test_layering.py holds every kind to that).

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
secrets left out (``mysql://root:***@db:3306/app``: ``urls.shown`` builds it; ``redaction``'s
``userinfo`` / ``query`` are its parts), ``secrets`` lists the credential values, ``params`` are
kind-specific parts the probe reads back via ``target.param(key)``. ``parse_address`` and
``parse_options`` raise ValueError with a one-line message for bad input that quotes nothing
secret (shown after the target's safe form, exit 2). ``show_unparsed`` and ``split_bare``
(scheme-less targets, libpq's ``host=db``) are for kinds with unusual addresses.

A check is built once per target and probed repeatedly by the runner. ``probe`` must be idempotent
and side-effect free, must translate the foreign exceptions it expects into an :class:`Outcome`
(not ready with a reason, or permanent), and lets anything unexpected propagate: that is a bug.
The runner bounds every probe with a cancellation scope, so a probe may simply await.

Networking: names are resolved and connections opened through :func:`resolve`, :func:`connect`,
:func:`open_stream` and :func:`start_tls` (all from :mod:`waitfor.net.aio`, imported when first
used: they need asyncio), never by a kind's own ``getaddrinfo``: they are bounded by the deadline,
cancellable, and raise :class:`NetError` whose text is the reason to show.

Also here, for kinds: the conversation template (:class:`ConversationCheck`, its options and
:class:`ProtocolError`, :func:`answer_line` for a line-based protocol's lines; the driver itself
is :mod:`waitfor.net.conversation`), seed lists
(:mod:`seeds <waitfor.core.seeds>`), the value base :class:`Value`, URL and redaction helpers
(:func:`urlsplit`, :func:`unquote`, :func:`host_port`, :func:`userinfo`, :func:`query`,
:data:`MASK`, :func:`is_secret_name`, and the modules ``urls``, ``redaction``, ``sanitize``),
RE2 patterns (:class:`Pattern`, :func:`compile_pattern`, :func:`option_pattern`), JSON expectations
(:class:`JsonExpectation`, the module ``jsonexpect``), SQL expectations (the module ``sql``:
which ``#sql=`` queries are taken, what their answer means), :class:`KindError` (what a
third-party kind that cannot be loaded is reported as), and :class:`Backoff` (the runner's
capped exponential delays, for a kind that paces requests of its own between attempts). Those a
cold start does not need are imported on first use.
"""

from __future__ import annotations

from waitfor.base import redaction, sanitize, urls
from waitfor.base.backoff import Backoff
from waitfor.base.deadline import Deadline
from waitfor.base.options import OptionPairs, Options, choice, flag, reject_unknown, single
from waitfor.base.outcome import Outcome
from waitfor.base.redaction import MASK, is_secret_name, query, userinfo
from waitfor.base.urls import host_port
from waitfor.base.urlsplit import unquote, urlsplit
from waitfor.base.values import Value
from waitfor.core.check import Address, Check, standard_address
from waitfor.core.registry import KindError
from waitfor.core.target import Target
from waitfor.net.errors import describe_os_error

TYPE_CHECKING = False
if TYPE_CHECKING:
    from waitfor.base import jsonexpect as jsonexpect
    from waitfor.base import sql as sql
    from waitfor.base.jsonexpect import JsonExpectation
    from waitfor.base.patterns import Pattern, compile_pattern, option_pattern
    from waitfor.core import seeds as seeds
    from waitfor.core.conversation_check import (
        ConversationCheck,
        ConversationOptions,
        ProtocolError,
        answer_line,
    )
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
    "MASK",
    "Address",
    "Backoff",
    "Check",
    "ConnectError",
    "ConversationCheck",
    "ConversationOptions",
    "Deadline",
    "JsonExpectation",
    "KindError",
    "NetError",
    "OptionPairs",
    "Options",
    "Outcome",
    "Pattern",
    "ProtocolError",
    "ResolveError",
    "Target",
    "TlsError",
    "Value",
    "answer_line",
    "choice",
    "compile_pattern",
    "connect",
    "describe_os_error",
    "flag",
    "host_port",
    "is_secret_name",
    "jsonexpect",
    "open_stream",
    "option_pattern",
    "query",
    "redaction",
    "reject_unknown",
    "resolve",
    "sanitize",
    "seeds",
    "single",
    "sql",
    "standard_address",
    "start_tls",
    "unquote",
    "urls",
    "urlsplit",
    "userinfo",
]

#: names imported on first use, from the module that holds them: asyncio (networking), RE2,
#: json, the conversation template are not every start's
_LAZY = {
    **dict.fromkeys(
        ("ConnectError", "NetError", "ResolveError", "TlsError", "connect", "open_stream"),
        "waitfor.net.aio",
    ),
    **dict.fromkeys(("resolve", "start_tls"), "waitfor.net.aio"),
    **dict.fromkeys(
        ("ConversationCheck", "ConversationOptions", "ProtocolError", "answer_line"),
        "waitfor.core.conversation_check",
    ),
    **dict.fromkeys(("Pattern", "compile_pattern", "option_pattern"), "waitfor.base.patterns"),
    "JsonExpectation": "waitfor.base.jsonexpect",
}
_LAZY_MODULES = {
    "jsonexpect": "waitfor.base.jsonexpect",
    "seeds": "waitfor.core.seeds",
    "sql": "waitfor.base.sql",
}


def __getattr__(name: str) -> object:
    from importlib import import_module

    if name in _LAZY_MODULES:
        return import_module(_LAZY_MODULES[name])
    if name not in _LAZY:
        raise AttributeError(f"module 'waitfor.kind' has no attribute {name!r}")
    return getattr(import_module(_LAZY[name]), name)
