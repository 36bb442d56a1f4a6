"""The README's Quick start, run as written: its sample output is what a run prints.

The commands of its ``sh`` block run on a free port, the server started once waitfor has found
the port closed (the sample's story: a background ``&`` server still starting); the lines
printed, stdout and stderr in one stream, must equal the README's sample once the port, times
and attempt counts are set aside.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.ports import free_port

README = Path(__file__).resolve().parents[1] / "README.md"
_VARIABLE = [(re.compile(r"\d+\.\d+s"), "T"), (re.compile(r"\(\d+ attempts?\)"), "(N)")]


def quick_start() -> tuple[list[str], list[str]]:
    """The Quick start's commands and its sample output."""
    section = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w*)\n(.*?)```", section, re.S)
    commands = next(body for lang, body in blocks if lang == "sh")
    sample = next(body for lang, body in blocks if lang == "")
    lines = [line.split("  #")[0].strip() for line in commands.splitlines()]
    return [line for line in lines if line], sample.splitlines()


def normalised(lines: list[str], port: int) -> list[str]:
    out = []
    for line in lines:
        line = line.replace(f":{port}", ":PORT").replace(":8000", ":PORT")
        for pattern, placeholder in _VARIABLE:
            line = pattern.sub(placeholder, line)
        out.append(line)
    return out


def test_the_quick_start_prints_its_sample_output(tmp_path: Path) -> None:
    commands, sample = quick_start()
    install, server, wait = commands
    assert install.startswith("pip install .")  # the test's venv is that install
    assert server.startswith("python3 -m http.server 8000")
    assert server.endswith("&")
    assert wait.startswith("waitfor http://127.0.0.1:8000/ -- ")
    port = free_port()
    waitfor = [sys.executable, "-m", "waitfor", *wait.split()[1:]]
    waitfor = [word.replace("8000", str(port)) for word in waitfor]
    waitfor = [word.strip('"') for word in waitfor]
    waiter = subprocess.Popen(
        waitfor, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path
    )
    assert waiter.stdout is not None
    try:
        # the server comes up once waitfor has said the port is closed: the sample's story
        seen = [waiter.stdout.readline(), waiter.stdout.readline()]
        httpd = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=tmp_path,
        )
        try:
            rest, _ = waiter.communicate(timeout=30)
        finally:
            httpd.terminate()
            httpd.wait(timeout=10)
    finally:
        waiter.kill()
        waiter.wait()
    out = "".join(seen) + rest
    assert waiter.returncode == 0, out
    assert normalised(out.splitlines(), port) == normalised(sample, 8000)
