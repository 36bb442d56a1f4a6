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

import contextlib
import math
import re
import threading
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from testcontainers.core.config import testcontainers_config
from testcontainers.core.waiting_utils import WaitStrategy, WaitStrategyTarget

from waitfor.api import DEFAULT_ATTEMPT_TIMEOUT, Wait
from waitfor.base.backoff import Backoff
from waitfor.errors import WaitTimeout

if TYPE_CHECKING:
    import asyncio

__all__ = ["ContainerExited", "WaitforStrategy"]

_PLACEHOLDER = re.compile(r"\{host\}|\{port:(\d+)\}")
#: how often the container's state is asked for while its targets are awaited
STATUS_EVERY = 0.5


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
        self.startup_timeout = float(testcontainers_config.timeout)

    def with_startup_timeout(self, timeout: int | timedelta) -> WaitforStrategy:
        """waitfor's deadline (testcontainers keeps its own copy private)."""
        super().with_startup_timeout(timeout)
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        self.startup_timeout = float(seconds)
        return self

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
                # testcontainers says "did not become running": say why instead. (Not in the
                # event loop: no wait has started yet.)
                message = _exit_message(container)
                if message is not None:
                    raise ContainerExited(message) from None
                raise

        return [_PLACEHOLDER.sub(fill, target) for target in self.targets]

    def wait_until_ready(self, container: WaitStrategyTarget) -> None:
        targets = self.resolve(container)
        exited: list[str] = []

        @contextlib.asynccontextmanager
        async def watched() -> AsyncIterator[None]:
            """The container watched while waiting: if it exits, the wait ends with its log."""
            import asyncio

            task = asyncio.current_task()
            assert task is not None
            loop = asyncio.get_running_loop()
            # Docker API calls block: they run in a thread of their own, never in the event
            # loop (where they would stall every probe), and are not waited for at the end.
            stop = threading.Event()

            def on_exit(message: str) -> None:
                exited.append(message)
                task.cancel()

            watcher = threading.Thread(
                target=_watch, args=(container, stop, loop, on_exit), daemon=True
            )
            watcher.start()
            try:
                yield
            except asyncio.CancelledError:
                if exited:
                    raise ContainerExited(exited[0]) from None
                raise
            finally:
                stop.set()

        wait = Wait(
            *targets,
            timeout=self.startup_timeout or None,
            attempt_timeout=min(self.attempt_timeout, self.startup_timeout or math.inf),
            backoff=self.backoff,
        )
        try:
            wait.run_sync(guard=watched)
        except WaitTimeout as exc:
            raise TimeoutError(f"container not ready: {exc}") from None


def _watch(
    container: WaitStrategyTarget,
    stop: threading.Event,
    loop: asyncio.AbstractEventLoop,
    on_exit: Callable[[str], None],
) -> None:
    """Until ``stop``: poll the container's state; if it exited, tell the loop with its log."""
    while not stop.wait(STATUS_EVERY):
        try:
            message = _exit_message(container)
            if message is not None and not stop.is_set():
                loop.call_soon_threadsafe(on_exit, message)
                return
        except Exception:  # noqa: S112 - the Docker API hiccuped or the wait ended: ask again
            continue


def _exit_message(container: WaitStrategyTarget) -> str | None:
    wrapped: Any = container.get_wrapped_container()
    wrapped.reload()
    if wrapped.status not in ("exited", "dead"):
        return None
    stdout, stderr = container.get_logs()
    tail = (stdout + stderr).decode(errors="replace").strip().splitlines()[-5:]
    return f"container {wrapped.status} while awaited; log ends: {tail}"
