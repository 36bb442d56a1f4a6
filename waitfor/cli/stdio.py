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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

STD_FDS = (0, 1, 2)


class BestEffortWriter(io.TextIOBase):
    """A text stream whose failed writes are dropped, not raised.

    Over the process's own stderr it writes the descriptor directly (``os.write``), so no
    buffer is left holding lines a broken pipe refused; over a stream someone put in its place
    (a test's, an embedding program's) it writes that. After a broken pipe or a closed
    descriptor nothing more is attempted.
    """

    def __init__(self, sink: int | TextIO, encoding: str = "utf-8") -> None:
        super().__init__()
        self._sink: int | TextIO | None = sink
        self._encoding = encoding
        self._pending: list[str] = []

    @property
    def encoding(self) -> str:  # type: ignore[override]  # a read-only property in io
        return self._encoding

    @property
    def errors(self) -> str:  # type: ignore[override]
        return "backslashreplace"

    def fileno(self) -> int:
        if isinstance(self._sink, int):
            return self._sink
        if self._sink is None:
            raise io.UnsupportedOperation("the stream is broken")
        return self._sink.fileno()

    def isatty(self) -> bool:
        try:
            return self._sink is not None and os.isatty(self.fileno())
        except (OSError, ValueError):
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
        text = "".join(self._pending)
        self._pending.clear()
        try:
            if isinstance(self._sink, int):
                _write_all(self._sink, text.encode(self._encoding, "backslashreplace"))
            elif self._sink is not None:
                self._sink.write(text)
                self._sink.flush()
        except BlockingIOError:
            pass  # a full non-blocking pipe: drop this line, try the next
        except (OSError, ValueError):
            self._sink = None  # EPIPE, EBADF, a closed stream: the reader is gone for good


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


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
    stream = sys.stderr
    if isinstance(stream, BestEffortWriter):
        return  # main() called again in one process
    encoding = getattr(stream, "encoding", None) or "utf-8"
    own = stream is None or stream is sys.__stderr__
    sys.stderr = BestEffortWriter(2 if own else stream, encoding)


def flush_stdio() -> None:
    """Flush before exec (the process image and its buffers are about to be replaced)."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
