"""The check base class, the address a kind parses, and the standard address parser.

Published to kind authors by :mod:`waitfor.kind` (which documents them); the engine (runner,
registry, first attempt) imports them from here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from waitfor.base import redaction, urls
from waitfor.base.deadline import Deadline
from waitfor.base.options import OptionPairs, Options, reject_unknown
from waitfor.base.outcome import Outcome
from waitfor.base.typing_lite import Generic, TypeVar, cast
from waitfor.base.values import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

    from waitfor.core.target import Target


# The value types are waitfor.base.values.Value: every start imports them (see there why).
class Address(Value):
    """What a kind parsed from a target's address (its URL less the ``#fragment``)."""

    host: str  # "" when the kind's targets have no host (files, commands)
    port: int | None
    display: str  # the address as shown everywhere: built from parts, secrets left out
    secrets: frozenset[str] = frozenset()  # credential values: must never appear in output
    params: tuple[tuple[str, str], ...] = ()  # kind-specific parts, read back by the probe


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
