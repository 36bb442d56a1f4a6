"""Third-party kinds: real packages built and installed into a virtualenv, used by entry point.

The example plugin of the README (examples/plugin, a ZooKeeper "ruok" check) is installed with
pip (offline, no build isolation) next to a package whose kinds are broken, and waited on through
the CLI and the library of that virtualenv.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.servers import free_port

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
flagfile = "waitfor_flagfile:FlagFileCheck"

[tool.setuptools]
py-modules = ["waitfor_broken", "waitfor_broken_raises", "waitfor_flagfile"]
"""

# A kind whose targets have no host (flagfile:///path), written with nothing but probe().
FLAGFILE = """\
import os

from waitfor.kind import Check, Outcome


class FlagFileCheck(Check):
    async def probe(self, budget: float) -> Outcome:
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
    (broken / "waitfor_broken.py").write_text(
        "from waitfor import Check\n\n"
        "class NotACheck:\n    pass\n\n"
        "class NoProbe(Check):\n    pass\n"
    )
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
    stop = threading.Event()
    server = socket.create_server(("127.0.0.1", port))

    def serve() -> None:
        with server:
            server.settimeout(0.05)
            while not stop.is_set():
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                with conn:
                    conn.settimeout(2)
                    if conn.recv(4) == b"ruok":
                        conn.sendall(b"imok")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


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
    assert f"{target} is ready (imok)" in rest


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
    assert f"{target} is ready ({flag} exists)" in result.stderr


def test_plugins_use_only_the_published_interface() -> None:
    """examples/plugin and the README's kind imports come from waitfor.kind (and waitfor) only."""
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
        ("zookeeper://db:2181#mode=ping", "unknown option 'mode' (known: none)"),
        ("zookeeper://db:99999", "invalid port"),
        ("zookeeper:whatever", "missing host"),
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
        "from waitfor.targets import parse_target\n"
        "parse_target('tcp://db:5432'); parse_target('https://api/'); parse_target('dns:db')\n"
        "print('importlib.metadata' in sys.modules)\n"
    )
    result = run(venv, "-c", code)
    assert result.stdout.strip() == "False", result.stderr


def test_the_readme_shows_the_tested_plugin() -> None:
    readme = (ROOT / "README.md").read_text()
    for name in ("pyproject.toml", "waitfor_zookeeper.py"):
        assert (PLUGIN / name).read_text().strip() in readme, name
