"""images/rootfs.py's derivation of the stdlib modules the image keeps (no podman needed).

The image tests prove the result inside the image; these prove the rule: whatever a dependency
names is kept with everything it imports in turn, wherever the import statement sits.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

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


def test_imports_this_interpreter_never_runs_are_not_followed(tmp_path: Path) -> None:
    """Type-checking imports, other platforms' branches and a module's command line."""
    source = tmp_path / "mod.py"
    source.write_text(
        "import sys, os\n"
        "from typing import TYPE_CHECKING\n"
        "WIN = sys.platform.startswith('win')\n"
        "if TYPE_CHECKING:\n    import tomllib\n"
        "if sys.platform == 'win32':\n    import winreg\nelse:\n    import fcntl\n"
        "if os.name == 'nt' or WIN:\n    import nturl2path\n"
        "if not WIN:\n    import termios\n"
        "def main():\n    import argparse\n"
        "def used():\n    import json\n"
        "used()\n"
        "if __name__ == '__main__':\n    import getopt\n    main()\n    used()\n"
    )
    found = rootfs.scan(source, "")
    assert {"sys", "os", "typing", "fcntl", "termios", "json"} <= found.names
    assert not {"tomllib", "winreg", "nturl2path", "getopt", "argparse"} & found.names
    assert found.programs == {"main": {"argparse"}}  # followed where code names mod.main


def test_a_fallback_for_a_module_this_interpreter_has_is_not_followed(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text(
        "try:\n    from _json import scanstring\nexcept ImportError:\n    import _pydecimal\n"
        "try:\n    import nosuchmodule_x\nexcept ImportError:\n    import fractions\n"
        "try:\n    import _json\nexcept Exception:\n    import numbers\n"
    )
    found = rootfs.imports_of(source, "")
    assert {"_json", "fractions", "numbers"} <= found  # the second's fallback is needed here
    assert "_pydecimal" not in found


def test_a_lazy_attribute_is_followed_only_where_code_names_it(tmp_path: Path) -> None:
    """concurrent.futures imports multiprocessing only for ProcessPoolExecutor (PEP 562)."""
    threads = site_with(
        tmp_path / "a", {"d.py": "from concurrent.futures import ThreadPoolExecutor\n"}
    )
    kept = rootfs.stdlib_closure(threads, set())
    assert "concurrent.futures.thread" in kept
    assert not {"concurrent.futures.process", "multiprocessing"} & kept
    processes = site_with(
        tmp_path / "b", {"d.py": "import concurrent.futures as f\nf.ProcessPoolExecutor\n"}
    )
    assert {"concurrent.futures.process", "multiprocessing"} <= rootfs.stdlib_closure(
        processes, set()
    )


def test_a_command_line_function_is_followed_where_code_calls_it(tmp_path: Path) -> None:
    """tarfile's main() imports argparse; only code naming tarfile.main brings it."""
    plain = rootfs.stdlib_closure(site_with(tmp_path / "a", {"d.py": "import tarfile\n"}), set())
    assert "tarfile" in plain
    assert "argparse" not in plain
    named = site_with(tmp_path / "b", {"d.py": "import tarfile\ntarfile.main()\n"})
    assert "argparse" in rootfs.stdlib_closure(named, set())


def test_frozen_modules_are_not_kept_but_the_landmark_is() -> None:
    assert {"codecs", "io", "site", "importlib._bootstrap"} <= rootfs.FROZEN
    assert "os" not in rootfs.FROZEN  # getpath finds the stdlib by lib/python3.X/os.py(c)


def test_a_dependencys_command_line_is_not_kept_unless_imported(tmp_path: Path) -> None:
    site = site_with(
        tmp_path,
        {
            "tool/__init__.py": "",
            "tool/cli.py": "import argparse\n",
            "tool/__main__.py": "from tool.cli import main\n",
            "lib/__init__.py": "def main(): pass\n",
            "app/__init__.py": "import lib\n",
            "tool-1.dist-info/entry_points.txt": "[console_scripts]\ntool = tool.cli:main\n",
            "lib-1.dist-info/entry_points.txt": "[console_scripts]\nlib = lib:main\n",
        },
    )
    assert rootfs.command_lines(site, own=set()) == {"tool.cli", "tool.__main__"}


def test_section_names_tell_a_symbol_table() -> None:
    """google-re2's wheel ships its extension with a symbol table: strip_symbols' case."""
    import re2

    extension = Path(re2._re2.__file__)
    assert {".dynsym", ".symtab"} <= rootfs.section_names(extension)
    libc = Path(
        os.path.realpath(
            next(
                p
                for p in rootfs.linked(extension, Path("/nonexistent"))
                if p.name.startswith("libc.so")
            )
        )
    )
    assert ".dynsym" in rootfs.section_names(libc)


def test_docstrings_stay_where_code_reads_them(tmp_path: Path) -> None:
    """click takes a command's help from its function's docstring, and so keeps them, as does
    its importer; dnspython's exceptions take their message from their class's docstring."""
    site = site_with(
        tmp_path,
        {
            "clicky/__init__.py": "def command(f):\n    return f.__doc__\n",
            "app/__init__.py": "import clicky\n",
            "user/__init__.py": "import app\n",  # hands app (and so clicky) its functions
            "dnsy/__init__.py": "class E(Exception):\n    def __str__(self):\n"
            "        return self.__doc__\n",
            "copier/__init__.py": "def wraps(f, g):\n    g.__doc__ = f.__doc__\n"
            "__slots__ = ('__doc__',)\nT = type('T', (), {'__doc__': 'made'})\n",
            "named/__init__.py": "def doc(f):\n    return getattr(f, '__doc__')\n",
            "plain.py": "import copier\n",
        },
    )
    kept = rootfs.docstrings_kept(site)
    assert kept["clicky"] == kept["app"] == kept["user"] == kept["named"] == rootfs.ALL_DOCSTRINGS
    assert kept["dnsy"] == rootfs.CLASS_DOCSTRINGS
    assert kept["copier"] == kept["plain"] == rootfs.NO_DOCSTRINGS


def test_without_docstrings_keeps_asserts_and_decorated_classes() -> None:
    source = (
        '"""module"""\nfrom __future__ import annotations\n'
        'def f():\n    """f"""\n'
        'def g():\n    """g"""\n    "not a docstring"\n    assert False, "kept"\n'
        'class C:\n    """C"""\n'
        'def mark(c):\n    return c\n@mark\nclass D:\n    """D"""\n'
    )

    def run(kept: int) -> dict[str, object]:
        import ast

        tree = ast.parse(source)
        rootfs.without_docstrings(tree, kept)
        namespace: dict[str, object] = {"__name__": "m"}
        exec(compile(tree, "m.py", "exec", dont_inherit=True), namespace)  # noqa: S102
        return namespace

    bare = run(rootfs.NO_DOCSTRINGS)
    assert bare.get("__doc__") is None
    assert [bare[name].__doc__ for name in "fgC"] == [None, None, None]
    assert bare["D"].__doc__ == "D"  # a decorator may make one up (dataclass)
    with pytest.raises(AssertionError, match="kept"):
        bare["g"]()  # type: ignore[operator]
    classes = run(rootfs.CLASS_DOCSTRINGS)
    assert classes["C"].__doc__ == "C"
    assert classes["f"].__doc__ is None
    assert run(rootfs.ALL_DOCSTRINGS)["f"].__doc__ == "f"


def test_computed_imports_bring_what_their_names_can_be(tmp_path: Path) -> None:
    site = site_with(
        tmp_path,
        {
            "app/__init__.py": "import dnsy.rdata\nimport lazy\n",
            "dnsy/__init__.py": "",
            "dnsy/rdata.py": "from importlib import import_module\nPREFIX = 'dnsy.rdtypes'\n"
            "def get(a, b):\n    return import_module('.'.join([PREFIX, a, b]))\n",
            "dnsy/rdtypes/__init__.py": "",
            "dnsy/rdtypes/IN/__init__.py": "",
            "dnsy/rdtypes/IN/A.py": "import dnsy.base\n",
            "dnsy/base.py": "",
            "dnsy/zone.py": "",
            "lazy/__init__.py": "import importlib\n"
            "def __getattr__(name):\n    return importlib.import_module('.' + name, __name__)\n",
            "lazy/part.py": "",
            "other/__init__.py": "",
        },
    )
    assert rootfs.computed_imports(site / "dnsy" / "rdata.py") == ["dnsy.rdtypes."]
    unreached = rootfs.unreachable(site, {"app"})
    assert unreached == {"dnsy.zone", "other"}  # rdtypes by prefix, lazy whole (no prefix)
