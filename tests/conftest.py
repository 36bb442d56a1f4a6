from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support import mysqld
from tests.support.dnsserver import DnsServer
from tests.support.pg import Cluster, make_template

# CI explores the same examples every run (a red CI must be reproducible); local runs roam.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def pg_template() -> Iterator[Path]:
    template = make_template()
    yield template
    shutil.rmtree(template.parent, ignore_errors=True)


@pytest.fixture
def pg_cluster(pg_template: Path) -> Iterator[Callable[[], Cluster]]:
    """A factory of stopped clusters; every one made is stopped and removed afterwards."""
    made: list[Cluster] = []

    def make() -> Cluster:
        cluster = Cluster(pg_template, Path(tempfile.mkdtemp(prefix="waitfor-pg-")))
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.stop("immediate")
        shutil.rmtree(cluster.root, ignore_errors=True)


@pytest.fixture
def dns_server(tmp_path: Path) -> Iterator[DnsServer]:
    """A stopped dnsmasq; the test adds records and starts it (possibly later)."""
    if shutil.which("dnsmasq") is None:
        pytest.skip("dnsmasq is not installed (the test command installs dnsmasq-base)")
    server = DnsServer(tmp_path)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def mariadb_template() -> Iterator[Path]:
    reason = mysqld.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    template = mysqld.make_template()
    yield template
    shutil.rmtree(template.parent, ignore_errors=True)


@pytest.fixture
def mariadb(mariadb_template: Path) -> Iterator[Callable[..., mysqld.MariaDB]]:
    """A factory of stopped MariaDB servers; every one made is stopped and removed afterwards."""
    made: list[mysqld.MariaDB] = []

    def make(netns: str | None = None) -> mysqld.MariaDB:
        server = mysqld.MariaDB(
            mariadb_template, Path(tempfile.mkdtemp(prefix="waitfor-mariadb-")), netns
        )
        made.append(server)
        return server

    yield make
    for server in made:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)
