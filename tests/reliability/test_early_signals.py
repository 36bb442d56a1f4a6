"""A signal in waitfor's first moments: importing, parsing, the synchronous first attempt, starting
the event loop. Each must end the wait with 130/143 and one line, as PID 1 too.

Only the interpreter's own start-up (before any of waitfor's code runs) precedes the handlers;
these tests send from the moment the process has a handler for the signal (its SigCgt mask) and
at many moments after, through every phase of a start.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import waitfor
from tests.support.pidns import as_pid1, pid1_of
from tests.support.ports import free_port

#: ms after the handlers appear: importing click, parsing, the first attempt, the event loop
DELAYS_MS = range(0, 151, 10)
REPEATS = 2


def catches(pid: int, sig: signal.Signals) -> bool:
    """Whether ``pid`` has a handler for ``sig`` (bit sig-1 of SigCgt in /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) >> (sig - 1) & 1)


def wait_for_handler(pid: int, sig: signal.Signals) -> None:
    give_up = time.monotonic() + 20
    while not catches(pid, sig):
        assert time.monotonic() < give_up, "no handler appeared"
        time.sleep(0.0005)


@contextmanager
def silent_peer() -> Iterator[int]:
    """Accepts and says nothing: a redis first attempt waits its whole quick budget on it."""
    server = socket.create_server(("127.0.0.1", 0))
    server.listen(64)
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def targets(silent: int) -> list[str]:
    # a ready target, one whose synchronous attempt hangs, one refused: every phase of a start
    return ["tcp://127.0.0.1:5432", f"redis://127.0.0.1:{silent}", f"tcp://127.0.0.1:{free_port()}"]


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)]
)
def test_a_signal_at_any_early_moment_ends_the_wait_in_one_line(
    sig: signal.Signals, code: int
) -> None:
    outcomes = []
    with silent_peer() as silent:
        for delay in DELAYS_MS:
            for _ in range(REPEATS):
                proc = subprocess.Popen(
                    [sys.executable, "-m", "waitfor", "-t", "30", *targets(silent)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                try:
                    # the signal's own (SIGTERM's for SIGINT, which Python itself catches
                    # from its own start-up on)
                    wait_for_handler(proc.pid, signal.SIGTERM if sig == signal.SIGINT else sig)
                    time.sleep(delay / 1000)
                    proc.send_signal(sig)
                    _, stderr = proc.communicate(timeout=30)
                finally:
                    proc.kill()
                    proc.wait()
                outcomes.append((delay, proc.returncode, stderr))
    wrong = [(d, rc, err) for d, rc, err in outcomes if rc != code]
    assert not wrong, wrong
    for delay, _, stderr in outcomes:
        assert stderr.endswith(f"waitfor: error: interrupted by {sig.name}\n"), (delay, stderr)
        assert "Traceback" not in stderr, (delay, stderr)
        assert "Warning" not in stderr, (delay, stderr)


#: ms after spawn: the interpreter's start-up, waitfor's first code, the handlers, and on;
#: None: once the handlers are in place (however long the start-up takes on a loaded machine)
SPAWN_DELAYS_MS: list[int | None] = [*range(0, 101, 2), 150, 200, 300, None]
PACKAGE = Path(waitfor.__file__).parent


def commands() -> list[list[str]]:
    """``python -m waitfor`` and the console script, as installed in this environment."""
    script = Path(sys.executable).parent / "waitfor"
    return [[sys.executable, "-m", "waitfor"], *([[str(script)]] if script.exists() else [])]


def ran_our_code(stderr: str) -> bool:
    """Whether a traceback passes through waitfor's own files (not the interpreter's site,
    runpy or the console script's first line)."""
    return f'File "{PACKAGE}{os.sep}' in stderr


@pytest.mark.parametrize("command", commands(), ids=["python -m waitfor", "console script"])
def test_a_sigint_from_the_first_moment_never_shows_a_traceback(command: list[str]) -> None:
    """A Ctrl-C at any moment after spawn. Before Python runs any of waitfor's code (its own
    start-up: site, runpy, the console script's imports) the interpreter decides: death by the
    signal, its own traceback, or (a KeyboardInterrupt raised in an import lock's callback,
    "Exception ignored") nothing at all. From waitfor's first code on: 130 and one line, never
    a traceback through waitfor's files (``waitfor/__init__`` importing typing was ~20 ms of
    it). Where the handler was in place before the signal was sent (SigCgt), it must be 130."""
    env = {k: v for k, v in os.environ.items() if "WAITFOR_" not in k}
    outcomes = []
    for delay in SPAWN_DELAYS_MS:
        proc = subprocess.Popen(
            [*command, "-t", "5", f"tcp://127.0.0.1:{free_port()}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            if delay is None:
                wait_for_handler(proc.pid, signal.SIGTERM)
            else:
                time.sleep(delay / 1000)
            handled = catches(proc.pid, signal.SIGTERM)  # waitfor's first code installs both
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=30)
        finally:
            proc.kill()
            proc.wait()
        outcomes.append((delay, handled, proc.returncode, stderr))
    for delay, handled, code, stderr in outcomes:
        if code == 130 or handled:
            assert code == 130, (delay, code, stderr)
            assert stderr.endswith("waitfor: error: interrupted by SIGINT\n"), (delay, stderr)
            assert "Traceback" not in stderr, (delay, stderr)
        else:  # the interpreter's own start-up
            assert code != 0, (delay, stderr)
            assert not ran_our_code(stderr), (delay, code, stderr)
    assert any(handled for _, handled, _, _ in outcomes)


@pytest.mark.parametrize(
    ("words", "module"),
    [
        # the quick reading of the words: the library is the first slow import
        (["tcp://127.0.0.1:5432"], "waitfor.api"),
        # click reads any other command line
        (["-o", "text", "tcp://127.0.0.1:5432"], "click"),
    ],
)
def test_the_handlers_are_in_place_before_the_slow_imports(
    tmp_path: Path, words: list[str], module: str
) -> None:
    """The command's first code installs them: importing click and the library takes tens of
    milliseconds in which a signal found Python's defaults (or, as PID 1, nothing)."""
    seen = tmp_path / "seen"
    script = (
        "import signal, sys\n"
        "class Spy:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name == {module!r}:\n"
        "            handler = signal.getsignal(signal.SIGTERM)\n"
        f"            open({str(seen)!r}, 'w').write(getattr(handler, '__module__', 'default'))\n"
        "        return None\n"
        "sys.meta_path.insert(0, Spy())\n"
        f"sys.argv = ['waitfor', *{words!r}]\n"
        "import runpy\n"
        "runpy.run_module('waitfor', run_name='__main__')\n"
    )
    env = {k: v for k, v in os.environ.items() if "WAITFOR_" not in k}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, env=env
    )
    assert result.returncode == 0, result.stderr
    assert seen.read_text().startswith("waitfor.")


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="a PID namespace needs root and unshare (util-linux)",
)
@pytest.mark.parametrize("delay_ms", [0, 20, 40, 60, 80, 100, 150])
def test_an_early_sigterm_to_pid1_is_not_lost(delay_ms: int) -> None:
    silent = socket.create_server(("127.0.0.1", 0))
    with silent, as_pid1("-m", "waitfor", "-t", "30", *targets(silent.getsockname()[1])) as root:
        pid = pid1_of(root)
        wait_for_handler(pid, signal.SIGTERM)
        time.sleep(delay_ms / 1000)
        os.kill(pid, signal.SIGTERM)
        assert root.wait(timeout=10) == 143
        assert root.stderr is not None
        stderr = root.stderr.read()
    assert stderr.endswith("waitfor: error: interrupted by SIGTERM\n"), stderr
    assert "Traceback" not in stderr


def ends_on_sigterm_in_one_line(script: str, *words: str) -> None:
    """``script`` (waitfor, with a SIGTERM planted somewhere in it) run on ``words`` in a fresh
    interpreter ends as interrupted by the signal: 143 and waitfor's one line, nothing else."""
    result = subprocess.run(
        [sys.executable, "-c", script, *words], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 143, result.stderr
    assert result.stderr == "waitfor: error: interrupted by SIGTERM\n"


#: A signal whose handler runs inside a ``__del__``: Python reports the handler's exception as
#: "Exception ignored" and carries on (seen for real inside importlib's module-lock callback).
SWALLOWED = (
    "import os, signal, sys\n"
    "from waitfor.cli import entry\n"
    "entry.install()\n"
    "class Finalised:\n"
    "    def __del__(self):\n"
    "        os.kill(os.getpid(), signal.SIGTERM)\n"
    "        for _ in range(1000):\n"  # the handler runs here, between two bytecodes
    "            pass\n"
    "Finalised()\n"
    "from waitfor.cli.command import run\n"
    "sys.argv = ['waitfor', *sys.argv[1:]]\n"
    "run()\n"
)


@pytest.mark.parametrize(
    "words",
    [
        ["tcp://127.0.0.1:5432"],  # ready at once: the synchronous path
        ["-t", "30", f"tcp://127.0.0.1:{free_port()}"],  # refused: the event loop's wait
        ["-o", "text", "tcp://127.0.0.1:5432"],  # click reads the words
    ],
)
def test_a_signal_python_swallowed_still_ends_the_wait(words: list[str]) -> None:
    started = time.monotonic()
    ends_on_sigterm_in_one_line(SWALLOWED, *words)
    assert time.monotonic() - started < 10  # not the 30 s deadline


#: A signal landing the moment the handlers are in place, before the command's first ``try``
#: (seen for real: a SIGTERM 17 ms in, "waitfor.cli.signals.Signalled: 15" and exit 1).
AS_INSTALLED = (
    "import os, signal, sys\n"
    "from waitfor.cli import entry\n"
    "installed = entry.install\n"
    "def install():\n"
    "    installed()\n"
    "    os.kill(os.getpid(), signal.SIGTERM)\n"
    "    for _ in range(1000):\n"  # the handler runs here, as install returns
    "        pass\n"
    "entry.install = install\n"
    "sys.argv = ['waitfor', *sys.argv[1:]]\n"
    "entry.run()\n"
)


def test_a_signal_as_the_handlers_are_installed_ends_in_one_line() -> None:
    ends_on_sigterm_in_one_line(AS_INSTALLED, "tcp://127.0.0.1:5432")


#: A signal whose exception Python loses: CPython replaces what a handler raised while it
#: formats an ImportError's message (`from _ssl import RAND_egd` as asyncio imports ssl, a
#: SIGINT 36 ms in: "TypeError: expected a message argument" and exit 1, seen in CI).
LOST = (
    "import os, signal, sys\n"
    "from waitfor import api\n"
    "from waitfor.cli import entry\n"
    "entry.install()\n"
    "def run_sync(self, guard=None):\n"
    "    try:\n"
    "        os.kill(os.getpid(), signal.SIGTERM)\n"
    "        for _ in range(1000):\n"  # the handler runs here
    "            pass\n"
    "    except BaseException:\n"
    "        pass\n"  # lost, as CPython loses it
    "    raise TypeError('expected a message argument')\n"
    "api.Wait.run_sync = run_sync\n"
    "from waitfor.cli.command import run\n"
    "sys.argv = ['waitfor', *sys.argv[1:]]\n"
    "run()\n"
)


def test_a_signal_whose_exception_python_lost_ends_in_one_line() -> None:
    ends_on_sigterm_in_one_line(LOST, "tcp://127.0.0.1:5432")


#: A signal landing while asyncio makes the event loop: the half-made loop's ``__del__`` fails
#: (no ``_ssock`` yet) and Python printed "Exception ignored ... Traceback" after our line.
IN_THE_LOOPS_MAKING = (
    "import os, signal, sys\n"
    "from asyncio import selector_events\n"
    "from waitfor.cli import entry\n"
    "entry.install()\n"
    "make = selector_events.BaseSelectorEventLoop._make_self_pipe\n"
    "def landing(loop):\n"
    "    os.kill(os.getpid(), signal.SIGTERM)\n"
    "    for _ in range(1000):\n"
    "        pass\n"
    "    make(loop)\n"
    "selector_events.BaseSelectorEventLoop._make_self_pipe = landing\n"
    "from waitfor.cli.command import run\n"
    "sys.argv = ['waitfor', *sys.argv[1:]]\n"
    "run()\n"
)


def test_a_signal_while_the_event_loop_is_made_ends_in_one_line() -> None:
    refused = f"tcp://127.0.0.1:{free_port()}"
    ends_on_sigterm_in_one_line(IN_THE_LOOPS_MAKING, "-q", "-t", "30", refused)
