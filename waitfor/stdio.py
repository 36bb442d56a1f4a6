"""Standard streams for the CLI: progress output is best effort, never a reason to stop.

An init container's stderr can be closed (``2>&-``) or a pipe whose reader has gone
(``2>&1 | head -1``). The wait and the command are the job; a line that cannot be written is
dropped. Closed descriptors 0-2 are filled with /dev/null, close-on-exec, so no socket or file
waitfor opens ever lands on them, and the command still starts with them closed, as a shell
would start it.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys

STD_FDS = (0, 1, 2)


class BestEffortWriter(io.TextIOBase):
    """A text stream over a file descriptor whose failed writes are dropped, not raised.

    Writes are buffered until a newline or :meth:`flush`, then written with ``os.write``; after
    a broken pipe or a closed descriptor nothing more is attempted.
    """

    def __init__(self, fd: int, encoding: str = "utf-8", errors: str = "backslashreplace") -> None:
        super().__init__()
        self._fd: int | None = fd
        self._encoding = encoding
        self._errors = errors
        self._pending: list[str] = []

    @property
    def encoding(self) -> str:  # type: ignore[override]  # a read-only property in io
        return self._encoding

    @property
    def errors(self) -> str:  # type: ignore[override]
        return self._errors

    def fileno(self) -> int:
        if self._fd is None:
            raise io.UnsupportedOperation("the stream is broken")
        return self._fd

    def isatty(self) -> bool:
        try:
            return self._fd is not None and os.isatty(self._fd)
        except OSError:
            return False

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._pending.append(text)
        if "\n" in text:
            self.flush()
        return len(text)

    def flush(self) -> None:
        data = "".join(self._pending).encode(self._encoding, self._errors)
        self._pending.clear()
        while data and self._fd is not None:
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:
                return  # a non-blocking pipe that is full: drop this line, try the next
            except OSError:
                self._fd = None  # EPIPE, EBADF, EIO: the reader is gone for good
                return
            data = data[written:]


def harden_stdio() -> None:
    """Fill closed descriptors 0-2, and make ``sys.stderr`` best effort."""
    for fd in STD_FDS:
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
            if null != fd:
                os.dup2(null, fd, inheritable=False)
                os.close(null)
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    sys.stderr = BestEffortWriter(2, encoding)


def flush_stdio() -> None:
    """Flush before exec (the process image and its buffers are about to be replaced)."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
