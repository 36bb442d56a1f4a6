from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.support import lab

_names = itertools.count()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Build before any test runs when a test needs the lab: on a new machine the build takes
    # minutes, more than a test's timeout, which would also cover its fixtures' setup.
    if any("lab_binaries" in getattr(item, "fixturenames", ()) for item in items):
        lab.build()


@pytest.fixture(scope="session")
def lab_binaries() -> None:
    """The lab's binaries, built first if this machine never has: the build is part of the
    test command (scripts/test calls it too), never a reason to skip. A no-op when cached."""
    lab.build()


@pytest.fixture(scope="session")
def control_plane(lab_binaries: None) -> Iterator[lab.ControlPlane]:
    """One lab for the session, stopped and removed at its end."""
    with lab.ControlPlane() as plane:
        yield plane


@pytest.fixture
def namespace(control_plane: lab.ControlPlane) -> Iterator[str]:
    """A fresh namespace where pods can be admitted; deleted afterwards (asynchronously, as
    Kubernetes deletes namespaces)."""
    name = control_plane.create_namespace(f"t{next(_names)}")
    yield name
    control_plane.api.call("DELETE", f"/api/v1/namespaces/{name}")
