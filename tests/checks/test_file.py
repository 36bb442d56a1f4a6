"""Files: exists, non-empty, dangling links, directories, written later by someone else."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tests.conftest import FAST
from waitfor import WaitTimeout, wait_for
from waitfor.errors import TargetError
from waitfor.targets import parse_target


def reason(target: str) -> str:
    with pytest.raises(WaitTimeout) as info:
        wait_for(target, timeout=0.3, backoff=FAST)
    return info.value.results[0].reason


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


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("file://server/share/x", "local path"),
        ("file://", "absolute"),
        ("file:relative", "absolute"),
        ("file:///x?y", "no query"),
        ("file:///x#nonempty=maybe", "true or false"),
        ("file:///x#size=3", "unknown option"),
    ],
)
def test_bad_targets(text: str, error: str) -> None:
    with pytest.raises(TargetError, match=error):
        parse_target(text)
