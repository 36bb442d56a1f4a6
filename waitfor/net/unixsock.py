"""Connecting to a Unix socket, for unix:// and http+unix:// targets alike (one wording).

A connect to a Unix socket never waits on the network: one non-blocking ``connect`` answers,
on the event loop or before it.
"""

from __future__ import annotations

import errno
import os
import socket
import stat

from waitfor.net.errors import describe_os_error


class NotAccepted(Exception):
    """The connection was not accepted; the message says why, as unix targets word it."""


def connected(path: str) -> socket.socket:
    """A non-blocking socket connected to ``path`` (also for http+unix), or NotAccepted."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        sock.connect(path)
        return sock
    except BlockingIOError:
        # Linux: the listener's backlog is full. It is listening but not accepting (and an
        # event loop's connect would take the socket for connected, and fail on writing).
        why = "listening, but its backlog is full"
    except OSError as exc:
        why = _describe(path, exc)
    sock.close()
    raise NotAccepted(why)  # outside the except: the errno's words are ours, not a cause


def _describe(path: str, exc: OSError) -> str:
    if exc.errno == errno.ECONNREFUSED:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            mode = stat.S_IFSOCK
        if not stat.S_ISSOCK(mode):
            return "not a socket"
        return "connection refused (a socket file with nothing listening)"
    return describe_os_error(exc)
