"""Containers: ``docker:NAME`` (or ``container:NAME``), through the Docker Engine API.

Ready when the container is running and, if it has a HEALTHCHECK, its health is ``healthy``
(running is enough without one); ``#exited=N`` when it has exited with code N (compose's
``service_completed_successfully``: exited with another code and no restart policy is final,
exit 2); ``#log=RE2`` when a line of its logs (stdout and stderr) matches.

The engine is the one ``DOCKER_HOST`` names (``unix://`` or plain ``tcp://``), else the first of
``/var/run/docker.sock`` and Podman's rootful ``/run/podman/podman.sock`` that exists, looked for
at each attempt (an engine that is starting is not ready yet). Podman's API service speaks the
same API. Logs are read from where the last attempt stopped (``since`` its last line's
timestamp) and searched 256 KiB at a time, so a chatty container's log is not read whole on
every attempt, nor held in memory.
"""

from __future__ import annotations

from functools import cached_property

from waitfor.kind import Address, Check, OptionPairs, Outcome, Value, reject_unknown, single
from waitfor.kinds.docker import ready

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from waitfor.kind import Deadline, Pattern
    from waitfor.kinds.docker.engine import Endpoint, Engine

#: Docker's container names ([a-zA-Z0-9][a-zA-Z0-9_.-]*), and IDs or their prefixes
_NAME_FIRST = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_NAME_REST = _NAME_FIRST | frozenset("_.-")
MAX_NAME = 253


class DockerOptions(Value):
    exited: int | None = None  # ready when the container exited with this code
    log: Pattern | None = None  # ready when a line of its logs matches (multi-line mode)
    log_text: str = ""  # the pattern as written, for the reasons


class DockerCheck(Check[DockerOptions]):
    OPTION_NAMES = frozenset({"exited", "log"})
    USAGE = (
        ("docker:NAME", "the container runs and, with a HEALTHCHECK, is healthy"),
        ("docker:NAME#exited=0", "the container has exited with code 0"),
        ("docker:NAME#log=RE2", "a line of the container's logs matches"),
    )

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        from waitfor.kinds.docker.engine import endpoint_from_env

        name = url[len(scheme) + 1 :]
        if name.startswith("//"):
            name = name[2:]
        if not name:
            raise ValueError(f"missing container name: {scheme}:NAME")
        if not (
            len(name) <= MAX_NAME
            and name[0] in _NAME_FIRST
            and all(char in _NAME_REST for char in name)
        ):
            raise ValueError(
                "a container name is letters, digits and _.- (starting with a letter or digit)"
            )
        endpoint = endpoint_from_env()  # a DOCKER_HOST this kind cannot use: exit 2 now
        params: tuple[tuple[str, str], ...] = ()
        if endpoint is not None:
            params = (("socket", endpoint.socket), ("host", endpoint.host))
            params += (("port", str(endpoint.port)),)
        return Address(host=name, port=None, display=f"{scheme}:{name}", params=params)

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> DockerOptions:
        reject_unknown(pairs, cls.OPTION_NAMES)
        exited, log = single(pairs, "exited"), single(pairs, "log")
        if exited is not None and log is not None:
            raise ValueError("give exited or log, not both")
        if exited is not None:
            code = exited.strip()
            if not (code.isascii() and code.isdigit() and int(code) <= 255):
                raise ValueError(f"exited must be an exit code 0-255, not {exited[:20]!r}")
            return DockerOptions(exited=int(code))
        if log is not None:
            from waitfor.kind import option_pattern

            if not log:  # would match any line: "any output at all" is not what was meant
                raise ValueError("log must be a pattern, not empty")
            option_pattern("log", log)  # the pattern as written: its errors quote it so
            # searched over many lines at once, ^ and $ at each line's ends
            return DockerOptions(log=option_pattern("log", f"(?m:{log})"), log_text=log)
        return DockerOptions()

    @cached_property
    def _engines(self) -> dict[Endpoint, Engine]:
        return {}

    @cached_property
    def _log_state(self) -> dict[str, Any]:
        return {}  # container id, since, matched: where the reading of its logs has got to

    def _endpoint(self) -> Endpoint | str:
        """DOCKER_HOST's, else the first default socket that exists (or why there is none)."""
        from waitfor.kinds.docker.engine import Endpoint, find_socket

        params = dict(self.target.params)
        if params:
            return Endpoint(socket=params["socket"], host=params["host"], port=int(params["port"]))
        return find_socket()

    def _engine(self) -> Engine | str:
        from waitfor.kinds.docker.engine import Engine

        endpoint = self._endpoint()
        if isinstance(endpoint, str):
            return endpoint
        engine = self._engines.get(endpoint)
        if engine is None:
            engine = self._engines[endpoint] = Engine(endpoint)
        return engine

    def probe_now(self, deadline: Deadline) -> Outcome | None:
        """The quick first attempt (:mod:`.quick`): running / exited, not logs."""
        if self.options.log is not None:
            return None
        from waitfor.kinds.docker.quick import first_attempt

        endpoint = self._endpoint()
        if isinstance(endpoint, str):
            return None
        return first_attempt(endpoint, self.target.host, self.options.exited, deadline)

    async def probe(self, deadline: Deadline) -> Outcome:
        from waitfor.kinds.docker.engine import EngineError, NoSuchContainer

        engine = self._engine()
        if isinstance(engine, str):
            return Outcome.down(engine)
        name = self.target.host
        try:
            container = await engine.inspect(name, deadline)
            if container is None:
                return Outcome.down(f"no such container {name}")
            if self.options.log is not None:
                return await self._read_logs(engine, container, deadline)
        except NoSuchContainer:  # removed between the inspection and the logs
            return Outcome.down(f"no such container {name}")
        except EngineError as exc:
            return Outcome.down(str(exc))
        if self.options.exited is not None:
            return ready.exited(name, container, self.options.exited)
        return ready.running(name, container)

    async def _read_logs(
        self, engine: Engine, container: dict[str, Any], deadline: Deadline
    ) -> Outcome:
        import contextlib

        from waitfor.kinds.docker.engine import since_after

        name, state = self.target.host, self._log_state
        pattern, shown = self.options.log, self.options.log_text
        assert pattern is not None
        if state.get("id") != container.get("Id"):  # another container of that name: anew
            state.clear()
            state["id"] = container.get("Id")
        if not state.get("matched"):
            tty = bool((container.get("Config") or {}).get("Tty"))
            batches = engine.log_lines(name, state.get("since", ""), tty, deadline)
            async with contextlib.aclosing(batches):
                async for lines in batches:
                    if not lines:
                        continue
                    # less each line's timestamp, and a TTY's carriage return
                    text = b"\n".join(line.partition(b" ")[2].rstrip(b"\r") for line in lines)
                    if await pattern.search(text):
                        state["matched"] = True
                        break
                    # searched: the next attempt reads on from here (the same second again on
                    # engines whose stamps are whole seconds, which is no line missed)
                    state["since"] = since_after(lines[-1].partition(b" ")[0]) or ""
        if state.get("matched"):
            return Outcome.up(f"a line of container {name}'s logs matches {shown!r}")
        now = ready.describe_state(container)
        return Outcome.down(f"no line of container {name}'s logs matches {shown!r} yet ({now})")

    async def aclose(self) -> None:
        for engine in self._engines.values():
            await engine.aclose()
