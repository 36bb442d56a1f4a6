"""The one networking layer every kind uses: bounded resolution and connect, TLS, conversations.

- :mod:`.aio`: resolving and connecting on the event loop (cancellable, named in reasons).
- :mod:`.blocking`: the same before the event loop exists, for a kind's quick first attempt.
- :mod:`.conversation`: a protocol's exchange written once, run on either of those.
- :mod:`.tls`: the one TLS path: the ``#cacert``/``#insecure`` options and client contexts.
- :mod:`.unixsock`: connecting to a Unix socket (unix:// and http+unix:// alike).
- :mod:`.errors`: words for socket errors.
- :mod:`.activity`: what an attempt in flight is waiting on, for the reason a deadline reports.

This package itself imports nothing: a kind pays for asyncio or ssl only when it uses them.
"""
