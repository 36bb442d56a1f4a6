"""images/rootfs.py's derivation of the stdlib modules the image keeps (no podman needed).

The image tests prove the result inside the image; these prove the rule: whatever a dependency
names is kept with everything it imports in turn, wherever the import statement sits.
"""

from __future__ import annotations

import sys
from pathlib import Path

from images import rootfs


def site_with(tmp_path: Path, files: dict[str, str]) -> Path:
    site = tmp_path / "site-packages"
    for name, text in files.items():
        path = site / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return site


def test_a_dependencys_lazy_import_brings_its_whole_closure(tmp_path: Path) -> None:
    site = site_with(tmp_path, {"newkind/probe.py": "def probe():\n    import fractions\n"})
    kept = rootfs.stdlib_closure(site, loaded=set())
    assert "fractions" in kept
    assert {"decimal", "numbers", "operator"} <= kept  # what fractions imports, and so on
    assert "sqlite3" not in kept  # nothing names it


def test_relative_imports_inside_stdlib_packages_are_followed(tmp_path: Path) -> None:
    site = site_with(tmp_path, {"dep/__init__.py": "from asyncio import subprocess\n"})
    kept = rootfs.stdlib_closure(site, loaded=set())
    # asyncio/__init__.py: "from .base_events import *"; base_events: "from . import sslproto"
    assert {"asyncio", "asyncio.subprocess", "asyncio.base_events", "asyncio.sslproto"} <= kept


def test_development_tools_are_never_kept(tmp_path: Path) -> None:
    """Only test and debugging helpers name them (click.testing imports pdb)."""
    site = site_with(tmp_path, {"d.py": "import inspect\n", "d_testing.py": "import pdb\n"})
    kept = rootfs.stdlib_closure(site, set())
    assert "inspect" in kept
    assert not {"pydoc", "pdb", "bdb", "unittest"} & kept


def test_a_pure_python_twin_of_a_c_module_is_not_kept(tmp_path: Path) -> None:
    """decimal imports _pydecimal only where _decimal is missing; this interpreter has it."""
    kept = rootfs.stdlib_closure(site_with(tmp_path, {"d.py": "import decimal, io, abc\n"}), set())
    assert {"decimal", "io", "abc"} <= kept
    assert "_decimal" in kept or "_decimal" in sys.builtin_module_names
    assert not {"_pydecimal", "_pyio", "_py_abc"} & kept
    loaded = rootfs.stdlib_closure(site_with(tmp_path, {}), loaded={"_pydecimal"})
    assert "_pydecimal" in loaded  # something did import it: kept


def test_modules_loaded_at_run_time_are_kept(tmp_path: Path) -> None:
    kept = rootfs.stdlib_closure(site_with(tmp_path, {}), loaded={"json.decoder", "_json"})
    assert {"json", "json.decoder", "site", "os", "encodings"} <= kept
    assert "_json" in kept or "_json" in sys.builtin_module_names


def test_imports_of_resolves_from_imports_both_ways(tmp_path: Path) -> None:
    source = tmp_path / "pkg" / "mod.py"
    source.parent.mkdir()
    source.write_text("from . import sibling\nfrom email import utils as u\nimport os.path\n")
    found = rootfs.imports_of(source, "pkg")
    assert {"pkg", "pkg.sibling", "email", "email.utils", "os.path"} <= found
