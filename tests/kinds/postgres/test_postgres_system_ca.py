"""``sslrootcert=system`` in query mode trusts the system's CA certificates.

psycopg-binary bundles an OpenSSL that looks for "system" CAs in a directory of its own; the
system's bundle is what must count. The CA is installed as the system bundle only inside a
private mount namespace (bind-mounted over the machine's file, which stays untouched).
"""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trustme

from tests.support.pg import Cluster

SYSTEM_CAFILE = ssl.get_default_verify_paths().cafile

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("unshare") is None or SYSTEM_CAFILE is None,
        reason="a private mount namespace needs root and unshare; the system needs a CA file",
    ),
]


def waitfor_with_system_ca(ca: Path | None, target: str) -> subprocess.CompletedProcess[str]:
    """waitfor in a mount namespace where ``ca`` is the system's CA bundle (None: the machine's)."""
    command = [sys.executable, "-m", "waitfor", "-t", "4", target]
    if ca is not None:
        mount = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
        command = ["unshare", "--mount", "sh", "-c", mount, "sh", str(ca), str(SYSTEM_CAFILE)]
        command += [sys.executable, "-m", "waitfor", "-t", "4", target]
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "SSL_CERT"))}
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=environment)


@pytest.fixture
def tls_cluster(pg_cluster: Callable[[], Cluster]) -> tuple[Cluster, trustme.CA]:
    ca = trustme.CA()
    cluster = pg_cluster()
    cluster.start_tls_only(ca, "localhost")
    return cluster, ca


@pytest.mark.parametrize("sslmode", ["", "&sslmode=verify-full"], ids=["implied", "verify-full"])
def test_query_mode_trusts_the_system_ca_bundle(
    tls_cluster: tuple[Cluster, trustme.CA], tmp_path: Path, sslmode: str
) -> None:
    cluster, ca = tls_cluster
    bundle = tmp_path / "ca-certificates.crt"
    ca.cert_pem.write_to_path(str(bundle))
    target = (
        f"postgresql://postgres@localhost:{cluster.port}/postgres"
        f"?sslrootcert=system{sslmode}#mode=query"
    )
    trusted = waitfor_with_system_ca(bundle, target)
    assert trusted.returncode == 0, trusted.stderr
    assert "is ready: SELECT 1 succeeded" in trusted.stderr
    # The machine's own bundle does not hold this CA: the same target is never ready.
    untrusted = waitfor_with_system_ca(None, target)
    assert untrusted.returncode == 124, untrusted.stderr
    assert "certificate verify failed" in untrusted.stderr
