#!/usr/bin/env python3
"""Pod diagnosis fan-out against baselines measured in the same run.

    .venv/bin/python benchmarks/kube_fanout.py [--sizes 1,8,32] [--runs 3]

Serves N Running pods from the test Kubernetes emulator (tests/kube_emulator.py: real HTTP on
loopback, websocket exec running the command as a real local process) and times, per N:

* epdoctor: ``diagnose_many`` over KubePodTarget (probe over exec in one round trip, plus the
  pod, events, node, StatefulSet, Services and log reads, and every check), parallel 16;
* epdoctor sequential: the same with parallel 1;
* bare exec: the official client's ``stream()`` exec of the same probe, in a 16-thread pool,
  nothing else (the floor any pod-exec tool pays).

Prints median seconds and the ratios epdoctor/bare and sequential/epdoctor, and the exec
round trips per pod (goal 1). The probe reads this machine, so absolute times include the
probe's own run time on it.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from kube_emulator import running  # noqa: E402
from test_kube_targets import node, pod, services, statefulset  # noqa: E402

from epdoctor.checks.base import Context  # noqa: E402
from epdoctor.diagnose import diagnose_many  # noqa: E402
from epdoctor.targets.base import ProbeOptions  # noqa: E402
from epdoctor.targets.kube import KubePodTarget, KubeSession, client_core, select_pods  # noqa: E402
from epdoctor.targets.probe_script import node_probe_source  # noqa: E402

NS = "ml"


def epdoctor_run(session: KubeSession, parallel: int) -> float:
    t0 = time.perf_counter()
    pods = select_pods(session, namespace=NS, selector="bench=1")
    targets = [KubePodTarget(session, p) for p in pods]
    got = diagnose_many(targets, Context(), ProbeOptions(timeout_s=60), parallel=parallel)
    bad = [d.result.error for d in got if d.result.error]
    if bad:
        raise SystemExit(f"diagnose failed: {bad[:2]}")
    return time.perf_counter() - t0


def bare_run(session: KubeSession, names: list[str]) -> float:
    from kubernetes.stream import stream

    src = node_probe_source()

    def one(name: str) -> int:
        api = session.exec_client()  # stream() patches its client: one per thread
        ws = stream(
            client_core(api).connect_get_namespaced_pod_exec, name, NS,
            command=["python3", "-", "--deadline", "60"], stdin=True, stdout=True,
            stderr=True, tty=False, _preload_content=False, binary=True,
        )  # fmt: skip
        ws.write_channel(0, src)
        ws.close_channel(0)
        ws.run_forever(timeout=120)
        out = ws.read_channel(1)
        ws.close()
        api.close()
        return len(out)

    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(16) as pool:
        sizes = list(pool.map(one, names))
    if min(sizes) == 0:
        raise SystemExit("bare exec returned no output")
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,8,32")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        f"{'pods':>5} {'epdoctor':>9} {'seq':>8} {'bare':>8} {'ep/bare':>8} {'seq/ep':>7} {'exec/pod':>8}"
    )
    with tempfile.TemporaryDirectory() as tmp, running(Path(tmp)) as emu:
        emu.put(node(), statefulset(), *services())
        session = KubeSession.connect(kubeconfig=str(emu.kubeconfig))
        made = 0
        for n in sizes:
            while made < n:
                p = pod(f"bench-{made}")
                p["metadata"]["labels"]["bench"] = "1"
                emu.put(p)
                made += 1
            names = [f"bench-{i}" for i in range(n)]
            calls0 = len(emu.emulator.exec_calls)
            ep = statistics.median(epdoctor_run(session, 16) for _ in range(args.runs))
            per_pod = (len(emu.emulator.exec_calls) - calls0) / (n * args.runs)
            seq = statistics.median(epdoctor_run(session, 1) for _ in range(args.runs))
            bare = statistics.median(bare_run(session, names) for _ in range(args.runs))
            print(
                f"{n:>5} {ep:>8.2f}s {seq:>7.2f}s {bare:>7.2f}s {ep / bare:>8.2f} {seq / ep:>7.2f} {per_pod:>8.1f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
