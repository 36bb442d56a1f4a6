"""Files: ``file:///path`` is ready when the path exists; ``#nonempty`` when it also has content.

For a token or config file that another init container or a sidecar writes. A symbolic link is
followed, as the application opening the path will follow it: a link whose target does not exist
(yet) is not ready, and the reason says it is a dangling link. A directory exists like a file;
``nonempty`` means it holds at least one entry. ``stat`` on a local path does not block, so the
probe is synchronous.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from urllib.parse import unquote

from waitfor.checks.base import (
    Address,
    Check,
    OptionPairs,
    Outcome,
    describe_os_error,
    flag,
    reject_unknown,
)


@dataclass(frozen=True)
class FileOptions:
    nonempty: bool = False


class FileCheck(Check):
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

    async def probe(self, budget: float) -> Outcome:
        assert isinstance(self.target.options, FileOptions)
        return inspect(self.target.host, nonempty=self.target.options.nonempty)


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


def inspect(path: str, *, nonempty: bool) -> Outcome:
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
