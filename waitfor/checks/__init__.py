"""Registry of check kinds: URL scheme -> (kind, "module:Class"), imported only when used.

Importing a check module may import its protocol library (httpx, dnspython, ...), so the
registry holds import strings: a run with only tcp targets never pays for the others.
"""

from __future__ import annotations

from importlib import import_module
from typing import NamedTuple

from waitfor.checks.base import Check


class Kind(NamedTuple):
    name: str
    implementation: str


KINDS: dict[str, Kind] = {
    "tcp": Kind("tcp", "waitfor.checks.tcp:TcpCheck"),
    "http": Kind("http", "waitfor.checks.http:HttpCheck"),
    "https": Kind("http", "waitfor.checks.http:HttpCheck"),
    "postgresql": Kind("postgresql", "waitfor.checks.postgres:PostgresCheck"),
    "postgres": Kind("postgresql", "waitfor.checks.postgres:PostgresCheck"),
    "dns": Kind("dns", "waitfor.checks.dns:DnsCheck"),
    "mysql": Kind("mysql", "waitfor.checks.mysql:MysqlCheck"),
    "mariadb": Kind("mysql", "waitfor.checks.mysql:MysqlCheck"),
    "redis": Kind("redis", "waitfor.checks.redis:RedisCheck"),
    "rediss": Kind("redis", "waitfor.checks.redis:RedisCheck"),
    "memcached": Kind("memcached", "waitfor.checks.memcached:MemcachedCheck"),
    "amqp": Kind("amqp", "waitfor.checks.amqp:AmqpCheck"),
    "amqps": Kind("amqp", "waitfor.checks.amqp:AmqpCheck"),
    "mqtt": Kind("mqtt", "waitfor.checks.mqtt:MqttCheck"),
    "mqtts": Kind("mqtt", "waitfor.checks.mqtt:MqttCheck"),
    "nats": Kind("nats", "waitfor.checks.nats:NatsCheck"),
    "tls": Kind("nats", "waitfor.checks.nats:NatsCheck"),
    "grpc": Kind("grpc", "waitfor.checks.grpc:GrpcCheck"),
    "grpcs": Kind("grpc", "waitfor.checks.grpc:GrpcCheck"),
    "http+unix": Kind("http", "waitfor.checks.http:HttpCheck"),
    "unix": Kind("unix", "waitfor.checks.unix:UnixCheck"),
    "file": Kind("file", "waitfor.checks.file:FileCheck"),
    "exec": Kind("exec", "waitfor.checks.exec:ExecCheck"),
}


def check_class(scheme: str) -> type[Check]:
    module_name, _, class_name = KINDS[scheme].implementation.partition(":")
    cls: type[Check] = getattr(import_module(module_name), class_name)
    return cls
