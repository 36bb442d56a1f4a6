"""Container start and image size: the waitfor image against a busybox-static image, one run.

``podman run`` of a ready TCP target and a ready ``http://`` target with the waitfor image, and
of the TCP target with busybox's ``nc`` from an image made here of Debian's busybox-static
package alone (``FROM scratch`` + one static binary: the smallest image that can check a port).
Rounds alternate them all so load drifts hit each. ``--baseline IMAGE`` (an earlier build of the
waitfor image, e.g. ``IMAGE=localhost/waitfor-old:latest images/build`` run in an older checkout)
joins the rounds with its tcp and http runs: whether a change moved start-up, under the same load.

Usage: bench/image [--runs N] [--baseline IMAGE]   (writes docs/bench/image.md and image.json)
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.ports import free_port
from tests.support.servers import http_server, tcp_listener

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "CONTAINERS_CONF": str(ROOT / "images" / "containers.conf")}
BUSYBOX = "localhost/waitfor-bench-busybox:latest"
TCP = "waitfor image: waitfor tcp://…"
HTTP = "waitfor image: waitfor http://…"
NC = "busybox-static image: nc"
BASE_TCP = "baseline image: waitfor tcp://…"
BASE_HTTP = "baseline image: waitfor http://…"
OUT = ROOT / "docs" / "bench"
PYTHON = "/opt/waitfor/bin/python"


def podman(
    *args: str, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["podman", *args], env=ENV, check=check, capture_output=True, timeout=timeout
    )


def busybox_image() -> str:
    """Debian's busybox-static as the only file of an image (made once, kept like the base)."""
    if podman("image", "exists", BUSYBOX, check=False).returncode == 0:
        return BUSYBOX
    with tempfile.TemporaryDirectory(prefix="waitfor-bench-busybox-") as tmp:
        subprocess.run(["apt-get", "download", "busybox-static"], cwd=tmp, check=True)
        [deb] = Path(tmp).glob("busybox-static_*.deb")
        subprocess.run(["dpkg-deb", "-x", str(deb), f"{tmp}/root"], check=True)
        with tarfile.open(f"{tmp}/root.tar", "w") as tar:
            tar.add(f"{tmp}/root/bin/busybox", "bin/busybox")
        podman("import", "--change", 'ENTRYPOINT ["/bin/busybox"]', f"{tmp}/root.tar", BUSYBOX)
    return BUSYBOX


def size(image: str) -> int:
    return int(podman("image", "inspect", image, "--format", "{{.Size}}").stdout)


def gzipped_size(image: str) -> int:
    """The image as a registry would ship it: its layers, gzipped."""
    archive = podman("image", "save", "--format=docker-archive", image, timeout=300).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        layers = [
            tar.extractfile(m) for m in tar.getmembers() if m.isfile() and m.name.endswith(".tar")
        ]
        return sum(len(gzip.compress(layer.read(), 6)) for layer in layers if layer)


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=ENV, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def measure(waitfor: str, busybox: str, runs: int, baseline: str | None = None) -> dict[str, Any]:
    port = free_port()
    run = ["podman", "run", "--rm", "--network=host", "--read-only"]
    before = os.getloadavg()[0]
    with tcp_listener(port), http_server() as (url, _):
        results = _measure(run, waitfor, busybox, port, url, runs, baseline)
    # the interpreter's CPU time is what load stretches: the ratios move with it
    results["load average"] = [before, os.getloadavg()[0]]
    return results


def _measure(
    run: list[str],
    waitfor: str,
    busybox: str,
    port: int,
    url: str,
    runs: int,
    baseline: str | None = None,
) -> dict[str, Any]:
    commands = {
        TCP: [*run, waitfor, "-q", f"tcp://127.0.0.1:{port}"],
        NC: [*run, busybox, "nc", "-w", "2", "127.0.0.1", str(port)],
        HTTP: [*run, waitfor, "-q", f"{url}/"],
        # the interpreter alone: what is left when waitfor imports nothing
        "waitfor image: python -c pass": [*run, f"--entrypoint={PYTHON}", waitfor, "-c", "pass"],
        "busybox-static image: true": [*run, busybox, "true"],
    }
    if baseline:
        commands[BASE_TCP] = [*run, baseline, "-q", f"tcp://127.0.0.1:{port}"]
        commands[BASE_HTTP] = [*run, baseline, "-q", f"{url}/"]
    times: dict[str, list[float]] = {name: [] for name in commands}
    for argv in commands.values():
        timed(argv)  # warm the page cache and podman's storage once
    for _ in range(runs):
        for name, argv in commands.items():
            times[name].append(timed(argv))
    starts = {
        name: {
            "median": statistics.median(values),
            "p90": statistics.quantiles(values, n=10)[-1] if len(values) > 1 else values[0],
        }
        for name, values in times.items()
    }
    nc = starts[NC]["median"]
    results: dict[str, Any] = {
        "runs": runs,
        "start": starts,
        "ratio waitfor/nc (medians)": starts[TCP]["median"] / nc,
        "ratio waitfor http/nc (medians)": starts[HTTP]["median"] / nc,
    }
    images = [waitfor, busybox]
    if baseline:
        results["ratio waitfor/baseline tcp (medians)"] = (
            starts[TCP]["median"] / starts[BASE_TCP]["median"]
        )
        results["ratio waitfor/baseline http (medians)"] = (
            starts[HTTP]["median"] / starts[BASE_HTTP]["median"]
        )
        images.insert(1, baseline)
    results["sizes"] = {
        image: {"bytes": size(image), "gzipped": gzipped_size(image)} for image in images
    }
    return results


def table(results: dict[str, Any]) -> str:
    lines = [
        "# Container start and image size",
        "",
        "`podman run --rm --network=host --read-only` of a ready TCP target and a ready HTTP target"
        f" (a 200 from a local server), {results['runs']} alternating rounds (`bench/image`):",
        "",
        "| container | median | p90 |",
        "| --- | --- | --- |",
    ]
    for name, start in results["start"].items():
        lines.append(f"| {name} | {start['median'] * 1000:.0f} ms | {start['p90'] * 1000:.0f} ms |")
    lines += [
        "",
        f"waitfor tcp / busybox nc: **{results['ratio waitfor/nc (medians)']:.2f}x**, waitfor http"
        f" / busybox nc: **{results['ratio waitfor http/nc (medians)']:.2f}x** (medians)",
        "",
    ]
    if "ratio waitfor/baseline tcp (medians)" in results:
        lines += [
            f"Against the baseline image in the same rounds: tcp"
            f" **{results['ratio waitfor/baseline tcp (medians)']:.2f}x**, http"
            f" **{results['ratio waitfor/baseline http (medians)']:.2f}x** (medians)",
            "",
        ]
    lines += [
        "Load average (1 min) on the machine: {:.1f} at the start, {:.1f} at the end.".format(
            *results["load average"]
        ),
        "",
        "| image | size | gzipped |",
        "| --- | --- | --- |",
    ]
    for name, sizes in results["sizes"].items():
        lines.append(
            f"| {name} | {sizes['bytes'] / 1e6:.1f} MB | {sizes['gzipped'] / 1e6:.1f} MB |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--image", required=True, help="the waitfor image (images/build)")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--baseline", help="an earlier waitfor image, alternated in the same rounds"
    )
    args = parser.parse_args()
    results = measure(args.image, busybox_image(), args.runs, args.baseline)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "image.json").write_text(json.dumps(results, indent=1))
    (args.out / "image.md").write_text(table(results))
    print(table(results), file=sys.stderr)


if __name__ == "__main__":
    main()
