"""The template of every kind whose probe is one conversation over TCP: amqp, mqtt, nats, redis,
memcached, mysql (ping mode), and whichever comes next.

A conversation kind is its folder: the front module (``__init__.py``) subclasses
:class:`ConversationCheck`, parses its address and options, and returns the conversation for a
target from :meth:`~ConversationCheck.conversation`; its wire module writes that conversation once
(see :mod:`waitfor.net.conversation`), raising :class:`ProtocolError` for bytes that are not its
protocol. The template connects (TLS from the first byte for ``TLS_SCHEME``), runs
it on the event loop or, for the quick first attempt, on a blocking socket (TLS there too, with
the same context and server name), and words every failure the same way for every kind
(:func:`failure_reason`).
"""

from __future__ import annotations

from abc import abstractmethod
from functools import cached_property

from waitfor.base import urls
from waitfor.base.options import OptionPairs, choice, reject_unknown
from waitfor.base.outcome import Outcome
from waitfor.base.typing_lite import TypeVar, cast
from waitfor.base.values import Value
from waitfor.core.check import Check
from waitfor.net import tls
from waitfor.net.errors import describe_os_error

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Generator
    from typing import ClassVar

    from waitfor.base.deadline import Deadline
    from waitfor.base.urlsplit import SplitResult
    from waitfor.net.conversation import Conversation, Step


class ProtocolError(Exception):
    """The peer's bytes are not the protocol expected: the message says what was wrong."""


def answer_line(limit: int, not_ours: Callable[[bytes], str]) -> Generator[Step, bytes, bytes]:
    """One line of a line-based protocol's answer, without its CRLF; longer than ``limit`` bytes
    (the CRLF included): TooLong. A server of the protocol never hangs up in the middle of a
    line: a peer that does speaks another, and is a ProtocolError saying ``not_ours(what it
    sent)``, as a whole line of it would be. A plain hang-up stays a Closed."""
    from waitfor.net.conversation import Closed, ReadLine

    try:
        line = yield ReadLine(limit)
    except Closed as exc:
        if not exc.partial:
            raise
        raise ProtocolError(not_ours(exc.partial)) from None
    return line[:-2]


class ConversationOptions(Value):
    """What every conversation kind's options hold; a kind's own options add their fields."""

    mode: str = ""
    tls: tls.TlsOptions = tls.TlsOptions()


OptionsT = TypeVar("OptionsT", bound=ConversationOptions)


class ConversationCheck(Check[OptionsT]):
    #: how reasons name the server ("not a NATS server")
    SERVER: ClassVar[str]
    DEFAULT_PORT: ClassVar[int]
    #: the scheme that speaks TLS from the first byte ("amqps"), and its default port
    TLS_SCHEME: ClassVar[str | None] = None
    TLS_PORT: ClassVar[int | None] = None
    #: the ``#mode=`` values, the first the default; () for a kind without modes
    MODES: ClassVar[tuple[str, ...]] = ()
    #: what most conversation kinds take; a kind with options of its own adds them
    OPTION_NAMES = frozenset({"mode"}) | tls.OPTION_NAMES
    #: the TLS client key's option name (None: ``client_key`` only, as ``key`` means another thing)
    TLS_KEY_OPTION: ClassVar[str | None] = "key"
    PLAIN_OPTIONS: ClassVar[frozenset[str]] = tls.PLAIN_OPTIONS

    @classmethod
    def parse_common(cls, pairs: OptionPairs) -> ConversationOptions:
        """``mode`` and the TLS options, after refusing options the kind does not take."""
        reject_unknown(pairs, cls.OPTION_NAMES)
        mode = choice(pairs, "mode", cls.MODES, cls.MODES[0]) if cls.MODES else ""
        return ConversationOptions(
            mode, tls.parse_tls_options(pairs, key_option=cls.TLS_KEY_OPTION)
        )

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> OptionsT:
        """The default: :meth:`parse_common`'s (for ``ConversationCheck[ConversationOptions]``;
        a kind with options of its own adds them to what that returns)."""
        return cast(OptionsT, cls.parse_common(pairs))

    @classmethod
    def default_port(cls, scheme: str) -> int:
        if scheme == cls.TLS_SCHEME and cls.TLS_PORT is not None:
            return cls.TLS_PORT
        return cls.DEFAULT_PORT

    @classmethod
    def split_address(cls, scheme: str, url: str) -> tuple[SplitResult, str, int]:
        """The URL's parts, its validated host and its port (else the scheme's default)."""
        parts = urls.split(url)
        return parts, urls.host(parts), urls.port(parts, cls.default_port(scheme))

    @abstractmethod
    def conversation(self) -> Conversation:
        """This target's exchange, from its first byte to the outcome."""

    @property
    def address(self) -> tuple[str, int]:
        return self.target.host, self.target.port or self.default_port(self.target.scheme)

    @property
    def tls_from_start(self) -> bool:
        return self.target.scheme == self.TLS_SCHEME

    @cached_property
    def tls_context(self) -> ssl.SSLContext:
        """Made once per target, and only for one that speaks TLS: loading CAs is not free."""
        return tls.client_context_for(self.options.tls)

    async def probe(self, deadline: Deadline) -> Outcome:
        return await self.probe_at(self.address, self.conversation(), deadline)

    async def probe_at(
        self, address: tuple[str, int], conversation: Conversation, deadline: Deadline
    ) -> Outcome:
        """One attempt of ``conversation`` at ``address`` (one of several, for a kind whose target
        lists hosts), its failures worded as every kind's."""
        from waitfor.net.aio import NetError
        from waitfor.net.conversation import Closed, TooLong, attempt

        context = self.tls_context if self.tls_from_start else None
        upgrade = lambda: self.tls_context  # noqa: E731 - a conversation's StartTls, if it has one
        try:
            return await attempt(address, conversation, deadline, tls=context, starttls=upgrade)
        except NetError as exc:  # a StartTls handshake that failed
            return Outcome.down(str(exc))
        except (ProtocolError, Closed, TooLong, OSError) as exc:
            return Outcome.down(failure_reason(exc, self.SERVER))

    def probe_now(self, deadline: Deadline) -> Outcome | None:
        return self.probe_now_at(self.address, deadline)

    def probe_now_at(
        self,
        address: tuple[str, int],
        deadline: Deadline,
        conversation: Conversation | None = None,
    ) -> Outcome | None:
        """The runner's attempt at ``address`` on a blocking socket, TLS included (the same
        context; ssl is imported only for a target that speaks it): :meth:`probe_at`'s twin,
        ``conversation`` (or else :meth:`conversation`'s) its exchange."""
        from waitfor.net.conversation import first_attempt

        return first_attempt(
            address,
            self.conversation() if conversation is None else conversation,
            deadline,
            (ProtocolError,),
            tls=self.make_tls_context,
            tls_from_start=self.tls_from_start,
        )

    def make_tls_context(self) -> ssl.SSLContext:
        """:attr:`tls_context` as a factory, for a handshake the conversation may not reach."""
        return self.tls_context


def failure_reason(exc: BaseException, server: str) -> str:
    """What a conversation that did not finish means, in the same words for every kind."""
    from waitfor.net.conversation import Closed, TooLong

    if isinstance(exc, ProtocolError):
        return str(exc)
    if isinstance(exc, TooLong):
        return f"not a {server} server (an endless line)"
    if isinstance(exc, Closed):
        if exc.partial:
            return "the server closed the connection in the middle of an answer"
        return "the server closed the connection"
    if isinstance(exc, ConnectionResetError):
        return "the server reset the connection"
    if isinstance(exc, OSError):
        return f"connection lost: {describe_os_error(exc)}"
    raise exc
