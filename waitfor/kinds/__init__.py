"""Registry of check kinds: one line per kind, URL schemes -> "module:Class", imported when used.

Importing a kind's module is cheap (its protocol library is imported inside its probe), but the
registry still holds import strings: a run with only tcp targets never imports the others.

Third-party kinds are entry points in the group ``waitfor.kinds`` (name = URL scheme, value =
``"module:Class"``). They are looked up only for a scheme that is not built in, so a run with
built-in kinds never scans installed packages; a built-in scheme cannot be taken over. A plugin
that cannot be imported, or whose object is not a :class:`~waitfor.kind.Check` subclass,
is a :class:`KindError` (one line, exit 2) for targets of its scheme only.
"""

from __future__ import annotations

import inspect
import re
from functools import cache
from importlib import import_module
from typing import TYPE_CHECKING

from waitfor.values import Value

if TYPE_CHECKING:
    from waitfor.kind import Check

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
    Kind("http", ("http", "https", "http+unix"), "waitfor.kinds.http:HttpCheck"),
    Kind("postgresql", ("postgresql", "postgres"), "waitfor.kinds.postgres:PostgresCheck", True),
    Kind("dns", ("dns",), "waitfor.kinds.dns:DnsCheck"),
    Kind("mysql", ("mysql", "mariadb"), "waitfor.kinds.mysql:MysqlCheck"),
    Kind("redis", ("redis", "rediss"), "waitfor.kinds.redis:RedisCheck"),
    Kind("memcached", ("memcached",), "waitfor.kinds.memcached:MemcachedCheck"),
    Kind("amqp", ("amqp", "amqps"), "waitfor.kinds.amqp:AmqpCheck"),
    Kind("mqtt", ("mqtt", "mqtts"), "waitfor.kinds.mqtt:MqttCheck"),
    Kind("nats", ("nats", "tls"), "waitfor.kinds.nats:NatsCheck"),
    Kind("grpc", ("grpc", "grpcs"), "waitfor.kinds.grpc:GrpcCheck"),
    Kind("unix", ("unix",), "waitfor.kinds.unix:UnixCheck"),
    Kind("file", ("file",), "waitfor.kinds.file:FileCheck"),
    Kind("exec", ("exec",), "waitfor.kinds.exec:ExecCheck"),
    Kind("k8s", ("k8s",), "waitfor.kinds.k8s:K8sCheck"),
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


def check_class(scheme: str) -> type[Check]:
    kind = find_kind(scheme)
    if kind is None:
        raise KindError(f"unknown scheme {scheme!r}")
    return load(kind)


def load(kind: Kind) -> type[Check]:
    """The kind's class; for a third-party kind, KindError if it cannot be imported or used."""
    module_name, _, class_name = kind.implementation.partition(":")
    if not kind.origin:
        cls: type[Check] = getattr(import_module(module_name), class_name)
        return cls
    from waitfor.kind import Check

    where = f"kind {kind.name!r} ({kind.implementation} from {kind.origin})"
    try:
        found = import_module(module_name)
        for attribute in class_name.split(".") if class_name else []:
            found = getattr(found, attribute)
    except Exception as exc:  # anything a broken plugin raises on import
        detail = " ".join(str(exc).split()) or "no detail"
        raise KindError(f"{where} cannot be loaded: {type(exc).__name__}: {detail}") from None
    if not (isinstance(found, type) and issubclass(found, Check)):
        raise KindError(f"{where} is not a subclass of waitfor.Check")
    if inspect.isabstract(found):
        raise KindError(f"{where} does not implement async def probe(self, budget)")
    return found


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
