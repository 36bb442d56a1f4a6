"""TLS client settings shared by the kinds that speak TLS themselves (amqps, mqtts, nats tls).

Verified by default against the system's CAs; ``cacert=FILE`` trusts a private CA instead and
``insecure`` skips verification (explicit only), as for https targets.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from waitfor.checks.base import OptionPairs, flag, single

if TYPE_CHECKING:
    import ssl

OPTION_NAMES = frozenset({"cacert", "insecure"})


@dataclass(frozen=True)
class TlsOptions:
    insecure: bool = False
    cacert: str | None = None


def parse_tls_options(pairs: OptionPairs) -> TlsOptions:
    cacert = single(pairs, "cacert")
    if cacert is not None and not os.access(cacert, os.R_OK):
        raise ValueError(f"cacert {cacert!r} is not a readable file")
    return TlsOptions(insecure=flag(pairs, "insecure"), cacert=cacert)


def client_context(options: TlsOptions) -> ssl.SSLContext:
    import ssl  # ~10 ms: only targets that speak TLS pay for it

    if options.insecure:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=options.cacert)
