"""The benchmark's Markdown tables and PNG plots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

PEERS = {  # waitfor's figure -> the peer it is compared with
    "waitfor tcp": "wait-for-it tcp",
    "waitfor postgresql": "pg_isready",
    "waitfor dns": "busybox nslookup",
    "waitfor http": "curl",
    "waitfor mysql": "mysqladmin ping",
    "waitfor mysql query": "mysqladmin ping",
    "waitfor redis": "redis-cli ping",
    "waitfor grpc": "grpcio health check",
    "waitfor http+unix": "curl --unix-socket",
    "waitfor file": "test -e",
}


WAIT_FOR_IT = "wait-for-it tcp"  # the yardstick: every kind's start-up against it


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def tables(r: dict[str, Any]) -> str:
    m = r["machine"]
    out = [
        "# waitfor benchmarks",
        "",
        f"Measured by `bench/run` on {m['date']}: {m['cpus']} CPUs, Python {m['python']}. "
        "Every peer ran in the same run, interleaved or side by side; ratios are waitfor's "
        "median over the peer's (below 1 is better for waitfor).",
        "",
        "## Cold start with a ready target (whole-process wall time)",
        "",
        "![cold start](cold_start.png)",
        "",
        "| tool | median | p10-p90 | ratio to its peer | ratio to wait-for-it |",
        "| --- | --- | --- | --- | --- |",
    ]
    cold = r["cold_start"]
    wfi = cold.get(WAIT_FOR_IT, {}).get("median")
    for tool, v in cold.items():
        peer = PEERS.get(tool)
        ratio = f"{v['median'] / cold[peer]['median']:.2f}x {peer}" if peer else ""
        to_wfi = f"{v['median'] / wfi:.2f}x" if wfi and tool.startswith("waitfor") else ""
        out.append(
            f"| {tool} | {ms(v['median'])} | {ms(v['p10'])}-{ms(v['p90'])} | {ratio} | {to_wfi} |"
        )
    if "instructions" in r:
        out += instruction_table(r["instructions"])
    out += [
        "",
        "## Detection latency (waiter exit minus the moment the dependency was ready)",
        "",
        "![detection latency](detection.png)",
        "",
        "| dependency | tool | p50 | p95 | max | trials | p50 ratio |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for kind, tools in r["detection"].items():
        ours = tools["waitfor"]["median"]
        for tool, v in tools.items():
            ratio = "" if tool == "waitfor" else f"waitfor {ours / v['median']:.2f}x"
            p95 = v.get("p95", v["p90"])
            out.append(
                f"| {kind} | {tool} | {ms(v['median'])} | {ms(p95)} | {ms(v['max'])} "
                f"| {v['n']} | {ratio} |"
            )
    out += [
        "",
        "## Probes per second against a dependency that stays down (steady state)",
        "",
        "A DNS probe is two queries (A and AAAA) for both waitfor and busybox nslookup.",
        "",
        "| dependency | tool | per second |",
        "| --- | --- | --- |",
    ]
    for kind, tools in r["probe_rate"].items():
        for tool, rate in tools.items():
            out.append(f"| {kind} | {tool} | {rate:.2f} |")
    out += [
        "",
        "## Fan-out: many ready targets in one invocation",
        "",
        "![fan-out](fan_out.png)",
        "",
        "| targets | tool | wall time | peak RSS |",
        "| --- | --- | --- | --- |",
    ]
    for size, tools in r["fan_out"].items():
        for tool, (wall, rss) in tools.items():
            out.append(f"| {size} | {tool} | {ms(wall)} | {rss / 1024:.1f} MiB |")
    out += ["", "## Footprint", "", "| what | size |", "| --- | --- |"]
    for what, size in r["footprint"].items():
        out.append(f"| {what} | {size / 1e6:.1f} MB |")
    if "brokers" in r:
        out += broker_tables(r["brokers"])
    if "k8s" in r:
        out += k8s_tables(r["k8s"])
    return "\n".join(out) + "\n"


def instruction_table(counts: dict[str, int]) -> list[str]:
    base = counts[WAIT_FOR_IT]
    out = [
        "",
        "## Cold start in instructions (callgrind)",
        "",
        "Instructions one run executes, unlike wall time the same under any load "
        "(`valgrind --tool=callgrind`, `PYTHONHASHSEED=0`).",
        "",
        "| tool | instructions | ratio to wait-for-it |",
        "| --- | --- | --- |",
    ]
    for tool, count in counts.items():
        out.append(f"| {tool} | {count / 1e6:.1f} M | {count / base:.2f}x |")
    return out


BROKER_PEERS = {
    "waitfor amqp": "rabbitmq-diagnostics -q ping",
    "waitfor mqtt": "mosquitto_sub -E",
    "waitfor nats": "bash /dev/tcp (nats port)",
}


def broker_tables(b: dict[str, Any]) -> list[str]:
    out = [
        "",
        "## Message brokers",
        "",
        "Cold start against the machine's ready RabbitMQ, Mosquitto and NATS (whole-process wall "
        "time; `rabbitmq-diagnostics` boots an Erlang VM, so it ran fewer times):",
        "",
        "| tool | median | p10-p90 | runs | ratio |",
        "| --- | --- | --- | --- | --- |",
    ]
    cold = b["cold_start"]
    for tool, v in cold.items():
        peer = BROKER_PEERS.get(tool)
        ratio = f"{v['median'] / cold[peer]['median']:.2f}x {peer}" if peer else ""
        out.append(
            f"| {tool} | {ms(v['median'])} | {ms(v['p10'])}-{ms(v['p90'])} | {v['n']} | {ratio} |"
        )
    out += [
        "",
        "Detection latency (waiter exit minus the moment the dependency was ready). A negative "
        'figure is a loop that said "ready" *before* the dependency was usable: '
        "`rabbitmq-diagnostics ping` answers for the Erlang node, whether or not the vhost "
        "exists; `list_vhosts` sees the vhost before its permissions are set.",
        "",
        "| dependency | tool | p50 | p95 | max | trials |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for kind, tools in b["detection"].items():
        for tool, v in tools.items():
            out.append(
                f"| {kind} | {tool} | {ms(v['median'])} | {ms(v['p95'])} | {ms(v['max'])} "
                f"| {v['n']} |"
            )
    return out


def k8s_tables(k: dict[str, Any]) -> list[str]:
    out = [
        "",
        "## Kubernetes objects",
        "",
        "Against the lab's control plane (`tests/support/lab.py`: kube-apiserver and "
        "kube-controller-manager 1.20.2 on loopback; kubectl 1.20.2). Detection latency: the "
        "three waiters start together; 1-11 s later the Job's pod is reported Succeeded (the "
        "kubelet's status PATCH) and the real Job controller marks the Job Complete; a waiter's "
        "exit minus the moment that PATCH returned. The delay spans two of waitfor's 5 s "
        "attempts. The last row is the Job controller's own share, seen by a watch of the "
        "benchmark itself.",
        "",
        "| tool | p50 | p95 | max | trials | p50 ratio | p95 ratio |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    detection = k["detection"]
    ours = detection["waitfor"]
    for tool, v in detection.items():
        ratios = (
            ("", "")
            if tool == "waitfor" or tool.startswith("Job controller")
            else (
                f"waitfor {ours['median'] / v['median']:.2f}x",
                f"waitfor {ours['p95'] / v['p95']:.2f}x",
            )
        )
        out.append(
            f"| {tool} | {ms(v['median'])} | {ms(v['p95'])} | {ms(v['max'])} | {v['n']} "
            f"| {ratios[0]} | {ratios[1]} |"
        )
    out += [
        "",
        "Cold start with the Job already complete (whole-process wall time):",
        "",
        "| tool | median | p10-p90 | runs |",
        "| --- | --- | --- | --- |",
    ]
    for tool, v in k["cold_start"].items():
        out.append(f"| {tool} | {ms(v['median'])} | {ms(v['p10'])}-{ms(v['p90'])} | {v['n']} |")
    return out


def draw(r: dict[str, Any], out: Path) -> None:
    cold = r["cold_start"]
    names = list(cold)
    medians = [cold[n]["median"] * 1000 for n in names]
    errors = [
        [(cold[n]["median"] - cold[n]["p10"]) * 1000 for n in names],
        [(cold[n]["p90"] - cold[n]["median"]) * 1000 for n in names],
    ]
    colors = ["tab:blue" if n.startswith("waitfor") else "tab:gray" for n in names]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.barh(names, medians, xerr=errors, color=colors)
    ax.invert_yaxis()
    ax.set_xlabel("ms (median, p10-p90)")
    ax.set_title("Cold start, ready target")
    fig.tight_layout()
    fig.savefig(out / "cold_start.png", dpi=110)
    plt.close(fig)

    kinds = list(r["detection"])
    fig, axes = plt.subplots(1, len(kinds), figsize=(4 * len(kinds), 4), squeeze=False)
    for ax, kind in zip(axes[0], kinds, strict=True):
        tools = r["detection"][kind]
        labels = [t.replace(" loop", "\nloop") for t in tools]
        ax.bar(
            labels,
            [v["median"] * 1000 for v in tools.values()],
            yerr=[[0] * len(tools), [(v["max"] - v["median"]) * 1000 for v in tools.values()]],
            color=["tab:blue" if t == "waitfor" else "tab:gray" for t in tools],
        )
        ax.set_title(kind)
        ax.set_ylabel("ms after ready (median, whisker: max)")
        ax.tick_params(axis="x", labelsize=7)
    fig.suptitle("Detection latency")
    fig.tight_layout()
    fig.savefig(out / "detection.png", dpi=110)
    plt.close(fig)

    sizes = [s for s in r["fan_out"] if s.endswith(" tcp")]
    counts = [int(s.split()[0]) for s in sizes]
    fig, (wall_ax, rss_ax) = plt.subplots(1, 2, figsize=(9, 3.5))
    for tool in ("waitfor", "wait-for-it --parallel"):
        wall_ax.plot(
            counts, [r["fan_out"][s][tool][0] * 1000 for s in sizes], marker="o", label=tool
        )
        rss_ax.plot(
            counts, [r["fan_out"][s][tool][1] / 1024 for s in sizes], marker="o", label=tool
        )
    wall_ax.set(xlabel="ready tcp targets", ylabel="wall time (ms)", title="Fan-out: time")
    rss_ax.set(xlabel="ready tcp targets", ylabel="peak RSS (MiB)", title="Fan-out: memory")
    wall_ax.legend()
    fig.tight_layout()
    fig.savefig(out / "fan_out.png", dpi=110)
    plt.close(fig)
