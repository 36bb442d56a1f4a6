"""Every row of kstatus's table (tests/kinds/k8s/kstatus_rows.py) through waitfor's whole API path.

A scripted API server serves each row's object exactly as the row writes it (a real one would
add defaults, and its controllers would rewrite the status): discovery, the list, the watch.
One waitfor run waits for all of them; its JSON summary says what it decided for each. Every
row agrees with kstatus, except the rows of the types where waitfor keeps kubectl's rule, which
docs/kinds/k8s.md lists one by one. tests/kinds/k8s/test_kstatus_lab.py does the same on the real
lab for the types whose status can be set there.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.kinds.k8s.kstatus_rows import ROWS, SAME, Row
from tests.kinds.k8s.test_hostile import (
    kubeconfig,
    read_path,
    reply_json,
    stream_head,
    waitfor,
)
from tests.support.servers import scripted_peer

ROOT = Path(__file__).resolve().parents[3]
PLURALS = {
    "Pod": "pods",
    "PersistentVolumeClaim": "persistentvolumeclaims",
    "Service": "services",
    "StatefulSet": "statefulsets",
    "DaemonSet": "daemonsets",
    "Deployment": "deployments",
    "ReplicaSet": "replicasets",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "MyCR": "mycrs",
    "Job": "jobs",
    "CronJob": "cronjobs",
    "HorizontalPodAutoscaler": "horizontalpodautoscalers",
    "CustomResourceDefinition": "customresourcedefinitions",
    "EndpointSlice": "endpointslices",
}
CLUSTER_SCOPED = {"CustomResourceDefinition"}


def discovery() -> dict[str, object]:
    """/api/v1, /apis and each group version's document, for the rows' types."""
    by_version: dict[str, list[dict[str, object]]] = {}
    kinds = {(r.group, r.version, r.kind) for r in ROWS} | {
        ("discovery.k8s.io", "v1", "EndpointSlice")
    }
    for group, version, kind in sorted(kinds):
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        by_version.setdefault(path, []).append(
            {"name": PLURALS[kind], "kind": kind, "namespaced": kind not in CLUSTER_SCOPED}
        )
    documents: dict[str, object] = {
        path: {"kind": "APIResourceList", "groupVersion": path.split("/", 2)[2], "resources": r}
        for path, r in by_version.items()
    }
    groups = sorted({g for g, _, _ in kinds if g})
    documents["/apis"] = {
        "kind": "APIGroupList",
        "groups": [
            {"name": g, "preferredVersion": {"version": next(v for gg, v, _ in kinds if gg == g)}}
            for g in groups
        ],
    }
    return documents


@contextmanager
def rows_server(rows: list[Row]) -> Iterator[str]:
    documents = discovery()
    objects: dict[str, dict[str, object]] = {}
    for r in rows:
        plural = PLURALS[r.kind]
        base = f"/apis/{r.group}/{r.version}" if r.group else f"/api/{r.version}"
        namespace = "" if r.kind in CLUSTER_SCOPED else "/namespaces/qual"
        objects.setdefault(f"{base}{namespace}/{plural}", {})[r.name.lower()] = {
            **r.obj,
            "metadata": {**r.obj["metadata"], "resourceVersion": "7"},
        }

    def answer(conn: socket.socket) -> None:
        request = read_path(conn)
        if request is None:
            return
        path, query = request
        if path in documents:
            reply_json(conn, 200, documents[path])
        elif "watch" in query:
            stream_head(conn)  # nothing changes: the list said it all
            time.sleep(10)
        else:
            name = query.get("fieldSelector", [""])[0].removeprefix("metadata.name=")
            found = objects.get(path, {})
            items = [found[name]] if name in found else []
            reply_json(conn, 200, {"metadata": {"resourceVersion": "7"}, "items": items})

    with scripted_peer(answer) as port:
        yield f"http://127.0.0.1:{port}"


def target(r: Row) -> str:
    plural = f"{PLURALS[r.kind]}.{r.group}" if r.group else PLURALS[r.kind]
    where = "" if r.kind in CLUSTER_SCOPED else "qual/"
    return f"k8s:{where}{plural}/{r.name.lower()}"


def decided(out: str) -> dict[str, tuple[bool, str]]:
    """target -> (ready, reason), from a JSON run's summaries."""
    found = {}
    for line in out.splitlines():
        event = json.loads(line)
        if event["event"] == "summary":
            found[event["target"]] = (event["ready"], event["reason"])
    return found


def state_of(ready: bool, reason: str) -> str:
    if ready:
        return "ready"
    return "stalled" if "stalled" in reason else "waiting"


def test_every_row_of_kstatus_table_as_kstatus_or_as_readme_says(tmp_path: Path) -> None:
    rows = [r for r in ROWS if r.state != "fatal"]  # a fatal target ends the whole run
    with rows_server(ROWS) as url:
        config = kubeconfig(tmp_path, url)
        # 57 targets on one scripted server: 6 s, so that on a loaded machine every one has
        # had its list answered before the deadline cuts an attempt off (2 s once left one
        # with "no answer to /api/v1/namespaces/qual/pods")
        code, out, _ = waitfor(config, "-t", "6", "-o", "json", *map(target, rows))
        assert code == 124, out
        found = decided(out)
        for r in rows:
            ready, reason = found[target(r)]
            assert (state_of(ready, reason), r.name) == (r.state, r.name), reason
            assert r.reason in reason, (r.name, reason)
        for r in (r for r in ROWS if r.state == "fatal"):
            code, out, _ = waitfor(config, "-t", "5", target(r))
            assert code == 2, out
            assert r.reason in out, out


@pytest.mark.parametrize("r", ROWS, ids=lambda r: r.name)
def test_row_agrees_with_kstatus_or_readme_names_it(r: Row) -> None:
    readme = (ROOT / "docs" / "kinds" / "k8s.md").read_text()
    if r.differs:
        assert r.state != SAME[r.kstatus], f"{r.name}: says it differs, but agrees"
        assert f"`{r.name}`" in readme, f"docs/kinds/k8s.md does not name kstatus row {r.name}"
    else:
        assert r.state == SAME[r.kstatus], f"{r.name}: differs from kstatus without saying so"
