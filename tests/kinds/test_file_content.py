"""file:///path#contains=RE2 (the first 1 MiB) and #min-size=BYTES.

Oracles: ``head -c 1048576 FILE | grep -qE RE`` for ``contains`` (with patterns whose meaning
is the same in RE2 and POSIX EREs, and that match within a line, as grep does), ``stat -c %s``
for ``min-size``.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.support.attempts import assert_first_attempt_as_runner
from tests.support.command import ready_event, usage_error
from tests.support.fast import FAST
from tests.support.targets import refusals
from tests.support.waiting import meanwhile, readiness
from waitfor import wait_for

MIB = 1024 * 1024  # the issue says the first 1 MiB: not read from the code under test


def grep_says(path: Path, pattern: str) -> bool:
    head = subprocess.run(["head", "-c", str(MIB), str(path)], capture_output=True)
    found = subprocess.run(["grep", "-qE", pattern], input=head.stdout, check=False)
    assert found.returncode in (0, 1)
    return found.returncode == 0


def size_says(path: Path) -> int:
    return int(subprocess.run(["stat", "-c", "%s", str(path)], capture_output=True).stdout)


CONTENTS = {
    "empty": b"",
    "status": b"migrations: 41 applied\nstatus: ready\n",
    "late": b"x" * (MIB - 3) + b"\nREADY\n",  # READY starts past the first 1 MiB
    "edge": b"x" * (MIB - 6) + b"\nREADY\n",  # READY ends exactly at 1 MiB
    "binary": b"\x00\xff\xfe header \x80 READY \x00",
}
PATTERNS = ["READY", "status: (ready|green)", "applied$", "[0-9]+ applied", "^READY", "nothing"]


@pytest.mark.parametrize("name", sorted(CONTENTS))
@pytest.mark.parametrize("pattern", PATTERNS)
def test_contains_agrees_with_grep(tmp_path: Path, name: str, pattern: str) -> None:
    path = tmp_path / name
    path.write_bytes(CONTENTS[name])
    from urllib.parse import quote

    is_ready, reason = readiness(f"file://{path}#contains={quote(pattern, safe='')}")
    # (?m): ^ and $ at line ends, as grep's line-by-line reading has them
    multiline, _ = readiness(f"file://{path}#contains={quote('(?m)' + pattern, safe='')}")
    assert multiline == grep_says(path, pattern), reason
    if "^" not in pattern and "$" not in pattern:
        assert is_ready == multiline


def test_the_reasons(tmp_path: Path) -> None:
    path = tmp_path / "app.log"
    path.write_text("booting\n")
    assert readiness(f"file://{path}#contains=started") == (
        False,
        f"{path} does not match 'started' (8 bytes)",
    )
    big = tmp_path / "big.log"
    big.write_bytes(b"." * (3 * MIB) + b"started")
    assert readiness(f"file://{big}#contains=started") == (
        False,
        f"{big} does not match 'started' (its first 1 MiB)",
    )
    path.write_text("booting\nstarted on :8080\n")
    assert readiness(f"file://{path}#contains=started%20on%20:[0-9]+") == (
        True,
        f"{path} matches 'started on :[0-9]+' (25 bytes)",
    )


def test_contains_waits_for_the_line_to_be_written(tmp_path: Path) -> None:
    path = tmp_path / "boot.log"
    path.write_text("starting\n")

    def append() -> None:
        with path.open("a") as log:
            log.write("listening\n")

    with meanwhile(0.4, append):
        (result,) = wait_for(f"file://{path}#contains=listening", timeout=10, backoff=FAST)
    assert result.attempts > 1
    assert grep_says(path, "listening")


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 10**6])
@pytest.mark.parametrize("minimum", [0, 1, 4096, 10**6])
def test_min_size_agrees_with_stat(tmp_path: Path, size: int, minimum: int) -> None:
    path = tmp_path / "data"
    with path.open("wb") as data:
        data.truncate(size)  # sparse: the size is what counts, not the blocks
    is_ready, reason = readiness(f"file://{path}#min-size={minimum}")
    assert is_ready == (size_says(path) >= minimum), reason
    if not is_ready:
        assert reason == f"{path} has {size} bytes, fewer than {minimum}"


def test_min_size_waits_for_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(b"")
    stop = threading.Event()

    def grow() -> None:
        with path.open("ab") as out:
            while not stop.is_set() and out.tell() < 64 * 1024:
                out.write(b"z" * 4096)
                out.flush()
                time.sleep(0.02)

    writer = threading.Thread(target=grow)
    writer.start()
    try:
        (result,) = wait_for(f"file://{path}#min-size=40000", timeout=10, backoff=FAST)
    finally:
        stop.set()
        writer.join()
    assert result.attempts > 1
    assert size_says(path) >= 40000


def test_all_options_must_hold(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("ok\n")
    assert readiness(f"file://{path}#min-size=3&contains=ok&nonempty")[0]
    assert not readiness(f"file://{path}#min-size=4&contains=ok")[0]
    assert not readiness(f"file://{path}#min-size=3&contains=no")[0]


def test_the_first_attempt_agrees(tmp_path: Path) -> None:
    """The quick first attempt (before the event loop) judges the options as the runner does."""
    path = tmp_path / "boot.log"
    path.write_text("listening on :8080\n")
    folder = tmp_path / "dir"
    folder.mkdir()
    assert_first_attempt_as_runner(
        [
            f"file://{path}#contains=listening%20on",
            f"file://{path}#min-size=19",
            f"file://{path}#min-size=5&contains=(%3Fm)%5Elistening&nonempty",
        ],
        [
            f"file://{path}#contains=READY",
            f"file://{path}#min-size=20",
            f"file://{folder}#min-size=0",
            f"file://{tmp_path / 'missing'}#contains=x",
        ],
    )


def test_only_regular_files_have_content(tmp_path: Path) -> None:
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "entry").touch()
    assert readiness(f"file://{folder}#min-size=1") == (False, f"{folder} is a directory")
    # min-size=0 still asks for a regular file: any file, even empty, but not a directory
    assert readiness(f"file://{folder}#min-size=0") == (False, f"{folder} is a directory")
    assert readiness(f"file://{folder / 'entry'}#min-size=0")[0]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    # opening a FIFO would wait for a writer: not ready at once, never waiting on it
    assert readiness(f"file://{fifo}#contains=x") == (False, f"{fifo} is not a regular file")
    assert time.monotonic() - started < 2
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "missing")
    assert (
        readiness(f"file://{link}#contains=x")[1]
        == f"{link} is a dangling link to {link.parent}/missing"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text("ready")
    path.chmod(0)
    assert readiness(f"file://{path}#contains=ready") == (False, f"{path}: permission denied")


test_bad_options_are_one_line_errors = refusals(
    [
        ("min-size=-1", "min-size must be a number of bytes, not '-1'"),
        ("min-size=1k", "not '1k'"),
        ("min-size=", "not ''"),
        ("min-size=" + "9" * 40, "not '99999999999999999999'"),
        ("min-size=1&min-size=2", "option 'min-size' given more than once"),
        ("contains=(a", "contains regex '(a' is invalid"),
        ("contains=(%3F=x)", "RE2 syntax"),
        ("contains=" + "(a|b)" * 3000, "is too large"),
        ("content=x", "unknown option 'content' (known: contains, min-size, nonempty)"),
    ],
    address="file:///run/token#{}",
    regex=False,
    one_line=True,
)


def test_the_cli_exit_2_and_json(tmp_path: Path) -> None:
    assert "Traceback" not in usage_error("file:///x#contains=%5C")
    path = tmp_path / "done"
    path.write_text("phase=done\n")
    done = ready_event(f"file://{path}#contains=phase=done&min-size=5")
    assert done["target"] == f"file://{path}#contains=phase=done&min-size=5"
    assert done["reason"] == f"{path} matches 'phase=done' (11 bytes)"
