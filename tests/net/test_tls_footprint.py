"""300 ready https targets, one private CA: the command's peak RSS stays within 80 MiB.

With asyncio's own TLS each connection held a 256 KiB read buffer, and the command peaked at
about 132 MiB; on waitfor's stream transport (waitfor.net.tlsstream) at about 56 MiB.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import trustme

from tests.support.peakrss import peak_rss_kib
from tests.support.servers import Script, http_server

TARGETS = 300
LIMIT_KIB = 80 * 1024


def test_300_https_targets_with_one_ca_stay_within_80_mib(tmp_path: Path) -> None:
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with http_server(Script(), tls=server) as (url, script):
        targets = [f"{url}/{i}#cacert={ca_file}" for i in range(TARGETS)]
        code, peak, stderr = peak_rss_kib("-q", "-t", "60", *targets)
        answered = len(script.requests)
    assert code == 0, stderr
    assert answered >= TARGETS  # every target's answer came over its own TLS connection
    print(f"\n{TARGETS} https targets, one CA: peak RSS {peak / 1024:.1f} MiB")
    assert peak <= LIMIT_KIB, f"peak RSS {peak / 1024:.1f} MiB"
