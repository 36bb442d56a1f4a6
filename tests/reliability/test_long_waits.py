"""10,000 failed attempts in one process, per kind: nothing may accumulate."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import time

import pytest

from tests.support.dnsserver import DnsServer
from tests.support.ports import free_port
from waitfor.base.backoff import IMMEDIATE
from waitfor.core.runner import Event, EventType, run
from waitfor.core.targets import parse_target

ATTEMPTS = 10_000
FIGURES: list[str] = []


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_kib() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def fail_many_times(target: str) -> dict[str, int]:
    samples: dict[str, int] = {}

    async def main() -> None:
        waiter = asyncio.current_task()
        assert waiter is not None
        samples["fds_before"] = open_fds()

        def on_event(event: Event) -> None:
            assert event.type is not EventType.READY, event.reason
            if event.type is EventType.NOT_READY and event.attempt in (100, ATTEMPTS):
                gc.collect()
                samples[f"fds_{event.attempt}"] = open_fds()
                samples[f"rss_{event.attempt}"] = rss_kib()
                if event.attempt == ATTEMPTS:
                    waiter.cancel()

        inner = asyncio.create_task(
            run(
                [parse_target(target)],
                timeout=None,
                attempt_timeout=5,
                backoff=IMMEDIATE,
                on_event=on_event,
            )
        )
        with contextlib.suppress(asyncio.CancelledError):
            await inner
        await asyncio.sleep(0)
        samples["pending_tasks"] = len(asyncio.all_tasks()) - 1
        samples["fds_after"] = open_fds()

    asyncio.run(main())
    return samples


@pytest.fixture(scope="module", autouse=True)
def _report() -> object:
    yield None
    print("\n" + "\n".join(FIGURES))


def kinds(dns_server: DnsServer) -> dict[str, str]:
    dns_server.start()
    return {
        "tcp": f"tcp://127.0.0.1:{free_port()}",
        "http": f"http://127.0.0.1:{free_port()}/",
        "postgresql": f"postgresql://127.0.0.1:{free_port()}/x",
        "dns": f"dns://{dns_server.address}/nowhere.test",
    }


@pytest.mark.parametrize("kind", ["tcp", "http", "postgresql", "dns"])
def test_ten_thousand_failed_attempts_leak_nothing(
    kind: str, dns_server: DnsServer, request: pytest.FixtureRequest
) -> None:
    target = kinds(dns_server)[kind]
    started = time.monotonic()
    s = fail_many_times(target)
    took = time.monotonic() - started
    FIGURES.append(
        f"{kind}: {ATTEMPTS} attempts in {took:.1f}s; fds {s['fds_100']} after 100, "
        f"{s[f'fds_{ATTEMPTS}']} after {ATTEMPTS}; RSS {s['rss_100'] / 1024:.1f} MiB after 100, "
        f"{s[f'rss_{ATTEMPTS}'] / 1024:.1f} MiB after {ATTEMPTS}"
    )
    assert s[f"fds_{ATTEMPTS}"] == s["fds_100"]
    assert s["fds_after"] == s["fds_before"]  # no socket left open
    assert s["pending_tasks"] == 0
    assert s[f"rss_{ATTEMPTS}"] - s["rss_100"] < 4 * 1024  # KiB: a small margin for the allocator
