"""The documentation held to the code: the pages that say what waitfor does cannot drift from it.

- docs/architecture.md's layout map names every package and module of waitfor/, and nothing that
  is not there;
- every kind (a module or folder of waitfor/kinds/) has its page docs/kinds/<kind>.md, whose
  "Options" section lists exactly the ``#fragment`` options the kind's check accepts
  (``OPTION_NAMES``, what ``reject_unknown`` lets through), and there is no page for a kind that
  does not exist;
- docs/cli.md's options table lists exactly the command's options and their variables;
- every command block (```sh, ```console, or a line starting with ``$ ``) in the README and docs/
  is marked: ``<!-- runs in tests/FILE.py -->`` (that test runs it, and reads that page), or
  ``<!-- not run here: WHY -->``. A block not run here is still read: its waitfor options must
  exist and its targets must parse, as far as this machine allows (files it names may be
  missing). The blocks that can run here run below;
- every relative link points at a file that exists, and at a heading that exists.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from waitfor.cli.clickparse import cli
from waitfor.core import registry
from waitfor.core.check import Check
from waitfor.core.targets import GENERIC_OPTIONS, parse_target
from waitfor.errors import TargetError

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "waitfor"
KIND_PAGES = ROOT / "docs" / "kinds"
#: the pages a reader is sent to; docs/bench/README.md is written by bench/run, not by hand
PAGES = sorted(
    [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md")],
)
HAND_WRITTEN = [page for page in PAGES if page != ROOT / "docs" / "bench" / "README.md"]

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
_MARKER = re.compile(r"<!-- (runs in (tests/\S+\.py)|not run here: (.+?)) -->\s*$")
_COMMAND_LANGS = {"sh", "console", "shell", "bash"}


def spelt(name: str) -> str:
    return name.replace("_", "-")


# --- the layout map ------------------------------------------------------------------------


def layout_map() -> set[str]:
    """The paths docs/architecture.md's map names (``waitfor/cli/``, ``waitfor/cli/entry.py``)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("## Layout", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    named: set[str] = set()
    stack: list[str] = []
    for line in block.splitlines():
        if not line.strip() or line.startswith(" " * 31):  # a description's next line
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2
        name = line.split()[0]
        del stack[depth:]
        path = "".join(stack) + name
        named.add(path)
        if name.endswith("/"):
            stack.append(name)
    return named


def tree() -> set[str]:
    """Every package and module of waitfor/, less the empty package ``__init__.py`` files."""
    found = {"waitfor/"}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(ROOT).as_posix()
        if "__pycache__" in relative:
            continue
        if path.name == "__init__.py":
            found.add(relative.removesuffix("__init__.py"))
            if path.parent != PACKAGE:
                continue
        found.add(relative)
    return found


def test_the_layout_map_names_every_module_and_nothing_else() -> None:
    named, there = layout_map(), tree()
    assert sorted(there - named) == [], "in the tree, missing from docs/architecture.md's map"
    assert sorted(named - there) == [], "in docs/architecture.md's map, not in the tree"


def test_the_layout_map_reader_sees_a_stale_entry() -> None:
    """The map test can fail: a map that names a module the tree lacks is told apart."""
    assert "waitfor/cli/entry.py" in layout_map()
    assert "waitfor/cli/nonesuch.py" not in tree()


# --- one page per kind, its options those of the code -----------------------------------------


def kind_folders() -> dict[str, list[type[Check[Any]]]]:
    """Each kind's folder or module name (waitfor/kinds/<name>) → the check classes it holds."""
    from importlib import import_module

    found: dict[str, list[type[Check[Any]]]] = {}
    for kind in registry.BUILTIN:
        module, _, name = kind.implementation.partition(":")
        folder = module.split(".")[2]
        found.setdefault(folder, []).append(getattr(import_module(module), name))
    return found


def test_every_kind_has_its_page_and_every_page_a_kind() -> None:
    on_disk = {p.stem for p in (PACKAGE / "kinds").iterdir() if p.suffix == ".py" or p.is_dir()} - {
        "__init__",
        "__pycache__",
    }
    assert on_disk == set(kind_folders()), "the registry and waitfor/kinds/ disagree"
    pages = {p.stem for p in KIND_PAGES.glob("*.md")} - {"README"}
    assert sorted(on_disk - pages) == [], "kinds without a page in docs/kinds/"
    assert sorted(pages - on_disk) == [], "pages in docs/kinds/ for no kind"
    index = (KIND_PAGES / "README.md").read_text()
    for name in on_disk:
        assert f"({name}.md" in index, f"docs/kinds/README.md does not link {name}.md"


def section(text: str, heading: str) -> str:
    """The text under a ``## heading`` up to the next heading of that level or above."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^#{{1,2}} |\Z)", text, re.S | re.M)
    return match.group(1) if match else ""


def documented_options(text: str) -> set[str]:
    """The option names the first column of an Options section's tables gives.

    ``cert=FILE&key=FILE`` names cert and key; ``mode=ping|query`` names mode; a cell
    ``stable`` names stable. Prose in the section does not count: only the tables.
    """
    names = set()
    for line in section(text, "Options").splitlines():
        if not line.startswith("| ") or line.startswith("| ---"):
            continue
        cell = line.split(" | ")[0].removeprefix("| ")
        if cell == "option":
            continue
        for code in re.findall(r"`([^`]+)`", cell):
            for part in code.split("&"):
                name = re.match(r"[a-z][a-z0-9_-]*", part)
                if name:
                    names.add(spelt(name.group()))
    return names


@pytest.mark.parametrize("folder", sorted(kind_folders()))
def test_a_kind_page_lists_exactly_its_options(folder: str) -> None:
    page = (KIND_PAGES / f"{folder}.md").read_text()
    accepted = {spelt(n) for cls in kind_folders()[folder] for n in cls.OPTION_NAMES}
    documented = documented_options(page)
    assert "## Options" in page, f"docs/kinds/{folder}.md has no Options section"
    assert sorted(accepted - documented) == [], f"accepted, not in docs/kinds/{folder}.md"
    assert sorted(documented - accepted) == [], f"in docs/kinds/{folder}.md, not accepted"


def test_the_options_reader_sees_an_undocumented_option() -> None:
    """The options test can fail: a row taken out of a page is missed."""
    page = (KIND_PAGES / "file.md").read_text()
    assert documented_options(page) == {"nonempty", "min-size", "contains"}
    without = "\n".join(line for line in page.splitlines() if "`nonempty`" not in line)
    assert documented_options(without) == {"min-size", "contains"}


def test_the_options_every_kind_takes_are_documented() -> None:
    index = (KIND_PAGES / "README.md").read_text()
    for name in GENERIC_OPTIONS:
        assert f"`#{spelt(name)}=" in index, name


# --- the command line's options ------------------------------------------------------------


def command_options() -> dict[str, str | None]:
    """The command's long options → their variable (none for --version)."""
    found: dict[str, str | None] = {}
    for param in cli.params:
        longs = [o for o in param.opts if o.startswith("--")]
        if longs and longs[0] != "--version":
            found[longs[0]] = "WAITFOR_" + longs[0][2:].upper().replace("-", "_")
    return found


def options_table(text: str) -> dict[str, str]:
    """docs/cli.md's (or the README's) options table: long option → variable."""
    rows = {}
    for line in text.splitlines():
        if not line.startswith("| `-"):
            continue
        option_cell, variable_cell = line.split(" | ")[:2]
        options = re.findall(r"--[a-z-]+", option_cell)
        variables = re.findall(r"WAITFOR_[A-Z_]+", variable_cell)
        for option, variable in zip(options, variables, strict=True):
            rows[option] = variable
    return rows


@pytest.mark.parametrize("page", ["docs/cli.md", "README.md"])
def test_the_options_tables_list_exactly_the_command_options(page: str) -> None:
    table = options_table((ROOT / page).read_text())
    assert table == command_options()
    assert "`WAITFOR_TARGETS`" in (ROOT / page).read_text()


def test_help_lists_what_the_docs_list() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "waitfor", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for option in command_options():
        assert option in out, option


# --- command blocks ------------------------------------------------------------------------


def command_blocks() -> list[tuple[Path, int, str, str | None, str | None]]:
    """Every command block: (page, line, text, the test that runs it, why it is not run)."""
    found = []
    for page in HAND_WRITTEN:
        text = page.read_text()
        for match in _FENCE.finditer(text):
            lang, body = match.group(1), match.group(2)
            commands = lang in _COMMAND_LANGS or any(
                line.startswith("$ ") for line in body.splitlines()
            )
            if not commands:
                continue
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = _MARKER.search(before)
            line = text[: match.start()].count("\n") + 1
            found.append(
                (
                    page,
                    line,
                    body,
                    marker.group(2) if marker else None,
                    marker.group(3) if marker else None,
                )
            )
    return found


def _where(page: Path, line: int) -> str:
    return f"{page.relative_to(ROOT)}:{line}"


def test_every_command_block_runs_in_a_test_or_says_why_not() -> None:
    unmarked = [_where(p, n) for p, n, _, runs, why in command_blocks() if not (runs or why)]
    assert unmarked == [], "command blocks without a marker: <!-- runs in tests/X.py --> or "
    "<!-- not run here: WHY -->"
    for page, line, _, runs, _ in command_blocks():
        if runs:
            test = ROOT / runs
            assert test.is_file(), f"{_where(page, line)}: {runs} does not exist"
            name = page.relative_to(ROOT).as_posix()
            assert name in test.read_text() or page.name in test.read_text(), (
                f"{_where(page, line)}: {runs} does not read {name}"
            )


def waitfor_lines(body: str) -> list[list[str]]:
    """The words of each waitfor command in a block (continuations joined, prompts and comments
    and leading VAR=value words left out)."""
    commands = []
    for logical in body.replace("\\\n", " ").splitlines():
        logical = logical.removeprefix("$ ")
        try:
            words = shlex.split(logical)
        except ValueError:
            continue
        words = words[: next((i for i, w in enumerate(words) if w.startswith("#")), len(words))]
        while words and re.match(r"[A-Z_]+=", words[0]):
            words.pop(0)
        if words and words[0] == "waitfor":
            commands.append(words[1:])
    return commands


#: what a target may fail to parse with here and still be right: the files and the pod it names
#: are the reader's, not this machine's
_THEIRS = re.compile(r"does not exist|not found|{namespace} needs|No such file|not PEM")


def _refusal(target: str) -> str | None:
    """Why the target parser refuses a target, or None."""
    try:
        parse_target(target)
    except TargetError as exc:
        return str(exc)
    return None


def test_commands_not_run_here_use_options_that_exist() -> None:
    flags = {o for p in cli.params for o in p.opts if o.startswith("-")}
    takes_value = {
        o for p in cli.params for o in p.opts if not getattr(p, "is_flag", False) and o[0] == "-"
    }
    checked = 0
    for page, line, body, _, why in command_blocks():
        if not why:
            continue
        for words in waitfor_lines(body):
            where = f"{_where(page, line)}: waitfor {' '.join(words)}"
            rest = iter(words)
            for word in rest:
                if word == "--":
                    break
                if word.startswith("-"):
                    flag = word.split("=", 1)[0]
                    assert flag in flags, f"{where}: no option {flag}"
                    if flag in takes_value and "=" not in word:
                        next(rest, None)
                    continue
                refused = _refusal(word)
                assert refused is None or _THEIRS.search(refused), f"{where}: {refused}"
                checked += 1
    assert checked > 30  # the reader found the examples


def test_the_bad_target_sample_is_what_a_run_prints() -> None:
    """docs/kinds/README.md's refused target, run as written."""
    text = (KIND_PAGES / "README.md").read_text()
    block = text.split("Bad targets are refused", 1)[1].split("```console\n", 1)[1]
    block = block.split("```", 1)[0]
    command, *expected = block.splitlines()
    words = shlex.split(command.removeprefix("$ "))
    assert words[0] == "waitfor"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAITFOR_")}
    run = subprocess.run(
        [sys.executable, "-m", "waitfor", *words[1:]], capture_output=True, text=True, env=env
    )
    assert run.returncode == 2
    assert run.stderr.splitlines() == expected


# --- links ---------------------------------------------------------------------------------


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings."""
    text = _FENCE.sub("", page.read_text())
    found = set()
    for heading in re.findall(r"^#+ (.+)$", text, re.M):
        found.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return found


@pytest.mark.parametrize("page", HAND_WRITTEN, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_point_at_what_exists(page: Path) -> None:
    text = _FENCE.sub("", page.read_text())
    for link in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", link):
            continue
        file, _, anchor = link.partition("#")
        target = (page.parent / file).resolve() if file else page
        assert target.exists(), f"{page.relative_to(ROOT)}: {link}"
        if anchor and target.suffix == ".md":
            assert anchor in anchors(target), f"{page.relative_to(ROOT)}: {link}"
