"""A real gRPC server (grpcio) with the standard health service, whose statuses tests change."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
UNKNOWN = health_pb2.HealthCheckResponse.UNKNOWN


@dataclass
class GrpcServer:
    port: int
    health: health.HealthServicer | None

    def set(self, service: str, status: int) -> None:
        assert self.health is not None
        self.health.set(service, status)


@contextmanager
def grpc_server(
    *, with_health: bool = True, tls: tuple[bytes, bytes] | None = None, port: int = 0
) -> Iterator[GrpcServer]:
    """Serve on 127.0.0.1 (``tls``: PEM key and certificate chain); the server status starts
    as the health servicer's default, SERVING, unless the test sets another."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    servicer = None
    if with_health:
        servicer = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    address = f"127.0.0.1:{port}"
    if tls is None:
        bound = server.add_insecure_port(address)
    else:
        bound = server.add_secure_port(address, grpc.ssl_server_credentials([tls]))
    server.start()
    try:
        yield GrpcServer(bound, servicer)
    finally:
        server.stop(grace=None).wait(5)
