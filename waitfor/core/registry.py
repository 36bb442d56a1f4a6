"""Registry of check kinds: one line per kind, URL schemes -> "module:Class", imported when used.

Importing a kind's module is cheap (its protocol library is imported inside its probe), but the
registry still holds import strings: a run with only tcp targets never imports the others.

Third-party kinds are entry points in the group ``waitfor.kinds`` (name = URL scheme, value =
``"module:Class"``). They are looked up only for a scheme that is not built in, so a run with
built-in kinds never scans installed packages; a built-in scheme cannot be taken over. A plugin
that cannot be imported (whatever it raises, ``sys.exit()`` included), or whose object is not a
:class:`~waitfor.kind.Check` subclass, is a :class:`KindError` (one line, exit 2) for
targets of its scheme only. A plugin's import cannot be cut short by the deadline (an import is
synchronous), but SIGINT/SIGTERM interrupt it.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import import_module

from waitfor.base.values import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from waitfor.base.deadline import Deadline
    from waitfor.core.check import Check

ENTRY_POINT_GROUP = "waitfor.kinds"
_SCHEME_NAME = r"[a-z][a-z0-9+.-]*"  # compiled on first use: only plugins need it


class Kind(Value):
    name: str  # the kind as reported (Target.kind)
    schemes: tuple[str, ...]  # URL schemes it handles, the first one canonical
    implementation: str  # "module:Class", a subclass of waitfor.kind.Check
    bare: bool = False  # also offered targets written without a scheme (Check.split_bare)
    origin: str = ""  # a third-party kind: the distribution that declares it; "" if built in


class KindError(ValueError):
    """A third-party kind that cannot be used; the message names it and why, in one line."""


BUILTIN: tuple[Kind, ...] = (
    Kind("tcp", ("tcp",), "waitfor.kinds.tcp:TcpCheck"),
    Kind("http", ("http", "https", "http+unix"), "waitfor.kinds.http.check:HttpCheck"),
    Kind(
        "postgresql", ("postgresql", "postgres"), "waitfor.kinds.postgres.check:PostgresCheck", True
    ),
    Kind("dns", ("dns",), "waitfor.kinds.dns.check:DnsCheck"),
    Kind("mysql", ("mysql", "mariadb"), "waitfor.kinds.mysql.check:MysqlCheck"),
    Kind("redis", ("redis", "rediss"), "waitfor.kinds.redis.check:RedisCheck"),
    Kind("memcached", ("memcached",), "waitfor.kinds.memcached.check:MemcachedCheck"),
    Kind("amqp", ("amqp", "amqps"), "waitfor.kinds.amqp.check:AmqpCheck"),
    Kind("mqtt", ("mqtt", "mqtts"), "waitfor.kinds.mqtt.check:MqttCheck"),
    Kind("nats", ("nats", "tls"), "waitfor.kinds.nats.check:NatsCheck"),
    Kind("grpc", ("grpc", "grpcs"), "waitfor.kinds.grpc:GrpcCheck"),
    Kind("kafka", ("kafka", "kafka+ssl"), "waitfor.kinds.kafka.check:KafkaCheck"),
    Kind("mongodb", ("mongodb", "mongodb+srv"), "waitfor.kinds.mongodb.check:MongoCheck"),
    Kind("unix", ("unix",), "waitfor.kinds.unix:UnixCheck"),
    Kind("file", ("file",), "waitfor.kinds.file:FileCheck"),
    Kind("exec", ("exec",), "waitfor.kinds.exec.check:ExecCheck"),
    Kind("k8s", ("k8s",), "waitfor.kinds.k8s.check:K8sCheck"),
    Kind("docker", ("docker", "container"), "waitfor.kinds.docker.check:DockerCheck"),
)

#: scheme -> kind, for every built-in scheme
KINDS: dict[str, Kind] = {scheme: kind for kind in BUILTIN for scheme in kind.schemes}


def find_kind(scheme: str) -> Kind | None:
    """The kind for a scheme: built in, else installed (entry points read only then)."""
    return KINDS.get(scheme) or installed().get(scheme)


def known_schemes() -> list[str]:
    """Every scheme a target may use: built-in ones, then installed ones."""
    return [*KINDS, *sorted(installed())]


@cache
def installed() -> dict[str, Kind]:
    """Third-party kinds declared in the ``waitfor.kinds`` entry point group, by scheme."""
    from importlib.metadata import entry_points

    found: dict[str, Kind] = {}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        scheme = entry.name.strip().lower()
        if scheme in KINDS or not re.fullmatch(_SCHEME_NAME, scheme):
            continue  # built-in schemes are not taken over; a bad name could never be used
        dist = entry.dist
        origin = f"{dist.name} {dist.version}" if dist is not None else "an installed package"
        found.setdefault(scheme, Kind(scheme, (scheme,), entry.value, origin=origin))
    return found


def check_class(scheme: str) -> type[Check[Any]]:
    kind = find_kind(scheme)
    if kind is None:
        raise KindError(f"unknown scheme {scheme!r}")
    return load(kind)


def load(kind: Kind) -> type[Check[Any]]:
    """The kind's class; for a third-party kind, KindError if it cannot be imported or used."""
    module_name, _, class_name = kind.implementation.partition(":")
    if not kind.origin:
        cls: type[Check[Any]] = getattr(import_module(module_name), class_name)
        return cls
    import inspect  # only a third-party kind is checked with it

    from waitfor.core.check import Check

    where = f"kind {kind.name!r} ({kind.implementation} from {kind.origin})"
    try:
        found = import_module(module_name)
        for attribute in class_name.split(".") if class_name else []:
            found = getattr(found, attribute)
    except (Exception, SystemExit) as exc:  # anything a broken plugin raises on import
        # SystemExit too (a module that calls sys.exit()); never an interruption: a signal is a
        # BaseException (waitfor.cli.signals.Signalled) or KeyboardInterrupt and ends the wait
        detail = " ".join(str(exc).split()) or "no detail"
        raise KindError(f"{where} cannot be loaded: {type(exc).__name__}: {detail}") from None
    if not (isinstance(found, type) and issubclass(found, Check)):
        raise KindError(f"{where} is not a subclass of waitfor.Check")
    if inspect.isabstract(found):
        raise KindError(f"{where} does not implement async def probe(self, deadline)")
    return _guarded(found, kind)


def _guarded(cls: type[Check[Any]], kind: Kind) -> type[Check[Any]]:
    """A third-party kind whose bugs fail its own targets, in one line, not the whole wait.

    An unexpected exception in ``parse_address``/``parse_options`` is a bad target (exit 2,
    naming the kind). In ``probe`` it is a permanent failure of that target: a bug does not go
    away by retrying, and waiting out the deadline would only hide it. OSError is the exception:
    a plugin that forgot to catch "connection refused" is not ready yet, as any kind would be;
    so is EOFError (a stream that ended: asyncio's IncompleteReadError), never an interrupt.
    Only the exception's type and where it was raised are shown, never its text: it may quote
    the target's URL, password included. Interruptions (BaseException) pass through.
    """
    import errno

    from waitfor.base import redaction
    from waitfor.base.outcome import Outcome
    from waitfor.net.errors import describe_os_error

    name = f"kind {kind.name!r} ({kind.origin})"

    class Guarded(cls):  # type: ignore[valid-type,misc]  # a subclass of a class known at run time
        @classmethod
        def parse_address(klass, scheme: str, url: str) -> Any:
            try:
                return super().parse_address(scheme, url)
            except ValueError:
                raise
            except Exception as exc:
                raise ValueError(f"{name} failed to parse it: {_bug(exc)}") from None

        @classmethod
        def show_unparsed(klass, text: str) -> str:
            try:
                return str(super().show_unparsed(text))
            except Exception:
                return redaction.unparsed(text)

        @classmethod
        def parse_options(klass, pairs: Any) -> Any:
            try:
                return super().parse_options(pairs)
            except ValueError:
                raise
            except Exception as exc:
                raise ValueError(f"{name} failed to parse its options: {_bug(exc)}") from None

        async def probe(self, deadline: Deadline) -> Any:
            try:
                return await super().probe(deadline)
            except TimeoutError:
                raise  # the attempt's deadline: the runner says so
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    raise  # out of descriptors: the runner's
                return Outcome.down(describe_os_error(exc))
            except EOFError:  # asyncio's IncompleteReadError, a library's closed stream
                return Outcome.down("the server closed the connection")
            except Exception as exc:
                return Outcome.fatal(f"{name} failed: {_bug(exc)}")

        def probe_now(self, deadline: Deadline) -> Any:
            try:
                return super().probe_now(deadline)
            except Exception:
                return None  # the runner's attempt makes the call again and says what happened

    for attribute in ("__name__", "__qualname__", "__module__", "__doc__"):
        setattr(Guarded, attribute, getattr(cls, attribute))
    return Guarded


def _bug(exc: BaseException) -> str:
    """``KeyError at waitfor_x.py:12``: what and where, for the plugin's author."""
    import os
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}{where} (a bug in the plugin)"


def claim_bare(text: str) -> tuple[Kind, str, str] | None:
    """The kind that recognises a target written without a scheme: (kind, address, fragment)."""
    for kind in BUILTIN:
        if kind.bare:
            split = load(kind).split_bare(text)
            if split is not None:
                return kind, *split
    return None


def missing_scheme_hint(text: str) -> str | None:
    """A suggestion for wait-for-it's HOST:PORT, written without a scheme."""
    if re.fullmatch(r"[^/:@]+:\d+", text):
        return f"for a TCP port write tcp://{text}"
    return None
