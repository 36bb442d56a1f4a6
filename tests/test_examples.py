"""Every example manifest's waitfor invocation goes through the real CLI parser and target
parser, so a typo in an example fails here (kube play and kubectl would ignore it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from waitfor import cli
from waitfor.targets import parse_target

EXAMPLES = sorted(Path(__file__).parent.parent.joinpath("examples").glob("*.yaml"))


def waitfor_containers(document: dict[str, Any]) -> list[dict[str, Any]]:
    spec = document.get("spec")
    if not isinstance(spec, dict) or not ("template" in spec or "containers" in spec):
        return []  # a ServiceAccount, Role, RoleBinding, Service
    pod = spec["template"]["spec"] if "template" in spec else spec
    containers = pod.get("initContainers", []) + pod.get("containers", [])
    return [c for c in containers if c["image"].startswith("waitfor")]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_invocations_parse(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "example-ns")
    containers = [c for d in yaml.safe_load_all(path.read_text()) for c in waitfor_containers(d)]
    assert containers, f"{path.name} has no waitfor container"
    for container in containers:
        env = {e["name"]: e.get("value", "from-a-secret") for e in container.get("env", [])}
        for name in [n for n in os.environ if n.startswith("WAITFOR_")]:
            monkeypatch.delenv(name)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        args = container.get("args", [])
        context = cli.cli.make_context("waitfor", list(args), auto_envvar_prefix="WAITFOR")
        targets = context.params["targets"]
        assert targets, f"{path.name}: no targets"
        for target in targets:
            parse_target(target)
        assert context.params["timeout"] > 0


def test_a_typo_in_an_example_would_fail() -> None:
    with pytest.raises(click.UsageError):
        cli.cli.make_context("waitfor", ["--timeot=5m", "tcp://a:1"], auto_envvar_prefix="WAITFOR")
