"""Third-party kinds: real packages built and installed into a virtualenv, used by entry point.

The example plugin of docs/architecture.md (examples/plugin, a ZooKeeper "ruok" check) is
installed with
pip (offline, no build isolation) next to a package whose kinds are broken, and waited on through
the CLI and the library of that virtualenv.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.servers import accepting

ROOT = Path(__file__).parent.parent
PLUGIN = ROOT / "examples" / "plugin"

BROKEN_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "waitfor-broken-kinds"
version = "0.1"

[project.entry-points."waitfor.kinds"]
raises = "waitfor_broken_raises:RaisesCheck"
notacheck = "waitfor_broken:NotACheck"
noprobe = "waitfor_broken:NoProbe"
missing = "waitfor_broken:Missing"
tcp = "waitfor_broken:NotACheck"
exits = "waitfor_broken_exits:Exits"
slow = "waitfor_broken_slow:Slow"
parsebug = "waitfor_broken:ParseBug"
probebug = "waitfor_broken:ProbeBug"
refused = "waitfor_broken:Refused"
streamended = "waitfor_broken:StreamEnded"
flagfile = "waitfor_flagfile:FlagFileCheck"

[tool.setuptools]
py-modules = [
    "waitfor_broken",
    "waitfor_broken_raises",
    "waitfor_broken_exits",
    "waitfor_broken_slow",
    "waitfor_flagfile",
]
"""

BROKEN_MODULE = """\
from waitfor import Check, Outcome


class NotACheck:
    pass


class NoProbe(Check):
    pass


class ParseBug(Check):
    @classmethod
    def parse_address(cls, scheme, url):
        return url.host  # a str has no host: AttributeError

    async def probe(self, budget):
        return Outcome.up("never asked")


class ProbeBug(Check):
    async def probe(self, budget):
        return {}[self.target.url]  # KeyError quoting the URL, password and all


class Refused(Check):
    async def probe(self, budget):
        raise ConnectionRefusedError(111, "Connection refused")


class StreamEnded(Check):
    async def probe(self, budget):
        import asyncio

        raise asyncio.IncompleteReadError(b"", 4)  # an EOFError: readexactly() on a closed stream
"""

#: a plugin whose import takes 5 s (a heavy SDK, a slow network mount)
SLOW_MODULE = """\
import time

from waitfor import Check, Outcome

time.sleep(5)


class Slow(Check):
    async def probe(self, budget):
        return Outcome.up("slow but here")
"""

# A kind whose targets have no host (flagfile:///path), written with nothing but probe().
FLAGFILE = """\
import os

from waitfor.kind import Check, Outcome


class FlagFileCheck(Check):
    async def probe(self, deadline) -> Outcome:
        path = self.target.url.removeprefix("flagfile://")
        if os.path.exists(path):
            return Outcome.up(f"{path} exists")
        return Outcome.down(f"no {path} yet")
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A virtualenv seeing this checkout's waitfor and its dependencies, plus the two plugins."""
    root = tmp_path_factory.mktemp("plugin-venv")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]  # waitfor (editable) and its dependencies
    Path(site, "waitfor_dev.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    shutil.copytree(PLUGIN, root / "zookeeper")
    broken = root / "broken"
    broken.mkdir()
    (broken / "pyproject.toml").write_text(BROKEN_PYPROJECT)
    (broken / "waitfor_broken_raises.py").write_text('raise ImportError("needs libfoo.so.1")\n')
    (broken / "waitfor_flagfile.py").write_text(FLAGFILE)
    (broken / "waitfor_broken.py").write_text(BROKEN_MODULE)
    (broken / "waitfor_broken_exits.py").write_text("import sys\n\nsys.exit(3)\n")
    (broken / "waitfor_broken_slow.py").write_text(SLOW_MODULE)
    offline = ["--no-index", "--no-build-isolation", "--no-deps", "--disable-pip-version-check"]
    for package in (root / "zookeeper", broken):
        installed = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *offline, str(package)],
            capture_output=True,
            text=True,
            cwd=root,
        )
        assert installed.returncode == 0, installed.stdout + installed.stderr
    yield python
    shutil.rmtree(root, ignore_errors=True)


@contextmanager
def zookeeper(port: int) -> Iterator[None]:
    """Answers "ruok" with "imok", as ZooKeeper does."""
    server = socket.create_server(("127.0.0.1", port))
    server.settimeout(0.05)

    def serve(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(2)
            if conn.recv(4) == b"ruok":
                conn.sendall(b"imok")

    with accepting(server, serve):
        yield


def run(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, *args], capture_output=True, text=True, timeout=60, cwd=python.parent
    )


def test_the_cli_waits_on_an_installed_kind(venv: Path) -> None:
    port = free_port()
    target = f"zookeeper://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [venv, "-m", "waitfor", "-o", "text", "-t", "30", target],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    try:
        lines = [proc.stderr.readline(), proc.stderr.readline()]
        assert lines[1].startswith(f"waitfor: {target} not ready: "), lines  # it does wait
        with zookeeper(port):
            rest = proc.stderr.read()
            assert proc.wait(timeout=30) == 0, rest
    finally:
        proc.kill()
        proc.wait()
    assert f"{target} is ready: imok" in rest


def test_the_library_waits_on_an_installed_kind(venv: Path) -> None:
    port = free_port()
    code = (
        "import sys, waitfor\n"
        "[result] = waitfor.wait_for(sys.argv[1], timeout=30)\n"
        "print(result.target.kind, result.ready, result.reason)\n"
    )
    with zookeeper(port):
        result = run(venv, "-c", code, f"zookeeper://127.0.0.1:{port}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["zookeeper", "True", "imok"]


def test_a_kind_without_a_host_needs_only_probe(venv: Path, tmp_path: Path) -> None:
    flag = tmp_path / "migrated"
    target = f"flagfile://{flag}"
    result = run(venv, "-m", "waitfor", "-t", "0.3", target)
    assert result.returncode == 124, result.stderr
    assert f"no {flag} yet" in result.stderr
    flag.touch()
    result = run(venv, "-m", "waitfor", "-o", "text", "-t", "20", target)
    assert result.returncode == 0, result.stderr
    assert f"{target} is ready: {flag} exists" in result.stderr


def test_plugins_use_only_the_published_interface() -> None:
    """examples/plugin and docs/architecture.md's kind imports come from waitfor.kind (and
    waitfor) only."""
    sources = [(PLUGIN / "waitfor_zookeeper.py").read_text(), FLAGFILE]
    for source in sources:
        imports = [line for line in source.splitlines() if "import" in line and "waitfor" in line]
        assert imports, source
        for line in imports:
            assert line.startswith(("from waitfor.kind import", "from waitfor import")), line


def test_a_down_plugin_target_times_out_with_its_reason(venv: Path) -> None:
    port = free_port()
    result = run(venv, "-m", "waitfor", "-t", "0.5", f"zookeeper://127.0.0.1:{port}")
    assert result.returncode == 124
    assert "connection refused" in result.stderr


def test_help_lists_installed_kinds_with_their_usage_rows(venv: Path) -> None:
    result = run(venv, "-m", "waitfor", "--help")
    assert result.returncode == 0, result.stderr
    rows = result.stdout[result.stdout.index("Targets") : result.stdout.index("Examples:")]
    assert "    zookeeper://HOST[:PORT]" in rows
    assert "the server answers ruok with imok" in rows
    assert "    raises:..." in rows  # a broken plugin says so, without breaking --help


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("raises://db", "cannot be loaded: ImportError: needs libfoo.so.1"),
        ("notacheck://db", "is not a subclass of waitfor.Check"),
        ("noprobe://db", "does not implement async def probe"),
        ("missing://db", "cannot be loaded: AttributeError"),
        ("exits://db", "cannot be loaded: SystemExit: 3"),
        ("parsebug://db", "failed to parse it: AttributeError at waitfor_broken.py:15"),
        ("zookeeper://db:2181#mode=ping", "unknown option 'mode' (known: none)"),
        ("zookeeper://db:99999", "invalid port"),
        ("zookeeper:whatever", "missing host: write zookeeper://HOST[:PORT]"),
        ("nope://db", "unknown scheme 'nope'"),
    ],
)
def test_broken_kinds_and_bad_targets_are_one_line_exit_2(
    venv: Path, target: str, problem: str
) -> None:
    result = run(venv, "-m", "waitfor", "-t", "5", target)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("waitfor: error: invalid target")
    assert problem in result.stderr


def test_the_unknown_scheme_error_lists_installed_kinds(venv: Path) -> None:
    result = run(venv, "-m", "waitfor", "nope://db")
    known = result.stderr.partition("(known: ")[2]
    assert "tcp:" in known
    assert "zookeeper:" in known
    assert "raises:" in known


def test_a_broken_plugin_does_not_break_other_kinds(venv: Path) -> None:
    """A plugin cannot take over a built-in scheme, and only its own targets see its errors."""
    tcp, zk = free_port(), free_port()
    with zookeeper(zk), socket.create_server(("127.0.0.1", tcp)):
        result = run(venv, "-m", "waitfor", "-t", "20", f"tcp://127.0.0.1:{tcp}")
        assert result.returncode == 0, result.stderr
        result = run(venv, "-m", "waitfor", "-t", "20", f"zookeeper://127.0.0.1:{zk}")
        assert result.returncode == 0, result.stderr


def test_built_in_targets_never_read_entry_points(venv: Path) -> None:
    code = (
        "import sys\n"
        "from waitfor.core.targets import parse_target\n"
        "parse_target('tcp://db:5432'); parse_target('https://api/'); parse_target('dns:db')\n"
        "print('importlib.metadata' in sys.modules)\n"
    )
    result = run(venv, "-c", code)
    assert result.stdout.strip() == "False", result.stderr


def test_the_docs_show_the_tested_plugin() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    for name in ("pyproject.toml", "waitfor_zookeeper.py"):
        assert (PLUGIN / name).read_text().strip() in page, name


def test_a_plugin_bug_in_probe_fails_its_target_in_one_line(venv: Path) -> None:
    """Permanent: a bug does not go away by retrying; its text (which may quote the URL's
    password) is not shown, only what and where."""
    result = run(venv, "-m", "waitfor", "-t", "30", "probebug://app:s3cret@db")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "s3cret" not in result.stderr
    last = result.stderr.splitlines()[-1]
    assert last == (
        "waitfor: error: probebug://app:***@db: kind 'probebug' (waitfor-broken-kinds 0.1) "
        "failed: KeyError at waitfor_broken.py:23 (a bug in the plugin)"
    ), result.stderr
    code = (
        "import waitfor\n"
        "try:\n"
        "    waitfor.wait_for('probebug://db', timeout=30)\n"
        "except waitfor.CheckFailed as exc:\n"
        "    print(exc.reason)\n"
    )
    result = run(venv, "-c", code)
    assert "failed: KeyError at waitfor_broken.py:23" in result.stdout, result.stderr


def test_a_plugin_that_lets_an_os_error_escape_is_not_ready(venv: Path) -> None:
    result = run(venv, "-m", "waitfor", "-t", "0.5", "refused://db")
    assert result.returncode == 124, result.stderr
    assert "not ready after" in result.stderr
    assert "connection refused" in result.stderr


def test_a_plugin_that_lets_an_eof_error_escape_is_not_ready(venv: Path) -> None:
    """asyncio's IncompleteReadError is an EOFError: a server that closed the connection, as an
    OSError is, not a bug of the plugin's and never the terminal's end of input."""
    result = run(venv, "-m", "waitfor", "-t", "0.5", "streamended://db")
    assert result.returncode == 124, result.stderr
    assert "not ready after" in result.stderr
    assert "the server closed the connection" in result.stderr


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_interrupts_a_slow_plugin_import(
    venv: Path, sig: signal.Signals, code: int
) -> None:
    began = time.monotonic()
    proc = subprocess.Popen(
        [venv, "-m", "waitfor", "-t", "1", "slow://db"], stderr=subprocess.PIPE, text=True
    )
    try:
        time.sleep(1.0)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == code, stderr
    assert stderr == f"waitfor: error: interrupted by {sig.name}\n"
    assert time.monotonic() - began < 4  # not after the 5 s import
