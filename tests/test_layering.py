"""The package's layers, read from its import statements (nothing is imported to check them).

Every ``import`` counts: at module level, inside functions, under ``TYPE_CHECKING``, and the
implicit import of each package whose submodule is imported (its ``__init__`` runs first). The
rules (docs/architecture.md):

- no import cycle anywhere in waitfor/;
- package ``__init__``\\ s hold at most a docstring (every start would pay for more), except the
  facade waitfor/__init__.py;
- the bottom layer (waitfor/base/) imports only itself, and waitfor/net/ only itself and base/;
- a kind (waitfor/kinds/<kind>.py or waitfor/kinds/<kind>/) imports only the published interface
  (waitfor.kind), net/ and its own folder (and ``waitfor.__version__``); nothing outside kinds/
  imports a kind (the registry names them in strings).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "waitfor"


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(name: str, path: Path, mods: dict[str, Path]) -> Iterator[str]:
    """The modules of waitfor that module ``name`` (file ``path``) imports, every way it can.

    A module's own packages are imported before it: they count only when it names them.
    """
    own = [p for p in mods if name.startswith(p + ".")]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            # "from package import submodule" imports the submodule, else the module itself
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names
            ]
        for target in targets:
            while target and target not in mods:  # "import a.b.c" of a name inside a module
                target = target.rpartition(".")[0]
            if not target:
                continue
            if target != name:
                yield target
            parent = target.rpartition(".")[0]
            while parent not in ("", "waitfor", *own):  # the packages' __init__s run first
                yield parent
                parent = parent.rpartition(".")[0]


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    mods = modules(root)
    return {name: set(_imported(name, path, mods)) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def kind_of(name: str) -> str | None:
    """The kind a module belongs to: its folder or module, ``waitfor.kinds.<kind>``."""
    parts = name.split(".")
    return ".".join(parts[:3]) if len(parts) >= 3 and parts[:2] == ["waitfor", "kinds"] else None


def violations(root: Path = PACKAGE) -> list[str]:
    graph = import_graph(root)
    found = [f"import cycle: {' -> '.join(c)}" for c in cycles(graph)]
    for name, path in modules(root).items():
        if path.name == "__init__.py" and name != "waitfor":
            body = ast.parse(path.read_text()).body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]  # a docstring costs nothing
            if body:
                found.append(f"{path.relative_to(root.parent)}: a package __init__ holds code")
    for name, imported in sorted(graph.items()):
        for target in sorted(imported):
            if _within(name, "waitfor.base"):
                allowed = _within(target, "waitfor.base")
            elif _within(name, "waitfor.net"):
                allowed = _within(target, "waitfor.net") or _within(target, "waitfor.base")
            elif kind_of(name):
                allowed = (  # and the package itself, for its __version__
                    target in ("waitfor", "waitfor.kind", "waitfor.kinds", "waitfor.net")
                    or _within(target, "waitfor.net")
                    or kind_of(target) == kind_of(name)
                )
            else:
                allowed = kind_of(target) is None
            if not allowed:
                found.append(f"{name} imports {target}")
    return found


def test_the_layers_hold() -> None:
    assert violations() == []


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """A rule is only as good as the graph: each way of importing shows up as an edge."""
    pkg = tmp_path / "waitfor"
    (pkg / "net" / "deep").mkdir(parents=True)
    (pkg / "base").mkdir()
    (pkg / "kinds" / "x").mkdir(parents=True)
    for init in ("", "net/", "net/deep/", "base/", "kinds/", "kinds/x/"):
        (pkg / f"{init}__init__.py").write_text("")
    (pkg / "net" / "deep" / "__init__.py").write_text("import os\n")
    (pkg / "kind.py").write_text("from waitfor.net.deep import leaf\n")
    (pkg / "net" / "deep" / "leaf.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from waitfor import kind\n"
    )
    (pkg / "base" / "low.py").write_text("def f():\n    from ..net import deep\n")
    (pkg / "kinds" / "x" / "check.py").write_text("import waitfor.base.low\nfrom . import wire\n")
    (pkg / "kinds" / "x" / "wire.py").write_text("")
    (pkg / "kinds" / "y.py").write_text("from waitfor.kinds.x.check import X\n")
    graph = import_graph(pkg)
    assert graph["waitfor.kind"] == {"waitfor.net.deep.leaf", "waitfor.net.deep", "waitfor.net"}
    assert graph["waitfor.base.low"] == {"waitfor.net.deep", "waitfor.net"}
    assert graph["waitfor.kinds.x.check"] == {
        "waitfor.base.low",
        "waitfor.base",
        "waitfor.kinds.x.wire",
    }
    assert sorted(violations(pkg)) == [
        "import cycle: waitfor.kind -> waitfor.net.deep.leaf",
        "waitfor.base.low imports waitfor.net",
        "waitfor.base.low imports waitfor.net.deep",
        "waitfor.kinds.x.check imports waitfor.base",
        "waitfor.kinds.x.check imports waitfor.base.low",
        "waitfor.kinds.y imports waitfor.kinds.x",
        "waitfor.kinds.y imports waitfor.kinds.x.check",
        "waitfor.net.deep.leaf imports waitfor.kind",
        "waitfor/net/deep/__init__.py: a package __init__ holds code",
    ]
