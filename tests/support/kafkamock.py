"""librdkafka's mock Kafka cluster, driven through its C API (rdkafka_mock.h) with ctypes.

The cluster is a stand-in for Apache Kafka (which this machine cannot run): a broker
implementation of the protocol written by librdkafka's maintainers for their own tests. The
library is the one PyPI's confluent-kafka bundles, so the oracle client and the cluster match.
"""

from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Iterator
from contextlib import contextmanager

import confluent_kafka


def _library() -> ctypes.CDLL:
    here = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
    found = glob.glob(os.path.join(here, "confluent_kafka.libs", "librdkafka*.so*"))
    lib = ctypes.CDLL(found[0] if found else "librdkafka.so.1")
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    for name, args in {
        "rd_kafka_mock_topic_create": [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.c_int,
        ],
        "rd_kafka_mock_partition_set_leader": [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_int32,
            ctypes.c_int32,
        ],
        "rd_kafka_mock_broker_set_down": [ctypes.c_void_p, ctypes.c_int32],
        "rd_kafka_mock_broker_set_up": [ctypes.c_void_p, ctypes.c_int32],
        "rd_kafka_mock_set_apiversion": [
            ctypes.c_void_p,
            ctypes.c_int16,
            ctypes.c_int16,
            ctypes.c_int16,
        ],
    }.items():
        getattr(lib, name).argtypes = args
        getattr(lib, name).restype = ctypes.c_int
    return lib


class MockCluster:
    def __init__(self, brokers: int) -> None:
        self.lib = _library()
        error = ctypes.create_string_buffer(512)
        self.rk = self.lib.rd_kafka_new(0, self.lib.rd_kafka_conf_new(), error, 512)
        assert self.rk, error.value
        self.cluster = self.lib.rd_kafka_mock_cluster_new(self.rk, brokers)
        assert self.cluster

    @property
    def bootstraps(self) -> str:
        return str(self.lib.rd_kafka_mock_cluster_bootstraps(self.cluster).decode())

    @property
    def addresses(self) -> list[str]:
        return self.bootstraps.split(",")

    def create_topic(self, name: str, partitions: int = 1, replication: int = 1) -> None:
        assert not self.lib.rd_kafka_mock_topic_create(
            self.cluster, name.encode(), partitions, replication
        )

    def set_leader(self, topic: str, partition: int, broker: int) -> None:
        """broker -1: the partition has no leader."""
        assert not self.lib.rd_kafka_mock_partition_set_leader(
            self.cluster, topic.encode(), partition, broker
        )

    def broker_down(self, broker: int) -> None:
        assert not self.lib.rd_kafka_mock_broker_set_down(self.cluster, broker)

    def broker_up(self, broker: int) -> None:
        assert not self.lib.rd_kafka_mock_broker_set_up(self.cluster, broker)

    def api_versions(self, api: int, low: int, high: int) -> None:
        assert not self.lib.rd_kafka_mock_set_apiversion(self.cluster, api, low, high)

    def close(self) -> None:
        self.lib.rd_kafka_mock_cluster_destroy(self.cluster)
        self.lib.rd_kafka_destroy(self.rk)


@contextmanager
def mock_cluster(brokers: int = 3) -> Iterator[MockCluster]:
    cluster = MockCluster(brokers)
    try:
        yield cluster
    finally:
        cluster.close()
