"""Registry of check kinds: one line per kind, URL schemes -> "module:Class", imported when used.

Importing a kind's module is cheap (its protocol library is imported inside its probe), but the
registry still holds import strings: a run with only tcp targets never imports the others.
"""

from __future__ import annotations

import re
from importlib import import_module
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from waitfor.checks.base import Check


class Kind(NamedTuple):
    name: str  # the kind as reported (Target.kind)
    schemes: tuple[str, ...]  # URL schemes it handles, the first one canonical
    implementation: str  # "module:Class", a subclass of waitfor.checks.base.Check
    bare: bool = False  # also offered targets written without a scheme (Check.split_bare)


BUILTIN: tuple[Kind, ...] = (
    Kind("tcp", ("tcp",), "waitfor.checks.tcp:TcpCheck"),
    Kind("http", ("http", "https", "http+unix"), "waitfor.checks.http:HttpCheck"),
    Kind("postgresql", ("postgresql", "postgres"), "waitfor.checks.postgres:PostgresCheck", True),
    Kind("dns", ("dns",), "waitfor.checks.dns:DnsCheck"),
    Kind("mysql", ("mysql", "mariadb"), "waitfor.checks.mysql:MysqlCheck"),
    Kind("redis", ("redis", "rediss"), "waitfor.checks.redis:RedisCheck"),
    Kind("memcached", ("memcached",), "waitfor.checks.memcached:MemcachedCheck"),
    Kind("amqp", ("amqp", "amqps"), "waitfor.checks.amqp:AmqpCheck"),
    Kind("mqtt", ("mqtt", "mqtts"), "waitfor.checks.mqtt:MqttCheck"),
    Kind("nats", ("nats", "tls"), "waitfor.checks.nats:NatsCheck"),
    Kind("grpc", ("grpc", "grpcs"), "waitfor.checks.grpc:GrpcCheck"),
    Kind("unix", ("unix",), "waitfor.checks.unix:UnixCheck"),
    Kind("file", ("file",), "waitfor.checks.file:FileCheck"),
    Kind("exec", ("exec",), "waitfor.checks.exec:ExecCheck"),
)

#: scheme -> kind, for every built-in scheme
KINDS: dict[str, Kind] = {scheme: kind for kind in BUILTIN for scheme in kind.schemes}


def find_kind(scheme: str) -> Kind | None:
    return KINDS.get(scheme)


def known_schemes() -> list[str]:
    return list(KINDS)


def check_class(scheme: str) -> type[Check]:
    return load(KINDS[scheme])


def load(kind: Kind) -> type[Check]:
    module_name, _, class_name = kind.implementation.partition(":")
    cls: type[Check] = getattr(import_module(module_name), class_name)
    return cls


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
