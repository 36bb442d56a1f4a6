"""What a ``k8s:`` target names: its options and its ``[NAMESPACE/]TYPE[/NAME]``, read together."""

from __future__ import annotations

from waitfor.kind import Value
from waitfor.kind import jsonexpect as expect


class K8sOptions(Value):
    selector: str | None = None
    condition: tuple[str, str] | None = None  # (type, status)
    json: tuple[expect.JsonExpectation, ...] = ()
    exists: bool = False
    min: int | None = None
    context: str | None = None
    #: ``missing=ready``: an object that is not there counts as ready (a Job its TTL removed)
    missing_ready: bool = False

    @property
    def expectation(self) -> bool:
        return self.condition is not None or bool(self.json) or self.exists


class Spec(Value):
    """What a target names, once its address and options are read together."""

    namespace: str | None  # None: the credentials' default namespace
    type: str
    name: str | None
    selector: str | None


def spec_of(segments: tuple[str, ...], options: K8sOptions) -> Spec:
    """``[NS/]TYPE/NAME`` or, with a selector, ``[NS/]TYPE``; ValueError if neither."""
    if options.selector is not None:
        if len(segments) == 3:
            raise ValueError("give NAMESPACE/TYPE with a selector, not a NAME as well")
        namespace, kind = (None, segments[0]) if len(segments) == 1 else segments
        return Spec(namespace, kind, None, options.selector)
    if len(segments) == 1:
        raise ValueError("expected k8s:[NAMESPACE/]TYPE/NAME or k8s:[NAMESPACE/]TYPE#selector=")
    namespace = segments[0] if len(segments) == 3 else None
    return Spec(namespace, segments[-2], segments[-1], None)
