"""Assemble the image's root filesystem in the Dockerfile's build stage.

    python3 images/rootfs.py VENV ROOT

Run by the distribution's python3, the one VENV was made from. ROOT receives:
- the venv (waitfor and its dependencies, whole), compiled to sourceless ``.pyc``;
- the interpreter and the standard-library modules that code can import: everything any module
  of the venv's packages imports, followed through the stdlib's own imports (read from the
  source, function-level imports included) plus what importing every venv module loads. The kept
  set is derived, never listed: a kind's new dependency brings its stdlib needs with it;
- every shared library the interpreter and the kept extension modules link (ldd), and libgcc_s,
  which glibc loads itself when a thread exits through pthread_exit;
- the CA bundle where this OpenSSL looks for it, nsswitch.conf, and passwd/group for 65532.

Paths come from the running interpreter and ldd, never written out: no architecture is named.
"""

from __future__ import annotations

import ast
import compileall
import json
import os
import py_compile
import re
import shutil
import ssl
import subprocess
import sys
import sysconfig
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
# modules ended up loaded. Optional parts whose own dependencies are absent fail: skipped.
IMPORT_EVERYTHING = """
import importlib, json, pkgutil, sys, sysconfig
site = sysconfig.get_path("purelib")
for info in list(pkgutil.walk_packages([site], onerror=lambda name: None)):
    if info.name.endswith("__main__"):
        continue  # it would run a program
    try:
        importlib.import_module(info.name)
    except BaseException:
        pass
print(json.dumps(sorted(sys.modules)))
"""


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
    install_venv(venv, site, root)
    modules = stdlib_closure(site, loaded_modules(python))
    files = [path for name in sorted(modules) for path in module_files(name)]
    for package in BY_NAME:
        files += sorted((STDLIB / package).rglob("*.py"))
    for path in files:
        copy_module(path, root)
    (root / DYNLOAD.relative_to("/")).mkdir(parents=True, exist_ok=True)  # getpath's landmark
    for entry in (venv / "bin").iterdir():  # python3 -> /usr/bin/python3 -> python3.11
        if entry.is_symlink() and not Path(os.path.realpath(entry)).is_relative_to(venv):
            install(Path(os.path.normpath(entry.parent / os.readlink(entry))), root)
    install_libraries(root)
    install_certificates(root)
    install_users(root)
    kept = sum(1 for path in files if path.suffix == ".py")
    print(f"rootfs: {kept} stdlib modules, {du(root) / 1e6:.1f} MB", file=sys.stderr)


def install_venv(venv: Path, site: Path, root: Path) -> None:
    """The venv without pip's leftovers, its sources compiled to sourceless .pyc."""
    target = root / venv.relative_to("/")
    shutil.copytree(venv, target, symlinks=True)
    scripts = console_scripts(site)
    for entry in (target / "bin").iterdir():
        # activate scripts and other packages' commands are not part of the image
        if not entry.is_symlink() and entry.name not in scripts:
            entry.unlink()
    packages = target / site.relative_to(venv)
    for cache in list(packages.rglob("__pycache__")):
        shutil.rmtree(cache)
    # ddir: tracebacks name the files where they are in the image
    compileall.compile_dir(packages, ddir=str(site), quiet=1, legacy=True, workers=0)
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


def console_scripts(site: Path) -> set[str]:
    names = set()
    for entry_points in site.glob("*.dist-info/entry_points.txt"):
        section = ""
        for line in entry_points.read_text().splitlines():
            line = line.strip()
            if line.startswith("["):
                section = line
            elif section == "[console_scripts]" and "=" in line:
                names.add(line.split("=")[0].strip())
    return names


def loaded_modules(python: Path) -> set[str]:
    result = subprocess.run(
        [python, "-c", IMPORT_EVERYTHING],
        check=True,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    return set(json.loads(result.stdout.splitlines()[-1]))


def stdlib_closure(site: Path, loaded: set[str]) -> set[str]:
    """Stdlib modules imported by the venv's code, by the interpreter's start, and by each other."""
    wanted: set[str] = set(loaded) | {"site", "sitecustomize", "os", "encodings"}
    for source in site.rglob("*.py"):
        wanted |= imports_of(source, package_of(source, site))
    kept: set[str] = set()
    queue = sorted(wanted)
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
                    queue += imports_of(path, package_of(path, STDLIB))
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


def imports_of(path: Path, package: str) -> set[str]:
    """Every module an import statement anywhere in the file may load (``from a import b``: a.b)."""
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (SyntaxError, ValueError):
        return set()  # e.g. test data written in another Python's syntax
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = package.split(".") if package else []
                if node.level > 1:
                    parent = parent[: len(parent) - node.level + 1]
                base = ".".join([*parent, node.module] if node.module else parent)
            else:
                base = node.module or ""
            if base:
                names.add(base)
                names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


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
    main(Path(sys.argv[1]), Path(sys.argv[2]))
