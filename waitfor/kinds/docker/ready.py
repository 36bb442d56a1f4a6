"""When a container is ready, as the engine's inspection says: the rules both paths share.

Running and, with a healthcheck, healthy (compose's ``service_healthy``); exited with a code
(``service_completed_successfully``). The runner's attempts (:mod:`.check`) and the quick first
attempt (:mod:`.quick`) judge the same inspection here.
"""

from __future__ import annotations

from waitfor.kind import Outcome

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def describe_state(container: dict[str, Any]) -> str:
    """``status exited, code 1``: the container's status as the engine words it."""
    state = container.get("State") or {}
    status = str(state.get("Status") or ("running" if state.get("Running") else "unknown"))
    if status in ("exited", "dead", "restarting") and isinstance(state.get("ExitCode"), int):
        return f"status {status}, code {state['ExitCode']}"
    return f"status {status}"


def running(name: str, container: dict[str, Any]) -> Outcome:
    """Running and, if it has a healthcheck, healthy (docker compose's service_healthy)."""
    state = container.get("State") or {}
    if state.get("Paused") or state.get("Status") == "paused":
        return Outcome.down(f"container {name} is paused")
    if not state.get("Running") or state.get("Status") not in ("running", None):
        return Outcome.down(f"container {name} is not running ({describe_state(container)})")
    health = state.get("Health")
    if not isinstance(health, dict):
        health = {}
    status = health.get("Status")
    if not status or status == "none":
        return Outcome.up(f"container {name} is running (no healthcheck)")
    if status == "healthy":
        return Outcome.up(f"container {name} is running and healthy")
    return Outcome.down(f"container {name} is running, health is {status} ({last_check(health)})")


def last_check(health: dict[str, Any]) -> str:
    """``last check: exit 1: OUTPUT``, the output on one line (the runner sanitizes it too)."""
    from waitfor.kind import sanitize

    log = health.get("Log")
    if not isinstance(log, list) or not log or not isinstance(log[-1], dict):
        return "no check has run yet"
    entry = log[-1]
    output = " ".join(str(entry.get("Output") or "").split())
    code = entry.get("ExitCode")
    said = f"exit {code}" if isinstance(code, int) else "no exit code"
    if output:
        said += f": {sanitize.shown(output)[:200]}"
    streak = health.get("FailingStreak")
    if isinstance(streak, int) and streak > 1:
        said += f"; {streak} failing in a row"
    return f"last check: {said}"


def exited(name: str, container: dict[str, Any], code: int) -> Outcome:
    """Exited with ``code``; another code with no restart policy will not change: fatal."""
    state = container.get("State") or {}
    status = state.get("Status")
    found = state.get("ExitCode")
    if status in ("exited", "dead") and not state.get("Running"):
        if found == code:
            return Outcome.up(f"container {name} exited with code {code}")
        policy = ((container.get("HostConfig") or {}).get("RestartPolicy") or {}).get("Name")
        reason = f"container {name} exited with code {found}, not {code}"
        if status == "dead" or policy in (None, "", "no"):
            return Outcome.fatal(f"{reason} (no restart policy: it stays so)")
        return Outcome.down(f"{reason} (restart policy {policy})")
    if status == "created":
        return Outcome.down(f"container {name} has not started yet (status created)")
    return Outcome.down(f"container {name} has not exited yet ({describe_state(container)})")
