"""The k8s: kind's parts that need no API server: targets, readiness rules, kubeconfig reading.

The readiness rules are also run here on the shapes the 1.20 lab cannot produce: EndpointSlice
``discovery.k8s.io/v1`` (1.21+) and core/v1 Endpoints (servers without EndpointSlices).
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.support.targets import refusals
from waitfor.core.targets import parse_target
from waitfor.kinds.k8s import ready
from waitfor.kinds.k8s.check import K8sOptions, spec_of
from waitfor.net.k8s import config as k8s_config

Json = dict[str, Any]


@pytest.mark.parametrize(
    ("text", "namespace", "kind", "name", "selector"),
    [
        ("k8s:job/migrate", None, "job", "migrate", None),
        ("k8s:app/job/migrate", "app", "job", "migrate", None),
        ("k8s:deployment.apps/web", None, "deployment.apps", "web", None),
        ("k8s:pods#selector=app=db,tier!=cache", None, "pods", None, "app=db,tier!=cache"),
        ("k8s:app/pods#selector=app=db&min=3", "app", "pods", None, "app=db"),
        (
            "k8s:certificates.cert-manager.io/web#condition=Ready",
            None,
            "certificates.cert-manager.io",
            "web",
            None,
        ),
    ],
)
def test_targets_parse(
    text: str, namespace: str | None, kind: str, name: str | None, selector: str | None
) -> None:
    target = parse_target(text)
    assert target.kind == "k8s"
    assert str(target) == text
    options = target.options
    assert isinstance(options, K8sOptions)
    spec = spec_of(tuple((target.param("path") or "").split("/")), options)
    assert (spec.namespace, spec.type, spec.name, spec.selector) == (
        namespace,
        kind,
        name,
        selector,
    )


test_bad_targets_are_one_line_usage_errors = refusals(
    [
        ("k8s://job/x", "no '//'"),
        ("k8s:a/b/c/d", "expected k8s:[NAMESPACE/]TYPE/NAME"),
        ("k8s:job//x", "expected k8s:[NAMESPACE/]TYPE/NAME"),
        ("k8s:Bad_NS/job/x", "not a valid namespace name"),
        ("k8s:job/x#condition=", "condition must be TYPE or TYPE=STATUS"),
        ("k8s:job/x#min=0", "min must be a whole number from 1 to 999999"),
        ("k8s:pods#selector=a&min=\u00b2", "min must be a whole number from 1 to 999999"),
        ("k8s:pods#selector=a&min=" + "9" * 5000, "min must be a whole number from 1 to 999999"),
        ("k8s:pods#selector=" + "a" * 9000, "selector is longer than 8192 characters"),
        ("k8s:job/x#condition=Ready=" + "T" * 100, "condition must be TYPE or TYPE=STATUS"),
        ("k8s:job/x#exists&condition=Ready", "exists takes no condition"),
        ("k8s:job/x#colour=red", "unknown option 'colour'"),
        ("k8s:job/x#json=", "json needs a PATH"),
        ("k8s:job/x?watch=1", "options go after '#'"),
    ],
    regex=False,
    one_line=True,
)


def test_type_alone_needs_a_selector_and_name_excludes_one() -> None:
    with pytest.raises(ValueError, match="TYPE/NAME or"):
        spec_of(("job",), K8sOptions())
    with pytest.raises(ValueError, match="not a NAME as well"):
        spec_of(("ns", "job", "x"), K8sOptions(selector="a=b"))


def test_namespace_placeholder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "app")
    assert str(parse_target("k8s:{namespace}/job/migrate")) == "k8s:app/job/migrate"


def test_condition_defaults_to_true() -> None:
    options = parse_target("k8s:x/y#condition=Ready").options
    assert isinstance(options, K8sOptions)
    assert options.condition == ("Ready", "True")
    options = parse_target("k8s:x/y#condition=Ready=false").options
    assert isinstance(options, K8sOptions)
    assert options.condition == ("Ready", "false")


# --- readiness rules (kubectl rollout status) -------------------------------------------------


def deployment(generation: int = 2, **status: int) -> Json:
    return {
        "metadata": {"generation": generation},
        "spec": {"replicas": 3},
        "status": {"observedGeneration": 2, **status},
    }


def test_deployment_steps_as_kubectl_rollout_status() -> None:
    assert ready.deployment(deployment(generation=3)).reason == "spec update not observed yet"
    assert ready.deployment(deployment(updatedReplicas=1)).reason == "1/3 replicas updated"
    verdict = ready.deployment(deployment(updatedReplicas=3, replicas=4))
    assert verdict.reason == "1 old replicas pending termination"
    verdict = ready.deployment(deployment(updatedReplicas=3, replicas=3, availableReplicas=2))
    assert verdict.reason == "2/3 replicas available"
    assert not verdict.ready, verdict
    assert ready.deployment(deployment(updatedReplicas=3, replicas=3, availableReplicas=3)).ready


def test_deployment_past_its_progress_deadline_is_retried() -> None:
    obj = deployment(updatedReplicas=3, replicas=3, availableReplicas=3)
    obj["status"]["conditions"] = [
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
    ]
    verdict = ready.deployment(obj)
    assert (verdict.ready, verdict.fatal) == (False, False)


def test_statefulset_rules() -> None:
    obj: Json = {
        "metadata": {"generation": 1},
        "spec": {"replicas": 2, "updateStrategy": {"type": "RollingUpdate"}},
        "status": {"observedGeneration": 1, "readyReplicas": 1},
    }
    assert ready.statefulset(obj).reason == "1/2 replicas ready"
    obj["status"].update(readyReplicas=2, updateRevision="b", currentRevision="a")
    assert not ready.statefulset(obj).ready
    obj["status"]["currentRevision"] = "b"
    assert ready.statefulset(obj).ready
    obj["spec"]["updateStrategy"]["rollingUpdate"] = {"partition": 1}
    obj["status"]["updatedReplicas"] = 0
    assert not ready.statefulset(obj).ready
    obj["status"]["updatedReplicas"] = 1
    assert ready.statefulset(obj).ready


def test_daemonset_and_replicaset_rules() -> None:
    ds: Json = {
        "metadata": {"generation": 1},
        "status": {
            "observedGeneration": 1,
            "desiredNumberScheduled": 2,
            "updatedNumberScheduled": 2,
            "numberAvailable": 1,
        },
    }
    assert ready.daemonset(ds).reason == "1/2 pods available"
    ds["status"]["numberAvailable"] = 2
    assert ready.daemonset(ds).ready
    rs: Json = {
        "metadata": {"generation": 1},
        "spec": {"replicas": 2},
        "status": {"observedGeneration": 1, "availableReplicas": 2},
    }
    assert ready.replicaset(rs).ready


def test_job_failed_is_fatal_with_its_reason() -> None:
    job: Json = {
        "status": {
            "failed": 1,
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                }
            ],
        }
    }
    verdict = ready.job(job)
    assert verdict.fatal
    assert verdict.reason == (
        "failed: BackoffLimitExceeded: Job has reached the specified backoff limit"
    )
    assert ready.job({"status": {"active": 1}}).reason == "not complete (1 active)"
    done = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert ready.job(done).ready


def test_condition_as_kubectl_wait() -> None:
    obj: Json = {
        "metadata": {"generation": 2},
        "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "NotYetIssued"}]},
    }
    assert ready.condition_met(obj, "ready").reason == "condition Ready is False: NotYetIssued"
    assert ready.condition_met(obj, "Ready", "false").ready
    assert ready.condition_met(obj, "Synced").reason == "no condition Synced"
    obj["status"]["conditions"][0].update(status="True", observedGeneration=1)
    assert not ready.condition_met(obj, "Ready").ready  # stale for generation 2


def test_endpoint_slices_v1_shape_and_core_endpoints() -> None:
    # discovery.k8s.io/v1 (1.21+): conditions.ready, serving, terminating; ready unset = ready
    slices: list[Json] = [
        {
            "endpoints": [
                {"addresses": ["10.0.0.1"], "conditions": {"ready": True, "serving": True}},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": False, "terminating": True}},
                {"addresses": ["10.0.0.3"]},
            ]
        },
        {"endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}]},
    ]
    ready_set, waiting = ready.endpoint_addresses_slices(slices)
    assert ready_set == {"10.0.0.1", "10.0.0.3"}
    assert waiting == {"10.0.0.2"}
    verdict = ready.endpoints_verdict(ready_set, waiting, 3)
    assert verdict.reason == "2/3 ready endpoints (1 not ready)"
    assert not verdict.ready, verdict
    core = {
        "subsets": [
            {"addresses": [{"ip": "10.0.0.1"}], "notReadyAddresses": [{"ip": "10.0.0.2"}]},
            {"addresses": [{"ip": "10.0.0.1"}]},
        ]
    }
    assert ready.endpoint_addresses_core(core) == ({"10.0.0.1"}, {"10.0.0.2"})


# --- kubeconfig, as kubectl reads it ---------------------------------------------------------


def write(path: Path, document: Json) -> str:
    path.write_text(json.dumps(document))
    return str(path)


def test_kubeconfig_list_merges_first_wins_and_paths_are_relative_to_their_file(
    tmp_path: Path,
) -> None:
    (tmp_path / "a").mkdir()
    first = write(
        tmp_path / "a" / "config",
        {
            "current-context": "one",
            "clusters": [
                {
                    "name": "c",
                    "cluster": {"server": "https://first:6443", "certificate-authority": "ca.pem"},
                }
            ],
            "users": [],
        },
    )
    second = write(
        tmp_path / "config2",
        {
            "current-context": "two",
            "clusters": [{"name": "c", "cluster": {"server": "https://second:6443"}}],
            "contexts": [{"name": "one", "context": {"cluster": "c", "user": "u"}}],
            "users": [{"name": "u", "user": {"tokenFile": "token"}}],
        },
    )
    merged = k8s_config.merge([first, second])
    assert merged["current-context"] == "one"
    cluster = merged["clusters"][0]["cluster"]
    assert cluster["server"] == "https://first:6443"
    assert cluster["certificate-authority"] == str(tmp_path / "a" / "ca.pem")
    assert merged["users"][0]["user"]["tokenFile"] == str(tmp_path / "token")
    files = k8s_config.kubeconfig_files({"KUBECONFIG": f"{first}:{tmp_path / 'missing'}::{second}"})
    assert files == [first, second]


def credentials(tmp_path: Path, user: Json, cluster: Json | None = None, **extra: Any) -> Any:
    path = write(
        tmp_path / "kc",
        {
            "current-context": "x",
            "clusters": [{"name": "c", "cluster": cluster or {"server": "https://api:6443"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", **extra}}],
            "users": [{"name": "u", "user": user}],
        },
    )
    source = k8s_config.Source(environ={"KUBECONFIG": path})
    return asyncio.run(source.credentials(5.0))


def test_token_file_wins_over_token_and_is_reread(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    found = credentials(tmp_path, {"token": "inline", "tokenFile": str(token_file)})
    assert found.headers["Authorization"] == "Bearer from-file"
    assert found.namespace == "default"
    assert "from-file" in found.secrets


def test_client_certificate_data_and_ca_data(tmp_path: Path) -> None:
    ca = trustme.CA()
    client = ca.issue_cert("admin")

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    found = credentials(
        tmp_path,
        {
            "client-certificate-data": b64(client.cert_chain_pems[0].bytes()),
            "client-key-data": b64(client.private_key_pem.bytes()),
        },
        {"server": "https://api:6443", "certificate-authority-data": b64(ca.cert_pem.bytes())},
        namespace="app",
    )
    assert found.namespace == "app"
    assert found.headers == {}
    assert client.private_key_pem.bytes().decode() in found.secrets


def test_bad_kubeconfigs_are_configuration_errors(tmp_path: Path) -> None:
    with pytest.raises(k8s_config.ConfigError, match="auth-provider 'gcp' is not supported"):
        credentials(tmp_path, {"auth-provider": {"name": "gcp"}})
    with pytest.raises(k8s_config.ConfigError, match="not a usable PEM pair"):
        credentials(tmp_path, {"client-certificate-data": "eA==", "client-key-data": "eA=="})
    (tmp_path / "broken").write_text("clusters: [\n")
    source = k8s_config.Source(environ={"KUBECONFIG": str(tmp_path / "broken")})
    with pytest.raises(k8s_config.ConfigError, match="is not valid YAML"):
        asyncio.run(source.credentials(5.0))
    source = k8s_config.Source(context_name="nope", environ={"KUBECONFIG": str(tmp_path / "kc")})
    with pytest.raises(k8s_config.ConfigError, match="no context 'nope' \\(known: x\\)"):
        asyncio.run(source.credentials(5.0))


def test_exec_plugin_credential_is_cached_until_it_expires(tmp_path: Path) -> None:
    count = tmp_path / "count"
    plugin = tmp_path / "plugin.sh"
    plugin.write_text(
        "#!/bin/sh\n"
        f"echo x >> {count}\n"
        'printf \'{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential",'
        '"status":{"token":"tok-%s","expirationTimestamp":"%s"}}\' "$EXTRA" "$EXPIRES"\n'
    )
    plugin.chmod(0o700)

    def run_with(expires: str) -> list[str]:
        count.unlink(missing_ok=True)
        path = write(
            tmp_path / "kc",
            {
                "current-context": "x",
                "clusters": [{"name": "c", "cluster": {"server": "https://api:6443"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "users": [
                    {
                        "name": "u",
                        "user": {
                            "exec": {
                                "apiVersion": "client.authentication.k8s.io/v1beta1",
                                "command": "./plugin.sh",
                                "env": [
                                    {"name": "EXTRA", "value": "7"},
                                    {"name": "EXPIRES", "value": expires},
                                ],
                            }
                        },
                    }
                ],
            },
        )
        source = k8s_config.Source(environ={"KUBECONFIG": path, "PATH": "/usr/bin:/bin"})

        async def twice() -> list[str]:
            return [(await source.credentials(5.0)).headers["Authorization"] for _ in range(2)]

        return asyncio.run(twice())

    assert run_with("2999-01-01T00:00:00Z") == ["Bearer tok-7", "Bearer tok-7"]
    assert len(count.read_text().split()) == 1  # cached
    run_with("2000-01-01T00:00:00Z")
    assert len(count.read_text().split()) == 2  # expired: run again


def test_no_credentials_at_all_is_a_configuration_error(tmp_path: Path) -> None:
    source = k8s_config.Source(environ={"HOME": str(tmp_path)})
    with pytest.raises(k8s_config.ConfigError, match="no Kubernetes credentials"):
        asyncio.run(source.credentials(1.0))


def test_every_rollout_waits_for_its_spec_to_be_observed() -> None:
    """Generation ahead of observedGeneration is not ready for each; a StatefulSet whose status
    never observed any generation neither (0 = 0), the others go on to their counts."""
    rules = (ready.deployment, ready.statefulset, ready.daemonset, ready.replicaset)
    for rule in rules:
        ahead: Json = {"metadata": {"generation": 2}, "status": {"observedGeneration": 1}}
        assert rule(ahead).reason == "spec update not observed yet", rule
        assert not rule(ahead).ready
    never: Json = {"metadata": {"generation": 0}, "spec": {"replicas": 0}, "status": {}}
    assert ready.statefulset(never).reason == "spec update not observed yet"
    assert ready.replicaset(never).ready  # 0/0 available, as kubectl would have it
    assert ready.daemonset(never).ready


def test_an_hpa_annotation_of_nested_brackets_is_not_conditions() -> None:
    from waitfor.kinds.k8s import kstatus

    nested = "[" * 30_000 + "]" * 30_000  # under the 64 KiB bound; json.loads recurses
    obj = {"metadata": {"annotations": {"autoscaling.alpha.kubernetes.io/conditions": nested}}}
    verdict = kstatus.hpa(obj)
    assert not verdict.ready, verdict
