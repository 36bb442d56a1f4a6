"""A selector's judge, as a watch drives it: one event changes one object, and the verdict must
be what judging every object afresh says, for the cost of judging the one that changed."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from waitfor.kinds.k8s import plan, ready

Json = dict[str, Any]


def pod(name: str, phase: str, is_ready: bool) -> Json:
    status = {"type": "Ready", "status": "True" if is_ready else "False", "reason": "Probe"}
    return {"metadata": {"name": name}, "status": {"phase": phase, "conditions": [status]}}


def afresh(state: dict[str, Json], minimum: int) -> tuple[bool, str]:
    """The selection's verdict from every object judged again (what the judge did before it
    kept verdicts): the count, and the first not ready by name."""
    verdicts = {name: ready.pod(obj) for name, obj in sorted(state.items())}
    count = sum(verdict.ready for verdict in verdicts.values())
    shown = f"{count}/{len(state)} pods ready" + (f" (min {minimum})" if minimum != 1 else "")
    if count >= minimum:
        return True, shown
    waiting = next(((n, v) for n, v in verdicts.items() if not v.ready), None)
    return False, shown + (f"; {waiting[0]}: {waiting[1].reason}" if waiting else "")


NAMES = st.sampled_from([f"p{i}" for i in range(6)])
EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), NAMES, st.sampled_from(["Running", "Pending"]), st.booleans()),
        st.tuples(st.just("delete"), NAMES, st.just(""), st.just(False)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(events=EVENTS, minimum=st.integers(1, 4))
def test_a_watched_selection_is_judged_as_afresh(
    events: list[tuple[str, str, str, bool]], minimum: int
) -> None:
    judge = plan.selection(ready.pod, "pods", "app=x", minimum)
    state: dict[str, Json] = {}
    for op, name, phase, is_ready in events:
        if op == "delete":
            state.pop(name, None)
        else:
            state[name] = pod(name, phase, is_ready)
        watched = judge(state)
        if state:
            assert (watched.ready, watched.reason) == afresh(state, minimum)
        else:
            assert (watched.ready, watched.reason) == (False, "no pods match app=x")


def test_an_event_judges_only_the_object_it_changed() -> None:
    judged: list[str] = []

    def rule(obj: Json) -> ready.Verdict:
        judged.append(obj["metadata"]["name"])
        return ready.pod(obj)

    judge = plan.selection(rule, "pods", "app=x", 5000)
    state = {f"p{i}": pod(f"p{i}", "Running", True) for i in range(5000)}
    assert judge(state).reason == "5000/5000 pods ready (min 5000)"
    judged.clear()
    for i in range(100):
        state[f"p{i}"] = pod(f"p{i}", "Running", i % 2 == 0)
        judge(state)
    assert len(judged) == 100, len(judged)  # 500,000 before: every pod at every event
    reason = judge(state).reason
    assert reason == "4950/5000 pods ready (min 5000); p1: Running, condition Ready is False: Probe"
