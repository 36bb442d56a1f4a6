"""The wait's options are declared once (waitfor/cli/reading.py OPTIONS): click's options, the
quick reading, the library's three signatures and their docs, and the README are held to it."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import click
import pytest

import waitfor
import waitfor.kind
from waitfor import api
from waitfor.cli import clickparse, command, reading
from waitfor.cli.reading import OPTIONS
from waitfor.core import registry
from waitfor.core.durations import parse_duration

ROOT = Path(__file__).resolve().parents[2]
#: the library keywords no single command-line option is passed as (how the command makes them)
LIBRARY_ONLY = {
    "backoff": "from --max-interval",
    "on_event": "the command's reporter takes the events",
    "reporter": "from --output, --quiet, --events",
    "defaults": "from the options with target_option=",
}


def parameters(function: Any) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(function).parameters.values() if p.name != "self"]


def test_the_three_library_signatures_are_one() -> None:
    wait = parameters(api.Wait.__init__)
    assert wait[-1].name == "log"  # Wait's own: wait_for and wait_for_async always log
    assert parameters(api.wait_for) == wait[:-1]
    assert parameters(api.wait_for_async) == wait[:-1]


def test_the_library_keywords_are_the_declared_ones() -> None:
    """A keyword the command passes is declared with keyword=; any other is listed above."""
    keywords = {p.name for p in parameters(api.wait_for) if p.kind is p.KEYWORD_ONLY}
    declared = {o.keyword for o in OPTIONS if o.keyword is not None}
    assert keywords == declared | set(LIBRARY_ONLY)
    assert not declared & set(LIBRARY_ONLY)


@pytest.mark.parametrize("option", [o for o in OPTIONS if o.keyword], ids=lambda o: o.name)
def test_the_command_and_the_library_default_alike(option: reading.Option) -> None:
    library = inspect.signature(api.wait_for).parameters[option.keyword or ""].default
    default = option.default
    assert default is None or isinstance(default, str | bool)  # None: not given (--interval)
    read = parse_duration(default) if isinstance(default, str) else default
    assert read == library


def test_every_target_option_is_one_a_built_in_kind_takes() -> None:
    taken = {name for kind in registry.BUILTIN for name in registry.load(kind).OPTION_NAMES}
    for option in OPTIONS:
        assert option.target_option is None or option.target_option in taken, option.name


def test_an_option_goes_to_the_library_one_way_at_most() -> None:
    for option in OPTIONS:
        assert option.keyword is None or option.target_option is None, option.name


def test_clicks_options_are_the_declared_ones() -> None:
    params = [
        p for p in clickparse.cli.params if isinstance(p, click.Option) and p.allow_from_autoenv
    ]
    assert [p.name for p in params] == [o.name for o in OPTIONS]
    for param, option in zip(params, OPTIONS, strict=True):
        assert tuple(param.opts) == option.flags
        assert param.envvar == option.envvar
        assert param.is_flag == (option.value == reading.FLAG)
        if not param.is_flag:  # a flag's default is click's unset: off (the quick tests read it)
            assert param.default == option.default


def test_the_quick_reading_follows_the_declaration() -> None:
    assert {o.name: o.default for o in OPTIONS} == reading.DEFAULTS
    assert set(command.QUICK_FLAGS.values()) | set(command.QUICK_VALUED.values()) == {
        o.name for o in OPTIONS if o.quick
    }
    assert {"WAITFOR_TARGETS", *(o.envvar for o in OPTIONS)} == reading.VARIABLES


def test_every_option_is_documented() -> None:
    """Each option's long name and variable in the options table (README or docs/)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    text = "\n".join(page.read_text() for page in pages)
    rows = [line for line in text.splitlines() if line.startswith("| `-")]
    for option in OPTIONS:
        row = [r for r in rows if re.search(rf"[`, ]{re.escape(option.flags[-1])}(?![\w-])", r)]
        assert row, f"{option.flags[-1]} has no row in an options table"
        assert any(option.envvar in r for r in row), f"{option.envvar} is not in its row"


def test_wait_for_documents_every_parameter_and_no_other() -> None:
    doc = inspect.getdoc(api.wait_for) or ""
    section = doc.split("Parameters:\n", 1)[1].split("\n\n", 1)[0]
    documented = re.findall(r"^    (\w+): ", section, flags=re.MULTILINE)
    assert documented == [p.name for p in parameters(api.wait_for)]


def test_the_docs_of_the_three_agree() -> None:
    """One first line for the two functions but their one difference; the others point to
    wait_for's parameters, and Wait says what its own ``log`` does."""
    sync, other = (inspect.getdoc(f) or "" for f in (api.wait_for, api.wait_for_async))
    assert sync.split(";")[0] == other.split(",")[0]
    assert "The parameters, the result and the errors are those of :func:`wait_for`" in other
    wait = " ".join((inspect.getdoc(api.Wait) or "").split())
    assert "The parameters are those of :func:`wait_for`; ``log``" in wait


def annotation_names(function: Any) -> set[str]:
    """The names the annotations of a function (``from __future__ import annotations``) use."""
    text = " ".join(str(a) for a in function.__annotations__.values())
    return set(re.findall(r"[A-Za-z_][\w.]*", text))


#: what the annotations may name without waitfor exporting it
NOT_OURS = {"str", "float", "bool", "int", "None", "object", "list", "dict", "tuple", "type"}
NOT_OURS |= {"Any", "Callable", "Mapping", "Sequence", "AbstractAsyncContextManager"}


@pytest.mark.parametrize(
    "function",
    [
        api.wait_for,
        api.wait_for_async,
        api.Wait.__init__,
        api.Wait.run_sync,
        waitfor.kind.Check.probe,
        waitfor.kind.Check.probe_now,
        waitfor.kind.Check.parse_address,
        waitfor.kind.Check.parse_options,
    ],
    ids=lambda f: f.__qualname__,
)
def test_what_a_public_signature_names_is_exported(function: Any) -> None:
    names = annotation_names(function) - NOT_OURS - {"T", "OptionsT"}
    assert names <= set(waitfor.__all__) | set(waitfor.kind.__all__), names
    for name in names:
        assert getattr(waitfor, name, None) is not None or hasattr(waitfor.kind, name), name


@pytest.mark.parametrize("name", ["Reporter", "Deadline", "KindError", "EventHandler"])
def test_the_signatures_names_are_waitfors(name: str) -> None:
    assert name in waitfor.__all__
    assert getattr(waitfor, name) is not None
    assert name in dir(waitfor)


@pytest.mark.parametrize("name", ["Deadline", "KindError"])
def test_kinds_get_them_from_the_published_interface(name: str) -> None:
    assert getattr(waitfor.kind, name) is getattr(waitfor, name)
