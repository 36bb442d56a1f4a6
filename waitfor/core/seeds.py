"""Targets that name several servers (``kafka://h1:9092,h2:9092``, a MongoDB seed list): any one
that answers will do, as the clients' bootstrap treats them.

The conversation template's ``probe_at`` (:mod:`waitfor.core.conversation_check`) talks to one
address; a kind with a list parses it with :func:`split` and probes it with :func:`first_ready`
(on the event loop: every address at once, the first ready answer wins, the others are
cancelled) and :func:`first_ready_now` (the quick first attempt: one after the other, each with
its share of the time left).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from waitfor.base import urls
from waitfor.base.outcome import Outcome
from waitfor.base.urls import host_port
from waitfor.base.values import Value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from waitfor.base.deadline import Deadline

HostPort = tuple[str, int]
MAX_SEEDS = 100  # a list longer than any cluster's bootstrap is a mistake, not a cluster


class SeedUrl(Value):
    """``scheme://[user[:password]@]host[:port][,host[:port]...][/path][?query]``, parsed."""

    seeds: tuple[HostPort, ...]
    username: str | None  # as written (percent-encoded), for the display
    password: str | None
    user: str | None  # decoded
    secret: str | None  # the password, decoded
    path: str
    query: str


def split(scheme: str, url: str, default_port: int) -> SeedUrl:
    """Parse a seed list; ValueError (quoting nothing secret) if any part is invalid."""
    if not url.startswith(f"{scheme}://"):
        raise ValueError(f"write {scheme}://HOST[:PORT][,HOST[:PORT]...]")
    rest = url[len(scheme) + 3 :]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    userinfo, at, hosts = authority.rpartition("@")
    items = hosts.split(",")
    if len(items) > MAX_SEEDS:
        raise ValueError(f"more than {MAX_SEEDS} hosts")
    # the first host with the userinfo and the rest: the one parser every kind uses
    parts = urls.split(f"{scheme}://{userinfo}{at}{items[0]}{tail}")
    seeds = []
    for item in items:
        if not item:
            raise ValueError("an empty host in the list")
        one = parts if item is items[0] else urls.split(f"{scheme}://{item}")
        if one is not parts and (one.username is not None or one.path or one.query):
            raise ValueError("invalid host list")
        seeds.append((urls.host(one), urls.port(one, default_port)))
    user = None if parts.username is None else urls.decoded(parts.username, "user")
    secret = None if parts.password is None else urls.decoded(parts.password, "password")
    return SeedUrl(
        tuple(dict.fromkeys(seeds)),
        parts.username,
        parts.password,
        user,
        secret,
        parts.path,
        parts.query,
    )


def shown(seeds: Sequence[HostPort]) -> str:
    return ",".join(host_port(host, port) for host, port in seeds)


def as_param(seeds: Sequence[HostPort]) -> str:
    """The list as one ``Address.params`` value (hosts hold neither spaces nor commas)."""
    return ",".join(f"{host} {port}" for host, port in seeds)


def from_param(value: str) -> tuple[HostPort, ...]:
    pairs = (item.rpartition(" ") for item in value.split(","))
    return tuple((host, int(port)) for host, _, port in pairs)


async def first_ready(
    seeds: Sequence[HostPort], probe: Callable[[HostPort], Awaitable[Outcome]]
) -> Outcome:
    """Every seed at once; the first ready outcome, else every seed's reason."""
    import asyncio

    if len(seeds) == 1:
        return await probe(seeds[0])
    tasks = [asyncio.ensure_future(probe(seed)) for seed in seeds]
    try:
        for done in asyncio.as_completed(tasks):
            outcome = await done
            if outcome.ready:
                return outcome
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return combined(seeds, [task.result() for task in tasks])


def first_ready_now(
    seeds: Sequence[HostPort],
    probe_now: Callable[[HostPort, Deadline], Outcome | None],
    deadline: Deadline,
) -> Outcome | None:
    """One after the other, each with an equal share of what is left: the first ready, or None."""
    for index, seed in enumerate(seeds):
        left = deadline.left()
        if left <= 0:
            return None
        outcome = probe_now(seed, deadline.within(left / (len(seeds) - index)))
        if outcome is not None and outcome.ready:
            return outcome
    return None


def combined(seeds: Sequence[HostPort], outcomes: Sequence[Outcome]) -> Outcome:
    """Not ready anywhere: one reason if they agree, else each address's own."""
    if any(outcome.permanent for outcome in outcomes):
        return next(outcome for outcome in outcomes if outcome.permanent)
    reasons = list(dict.fromkeys(outcome.reason for outcome in outcomes))
    if len(reasons) == 1:
        return Outcome.down(reasons[0])
    shown = []
    for seed, outcome in zip(seeds, outcomes, strict=True):
        named = host_port(*seed)  # connecting's reasons name the address already
        shown.append(outcome.reason if named in outcome.reason else f"{named}: {outcome.reason}")
    return Outcome.down("; ".join(shown))
