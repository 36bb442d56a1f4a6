"""kstatus's own table (sigs.k8s.io/cli-utils ``pkg/kstatus/status/status_compute_test.go``), row
by row: the object as the row writes it, the status kstatus computes for it, and what waitfor
decides.

``state`` is waitfor's: ``ready``, ``waiting`` (not ready, retried), ``stalled`` (not ready,
retried, the reason says "stalled") or ``fatal`` (exit 2). kstatus's ``Current`` is waitfor's
ready, ``Failed`` its stalled, every other status its waiting. Where kubectl has a rule of its own
(Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, Pod, Service) waitfor keeps kubectl's, so a
row may differ: ``differs`` says how, and docs/kinds/k8s.md's table of differences lists it.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

import yaml

Json = dict[str, Any]

CURRENT, IN_PROGRESS, FAILED, UNKNOWN = "Current", "InProgress", "Failed", "Unknown"
SAME = {CURRENT: "ready", IN_PROGRESS: "waiting", FAILED: "stalled", UNKNOWN: "waiting"}


@dataclass(frozen=True)
class Row:
    name: str  # kstatus's name for the row
    text: str  # its YAML
    kstatus: str  # the status kstatus's table expects
    state: str  # what waitfor decides
    reason: str  # in waitfor's reason
    differs: str = ""  # why waitfor's state is not kstatus's

    @property
    def obj(self) -> Json:
        loaded: Json = yaml.safe_load(self.text)
        loaded.setdefault("metadata", {})["name"] = self.name.lower()
        loaded["metadata"]["namespace"] = "qual"
        return loaded

    @property
    def group(self) -> str:
        api: str = self.obj["apiVersion"]
        return api.rpartition("/")[0]

    @property
    def version(self) -> str:
        api: str = self.obj["apiVersion"]
        return api.rpartition("/")[2]

    @property
    def kind(self) -> str:
        kind: str = self.obj["kind"]
        return kind


def row(name: str, text: str, kstatus: str, reason: str, state: str = "", differs: str = "") -> Row:
    return Row(name, text, kstatus, state or SAME[kstatus], reason, differs)


POD = "apiVersion: v1\nkind: Pod\nmetadata: {generation: 1}\n"
PVC = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {generation: 1}\n"
STS = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {generation: 1}\n"
DS = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {generation: 1}\n"
DEP = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {generation: 1}\n"
RS = "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {generation: 1}\n"
PDB = "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\n"
CR = "apiVersion: something/v1\nkind: MyCR\n"
JOB = "apiVersion: batch/v1\nkind: Job\nmetadata: {generation: 1}\n"
HPA = "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {generation: 1}\n"
CJ = "apiVersion: batch/v1\nkind: CronJob\nmetadata: {generation: 1}\n"
SVC = "apiVersion: v1\nkind: Service\nmetadata: {generation: 1}\n"
CRD = (
    "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
    "metadata: {generation: 1}\n"
)
NOW = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
KUBECTL_POD = "kubectl's rule: condition Ready (as kubectl wait --for=condition=Ready)"

ROWS = [
    # -- Pod: kubectl's rule, condition Ready
    row("podNoStatus", POD, IN_PROGRESS, "Pending, no condition Ready yet"),
    row(
        "podReady",
        POD + "status: {phase: Running, conditions: [{type: Ready, status: 'True'}]}",
        CURRENT,
        "Ready",
    ),
    row(
        "podCompletedOK",
        POD
        + "status: {phase: Succeeded, conditions: "
        + "[{type: Ready, status: 'False', reason: PodCompleted}]}",
        CURRENT,
        "Succeeded, condition Ready is False: PodCompleted",
        "waiting",
        KUBECTL_POD,
    ),
    row(
        "podCompletedFail",
        POD
        + "status: {phase: Failed, conditions: "
        + "[{type: Ready, status: 'False', reason: PodCompleted}]}",
        CURRENT,
        "Failed, condition Ready is False: PodCompleted",
        "waiting",
        KUBECTL_POD,
    ),
    row(
        "podBeingScheduled",
        f"apiVersion: v1\nkind: Pod\nmetadata: {{generation: 1, creationTimestamp: '{NOW}'}}\n"
        + "status: {phase: Pending, conditions: "
        + "[{type: PodScheduled, status: 'False', reason: Unschedulable}]}",
        IN_PROGRESS,
        "Pending, no condition Ready yet",
    ),
    row(
        "podUnschedulable",
        POD
        + "status: {phase: Pending, conditions: "
        + "[{type: PodScheduled, status: 'False', reason: Unschedulable}]}",
        FAILED,
        "Pending, no condition Ready yet",
        "waiting",
        KUBECTL_POD + "; kstatus: stalled after 15 s unscheduled",
    ),
    row(
        "podCrashLooping",
        POD
        + "status: {phase: Running, conditions: "
        + "[{type: PodScheduled, status: 'False', reason: Unschedulable}], "
        + "containerStatuses: [{name: nginx, state: {waiting: {reason: CrashLoopBackOff}}}]}",
        FAILED,
        "Running, no condition Ready yet",
        "waiting",
        KUBECTL_POD + "; kstatus: a container in CrashLoopBackOff is stalled",
    ),
    # -- PersistentVolumeClaim: kstatus's rule
    row("pvcNoStatus", PVC, IN_PROGRESS, "PVC is unknown, not Bound"),
    row("pvcBound", PVC + "status: {phase: Bound}", CURRENT, "PVC is Bound"),
    # -- StatefulSet: kubectl rollout status
    row("stsNoStatus", STS, IN_PROGRESS, "spec update not observed yet"),
    row(
        "stsBadStatus",
        STS + "status: {observedGeneration: 1, currentReplicas: 1}",
        IN_PROGRESS,
        "0/1 replicas ready",
    ),
    row(
        "stsOK",
        STS
        + "spec: {replicas: 4}\n"
        + "status: {observedGeneration: 1, currentReplicas: 4, readyReplicas: 4, replicas: 4}",
        CURRENT,
        "rolled out, 4/4 replicas ready",
    ),
    row(
        "stsLessReady",
        STS
        + "spec: {replicas: 4}\n"
        + "status: {observedGeneration: 1, currentReplicas: 4, readyReplicas: 2, replicas: 4}",
        IN_PROGRESS,
        "2/4 replicas ready",
    ),
    row(
        "stsLessCurrent",
        STS
        + "spec: {replicas: 4}\n"
        + "status: {observedGeneration: 1, currentReplicas: 2, readyReplicas: 4, replicas: 4}",
        IN_PROGRESS,
        "rolled out, 4/4 replicas ready",
        "ready",
        "kubectl compares the revisions, not currentReplicas",
    ),
    row(
        "stsExtraPods",
        STS
        + "spec: {replicas: 4}\n"
        + "status: {observedGeneration: 1, currentReplicas: 4, readyReplicas: 4, replicas: 8}",
        IN_PROGRESS,
        "rolled out, 4/4 replicas ready",
        "ready",
        "kubectl does not wait for extra pods to go",
    ),
    # -- DaemonSet: kubectl rollout status
    row("dsNoStatus", DS, IN_PROGRESS, "spec update not observed yet"),
    row(
        "dsBadStatus",
        DS + "status: {observedGeneration: 1, currentReplicas: 1}",
        IN_PROGRESS,
        "rolled out, 0/0 pods available",
        "ready",
        "kubectl takes a missing desiredNumberScheduled as 0 pods to run",
    ),
    row(
        "dsOK",
        DS
        + "status: {desiredNumberScheduled: 4, currentNumberScheduled: 4, "
        + "updatedNumberScheduled: 4, numberAvailable: 4, numberReady: 4, observedGeneration: 1}",
        CURRENT,
        "rolled out, 4/4 pods available",
    ),
    row(
        "dsLessReady",
        DS
        + "status: {desiredNumberScheduled: 4, currentNumberScheduled: 4, "
        + "updatedNumberScheduled: 4, numberAvailable: 4, numberReady: 2, observedGeneration: 1}",
        IN_PROGRESS,
        "rolled out, 4/4 pods available",
        "ready",
        "kubectl counts available pods, not ready ones",
    ),
    row(
        "dsDifferentGeneration",
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {generation: 2}\n"
        + "status: {desiredNumberScheduled: 4, currentNumberScheduled: 4, "
        + "updatedNumberScheduled: 4, numberAvailable: 4, numberReady: 4, observedGeneration: 1}",
        IN_PROGRESS,
        "spec update not observed yet",
    ),
    row(
        "dsLessAvailable",
        DS
        + "status: {desiredNumberScheduled: 4, currentNumberScheduled: 4, "
        + "updatedNumberScheduled: 4, numberAvailable: 2, numberReady: 4, observedGeneration: 1}",
        IN_PROGRESS,
        "2/4 pods available",
    ),
    # -- Deployment: kubectl rollout status
    row("depNoStatus", DEP, IN_PROGRESS, "spec update not observed yet"),
    row(
        "depOK",
        DEP
        + "status: {observedGeneration: 1, updatedReplicas: 1, readyReplicas: 1, "
        + "availableReplicas: 1, replicas: 1, conditions: [{type: Progressing, status: 'True', "
        + "reason: NewReplicaSetAvailable}, {type: Available, status: 'True'}]}",
        CURRENT,
        "rolled out, 1/1 replicas available",
    ),
    row(
        "depNotProgressing",
        DEP
        + "spec: {progressDeadlineSeconds: 45}\n"
        + "status: {observedGeneration: 1, updatedReplicas: 1, readyReplicas: 1, "
        + "availableReplicas: 1, replicas: 1, conditions: [{type: Progressing, status: 'False', "
        + "reason: Some reason}, {type: Available, status: 'True'}]}",
        IN_PROGRESS,
        "rolled out, 1/1 replicas available",
        "ready",
        "kubectl reads the replica counts; Progressing only for its deadline",
    ),
    row(
        "depNoProgressDeadlineSeconds",
        DEP
        + "status: {observedGeneration: 1, updatedReplicas: 1, readyReplicas: 1, "
        + "availableReplicas: 1, replicas: 1, conditions: [{type: Available, status: 'True'}]}",
        CURRENT,
        "rolled out, 1/1 replicas available",
    ),
    row(
        "depNotAvailable",
        DEP
        + "status: {observedGeneration: 1, updatedReplicas: 1, readyReplicas: 1, "
        + "availableReplicas: 1, replicas: 1, conditions: [{type: Progressing, status: 'True', "
        + "reason: NewReplicaSetAvailable}, {type: Available, status: 'False'}]}",
        IN_PROGRESS,
        "rolled out, 1/1 replicas available",
        "ready",
        "kubectl reads the replica counts, not the Available condition",
    ),
    # -- ReplicaSet: observed, available >= desired
    row("rsNoStatus", RS, IN_PROGRESS, "spec update not observed yet"),
    row(
        "rsOK1",
        RS
        + "spec: {replicas: 2}\n"
        + "status: {observedGeneration: 1, replicas: 2, readyReplicas: 2, availableReplicas: 2, "
        + "fullyLabeledReplicas: 2, conditions: [{type: ReplicaFailure, status: 'False'}]}",
        CURRENT,
        "2/2 replicas available",
    ),
    row(
        "rsOK2",
        RS
        + "spec: {replicas: 2}\n"
        + "status: {observedGeneration: 1, fullyLabeledReplicas: 2, replicas: 2, "
        + "readyReplicas: 2, availableReplicas: 2}",
        CURRENT,
        "2/2 replicas available",
    ),
    row(
        "rsLessAvailable",
        RS
        + "spec: {replicas: 4}\n"
        + "status: {observedGeneration: 1, replicas: 4, readyReplicas: 4, availableReplicas: 2, "
        + "fullyLabeledReplicas: 4}",
        IN_PROGRESS,
        "2/4 replicas available",
    ),
    row(
        "rsLessReady",
        RS
        + "spec: {replicas: 4}\n"
        + "status: {observedGeneration: 1, replicas: 4, readyReplicas: 2, availableReplicas: 4, "
        + "fullyLabeledReplicas: 4}",
        IN_PROGRESS,
        "4/4 replicas available",
        "ready",
        "waitfor counts available replicas, as for a Deployment",
    ),
    row(
        "rsReplicaFailure",
        RS
        + "spec: {replicas: 4}\n"
        + "status: {observedGeneration: 1, replicas: 4, readyReplicas: 4, "
        + "fullyLabeledReplicas: 4, availableReplicas: 4, "
        + "conditions: [{type: ReplicaFailure, status: 'True'}]}",
        IN_PROGRESS,
        "4/4 replicas available",
        "ready",
        "waitfor counts available replicas; ReplicaFailure is about pods not created",
    ),
    # -- PodDisruptionBudget: kstatus's rule
    row(
        "pdbNotObserved",
        PDB + "metadata: {generation: 2}\nstatus: {observedGeneration: 1}",
        IN_PROGRESS,
        "generation 2 not observed yet (generation 2 observed 1)",
    ),
    row(
        "pdbObserved",
        PDB + "metadata: {generation: 1}\nstatus: {observedGeneration: 1}",
        CURRENT,
        "generation observed",
    ),
    # -- any other object (here a custom resource): kstatus's generic rule
    row("crdNoStatus", CR + "metadata: {generation: 1}", CURRENT, "exists (no status)"),
    row(
        "crdMismatchStatusGeneration",
        CR + "metadata: {generation: 2}\nstatus: {observedGeneration: 1}",
        IN_PROGRESS,
        "generation 2 not observed yet (generation 2 observed 1)",
    ),
    row(
        "crdReady",
        CR
        + "metadata: {generation: 1}\nstatus: {conditions: [{type: Ready, status: 'True', "
        + "message: All looks ok, reason: AllOk}]}",
        CURRENT,
        "Ready is True: AllOk: All looks ok",
    ),
    row(
        "crdNotReady",
        CR
        + "metadata: {generation: 1}\nstatus: {observedGeneration: 1, conditions: "
        + "[{type: Ready, status: 'False', reason: NotReadyYet}]}",
        IN_PROGRESS,
        "Ready is False: NotReadyYet",
    ),
    row(
        "crdNoCondition",
        CR
        + "metadata: {generation: 1}\nstatus: {conditions: "
        + "[{type: SomeCondition, status: 'False'}]}",
        CURRENT,
        "current (no Ready, Reconciling or Stalled condition)",
    ),
    # -- Job: kubectl wait --for=condition=complete
    row("jobNoStatus", JOB, IN_PROGRESS, "not complete (no pods yet)"),
    row(
        "jobComplete",
        JOB + "status: {succeeded: 1, active: 0, conditions: [{type: Complete, status: 'True'}]}",
        CURRENT,
        "complete",
    ),
    row(
        "jobFailed",
        JOB
        + "spec: {completions: 4}\nstatus: {succeeded: 3, failed: 1, conditions: "
        + "[{type: Failed, status: 'True', reason: JobFailed}]}",
        FAILED,
        "failed: JobFailed",
        "fatal",
        "a Job never leaves Failed: exit 2 rather than waiting on",
    ),
    row(
        "jobInProgress",
        JOB
        + "spec: {completions: 10, parallelism: 2}\n"
        + "status: {startTime: '2019-06-04T01:17:13Z', succeeded: 3, failed: 1, active: 2, "
        + "conditions: [{type: Failed, status: 'False'}, {type: Complete, status: 'False'}]}",
        CURRENT,
        "not complete (2 active, 3 succeeded, 1 failed)",
        "waiting",
        "kstatus calls a started Job Current; kubectl waits for Complete",
    ),
    # -- HorizontalPodAutoscaler: kstatus's rule
    row("hpaNoStatus", HPA, UNKNOWN, "no conditions yet"),
    row(
        "hpaCurrentStatus",
        HPA
        + "status: {conditions: [{type: AbleToScale, status: 'True'}, "
        + "{type: ScalingActive, status: 'True'}]}",
        CURRENT,
        "able to scale, scaling active",
    ),
    row(
        "hpaScalingLimitedStatus",
        HPA
        + "status: {conditions: [{type: AbleToScale, status: 'True'}, "
        + "{type: ScalingActive, status: 'True'}, {type: ScalingLimited, status: 'True'}]}",
        FAILED,
        "stalled: ScalingLimited is True",
    ),
    # -- CronJob: exists
    row("cronjobNoStatus", CJ, CURRENT, "exists"),
    row("cronjobWithStatus", CJ + "status:", CURRENT, "exists"),
    # -- Service: waitfor waits for ready endpoints (kstatus: a LoadBalancer's cluster IP)
    row(
        "serviceDefault",
        SVC,
        CURRENT,
        "0/1 ready endpoints",
        "waiting",
        "waitfor waits for ready endpoints; kstatus only for a LoadBalancer's cluster IP",
    ),
    row(
        "serviceNodePort",
        SVC + "spec: {type: NodePort}",
        CURRENT,
        "0/1 ready endpoints",
        "waiting",
        "waitfor waits for ready endpoints",
    ),
    row(
        "serviceLBok",
        SVC + "spec: {type: LoadBalancer, clusterIP: 1.2.3.4}",
        CURRENT,
        "0/1 ready endpoints",
        "waiting",
        "waitfor waits for ready endpoints",
    ),
    row(
        "serviceLBnok",
        SVC + "spec: {type: LoadBalancer}",
        IN_PROGRESS,
        "0/1 ready endpoints",
    ),
    # -- CustomResourceDefinition: kstatus's rule
    row("crdNoConditions", CRD, IN_PROGRESS, "not Established yet (installing)"),
    row(
        "crdInstalling",
        CRD
        + "status: {conditions: [{type: NamesAccepted, status: 'True', reason: NoConflicts}, "
        + "{type: Established, status: 'False', reason: Installing}]}",
        IN_PROGRESS,
        "not Established yet (installing)",
    ),
    row(
        "crdNamesNotAccepted",
        CRD + "status: {conditions: [{type: NamesAccepted, status: 'False', reason: SomeReason}]}",
        FAILED,
        "stalled: NamesAccepted is False: SomeReason",
    ),
    row(
        "crdEstablished",
        CRD
        + "status: {conditions: [{type: NamesAccepted, status: 'True', reason: NoConflicts}, "
        + "{type: Established, status: 'True', reason: InitialNamesAccepted}]}",
        CURRENT,
        "Established",
    ),
]
