"""TLS client settings of the kinds that speak TLS themselves: amqps, mqtts, nats tls, rediss.

Verified by default against the system's CAs; ``cacert=FILE`` trusts a private CA instead and
``insecure`` skips verification (explicit only), as for https targets. Contexts come from
:mod:`waitfor.net.tls`: one per setting, shared, the CA file read (and refused) when parsing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from waitfor.kind import OptionPairs, flag, single
from waitfor.values import Value

if TYPE_CHECKING:
    import ssl

OPTION_NAMES = frozenset({"cacert", "insecure"})


class TlsOptions(Value):
    insecure: bool = False
    cacert: str | None = None


def parse_tls_options(pairs: OptionPairs) -> TlsOptions:
    cacert = single(pairs, "cacert")
    if cacert is not None:
        from waitfor.net import tls  # imports ssl: only targets naming a CA pay for it when parsed

        tls.client_context(cafile=cacert)  # a file that is not PEM: exit 2 now
    return TlsOptions(insecure=flag(pairs, "insecure"), cacert=cacert)


def client_context(options: TlsOptions) -> ssl.SSLContext:
    from waitfor.net import tls  # ~10 ms for ssl: only targets that speak TLS pay for it

    return tls.client_context(verify=not options.insecure, cafile=options.cacert)
