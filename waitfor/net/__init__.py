"""The one networking layer every kind uses: bounded resolution and connect, TLS, conversations.

- :mod:`.aio`: resolving and connecting on the event loop (cancellable, named in reasons).
- :mod:`.blocking`: the same before the event loop exists, for a kind's quick first attempt.
- :mod:`.conversation`: a protocol's exchange written once, run on either of those.
- :mod:`.tls`: the one TLS path: the ``#cacert``/``#insecure`` options and client contexts.
- :mod:`.unixsock`: connecting to a Unix socket (unix:// and http+unix:// alike).
- :mod:`.errors`: words for socket errors.
- :mod:`.activity`: what an attempt in flight is waiting on, for the reason a deadline reports.
- :mod:`.httptransport`: httpx over these (http, k8s, Events); :mod:`.k8s`: the Kubernetes API
  client and credentials (the k8s kind and ``--events``).
- :mod:`.glibc`: glibc's resolver, emulated (dns and mongodb+srv); :mod:`.dnsstub`: it on the
  event loop.
- :mod:`.varint`: base-128 varints, written as protobuf (grpc), MQTT and Kafka write them.

It imports nothing of waitfor above it (only :mod:`waitfor.base`).

This package itself imports nothing: a kind pays for asyncio or ssl only when it uses them.
"""
