"""Files: ``file:///path`` is ready when the path exists; ``#nonempty`` when it also has content.

For a token or config file that another init container or a sidecar writes. ``#min-size=BYTES``:
a regular file of at least that size; ``#contains=RE2``: a regular file whose first 1 MiB
matches (read in the same thread as the ``stat``, so a hung mount holds that thread only; opened
without blocking, so a FIFO is answered "not a regular file", not waited on). A symbolic link is
followed, as the application opening the path will follow it: a link whose target does not exist
(yet) is not ready, and the reason says it is a dangling link. A directory exists like a file;
``nonempty`` means it holds at least one entry.

``stat`` and ``scandir`` block on a hung NFS or FUSE mount, so they run in a daemon thread, never on
the event loop (it would hold every target, the deadline and SIGTERM) nor in the default executor
(``asyncio.run`` waits for it at exit). A cancelled attempt abandons the thread; while it is stuck,
later attempts on the same path wait on it instead of starting another. An attempt cut off there
says so: "stat /mnt/x: no answer after 1.0s".
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Callable

from waitfor.kind import (
    Address,
    Check,
    OptionPairs,
    Outcome,
    Value,
    flag,
    reject_unknown,
    single,
    unquote,
)
from waitfor.net.errors import describe_os_error

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from typing import ClassVar

    from waitfor.kind import Deadline, Pattern

#: ``#contains=`` searches this much from the start of the file
HEAD_BYTES = 1024 * 1024


class FileOptions(Value):
    nonempty: bool = False
    min_size: int | None = None  # bytes a regular file must hold at least (0: a regular file)
    contains: Pattern | None = None  # the first HEAD_BYTES must match


class FileCheck(Check[FileOptions]):
    USAGE = (
        ("file:///path#nonempty", "the path exists (#nonempty: and has content)"),
        ("file:///path#min-size=BYTES&contains=RE2", "a file that big, its first 1 MiB matches"),
    )
    OPTION_NAMES = frozenset({"nonempty", "min_size", "contains"})

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        path = file_path(url)
        return Address(host=path, port=None, display=f"file://{path}")

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> FileOptions:
        reject_unknown(pairs, cls.OPTION_NAMES)
        nonempty = flag(pairs, "nonempty")
        size = single(pairs, "min_size")
        if size is not None and not (size.isascii() and size.isdigit() and len(size) <= 18):
            raise ValueError(f"min-size must be a number of bytes, not {size[:20]!r}")
        pattern = single(pairs, "contains")
        contains = None
        if pattern is not None:
            from waitfor.kind import option_pattern

            contains = option_pattern("contains", pattern)
        return FileOptions(nonempty, None if size is None else int(size), contains)

    async def probe(self, deadline: Deadline) -> Outcome:
        import asyncio  # imported already by whoever awaits this; kept off the module's imports

        from waitfor.net.activity import waiting_on

        inspection = _Inspection.start(self.target.host, self.options)
        with waiting_on(lambda waited: f"{inspection.step}: no answer after {waited:.1f}s"):
            outcome = await asyncio.shield(inspection.future)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def probe_now(self, deadline: Deadline) -> Outcome | None:
        """The same look in a daemon thread, given up at ``deadline``: a hung mount holds none."""
        path, options = self.target.host, self.options
        found: list[Outcome] = []
        look = threading.Thread(
            target=lambda: found.append(inspect(path, options, doing=_ignore)),
            name=f"waitfor-{path}",
            daemon=True,
        )
        try:
            look.start()
        except RuntimeError:  # out of threads: the runner's attempt will say so
            return None
        look.join(deadline.left())
        return found[0] if found and found[0].ready else None


def _ignore(step: str) -> None:
    """Nobody hears what a quick first look is doing: it is never reported as cut off."""


def file_path(url: str) -> str:
    """RFC 8089: ``file:///etc/x`` or ``file://localhost/etc/x`` (and ``file:/etc/x``)."""
    rest = url[len("file:") :]
    if rest.startswith("//"):
        authority, slash, rest = rest[2:].partition("/")
        if authority not in ("", "localhost"):
            raise ValueError("file targets name a local path: file:///path (no host)")
        rest = slash + rest
    if "?" in rest:
        raise ValueError("file targets take no query; percent-encode '?' in a path as %3F")
    path = unquote(rest)
    if not path.startswith("/"):
        raise ValueError("the path must be absolute: file:///path")
    if "\0" in path:
        raise ValueError("the path contains a NUL byte")
    return path


def inspect(path: str, options: FileOptions, *, doing: Callable[[str], None]) -> Outcome:
    """The outcome for ``path``, as slow as its filesystem; ``doing`` hears each call made."""
    nonempty = options.nonempty
    doing(f"stat {path}")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            return Outcome.down(f"{path} is a dangling link to {os.readlink(path)}")
        return Outcome.down(f"{path}: no such file or directory")
    except OSError as exc:
        return Outcome.down(f"{path}: {describe_os_error(exc)}")
    if options.min_size is not None or options.contains is not None:
        return _inspect_content(path, options, doing)
    if stat.S_ISDIR(info.st_mode):
        if not nonempty:
            return Outcome.up(f"{path} exists (a directory)")
        doing(f"listing {path}")
        try:
            with os.scandir(path) as entries:
                has_entry = next(entries, None) is not None
        except OSError as exc:
            return Outcome.down(f"{path}: {describe_os_error(exc)}")
        if has_entry:
            return Outcome.up(f"{path} is a directory with entries")
        return Outcome.down(f"{path} is an empty directory")
    if nonempty and info.st_size == 0:
        return Outcome.down(f"{path} is empty")
    return Outcome.up(f"{path} exists ({info.st_size} bytes)")


def _inspect_content(path: str, options: FileOptions, doing: Callable[[str], None]) -> Outcome:
    """``#min-size`` and ``#contains``: only a regular file has a size and a content to read."""
    doing(f"opening {path}")
    try:
        # O_NONBLOCK: opening a FIFO does not wait for a writer (a regular file ignores it)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        return Outcome.down(f"{path}: {describe_os_error(exc)}")
    try:
        info = os.fstat(fd)  # the file opened, not what the path names by now
        if not stat.S_ISREG(info.st_mode):
            what = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            return Outcome.down(f"{path} is {what}")
        size = info.st_size
        if options.min_size is not None and size < options.min_size:
            return Outcome.down(f"{path} has {size} bytes, fewer than {options.min_size}")
        if size == 0 and options.nonempty:
            return Outcome.down(f"{path} is empty")
        pattern = options.contains
        if pattern is None:
            return Outcome.up(f"{path} exists ({size} bytes)")
        doing(f"reading {path}")
        try:
            head = _read_head(fd)
        except OSError as exc:
            return Outcome.down(f"{path}: {describe_os_error(exc)}")
    finally:
        os.close(fd)
    doing(f"searching {path}")
    # In this thread, not the event loop's: RE2 over 1 MiB takes up to a few seconds with
    # the largest program allowed (waitfor.base.patterns), and the attempt may abandon it.
    if not pattern.search_now(head):
        read = "its first 1 MiB" if len(head) == HEAD_BYTES else f"{len(head)} bytes"
        return Outcome.down(f"{path} does not match {pattern.pattern!r} ({read})")
    return Outcome.up(f"{path} matches {pattern.pattern!r} ({size} bytes)")


def _read_head(fd: int) -> bytes:
    """The first HEAD_BYTES (fewer if the file is shorter, or grows while it is read)."""
    head = bytearray()
    while len(head) < HEAD_BYTES:
        chunk = os.read(fd, HEAD_BYTES - len(head))
        if not chunk:
            break
        head += chunk
    return bytes(head)


InspectionOutcome = Outcome | BaseException


class _Inspection:
    """:func:`inspect` in a daemon thread, one per path at a time however many attempts wait."""

    _lock = threading.Lock()
    _running: ClassVar[dict[tuple[asyncio.AbstractEventLoop, str, FileOptions], _Inspection]] = {}

    def __init__(self, loop: asyncio.AbstractEventLoop, path: str, options: FileOptions) -> None:
        self.loop = loop
        self.key = (loop, path, options)
        self.step = f"stat {path}"  # what the thread is in now; read by the attempt cut off
        self.future: asyncio.Future[InspectionOutcome] = loop.create_future()

    @classmethod
    def start(cls, path: str, options: FileOptions) -> _Inspection:
        import asyncio

        loop = asyncio.get_running_loop()
        with cls._lock:
            running = cls._running.get((loop, path, options))
            if running is not None:
                return running  # a hung mount must not cost a thread per attempt
            inspection = cls._running[(loop, path, options)] = _Inspection(loop, path, options)
        try:
            thread = threading.Thread(target=inspection.run, name=f"waitfor-{path}", daemon=True)
            thread.start()
        except RuntimeError as exc:  # "can't start new thread": out of threads or memory
            inspection.finish(Outcome.down(f"{path}: cannot start a thread to look ({exc})"))
        return inspection

    def run(self) -> None:  # in the inspection's own thread
        _, path, options = self.key
        outcome: InspectionOutcome
        try:
            outcome = inspect(path, options, doing=self.doing)
        except Exception as exc:  # handed to the awaiting attempt
            outcome = exc
        self.finish(outcome)

    def doing(self, step: str) -> None:
        self.step = step

    def finish(self, outcome: InspectionOutcome) -> None:
        with self._lock:
            if self._running.get(self.key) is self:
                del self._running[self.key]
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self.loop.call_soon_threadsafe(self._deliver, outcome)

    def _deliver(self, outcome: InspectionOutcome) -> None:
        if not self.future.done():
            self.future.set_result(outcome)
