from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trustme
from hypothesis import settings

from tests.support import mysqld
from tests.support.dnsserver import DnsServer
from tests.support.pg import Cluster, make_template

# CI explores the same examples every run (a red CI must be reproducible); local runs roam.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

TESTS = Path(__file__).parent

# The tests' Ctrl-C is a user's at a terminal: a suite started as a script's background job
# (SIGINT ignored, which its children inherit and waitfor keeps) still sends one that counts.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

#: Support modules whose use needs root (network or PID namespaces, a private mount of
#: /etc/resolv.conf with port 53), and the marks a test using them gets.
SUPPORT_MARKS = {
    "tests.support.netns": ("netns", "root"),
    "tests.support.pidns": ("root",),
    "tests.support.silent_nameserver": ("root",),
}
#: Fixtures and the marks a test using them (directly or through another fixture) gets.
FIXTURE_MARKS = {
    "image": ("image", "root"),  # tests/image/conftest.py: the podman image
    "lab_binaries": ("k8s",),  # tests/kinds/k8s/conftest.py: the lab's binaries and planes
    "netns": ("netns", "root"),  # a network namespace of the test's own
    "podman_engine": ("image", "root"),  # tests/kinds/docker: Podman's API service, containers
}


def _support_modules(module: object) -> set[str]:
    """The support modules a test module uses, by what its names are bound to."""
    found = set()
    for value in vars(module).values():
        name = getattr(value, "__module__", None) or getattr(value, "__name__", None)
        if name in SUPPORT_MARKS:
            found.add(name)
    return found


@pytest.hookimpl(tryfirst=True)  # before -m selects by the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tiers' marks, from each test's folder, fixtures and support modules (the markers
    are described in pyproject.toml; CONTRIBUTING.md says which tier runs what)."""
    for item in items:
        marks: set[str] = set()
        folder = item.path.relative_to(TESTS).parts[0]
        if folder == "image":
            marks |= {"image", "root"}
        if item.path.name == "test_bench.py":
            marks |= {"bench", "root"}
        for fixture in getattr(item, "fixturenames", ()):
            marks.update(FIXTURE_MARKS.get(fixture, ()))
        module = getattr(item, "module", None)
        if module is not None:
            for name in _support_modules(module):
                marks.update(SUPPORT_MARKS[name])
        for mark in sorted(marks - {m.name for m in item.iter_markers()}):
            item.add_marker(mark)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadfile`` (scripts/test), each test file runs on one worker, so that its
    module-scoped servers, virtualenvs and tallies are made once, as in a serial run; all of
    tests/image/ on one worker: one image build, no two podman runs fighting for the two cores;
    and all of tests/kinds/k8s/ on one worker: one Kubernetes lab (an API server and etcd each)
    rather than one per worker on two cores, where a loaded API server missed 1 s deadlines;
    when ``-m`` leaves the lab's tests out (the fast tier), its files run apart like any other.
    (Its scripted-server files, run apart beside the lab's worker, missed their deadlines in
    two CI runs of five: they stay with it.) Those groups and the benchmark are handed out
    first, then the files with the most tests, as xdist orders them: the benchmark, one test of
    three minutes, came last by that count and ran alone at the end for 176 s.
    (xdist's loadgroup would say this with marks, but it cannot rename nodes under pytest 9.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    groups = ("tests/image/", "tests/kinds/k8s/") if _selects("k8s", config) else ("tests/image/",)

    class FileScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            for group in groups:
                if path.startswith(group):
                    return group
            return path

        def schedule(self) -> None:
            if self.collection is None:  # the first call, which makes the queue of work
                # Its keys placed first keep their places as xdist fills it. (The collection
                # itself must stay as it is: work is sent as indexes into the workers' own.)
                nodeids: list[str] = next(iter(self.registered_collections.values()), [])
                sizes = Counter(self._split_scope(nodeid) for nodeid in nodeids)
                for scope in sorted(sizes, key=lambda scope: (scope not in LONGEST, -sizes[scope])):
                    self.workqueue[scope] = {}
            super().schedule()

    return FileScheduling(config, log)


#: the work that runs on one worker by design, each of it minutes long
LONGEST = frozenset({"tests/image/", "tests/kinds/k8s/", "tests/test_bench.py"})


def _selects(mark: str, config: pytest.Config) -> bool:
    """Whether ``-m`` keeps a test that carries just ``mark``."""
    from _pytest.mark.expression import Expression  # what -m itself evaluates with

    markexpr = config.getoption("markexpr")
    return not markexpr or Expression.compile(markexpr).evaluate(lambda name, /, **_: name == mark)


@pytest.fixture(scope="session")
def pg_template() -> Iterator[Path]:
    template = make_template()
    yield template
    shutil.rmtree(template.parent, ignore_errors=True)


@contextmanager
def _clusters(template: Path) -> Iterator[Callable[[], Cluster]]:
    made: list[Cluster] = []

    def make() -> Cluster:
        cluster = Cluster(template, Path(tempfile.mkdtemp(prefix="waitfor-pg-")))
        made.append(cluster)
        return cluster

    try:
        yield make
    finally:
        for cluster in made:
            cluster.stop("immediate")
            shutil.rmtree(cluster.root, ignore_errors=True)


@pytest.fixture
def pg_cluster(pg_template: Path) -> Iterator[Callable[[], Cluster]]:
    """A factory of stopped clusters; every one made is stopped and removed afterwards."""
    with _clusters(pg_template) as make:
        yield make


@pytest.fixture(scope="module")
def module_pg_cluster(pg_template: Path) -> Iterator[Callable[[], Cluster]]:
    """:func:`pg_cluster`'s, kept for the module: a server for the tests that only read it."""
    with _clusters(pg_template) as make:
        yield make


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


@contextmanager
def _mariadbs(template: Path) -> Iterator[Callable[..., mysqld.MariaDB]]:
    made: list[mysqld.MariaDB] = []

    def make(netns: str | None = None) -> mysqld.MariaDB:
        server = mysqld.MariaDB(template, Path(tempfile.mkdtemp(prefix="waitfor-mariadb-")), netns)
        made.append(server)
        return server

    try:
        yield make
    finally:
        for server in made:
            server.stop()
            shutil.rmtree(server.root, ignore_errors=True)


@pytest.fixture
def mariadb(mariadb_template: Path) -> Iterator[Callable[..., mysqld.MariaDB]]:
    """A factory of stopped MariaDB servers; every one made is stopped and removed afterwards."""
    with _mariadbs(mariadb_template) as make:
        yield make


@pytest.fixture(scope="module")
def module_mariadb(mariadb_template: Path) -> Iterator[Callable[..., mysqld.MariaDB]]:
    """:func:`mariadb`'s, kept for the module: a server for the tests that only read it."""
    with _mariadbs(mariadb_template) as make:
        yield make


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    """A certificate authority of the test module's own (trustme: in memory, never trusted by
    the machine)."""
    return trustme.CA()


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> str:
    """``ca``'s certificate as a PEM file, for a target's ``cacert=``."""
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)
