"""waitfor's checks as a testcontainers-python (4.x) wait strategy.

    from testcontainers.core.container import DockerContainer
    from waitfor.testcontainers import WaitforStrategy

    db = DockerContainer("postgres:16").with_exposed_ports(5432).waiting_for(
        WaitforStrategy("postgresql://postgres@{host}:{port:5432}/postgres#mode=query")
    )

In a target, ``{host}`` becomes the container's host address and ``{port:5432}`` the host port
that container port 5432 is published on. Every waitfor target kind and option works; the
strategy's startup timeout is waitfor's deadline, attempts follow waitfor's backoff, and a
timeout raises ``TimeoutError`` with each target's last reason. A container that exits while
being awaited fails at once, with the end of its log. Install with ``waitfor[testcontainers]``.
"""

from __future__ import annotations

import re
from typing import Any

from testcontainers.core.waiting_utils import WaitStrategy, WaitStrategyTarget

from waitfor.api import DEFAULT_ATTEMPT_TIMEOUT, wait_for
from waitfor.backoff import Backoff
from waitfor.errors import WaitTimeout
from waitfor.runner import Event, EventType

__all__ = ["ContainerExited", "WaitforStrategy"]

_PLACEHOLDER = re.compile(r"\{host\}|\{port:(\d+)\}")


class ContainerExited(RuntimeError):
    """The container stopped while its targets were awaited."""


class WaitforStrategy(WaitStrategy):
    def __init__(
        self,
        *targets: str,
        attempt_timeout: float = DEFAULT_ATTEMPT_TIMEOUT,
        backoff: Backoff | None = None,
    ) -> None:
        super().__init__()
        if not targets:
            raise ValueError("WaitforStrategy needs at least one target")
        self.targets = targets
        self.attempt_timeout = attempt_timeout
        self.backoff = backoff

    def resolve(self, container: WaitStrategyTarget) -> list[str]:
        """The targets with the container's host and published ports filled in."""
        host = container.get_container_host_ip()

        def fill(match: re.Match[str]) -> str:
            if match.group(1) is None:
                return f"[{host}]" if ":" in host else host
            try:
                return str(container.get_exposed_port(int(match.group(1))))
            except Exception:
                # A container that exits before it is ever seen running has no ports, and
                # testcontainers says "did not become running": say why instead.
                _fail_if_exited(container)
                raise

        return [_PLACEHOLDER.sub(fill, target) for target in self.targets]

    def wait_until_ready(self, container: WaitStrategyTarget) -> None:
        def on_event(event: Event) -> None:
            if event.type is EventType.NOT_READY:
                _fail_if_exited(container)

        try:
            wait_for(
                *self.resolve(container),
                timeout=self._startup_timeout,
                attempt_timeout=min(self.attempt_timeout, self._startup_timeout),
                backoff=self.backoff,
                on_event=on_event,
            )
        except WaitTimeout as exc:
            raise TimeoutError(f"container not ready: {exc}") from None


def _fail_if_exited(container: WaitStrategyTarget) -> None:
    wrapped: Any = container.get_wrapped_container()
    wrapped.reload()
    if wrapped.status in ("exited", "dead"):
        stdout, stderr = container.get_logs()
        tail = (stdout + stderr).decode(errors="replace").strip().splitlines()[-5:]
        raise ContainerExited(f"container {wrapped.status} while awaited; log ends: {tail}")
