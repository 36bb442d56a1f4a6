"""Kubernetes objects, read and *watched* through the API server, ready as kubectl decides.

``k8s:[NAMESPACE/]TYPE/NAME`` is one object, ``k8s:[NAMESPACE/]TYPE#selector=LABELS`` the objects
a label selector matches (at least ``min``, default 1, ready). TYPE is any name kubectl accepts,
resolved through API discovery (:mod:`waitfor.net.k8s.client`). The namespace defaults to the
pod's own, else the kubeconfig context's, else ``default``. Credentials are found as kubectl finds
them (:mod:`waitfor.net.k8s.config`); readiness follows ``kubectl rollout status`` /
``kubectl wait`` (:mod:`.ready`) where kubectl has a rule, else kstatus's (:mod:`.kstatus`),
the rule chosen by :mod:`.plan`. ``condition=TYPE[=STATUS]``, ``json=PATH[==VALUE]`` or
``exists`` override a type's default. With ``missing=ready`` an object that is not there counts
as ready (a Job its TTL removed). With ``--invert`` the wait is for deletion.

The first attempt is a single blocking GET (:mod:`.quick`: no event loop, httpx or PyYAML); it
only ever answers "ready". The wait after it is one list and one long watch (:mod:`.reflector`),
kept across the runner's attempts: an attempt looks at the watch's verdict for its budget and
reports each change, so attempts ending (``--attempt-timeout``) ask the API server nothing, and
the runner begins the next at once (``WATCHES``).
"""

from __future__ import annotations

import re
from functools import cached_property

from waitfor.kind import Address, Check, OptionPairs, Outcome, flag, reject_unknown, single
from waitfor.kind import jsonexpect as expect
from waitfor.kinds.k8s.spec import K8sOptions, Spec, spec_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from waitfor.kind import Deadline
    from waitfor.kinds.k8s.quick import Busy
    from waitfor.kinds.k8s.reflector import Memory, Session

__all__ = ["MAX_SELECTOR", "K8sCheck", "K8sOptions", "spec_of"]

_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9.-]{0,252}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,252}")
# a condition type is a qualified name of at most 316 characters (the API's validation)
_CONDITION = re.compile(r"([A-Za-z0-9][A-Za-z0-9._/-]{0,315})(?:=([A-Za-z]{1,32}))?")
#: an attempt returns this much before its budget ends, so the runner sees its reason, not a
#: cut-off attempt
_MARGIN = 0.2
#: a selector goes into the request's URL (httpx refuses one over 64 KiB); real ones are short
MAX_SELECTOR = 8192


class K8sCheck(Check[K8sOptions]):
    OPTION_NAMES = frozenset(
        {"selector", "condition", "json", "exists", "min", "context", "missing"}
    )
    WATCHES = True  # an attempt ends at its budget, watching: the next one begins at once
    USAGE = (
        ("k8s:[NAMESPACE/]TYPE/NAME", "rolled out / complete / Ready, as kubectl decides"),
        ("k8s:app/job/migrate", "Job migrate in namespace app has completed"),
        ("k8s:svc/db#min=2", "Service db has 2 ready endpoints"),
        ("k8s:pods#selector=app=db,tier!=cache&min=3", "3 matching pods Ready"),
        ("k8s:certificates.cert-manager.io/web#condition=Ready", "any type: condition, json"),
    )

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        rest = url[len(scheme) + 1 :]
        if rest.startswith("/"):
            raise ValueError("expected k8s:[NAMESPACE/]TYPE/NAME (no '//')")
        segments = rest.split("/")
        if not 1 <= len(segments) <= 3 or not all(segments):
            raise ValueError("expected k8s:[NAMESPACE/]TYPE/NAME or k8s:[NAMESPACE/]TYPE#selector=")
        if "?" in rest:
            raise ValueError("options go after '#': k8s:TYPE/NAME#condition=Ready")
        if len(segments) == 3 and not _NAMESPACE.fullmatch(segments[0]):
            raise ValueError(f"namespace {segments[0]!r} is not a valid namespace name")
        for index, segment in enumerate(segments):
            pattern = _NAME if index == len(segments) - 1 else _TYPE
            # The first of two segments may be a namespace (with a selector).
            if not pattern.fullmatch(segment) and not (
                len(segments) == 2 and index == 0 and _NAMESPACE.fullmatch(segment)
            ):
                raise ValueError(f"{segment!r} is not a valid Kubernetes type or name")
        return Address(host="", port=None, display=f"k8s:{rest}", params=(("path", rest),))

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> K8sOptions:
        reject_unknown(pairs, cls.OPTION_NAMES)
        selector = single(pairs, "selector")
        if selector is not None and not selector.strip():
            raise ValueError("selector needs labels, e.g. selector=app=db,tier!=cache")
        if selector is not None and len(selector) > MAX_SELECTOR:
            raise ValueError(f"selector is longer than {MAX_SELECTOR} characters")
        condition = None
        if (text := single(pairs, "condition")) is not None:
            match = _CONDITION.fullmatch(text.strip())
            if not match:
                raise ValueError("condition must be TYPE or TYPE=STATUS, e.g. condition=Ready")
            condition = (match.group(1), match.group(2) or "True")
        minimum = None
        if (text := single(pairs, "min")) is not None:
            # ASCII and short: int() refuses '²' and 5,000 digits with Python's own words
            if not (text.isascii() and text.isdigit() and len(text) <= 6) or int(text) < 1:
                raise ValueError("min must be a whole number from 1 to 999999")
            minimum = int(text)
        exists = flag(pairs, "exists")
        expectations = tuple(expect.parse_expectation(v) for k, v in pairs if k == "json")
        if exists and (condition or expectations):
            raise ValueError("exists takes no condition or json: it only waits for the object")
        context = single(pairs, "context")
        if context is not None and not context.strip():
            raise ValueError("context needs a kubeconfig context name")
        missing = single(pairs, "missing")
        if missing is not None and missing.strip().lower() not in ("ready", "not-ready"):
            raise ValueError("missing must be ready or not-ready (the default), e.g. missing=ready")
        return K8sOptions(
            missing_ready=missing is not None and missing.strip().lower() == "ready",
            selector=selector.strip() if selector else None,
            condition=condition,
            json=expectations,
            exists=exists,
            min=minimum,
            context=context,
        )

    @cached_property
    def _memory(self) -> Memory:
        from waitfor.kinds.k8s.reflector import Memory
        from waitfor.net.k8s.client import Discovery
        from waitfor.net.k8s.config import Source

        return Memory(Source(context_name=self.options.context), Discovery())

    _session: Session | None = None  # the list and watch in progress, across attempts
    _busy: Busy | None = None  # a 429 the first attempt met

    def _spec(self) -> Spec:
        return spec_of(tuple((self.target.param("path") or "").split("/")), self.options)

    def probe_now(self, deadline: Deadline) -> Outcome | None:
        """The first attempt without the event loop, httpx or PyYAML (:mod:`.quick`)."""
        from waitfor.kinds.k8s import quick
        from waitfor.net.k8s.config import Source

        if self.inverted:
            return None
        try:
            spec = self._spec()
        except ValueError:
            return None
        source = Source(context_name=self.options.context)
        try:
            return quick.ready_now(source, spec, self.options, deadline)
        except quick.Busy as busy:
            self._busy = busy  # for the watching path's first request to honour
            return None

    async def probe(self, deadline: Deadline) -> Outcome:
        """A look at the session's verdict, for this attempt's budget (the session goes on)."""
        import asyncio

        from waitfor.kinds.k8s.reflector import Session

        budget = deadline.left()
        loop = asyncio.get_running_loop()
        hold_until = loop.time() + max(budget - _MARGIN, budget * 0.5)
        try:
            spec = self._spec()
        except ValueError as exc:
            return Outcome.fatal(str(exc))
        session = self._session
        if self._busy is not None:
            self._memory.busy, self._busy = self._busy, None
        if session is None:
            session = self._session = Session(
                self._memory, spec, self.options, self.inverted, budget
            )
            session.start()
        return await self._follow(session, hold_until)

    async def _follow(self, session: Session, hold_until: float) -> Outcome:
        """The session's outcome once final, else its verdict at ``hold_until``; meanwhile each
        new verdict is reported (progress, and the reason of a wait cut off now)."""
        import asyncio

        from waitfor.net import activity

        loop = asyncio.get_running_loop()
        with activity.waiting_on(lambda waited: session.waiting_on()):
            while True:
                outcome = session.outcome
                if session.done and outcome is not None:
                    self._session = None  # the next attempt starts a new one
                    return outcome
                if outcome is not None:
                    activity.report(outcome.reason)
                changed = session.changed
                left = hold_until - loop.time()
                if left <= 0 and (outcome is not None or session.waiting_on() is None):
                    # Nothing new this attempt; a request still unanswered is left to the
                    # runner's cut-off, which names it.
                    return outcome or self._memory.last
                try:
                    async with asyncio.timeout(left if left > 0 else None):
                        await changed.wait()
                except TimeoutError:
                    pass

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.aclose()
            self._session = None
