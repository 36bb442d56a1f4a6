"""Assemble the image's root filesystem in the Dockerfile's build stage.

    python3 images/rootfs.py VENV ROOT

Run by the distribution's python3, the one VENV was made from. ROOT receives:
- the venv (waitfor and its dependencies): every module an import can reach from waitfor's own
  (see :func:`reached_from`), compiled to sourceless ``.pyc`` without the docstrings no code
  reads (see :func:`docstrings_kept`);
- the interpreter and the standard-library modules that code can import: everything any module
  kept venv module imports, followed through the stdlib's own imports (read from the source,
  function-level imports included) plus what importing every kept venv module loads. The kept
  set is derived, never listed: a kind's new dependency brings its stdlib needs with it;
- every shared library the interpreter and the kept extension modules link (ldd), and libgcc_s,
  which glibc loads itself when a thread exits through pthread_exit;
- the CA bundle where this OpenSSL looks for it, nsswitch.conf, and passwd/group for 65532.

Paths come from the running interpreter and ldd, never written out: no architecture is named.
"""

from __future__ import annotations

import _imp
import ast
import contextlib
import functools
import importlib.util
import json
import marshal
import os
import py_compile
import re
import shutil
import ssl
import struct
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Set
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

# C accelerators of dependencies that waitfor never calls, whose package works without them:
# PyYAML's libyaml binding (2.7 MB) serves yaml.CSafeLoader; kubeconfigs are read with
# yaml.safe_load, the pure-Python loader.
UNUSED_ACCELERATORS = ("yaml/_yaml.*.so",)
STDLIB = Path(sysconfig.get_path("stdlib"))
DYNLOAD = Path(sysconfig.get_config_var("DESTSHARED") or STDLIB / "lib-dynload")
# Looked up by name at run time (codecs by their encoding's name, e.g. "idna" for host names),
# so no import statement names their modules: kept whole.
BY_NAME = ("encodings",)
# Tools for developing and debugging Python programs, which no program imports to do its work:
# never kept, wherever an import names them (inspect names pydoc for help(); a dependency's test
# helpers name them too: click.testing imports pdb). Everything else an import can reach is kept.
DEVELOPMENT = frozenset(
    {
        *("bdb", "cmd", "code", "codeop", "distutils", "doctest", "ensurepip", "idlelib"),
        *("lib2to3", "pdb", "profile", "cProfile", "pstats", "pydoc", "pydoc_data", "readline"),
        *("rlcompleter", "tabnanny", "test", "timeit", "tkinter", "trace", "turtle", "turtledemo"),
        *("unittest", "venv", "_testbuffer", "_testcapi", "_testclinic", "_testimportmultiple"),
        *("_testinternalcapi", "_testmultiphase", "_xxtestfuzz"),
    }
)
USER = "nonroot"
UID = 65532

# Run by the venv's python: import every module of every package in the venv, then tell which
# modules ended up loaded, and which are no use here: those whose import names a distribution
# that is not installed (anyio's trio backend), and those that load a development tool (a
# package's own tests: certifi.tests imports unittest). What the latter load is not counted.
IMPORT_EVERYTHING = """
import importlib, importlib.util, json, os, pkgutil, sys, sysconfig
site = sysconfig.get_path("purelib")
skipped, development = set(json.loads(sys.argv[1])), set(json.loads(sys.argv[2]))
unused, loaded = [], set(sys.modules)
def walk(path, prefix=""):  # pkgutil.walk_packages without importing a skipped package
    for info in pkgutil.iter_modules(path, prefix):
        if info.name.endswith("__main__") or info.name in skipped:
            continue  # it would run a program, is one, or nothing imports it
        yield info.name
        if info.ispkg:
            folder = os.path.join(info.module_finder.path, info.name.rpartition(".")[2])
            yield from walk([folder], info.name + ".")
for name in list(walk([site])):
    before = set(sys.modules)
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as error:
        missing = (error.name or "").partition(".")[0]
        if missing and importlib.util.find_spec(missing) is None:
            unused.append(name)
    except BaseException:
        pass
    new = set(sys.modules) - before
    if any(module.partition(".")[0] in development for module in new):
        unused.append(name)
    else:
        loaded |= new
print(json.dumps({"loaded": sorted(loaded), "unused": unused}))
"""


def _frozen_modules() -> frozenset[str]:
    """Modules the interpreter carries frozen and imports from itself, never from their file
    (``_frozen_importlib`` is importlib._bootstrap). Empty where the interpreter cannot say."""
    names: tuple[str, ...] = getattr(_imp, "_frozen_module_names", tuple)()
    found = {name for name in names if not name.startswith("__")}
    found |= {spec[2] for name in found if (spec := _imp.find_frozen(name)) and spec[2]}
    return frozenset(found)


# getpath finds the stdlib by its landmark, lib/python3.X/os.py or os.pyc: kept though frozen.
FROZEN = _frozen_modules() - {"os"}


def main(venv: Path, root: Path) -> None:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    programs = command_lines(site, own_scripts())
    unreached = unreachable(site, own_packages(site), programs)
    loaded, useless = loaded_modules(python, programs | unreached)
    while stray := unreached & loaded:  # an extension module's import, which no scan sees
        print(
            f"rootfs: loaded by an import no scan sees: {', '.join(sorted(stray))}", file=sys.stderr
        )
        unreached -= reached_from(site, stray)
        loaded, useless = loaded_modules(python, programs | unreached)
    unused = useless | programs | unreached
    install_venv(venv, site, root, unused)
    modules = stdlib_closure(site, loaded, unused)
    files = [path for name in sorted(modules - FROZEN) for path in module_files(name)]
    for package in BY_NAME:
        files += sorted((STDLIB / package).rglob("*.py"))
    for path in files:
        copy_module(path, root)
    (root / DYNLOAD.relative_to("/")).mkdir(parents=True, exist_ok=True)  # getpath's landmark
    for entry in (venv / "bin").iterdir():  # python3 -> /usr/bin/python3 -> python3.11
        if entry.is_symlink() and not Path(os.path.realpath(entry)).is_relative_to(venv):
            install(Path(os.path.normpath(entry.parent / os.readlink(entry))), root)
    install_libraries(root)
    strip_symbols(root)
    install_certificates(root)
    share_certifi(python, root)
    install_users(root)
    kept = sum(1 for path in files if path.suffix == ".py")
    print(f"rootfs: {kept} stdlib modules, {du(root) / 1e6:.1f} MB", file=sys.stderr)


def install_venv(venv: Path, site: Path, root: Path, unused: set[str]) -> None:
    """The venv without pip's leftovers, other commands than the project's, and ``unused``
    modules, its sources compiled to sourceless .pyc."""
    target = root / venv.relative_to("/")
    shutil.copytree(venv, target, symlinks=True)
    scripts = own_scripts()
    for entry in (target / "bin").iterdir():
        # activate scripts and other packages' commands are not part of the image
        if not entry.is_symlink() and entry.name not in scripts:
            entry.unlink()
    packages = target / site.relative_to(venv)
    for cache in list(packages.rglob("__pycache__")):
        shutil.rmtree(cache)
    for name in unused:
        for source in module_sources(name, packages):
            if source.name == "__init__.py":
                shutil.rmtree(source.parent)
            else:
                source.unlink()
    compile_venv(packages, site)
    # RECORD lists files for pip, which is not in the image; METADATA and entry points stay
    for pattern in ("*.py", "*.pyi", "*.dist-info/RECORD"):
        for source in packages.rglob(pattern):
            source.unlink()
    for pattern in UNUSED_ACCELERATORS:
        for accelerator in packages.glob(pattern):
            accelerator.unlink()
    # METADATA keeps its headers (the version --version reads) but not the long description: the
    # README, which a package manager shows and nothing in the image reads (about 90 kB)
    for metadata in packages.glob("*.dist-info/METADATA"):
        headers, _, _ = metadata.read_text(encoding="utf-8").partition("\n\n")
        metadata.write_text(headers + "\n", encoding="utf-8")


def compile_venv(packages: Path, site: Path) -> None:
    """Every source in ``packages`` compiled to sourceless bytecode beside it (the legacy layout),
    named as it is in the image (``site``) for tracebacks, without the docstrings nothing reads
    (see :func:`docstrings_kept`). Asserts stay: only docstrings go, unlike ``-OO``."""
    kept = docstrings_kept(packages)
    for source in sorted(packages.rglob("*.py")):
        relative = source.relative_to(packages)
        try:
            tree = ast.parse(source.read_bytes(), str(site / relative))
        except (SyntaxError, ValueError) as error:  # another Python's file: as compileall does
            print(f"rootfs: not compiled: {relative}: {error}", file=sys.stderr)
            continue
        without_docstrings(tree, kept.get(relative.parts[0].removesuffix(".py"), NO_DOCSTRINGS))
        code = compile(tree, str(site / relative), "exec", dont_inherit=True)
        info = source.stat()
        header = struct.pack("<III", 0, int(info.st_mtime) & 0xFFFFFFFF, info.st_size & 0xFFFFFFFF)
        source.with_suffix(".pyc").write_bytes(
            importlib.util.MAGIC_NUMBER + header + marshal.dumps(code)
        )


# What a package's docstrings keep, by what its code (or a package it imports) reads of them.
NO_DOCSTRINGS, CLASS_DOCSTRINGS, ALL_DOCSTRINGS = 0, 1, 2


def docstrings_kept(packages: Path) -> dict[str, int]:
    """Top-level package -> which docstrings stay (``ALL_DOCSTRINGS``, ``CLASS_DOCSTRINGS``, or
    ``NO_DOCSTRINGS``: a decorated class's only, as a decorator may make one up where it is
    missing: dataclasses calls inspect.signature for it, at import time).

    A package keeps what its code reads: a class's (``self.__doc__``: dnspython's exceptions take
    their message from their class's docstring), or any object's (``f.__doc__``: click takes a
    command's help from its function's; ``getdoc``, or ``"__doc__"`` named as a string). A copy
    (``wrapper.__doc__ = f.__doc__``) reads nothing. A package that imports a reader keeps what
    it reads too: it may hand the reader its own objects (waitfor's commands to click).
    """
    tops: dict[str, list[Path]] = {}
    for source in packages.rglob("*.py"):
        top = source.relative_to(packages).parts[0].removesuffix(".py")
        tops.setdefault(top, []).append(source)
    level: dict[str, int] = {}
    uses: dict[str, set[str]] = {}
    for top, sources in tops.items():
        level[top], uses[top] = NO_DOCSTRINGS, set()
        for source in sources:
            reads = _DocstringReads()
            with contextlib.suppress(SyntaxError, ValueError):
                reads.visit(ast.parse(source.read_bytes()))
            level[top] = max(level[top], reads.level)
            names = imports_of(source, package_of(source, packages), packages)
            uses[top] |= {name.partition(".")[0] for name in names} & tops.keys() - {top}
    changed = True
    while changed:  # an importer of an importer of click hands click its objects too
        changed = False
        for top, used in uses.items():
            most = max([level[top], *(level[name] for name in used)])
            if most != level[top]:
                level[top], changed = most, True
    return level


class _DocstringReads(ast.NodeVisitor):
    """How a file reads docstrings: ``level`` is ``CLASS_DOCSTRINGS`` where it reads only its
    classes' (``self.__doc__``, ``cls.__doc__``, ``type(x).__doc__``, ``x.__class__.__doc__``),
    ``ALL_DOCSTRINGS`` where it reads any other."""

    def __init__(self) -> None:
        self.level = NO_DOCSTRINGS

    def visit_Assign(self, node: ast.Assign) -> None:
        if any(
            isinstance(target, ast.Name) and target.id == "__slots__" for target in node.targets
        ):
            return  # __slots__ = ("__doc__", ...): an attribute declared, not read
        if _is_docstring(node.value) and any(_is_docstring(target) for target in node.targets):
            if isinstance(node.value, ast.Attribute):  # x.__doc__ = y.__doc__: a copy
                self.visit(node.value.value)
            for target in node.targets:
                self.visit(target)
            return
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if _is_docstring(node.target):  # __doc__ += "...": reads it
            self.level = ALL_DOCSTRINGS
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "__doc__" and isinstance(node.ctx, ast.Load):
            of = node.value
            own_class = (
                (isinstance(of, ast.Name) and of.id in ("self", "cls"))
                or (isinstance(of, ast.Attribute) and of.attr == "__class__")
                or (
                    isinstance(of, ast.Call)
                    and isinstance(of.func, ast.Name)
                    and of.func.id == "type"
                )
            )
            self.level = max(self.level, CLASS_DOCSTRINGS if own_class else ALL_DOCSTRINGS)
        elif node.attr == "getdoc":
            self.level = ALL_DOCSTRINGS
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if (node.id == "__doc__" and isinstance(node.ctx, ast.Load)) or node.id == "getdoc":
            self.level = ALL_DOCSTRINGS

    def visit_Dict(self, node: ast.Dict) -> None:
        for key, value in zip(node.keys, node.values, strict=True):
            # {"__doc__": ...}: type()'s namespace, a docstring made, not read
            if key is not None and not (isinstance(key, ast.Constant) and key.value == "__doc__"):
                self.visit(key)
            self.visit(value)

    def visit_Constant(self, node: ast.Constant) -> None:
        if node.value == "__doc__":  # getattr(f, "__doc__")
            self.level = ALL_DOCSTRINGS


def _is_docstring(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "__doc__") or (
        isinstance(node, ast.Name) and node.id == "__doc__"
    )


def without_docstrings(tree: ast.Module, kept: int) -> None:
    """Remove the docstrings ``kept`` (see :func:`docstrings_kept`) does not keep."""
    if kept == ALL_DOCSTRINGS:
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            if kept == CLASS_DOCSTRINGS or node.decorator_list:
                continue
        elif not isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        if body and _is_string(body[0]):
            node.body = body[1:]
            if not node.body or _is_string(node.body[0]):  # no new docstring, no empty body
                node.body.insert(0, ast.copy_location(ast.Pass(), body[0]))


def _is_string(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def console_scripts(site: Path) -> dict[str, str]:
    """Every distribution's commands: name -> module (``waitfor = waitfor.__main__:run``)."""
    scripts = {}
    for entry_points in site.glob("*.dist-info/entry_points.txt"):
        section = ""
        for line in entry_points.read_text().splitlines():
            line = line.strip()
            if line.startswith("["):
                section = line
            elif section == "[console_scripts]" and "=" in line:
                name, _, target = line.partition("=")
                scripts[name.strip()] = target.partition(":")[0].strip()
    return scripts


def own_scripts() -> set[str]:
    """The commands of the project this file belongs to (its pyproject's [project.scripts])."""
    with (Path(__file__).resolve().parents[1] / "pyproject.toml").open("rb") as file:
        return set(tomllib.load(file).get("project", {}).get("scripts", {}))


def command_lines(site: Path, own: set[str]) -> set[str]:
    """Dependencies' own command lines (idna's, httpx's, ``python -m certifi``): modules no
    import reaches, run only as programs, which the image never starts."""
    scripts = console_scripts(site)
    keep = {scripts[name] for name in own if name in scripts}
    found = {module for name, module in scripts.items() if name not in own}
    for main in site.rglob("__main__.py"):
        found.add(".".join(main.relative_to(site).with_suffix("").parts))
    found -= keep
    sources = {source for module in found for source in module_sources(module, site)}
    imported: set[str] = set()  # a command's module that other code imports is a library too
    for source in site.rglob("*.py"):
        if source not in sources:
            imported |= imports_of(source, package_of(source, site), site)
    return found - imported


def own_packages(site: Path) -> set[str]:
    """The top-level packages of the project's commands (waitfor's: ``waitfor``)."""
    scripts = console_scripts(site)
    return {scripts[name].partition(".")[0] for name in own_scripts() if name in scripts}


def venv_modules(site: Path) -> dict[str, Path]:
    """Every module of the venv: name -> its source (a package's __init__.py)."""
    found = {}
    for source in site.rglob("*.py"):
        parts = source.relative_to(site).with_suffix("").parts
        if parts and parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and all(part.isidentifier() for part in parts):
            found[".".join(parts)] = source
    return found


def unreachable(site: Path, roots: Set[str], dead: Set[str] = frozenset()) -> set[str]:
    """The venv's modules that no import can reach from the project's own packages (``roots``,
    kept whole): dnspython's zone files and DNSSEC, psycopg's CockroachDB support, anyio's
    pytest plugin. Every import counts, wherever it sits (see :func:`reached_from`); ``dead``
    modules (dependencies' command lines) reach nothing."""
    modules = venv_modules(site)
    start = {name for name in modules if name.partition(".")[0] in roots}
    return set(modules) - reached_from(site, start, dead)


def reached_from(site: Path, start: Set[str], dead: Set[str] = frozenset()) -> set[str]:
    """The venv's modules that importing ``start`` may import: every import statement (functions,
    fallbacks, lazy attributes and command lines included), and where a module imports by a
    computed name (``import_module(...)``), every module under the name's constant beginning
    (dnspython's rdata classes: ``dns.rdtypes.``), or, without one, its whole top-level package
    (anyio's lazy attributes, waitfor's kinds)."""
    modules = venv_modules(site)
    reached: set[str] = set()
    queue = sorted(start)
    while queue:
        name = queue.pop()
        for candidate in with_parents(name):
            if candidate in reached or candidate not in modules or candidate in dead:
                continue
            reached.add(candidate)
            source = modules[candidate]
            found = scan(source, package_of(source, site), site)
            queue += found.names
            for names in [*found.lazy.values(), *found.programs.values()]:
                queue += names
            for prefix in computed_imports(source):
                prefix = prefix or candidate.partition(".")[0] + "."
                queue += [module for module in modules if f"{module}.".startswith(prefix)]
    return reached


def computed_imports(source: Path) -> list[str]:
    """The constant beginnings of the names a file imports by computing them, "" where a name
    has none: ``import_module(f"anyio._backends._{name}")`` -> "anyio._backends._";
    ``import_module(".".join([_module_prefix, ...]))`` with ``_module_prefix = "dns.rdtypes"``
    -> "dns.rdtypes."."""
    try:
        tree = ast.parse(source.read_bytes())
    except (SyntaxError, ValueError):
        return []
    constants = {
        statement.targets[0].id: statement.value.value
        for statement in tree.body
        if isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    }

    def text(node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return constants.get(node.id)
        return None

    def prefix(node: ast.expr) -> str:
        if isinstance(node, ast.JoinedStr) and node.values:
            return text(node.values[0]) or ""
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return text(node.left) or prefix(node.left)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "join"
            and text(node.func.value) is not None
            and len(node.args) == 1
            and isinstance(node.args[0], (ast.List, ast.Tuple))
            and node.args[0].elts
        ):
            first = text(node.args[0].elts[0])
            return first + text(node.func.value) if first else ""  # type: ignore[operator]
        return ""

    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        function = node.func
        called = function.id if isinstance(function, ast.Name) else getattr(function, "attr", "")
        if called not in ("import_module", "__import__"):
            continue
        name = node.args[0]
        if isinstance(name, ast.Constant):
            continue  # a constant name: a plain import, which scan() reads
        relative = len(node.args) > 1 or any(k.arg == "package" for k in node.keywords)
        found.append("" if relative else prefix(name))
    return found


def loaded_modules(python: Path, skipped: Set[str] = frozenset()) -> tuple[set[str], set[str]]:
    """What importing every venv module but ``skipped`` loads, and which of them are no use."""
    result = subprocess.run(
        [
            python,
            "-c",
            IMPORT_EVERYTHING,
            json.dumps(sorted(skipped)),
            json.dumps(sorted(DEVELOPMENT)),
        ],
        check=True,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    found = json.loads(result.stdout.splitlines()[-1])
    return set(found["loaded"]), set(found["unused"])


def stdlib_closure(site: Path, loaded: set[str], unused: Set[str] = frozenset()) -> set[str]:
    """Stdlib modules imported by the venv's code, by the interpreter's start, and by each other.

    A lazy attribute's imports (see :class:`_Imports`) are followed once any scanned file names
    the attribute, or star-imports its module.
    """
    wanted: set[str] = set(loaded) | {"site", "sitecustomize", "os", "encodings"}
    named: set[str] = set()  # identifiers the scanned files read
    qualified: set[str] = set()  # module.attribute as read, and module.name as imported
    starred: set[str] = set()
    lazy: dict[str, dict[str, set[str]]] = {}  # module: attribute: imports
    programs: dict[str, dict[str, set[str]]] = {}  # module: command-line function: imports
    dead = {source for name in unused for source in module_sources(name, site)}
    for source in site.rglob("*.py"):
        if not dead & {source, *(folder / "__init__.py" for folder in source.parents)}:
            found = scan(source, package_of(source, site), site)
            wanted |= found.names
            named |= found.identifiers
            qualified |= found.qualified | found.names
            starred |= found.star
    kept: set[str] = set()
    queue = sorted(wanted)
    while queue:
        while queue:
            name = queue.pop()
            top = name.partition(".")[0]
            if top in DEVELOPMENT or (top not in loaded and has_c_twin(top)):
                continue
            for candidate in with_parents(name):
                if candidate in kept or not module_files(candidate):
                    continue
                kept.add(candidate)
                for path in module_files(candidate):
                    if path.suffix == ".py":
                        found = stdlib_scan(path)
                        queue += found.names
                        named |= found.identifiers
                        qualified |= found.qualified | found.names
                        starred |= found.star
                        if found.lazy:  # copies: the loops below pop what they follow
                            lazy[candidate] = dict(found.lazy)
                        if found.programs:
                            programs[candidate] = dict(found.programs)
        for module, attributes in lazy.items():
            for attribute in list(attributes):
                if attribute in named or module in starred:
                    queue += attributes.pop(attribute)
        for module, functions in programs.items():
            for function in list(functions):
                names = {f"{module}.{function}", f"{module.rpartition('.')[2]}.{function}"}
                if names & qualified:
                    queue += functions.pop(function)
    return kept


def has_c_twin(name: str) -> bool:
    """``_pydecimal``, ``_pyio``, ``_py_abc``: the pure-Python twin of a C module this interpreter
    has, imported only where that one is missing (``decimal``: ``except ImportError: from
    _pydecimal import *``), so never here."""
    if not name.startswith("_py"):
        return False
    rest = name.removeprefix("_py")
    twin = rest if rest.startswith("_") else f"_{rest}"
    return twin in sys.builtin_module_names or bool(module_files(twin))


def with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def package_of(path: Path, base: Path) -> str:
    # a/__init__.py and a/b.py both resolve relative imports against package a
    return ".".join(path.relative_to(base).parts[:-1])


def imports_of(path: Path, package: str, site: Path | None = None) -> set[str]:
    """Every module an import statement in the file may load here (``from a import b``: a.b).

    Wherever the statement sits (functions too), except where it can never run on this
    interpreter (see :class:`_Imports`). ``site``: the venv's packages, where imports resolve too.
    """
    return scan(path, package, site).names


@functools.cache
def stdlib_scan(path: Path) -> _Imports:
    """:func:`scan` of a stdlib file, read once a process: the stdlib does not change while the
    build runs, and its tests close over it many times."""
    return scan(path, package_of(path, STDLIB))


def scan(path: Path, package: str, site: Path | None = None) -> _Imports:
    finder = _Imports(package, site)
    with contextlib.suppress(SyntaxError, ValueError):  # e.g. another Python's test data
        finder.visit(ast.parse(path.read_bytes(), str(path)))
    return finder


class _Imports(ast.NodeVisitor):
    """Collects import statements, skipping the ones this interpreter never runs:

    - under ``if`` tests known here: ``TYPE_CHECKING``, ``__name__ == "__main__"`` (a module's
      command line, not its import), ``sys.platform``/``os.name`` comparisons (``win32``,
      ``darwin``, ``aix`` branches), and module-level names bound to such a test
      (``WIN = sys.platform.startswith("win")``);
    - in the ``except ImportError`` of a ``try`` whose own imports all exist here: the fallback
      for a module this interpreter has (``decimal``: ``try: from _decimal import *``,
      ``except ImportError: from _pydecimal import *``).

    A module's command line: its ``if __name__ == "__main__":`` block, and the functions that
    only that block calls (``def main(): import argparse``), whose imports go to ``programs``,
    to be followed only where some code names the function with its module (``tarfile.main``).

    A module's ``__getattr__`` (PEP 562) imports for the attribute it is asked for: those imports
    go to ``lazy`` under the attribute's name, to be followed only where some code names it
    (``concurrent.futures.ProcessPoolExecutor`` brings multiprocessing). ``identifiers``: the
    names this file reads, as variables, attributes or imported names.
    """

    def __init__(self, package: str, site: Path | None) -> None:
        self.package, self.site = package, site
        self.names: set[str] = set()
        self.bases: set[str] = set()  # what must exist for the imports to succeed
        self.known: dict[str, bool] = {"TYPE_CHECKING": False}
        self.lazy: dict[str, set[str]] = {}
        self.identifiers: set[str] = set()
        self.star: set[str] = set()  # from m import *: every attribute of m, lazy ones too
        self.in_function = 0
        self.program: set[str] = set()
        self.programs: dict[str, set[str]] = {}  # the command line's functions: their imports
        self.qualified: set[str] = set()  # module.attribute, as read (tarfile.main)

    def visit_Module(self, node: ast.Module) -> None:
        self.program = _program_functions(node)
        for statement in node.body:  # WIN = sys.platform.startswith("win")
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target = statement.targets[0]
                value = self.test(statement.value)
                if isinstance(target, ast.Name) and value is not None:
                    self.known[target.id] = value
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name in self.program and not self.in_function:
            body = _Imports(self.package, self.site)
            body.in_function = 1
            body.generic_visit(node)
            self.programs[node.name] = body.names
            return
        if node.name != "__getattr__" or self.in_function or len(node.args.args) != 1:
            self.in_function += 1
            self.generic_visit(node)
            self.in_function -= 1
            return
        parameter = node.args.args[0].arg
        for statement in node.body:
            asked = _compared_names(statement, parameter)
            if asked is None or not isinstance(statement, ast.If):
                self.visit(statement)
                continue
            branch = _Imports(self.package, self.site)
            branch.in_function = 1
            for inner in statement.body:
                branch.visit(inner)
            for name in asked:  # (the branch's own names do not ask for the attribute)
                self.lazy.setdefault(name, set()).update(branch.names)
            for inner in statement.orelse:
                self.visit(inner)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Store):
            self.identifiers.add(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not isinstance(node.ctx, ast.Store):
            self.identifiers.add(node.attr)
            if isinstance(node.value, ast.Name):
                self.qualified.add(f"{node.value.id}.{node.attr}")
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        value = self.test(node.test)
        if value is not False:
            for statement in node.body:
                self.visit(statement)
        if value is not True:
            for statement in node.orelse:
                self.visit(statement)

    def visit_Try(self, node: ast.Try | ast.TryStar) -> None:
        tried = _Imports(self.package, self.site)
        tried.in_function = self.in_function
        for statement in node.body:
            tried.visit(statement)
        self.names |= tried.names
        self.identifiers |= tried.identifiers
        self.star |= tried.star
        for attribute, names in tried.lazy.items():
            self.lazy.setdefault(attribute, set()).update(names)
        fallback = bool(tried.names) and all(exists(name, self.site) for name in tried.bases)
        for handler in node.handlers:
            if not (fallback and _catches_import_error(handler)):
                self.visit(handler)
        for statement in [*node.orelse, *node.finalbody]:
            self.visit(statement)

    def visit_TryStar(self, node: ast.TryStar) -> None:
        self.visit_Try(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.names.add(alias.name)
            self.bases.add(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            parent = self.package.split(".") if self.package else []
            if node.level > 1:
                parent = parent[: len(parent) - node.level + 1]
            base = ".".join([*parent, node.module] if node.module else parent)
        else:
            base = node.module or ""
        if base:
            self.names.add(base)
            self.names.update(f"{base}.{alias.name}" for alias in node.names)
            self.bases.add(base)  # from a import b: b may be a name in a
            self.identifiers.update(alias.name for alias in node.names)
            if any(alias.name == "*" for alias in node.names):
                self.star.add(base)

    def test(self, node: ast.expr) -> bool | None:
        """The value of an ``if`` test where this interpreter decides it, else None."""
        if isinstance(node, ast.Name):
            return self.known.get(node.id)
        if isinstance(node, ast.Attribute) and node.attr == "TYPE_CHECKING":
            return False  # typing.TYPE_CHECKING
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            value = self.test(node.operand)
            return None if value is None else not value
        if isinstance(node, ast.BoolOp):
            values = [self.test(value) for value in node.values]
            if isinstance(node.op, ast.And):
                return False if False in values else None if None in values else True
            return True if True in values else None if None in values else False
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            here = _platform_value(node.left)
            other = _constant(node.comparators[0])
            if isinstance(node.left, ast.Name) and node.left.id == "__name__":
                here = "" if other == "__main__" else None  # imported: never "__main__"
            if here is None or other is None:
                return None
            op = node.ops[0]
            if isinstance(op, (ast.Eq, ast.NotEq)):
                return (here == other) == isinstance(op, ast.Eq)
            if isinstance(op, (ast.In, ast.NotIn)) and isinstance(other, tuple):
                return (here in other) == isinstance(op, ast.In)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "startswith"
            and len(node.args) == 1
        ):
            here = _platform_value(node.func.value)
            prefix = _constant(node.args[0])
            if here is not None and isinstance(prefix, (str, tuple)):
                return here.startswith(prefix)
        return None


def _program_functions(module: ast.Module) -> set[str]:
    """The module-level functions that only its ``if __name__ == "__main__":`` block calls."""
    called: set[str] = set()
    elsewhere: set[str] = set()
    for statement in module.body:
        main = (
            isinstance(statement, ast.If)
            and isinstance(statement.test, ast.Compare)
            and isinstance(statement.test.left, ast.Name)
            and statement.test.left.id == "__name__"
            and _constant(statement.test.comparators[0]) == "__main__"
        )
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
                (called if main else elsewhere).add(node.id)
    defined = {s.name for s in module.body if isinstance(s, ast.FunctionDef)}
    return (called & defined) - elsewhere


def _compared_names(statement: ast.stmt, parameter: str) -> tuple[str, ...] | None:
    """``if name == "X":`` or ``if name in ("X", "Y"):`` in a ``__getattr__(name)``: the names."""
    if not isinstance(statement, ast.If) or not isinstance(statement.test, ast.Compare):
        return None
    test = statement.test
    if not (isinstance(test.left, ast.Name) and test.left.id == parameter and len(test.ops) == 1):
        return None
    value = _constant(test.comparators[0])
    if isinstance(test.ops[0], ast.Eq) and isinstance(value, str):
        return (value,)
    if isinstance(test.ops[0], ast.In) and isinstance(value, tuple):
        return value
    return None


def _platform_value(node: ast.expr) -> str | None:
    """This interpreter's value of ``sys.platform`` or ``os.name``, where ``node`` names one."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if (node.value.id, node.attr) == ("sys", "platform"):
            return sys.platform
        if (node.value.id, node.attr) == ("os", "name"):
            return os.name
    return None


def _constant(node: ast.expr) -> object:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        values = [_constant(element) for element in node.elts]
        return tuple(values) if all(isinstance(v, str) for v in values) else None
    return None


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    caught = handler.type
    names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
    return any(
        isinstance(name, ast.Name) and name.id in ("ImportError", "ModuleNotFoundError")
        for name in names
    )


def exists(name: str, site: Path | None = None) -> bool:
    """Whether this interpreter (or the venv's packages) has the module ``name``."""
    if name in sys.builtin_module_names or _imp.is_frozen(name) or module_files(name):
        return True
    if site is None:
        return False
    folder = site.joinpath(*name.split("."))
    return (
        (folder / "__init__.py").is_file()
        or folder.with_suffix(".py").is_file()
        or any(folder.with_name(folder.name + suffix).is_file() for suffix in EXTENSION_SUFFIXES)
    )


def module_sources(name: str, site: Path) -> list[Path]:
    """The venv's source of module ``name`` (its package's __init__.py for a package)."""
    folder = site.joinpath(*name.split("."))
    return [path for path in (folder / "__init__.py", folder.with_suffix(".py")) if path.is_file()]


@functools.cache
def module_files(name: str) -> list[Path]:
    """The stdlib file(s) of a module: its source or package __init__, or its extension."""
    parts = name.split(".")
    directory = STDLIB.joinpath(*parts)
    for source in (directory / "__init__.py", directory.with_suffix(".py")):
        if source.is_file():
            return [source]
    for folder in (DYNLOAD, STDLIB.joinpath(*parts[:-1])):
        for suffix in EXTENSION_SUFFIXES:
            extension = folder / f"{parts[-1]}{suffix}"
            if extension.is_file():
                return [extension]
    return []


def copy_module(path: Path, root: Path) -> None:
    if path.suffix == ".py":
        # Sourceless bytecode sits where the source was (the legacy layout): only there does
        # the import system load a .pyc without its .py. Tracebacks still name the source path.
        real = Path(os.path.realpath(path))  # sitecustomize.py is a symlink into /etc
        target = root / path.relative_to("/").with_suffix(".pyc")
        target.parent.mkdir(parents=True, exist_ok=True)
        # Without docstrings (-OO): the stdlib supports it (CPython's own tests run so).
        py_compile.compile(str(real), cfile=str(target), dfile=str(path), doraise=True, optimize=2)
    else:
        install(path, root)


def install(path: Path, root: Path) -> None:
    """Copy ``path`` into ``root`` as it is here: symlinks (of directories too) stay symlinks."""
    path = Path(os.path.normpath(path))
    for i in range(2, len(path.parts) + 1):
        prefix = Path(*path.parts[:i])
        if prefix.is_symlink():
            link = root / prefix.relative_to("/")
            if not link.is_symlink():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(os.readlink(prefix))
            real = Path(os.path.normpath(prefix.parent / os.readlink(prefix)))
            install(real.joinpath(*path.parts[i:]), root)
            return
    target = root / path.relative_to("/")
    if path.is_dir():
        target.mkdir(parents=True, exist_ok=True)
    elif not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def install_libraries(root: Path) -> None:
    """Every shared library an ELF file in ``root`` links, as ldd resolves it here."""
    libraries: set[Path] = set()
    for path in elf_files(root):
        libraries |= linked(path, root)
    share_vendored(root, {library.name: library for library in libraries})
    libc = next((path for path in libraries if path.name.startswith("libc.so")), None)
    if libc is not None and (libc.parent / "libgcc_s.so.1").exists():
        libraries |= {libc.parent / "libgcc_s.so.1"}
        libraries |= linked(libc.parent / "libgcc_s.so.1", root)
    for library in sorted(libraries):
        install(library, root)


def elf_files(root: Path) -> list[Path]:
    return [
        path
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink() and is_elf(path)
    ]


def share_vendored(root: Path, system: dict[str, Path]) -> None:
    """A wheel's own copy of a library the image has anyway becomes a link to the system's.

    auditwheel names bundled copies NAME-HASH.so.N (psycopg-binary bundles OpenSSL: ~7 MB, and
    its own OpenSSL looks for CA certificates in a directory that exists nowhere). The link is
    kept only where every user still loads: ``ldd -r`` reports no symbol or version newly missing.
    """
    shared = True
    while shared:  # until nothing more can be shared: libssl first lets libcrypto follow
        shared = False
        for vendored in sorted(root.rglob("*.libs/lib*")):
            name = re.sub(r"-[0-9a-f]{8}(?=\.so)", "", vendored.name)
            if name == vendored.name or name not in system or vendored.is_symlink():
                continue
            users = elf_files(root)
            before = unresolved(users)
            saved = vendored.with_name(vendored.name + ".bundled")
            vendored.rename(saved)
            vendored.symlink_to(system[name])
            if unresolved(users) <= before:
                saved.unlink()
                shared = True
                print(f"rootfs: {vendored.name} -> {system[name]}", file=sys.stderr)
            else:
                vendored.unlink()
                saved.rename(vendored)


def strip_symbols(root: Path) -> None:
    """A shared object that still has its symbol table (google-re2's, 370 kB of 1.5 MB) loses
    it, as Debian's own are: the dynamic symbols, which loading uses, stay."""
    for path in elf_files(root):
        if ".symtab" in section_names(path):
            subprocess.run(["strip", "--strip-unneeded", path], check=True)


def section_names(path: Path) -> set[str]:
    """The section names of a 64-bit little-endian ELF file (the only kind ldd finds here)."""
    data = path.read_bytes()
    if data[4:6] != b"\x02\x01":  # ELFCLASS64, ELFDATA2LSB
        return set()
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if not shoff or shstrndx >= shnum:
        return set()
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strings = headers[shstrndx][4]  # sh_offset of the section-name table
    return {data[strings + h[0] : data.index(b"\0", strings + h[0])].decode() for h in headers}


def unresolved(paths: list[Path]) -> set[str]:
    """What ldd -r cannot resolve (extension modules miss the interpreter's symbols: expected)."""
    missing: set[str] = set()
    for path in paths:
        output = subprocess.run(["ldd", "-r", path], capture_output=True, text=True)
        missing.update(
            f"{path}: {line.strip()}"
            for line in (output.stdout + output.stderr).splitlines()
            if "not found" in line or "undefined symbol" in line
        )
    return missing


def is_elf(path: Path) -> bool:
    with path.open("rb") as file:
        return file.read(4) == b"\x7fELF"


def linked(path: Path, root: Path) -> set[Path]:
    # Libraries beside the file (a wheel's bundled .libs, found through its RPATH) are in root
    # already: ldd names them by their path in root.
    output = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    found: set[Path] = set()
    for line in output.splitlines():
        words = line.split()
        if "=>" in words and len(words) > words.index("=>") + 1:
            candidate = words[words.index("=>") + 1]
        elif words and words[0].startswith("/"):
            candidate = words[0]  # the dynamic loader
        else:
            continue
        if candidate.startswith("/") and not Path(candidate).is_relative_to(root):
            found.add(Path(candidate))
    return found


def install_certificates(root: Path) -> None:
    """The CA bundle and OpenSSL's own paths to it, as this OpenSSL looks for them."""
    paths = ssl.get_default_verify_paths()
    for name in (paths.openssl_cafile, paths.openssl_capath):
        if name and os.path.lexists(name):
            install(Path(name), root)
    config = Path(paths.openssl_cafile).parent / "openssl.cnf"
    if config.exists():
        install(config, root)


# certifi.where() in the venv, where certifi is installed (httpx and httpcore import it)
CERTIFI_WHERE = """
try:
    import certifi
except ImportError:
    pass
else:
    print(certifi.where())
"""


def share_certifi(python: Path, root: Path) -> None:
    """certifi's bundle (Mozilla's roots, as Debian's bundle is) becomes a link to the bundle
    OpenSSL reads, so the image holds one set of roots and every TLS path trusts the same ones:
    a bundle mounted over the system's counts for httpx's defaults too."""
    where = subprocess.run(
        [python, "-c", CERTIFI_WHERE], check=True, capture_output=True, text=True
    ).stdout.strip()
    system = ssl.get_default_verify_paths().openssl_cafile
    bundle = root / Path(where).relative_to("/") if where else None
    if bundle is None or not bundle.is_file() or not os.path.lexists(root / system.lstrip("/")):
        return
    bundle.unlink()
    bundle.symlink_to(system)


def install_users(root: Path) -> None:
    etc = root / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text(
        f"root:x:0:0:root:/root:/nonexistent\n{USER}:x:{UID}:{UID}:{USER}:/home/{USER}:/nonexistent\n"
    )
    (etc / "group").write_text(f"root:x:0:\n{USER}:x:{UID}:\n")
    if Path("/etc/nsswitch.conf").exists():
        shutil.copy2("/etc/nsswitch.conf", etc / "nsswitch.conf")
    home = root / "home" / USER
    home.mkdir(parents=True)
    os.chown(home, UID, UID)
    tmp = root / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)


def du(root: Path) -> int:
    return sum(path.lstat().st_size for path in root.rglob("*") if not path.is_dir())


if __name__ == "__main__":
    if "no_debug_ranges" not in sys._xoptions:
        # Bytecode without the column ranges of each instruction (PEP 657): about 8 % smaller;
        # tracebacks keep their file and line, only the ^^^ markers go. Compilation reads the
        # setting from the interpreter's own options, so the script runs itself with it.
        os.execv(sys.executable, [sys.executable, "-X", "no_debug_ranges", *sys.argv])
    main(Path(sys.argv[1]), Path(sys.argv[2]))
