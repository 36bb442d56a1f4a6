from __future__ import annotations

import os

import pytest

from tests.support.podman import build as podman_build

#: A new machine's first image test builds its image (debootstrap, minutes); the compose test its
#: services' image: their fixtures' time counts against the test's timeout, the suite's 120 s.
BUILD_TIMEOUT = 1500


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/image/" in item.nodeid and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(BUILD_TIMEOUT))


@pytest.fixture(scope="session")
def image() -> str:
    """The image, built by images/build (which installs podman where it is missing)."""
    if os.geteuid() != 0:
        pytest.skip("the image tests run podman as root (rootful storage and networking)")
    build = podman_build("build")
    if build.returncode != 0 and "podman" in build.stderr and "cannot" in build.stderr.lower():
        pytest.skip(f"podman cannot run here: {build.stderr.strip().splitlines()[-1]}")
    assert build.returncode == 0, build.stderr
    # No "container prune" afterwards: it would also remove containers that are not this
    # suite's (another run's, a developer's). Each test removes what it starts, by name or ID.
    return build.stdout.strip()
