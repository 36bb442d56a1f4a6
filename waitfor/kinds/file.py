"""Files: ``file:///path`` is ready when the path exists; ``#nonempty`` when it also has content.

For a token or config file that another init container or a sidecar writes. A symbolic link is
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
from typing import TYPE_CHECKING, ClassVar

from waitfor.kind import Address, Check, OptionPairs, Outcome, Value, flag, reject_unknown, unquote
from waitfor.net.errors import describe_os_error

if TYPE_CHECKING:
    import asyncio

    from waitfor.kind import Deadline


class FileOptions(Value):
    nonempty: bool = False


class FileCheck(Check[FileOptions]):
    USAGE = (("file:///path#nonempty", "the path exists (#nonempty: and has content)"),)
    OPTION_NAMES = frozenset({"nonempty"})

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        path = file_path(url)
        return Address(host=path, port=None, display=f"file://{path}")

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> FileOptions:
        reject_unknown(pairs, cls.OPTION_NAMES)
        return FileOptions(nonempty=flag(pairs, "nonempty"))

    async def probe(self, deadline: Deadline) -> Outcome:
        import asyncio  # imported already by whoever awaits this; kept off the module's imports

        from waitfor.net.activity import waiting_on

        inspection = _Inspection.start(self.target.host, self.options.nonempty)
        with waiting_on(lambda waited: f"{inspection.step}: no answer after {waited:.1f}s"):
            outcome = await asyncio.shield(inspection.future)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def probe_now(self, deadline: Deadline) -> Outcome | None:
        """The same look in a daemon thread, given up at ``deadline``: a hung mount holds none."""
        path, nonempty = self.target.host, self.options.nonempty
        found: list[Outcome] = []
        look = threading.Thread(
            target=lambda: found.append(inspect(path, nonempty=nonempty, doing=_ignore)),
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


def inspect(path: str, *, nonempty: bool, doing: Callable[[str], None]) -> Outcome:
    """The outcome for ``path``, as slow as its filesystem; ``doing`` hears each call made."""
    doing(f"stat {path}")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            return Outcome.down(f"{path} is a dangling link to {os.readlink(path)}")
        return Outcome.down(f"{path}: no such file or directory")
    except OSError as exc:
        return Outcome.down(f"{path}: {describe_os_error(exc)}")
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


InspectionOutcome = Outcome | BaseException


class _Inspection:
    """:func:`inspect` in a daemon thread, one per path at a time however many attempts wait."""

    _lock = threading.Lock()
    _running: ClassVar[dict[tuple[asyncio.AbstractEventLoop, str, bool], _Inspection]] = {}

    def __init__(self, loop: asyncio.AbstractEventLoop, path: str, nonempty: bool) -> None:
        self.loop = loop
        self.key = (loop, path, nonempty)
        self.step = f"stat {path}"  # what the thread is in now; read by the attempt cut off
        self.future: asyncio.Future[InspectionOutcome] = loop.create_future()

    @classmethod
    def start(cls, path: str, nonempty: bool) -> _Inspection:
        import asyncio

        loop = asyncio.get_running_loop()
        with cls._lock:
            running = cls._running.get((loop, path, nonempty))
            if running is not None:
                return running  # a hung mount must not cost a thread per attempt
            inspection = cls._running[(loop, path, nonempty)] = _Inspection(loop, path, nonempty)
        try:
            thread = threading.Thread(target=inspection.run, name=f"waitfor-{path}", daemon=True)
            thread.start()
        except RuntimeError as exc:  # "can't start new thread": out of threads or memory
            inspection.finish(Outcome.down(f"{path}: cannot start a thread to look ({exc})"))
        return inspection

    def run(self) -> None:  # in the inspection's own thread
        _, path, nonempty = self.key
        outcome: InspectionOutcome
        try:
            outcome = inspect(path, nonempty=nonempty, doing=self.doing)
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
