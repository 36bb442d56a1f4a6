"""Files: exists, non-empty, dangling links, directories, written later by someone else.

A hung NFS or FUSE mount is played by ``os.stat``/``os.scandir`` held at a gate for paths under
:data:`HUNG`: the calls block in their thread exactly where a dead mount would.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fast import FAST
from tests.support.gate import Gate, gated
from tests.support.targets import refusals
from tests.support.waiting import reason as reason_of
from waitfor import WaitTimeout, wait_for
from waitfor.base.deadline import Deadline
from waitfor.core.targets import parse_target
from waitfor.kinds.file import FileCheck

reason = functools.partial(reason_of, timeout=0.3)


def test_missing_then_written(tmp_path: Path) -> None:
    path = tmp_path / "token"
    assert reason(f"file://{path}") == f"{path}: no such file or directory"
    timer = threading.Timer(0.3, lambda: path.write_text("t0k"))
    timer.start()
    try:
        results = wait_for(f"file://{path}", timeout=10, backoff=FAST)
    finally:
        timer.join()
    assert results[0].reason == f"{path} exists (3 bytes)"
    assert results[0].attempts > 1


def test_nonempty_waits_for_content(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.touch()
    assert wait_for(f"file://{path}", timeout=5)[0].ready  # exists is enough without #nonempty
    assert reason(f"file://{path}#nonempty") == f"{path} is empty"
    path.write_text("a: 1\n")
    assert wait_for(f"file://{path}#nonempty", timeout=5)[0].reason == f"{path} exists (5 bytes)"


def test_a_dangling_link_is_not_ready_until_its_target_exists(tmp_path: Path) -> None:
    link, target = tmp_path / "current", tmp_path / "v2"
    link.symlink_to(target)
    assert reason(f"file://{link}") == f"{link} is a dangling link to {target}"
    target.write_text("x")
    assert wait_for(f"file://{link}", timeout=5)[0].reason == f"{link} exists (1 bytes)"


def test_directories(tmp_path: Path) -> None:
    folder = tmp_path / "secrets"
    folder.mkdir()
    assert wait_for(f"file://{folder}", timeout=5)[0].reason == f"{folder} exists (a directory)"
    assert reason(f"file://{folder}#nonempty") == f"{folder} is an empty directory"
    (folder / "key").write_text("k")
    results = wait_for(f"file://{folder}#nonempty", timeout=5)
    assert results[0].reason == f"{folder} is a directory with entries"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every directory")
def test_unreadable_parent(tmp_path: Path) -> None:
    folder = tmp_path / "closed"
    folder.mkdir(mode=0)
    try:
        assert reason(f"file://{folder}/x") == f"{folder}/x: permission denied"
    finally:
        folder.chmod(0o700)


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("file:///etc/hostname", "/etc/hostname"),
        ("file://localhost/etc/hostname", "/etc/hostname"),
        ("file:/etc/hostname", "/etc/hostname"),
        ("file:///srv/a%20b%23c", "/srv/a b#c"),
    ],
)
def test_addresses(text: str, path: str) -> None:
    assert parse_target(text).host == path


test_bad_targets = refusals(
    [
        ("file://server/share/x", "local path"),
        ("file://", "absolute"),
        ("file:relative", "absolute"),
        ("file:///x?y", "no query"),
        ("file:///x#nonempty=maybe", "true or false"),
        ("file:///x#size=3", "unknown option"),
    ]
)


HUNG = "/waitfor-hung-mount"


class HungMount(Gate):
    """A filesystem call on a path under HUNG blocks until opened; others pass through."""

    def held(self, path: Any, *args: Any, **kw: Any) -> tuple[Any, ...] | None:
        if not str(path).startswith(HUNG):
            return None
        return (str(path)[len(HUNG) :] or "/", *args)


@pytest.fixture
def hung_stat(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    with gated(monkeypatch, os, "stat", HungMount(os.stat)) as held:
        yield held


def test_a_hung_stat_holds_neither_the_deadline_nor_other_targets(
    hung_stat: Gate, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    ready.touch()
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as info:
        wait_for(
            f"file://{HUNG}/x",
            f"file://{ready}",
            timeout=1,
            attempt_timeout=0.3,
            backoff=FAST,
        )
    assert time.monotonic() - started < 3.0  # a stat on the loop would hold it for 30 s
    hung, other = info.value.results
    assert hung.reason.startswith(f"stat {HUNG}/x: no answer after ")
    assert hung.attempts > 1
    # the quick first look's thread, then one for all the runner's attempts, not one each
    assert hung_stat.calls == 2
    assert other.ready
    assert other.reason == f"{ready} exists (0 bytes)"


def test_the_quick_first_look_gives_up_on_a_hung_stat(hung_stat: Gate, tmp_path: Path) -> None:
    check = FileCheck(parse_target(f"file://{HUNG}{tmp_path}"))
    started = time.monotonic()
    assert check.probe_now(Deadline.after(0.2)) is None  # the runner's attempts take over
    assert time.monotonic() - started < 2.0
    hung_stat.opened.set()
    assert FileCheck(parse_target(f"file://{tmp_path}")).probe_now(Deadline.after(5)) is not None
    assert (
        FileCheck(parse_target(f"file://{tmp_path}#nonempty")).probe_now(Deadline.after(5)) is None
    )  # empty


def test_the_answer_of_a_slow_stat_is_used_when_it_comes(hung_stat: Gate, tmp_path: Path) -> None:
    timer = threading.Timer(0.5, hung_stat.opened.set)
    timer.start()
    try:
        target = f"file://{HUNG}{tmp_path}"
        results = wait_for(target, timeout=10, attempt_timeout=0.2, backoff=FAST)
    finally:
        timer.join()
    assert results[0].reason == f"{HUNG}{tmp_path} exists (a directory)"


def test_a_hung_listing_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    passing = HungMount(os.stat)
    passing.opened.set()  # only the listing hangs
    hung = HungMount(os.scandir)
    with (
        gated(monkeypatch, os, "stat", passing),
        gated(monkeypatch, os, "scandir", hung),
        pytest.raises(WaitTimeout) as info,
    ):
        wait_for(f"file://{HUNG}{tmp_path}#nonempty", timeout=0.5, backoff=FAST)
    assert info.value.results[0].reason.startswith(f"listing {HUNG}{tmp_path}: no answer after ")


# The CLI in a child whose os.stat hangs for ever under HUNG, as on a dead mount: the thread is
# never released, so only abandoning it lets the process keep its deadline and its signals.
CHILD = f"""
import os, runpy, sys, threading
real, never = os.stat, threading.Event()
def stat(path, *args, **kw):
    if str(path).startswith({HUNG!r}):
        never.wait()
    return real(path, *args, **kw)
os.stat = stat
sys.argv = ["waitfor", *sys.argv[1:]]
runpy.run_module("waitfor", run_name="__main__")
"""


def hung_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, *args, f"file://{HUNG}/token"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_cli_keeps_its_deadline_over_a_hung_stat() -> None:
    started = time.monotonic()
    proc = hung_cli("--timeout", "1", "--attempt-timeout", "0.5")
    try:
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 124
    assert time.monotonic() - started < 6.0  # interpreter start-up on a busy machine included
    assert f"stat {HUNG}/token: no answer after " in err


def test_sigterm_ends_the_cli_during_a_hung_stat() -> None:
    proc = hung_cli("--timeout", "60")
    try:
        assert proc.stderr is not None
        proc.stderr.readline()  # "waiting for ..." once the wait has begun
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 143
        assert time.monotonic() - sent < 2.0
        assert "interrupted by SIGTERM" in proc.stderr.read()
    finally:
        proc.kill()
        proc.communicate()
