"""zookeeper://HOST[:PORT]: ready when the server answers "ruok" with "imok"."""

from waitfor.kind import (
    Address,
    Check,
    Deadline,
    NetError,
    Options,
    Outcome,
    open_stream,
    standard_address,
)


class ZookeeperCheck(Check[Options]):
    USAGE = (("zookeeper://HOST[:PORT]", "the server answers ruok with imok"),)

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        return standard_address(scheme, url, default_port=2181)  # a host is required, validated

    async def probe(self, deadline: Deadline) -> Outcome:
        try:  # resolves and connects before the attempt's deadline
            reader, writer = await open_stream(self.target.host, self.target.port, deadline)
        except NetError as exc:  # refused, unreachable, not resolving: retried
            return Outcome.down(str(exc))
        try:
            writer.write(b"ruok")
            answer = await reader.read(4)
        except OSError as exc:
            return Outcome.down(f"no answer: {exc.strerror or exc}")
        finally:
            writer.close()
        if answer == b"imok":
            return Outcome.up("imok")
        return Outcome.down(f"answered {answer!r} to ruok")
