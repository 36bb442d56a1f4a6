"""Ready TLS targets of every kind whose plain form has a quick first attempt, and those plain
forms, for the cold-start instruction rows (callgrind).

The TLS servers are real ones with a throw-away CA: nats-server with ``--tls`` (NATS upgrades
after INFO), and a TLS terminator (as a load balancer would be) in front of the machine's
redis-server, RabbitMQ and Mosquitto, mockupdb's MongoDB and librdkafka's mock Kafka cluster:
what the client does, the instructions counted, is the same as in front of a server that speaks
TLS itself. A peer that is missing (a broker not running, a library not installed) leaves its
rows out.
"""

from __future__ import annotations

import contextlib
import importlib.util
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.support.brokers import (
    MOSQUITTO_PORT,
    NATS_PORT,
    RABBITMQ_PORT,
    NatsServer,
    have,
    tls_terminator,
)
from tests.support.servers import listening

REDIS_PORT = 6379


@contextlib.contextmanager
def targets() -> Iterator[dict[str, str]]:
    """Row name -> a ready target, plain and TLS forms side by side."""
    import trustme

    with contextlib.ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="waitfor-bench-tls-")))
        ca = trustme.CA()
        ca_file = root / "ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        cert = ca.issue_cert("127.0.0.1", "localhost")
        chain, key = root / "server.crt", root / "server.key"
        chain.write_bytes(b"".join(pem.bytes() for pem in cert.cert_chain_pems))
        cert.private_key_pem.write_to_path(str(key))
        trust = f"cacert={ca_file}"
        rows: dict[str, str] = {}

        def behind_tls(port: int) -> int:
            return int(stack.enter_context(tls_terminator(port, (chain, key))))

        if listening(REDIS_PORT):
            rows["waitfor redis"] = f"redis://127.0.0.1:{REDIS_PORT}"
            rows["waitfor rediss"] = f"rediss://127.0.0.1:{behind_tls(REDIS_PORT)}#{trust}"
        if listening(RABBITMQ_PORT):
            rows["waitfor amqp"] = f"amqp://127.0.0.1:{RABBITMQ_PORT}"
            rows["waitfor amqps"] = f"amqps://127.0.0.1:{behind_tls(RABBITMQ_PORT)}#{trust}"
        if listening(MOSQUITTO_PORT):
            rows["waitfor mqtt"] = f"mqtt://127.0.0.1:{MOSQUITTO_PORT}#mode=ping"
            rows["waitfor mqtts"] = (
                f"mqtts://127.0.0.1:{behind_tls(MOSQUITTO_PORT)}#mode=ping&{trust}"
            )
        if listening(NATS_PORT) and have("nats-server"):
            (root / "nats").mkdir()
            server = NatsServer(root / "nats", tls=(chain, key))
            server.start()
            stack.callback(server.stop)
            rows["waitfor nats"] = f"nats://127.0.0.1:{NATS_PORT}"
            rows["waitfor nats tls://"] = f"tls://127.0.0.1:{server.port}#{trust}"
        if importlib.util.find_spec("mockupdb"):
            from mockupdb import MockupDB  # type: ignore[import-untyped]

            mock = MockupDB()
            for name in ("hello", "ismaster"):
                mock.autoresponds(name, {"isWritablePrimary": True, "maxWireVersion": 17})
            for name in ("ping", "endSessions"):
                mock.autoresponds(name, {"ok": 1})
            port = mock.run()
            stack.callback(mock.stop)
            rows["waitfor mongodb"] = f"mongodb://127.0.0.1:{port}/"
            rows["waitfor mongodb tls=true"] = (
                f"mongodb://127.0.0.1:{behind_tls(port)}/?tls=true&tlsCAFile={ca_file}"
            )
        if importlib.util.find_spec("confluent_kafka"):
            from tests.support.kafkamock import mock_cluster

            cluster = stack.enter_context(mock_cluster(1))
            port = int(cluster.addresses[0].rpartition(":")[2])
            rows["waitfor kafka"] = f"kafka://127.0.0.1:{port}"
            rows["waitfor kafka+ssl"] = f"kafka+ssl://127.0.0.1:{behind_tls(port)}#{trust}"
        yield rows
