"""The three kernel-test kinds: commands per node, the run, and its gates.

* builtin: probes/ep_kernel_test.py (PyTorch only), one process per GPU via
  torchrun, one JSON result line per rank, each rank's NCCL log in its own file.
* deepep: DeepEP-V2's tests/elastic/test_ep.py, one torchrun per node with the
  test's own --num-processes (it spawns the GPU processes itself), as the
  seeds' run-kernel-test.sh runs it.
* trtllm: probes/trtllm_nccl_ep_probe.py, the TensorRT-LLM NcclEP probe of
  CommunicationFactory.create_strategy(), one process per GPU.
* plan: the plan's own kernel test, one command per node given whole in ``specs`` (the
  Kubernetes rollout runs it in every pod of the plan's StatefulSet), gated like deepep.

Every kind is gated on every node's exit code and on the network NCCL used on
every rank (gates.py); the built-in and TensorRT-LLM kinds also on their
numerics, the EFA hw_counters before/after on every node (counters.py). The
per-rank network facts come from the log analyzer, reading every stream and
NCCL file with the channel lines included (``LogAnalyzer(transports=True)``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from epdoctor.checks.registry import detector
from epdoctor.facts.logs.model import RankFacts
from epdoctor.facts.logs.prefix import rank_of_line
from epdoctor.launch import counters as hwc
from epdoctor.launch.gates import (
    RESULT_MARKER,
    Gate,
    KernelReport,
    NetworkExpectation,
    exit_code_gate,
    network_gate,
    not_reached,
    numerics_gate,
    parse_results,
    rank_table,
    results_gate,
    start_failure,
    start_gate,
)
from epdoctor.launch.launcher import Group, LocalNode, Node, ProcSpec
from epdoctor.launch.streams import Chunk, Follower, LineSplitter, WatchedDir
from epdoctor.logwatch import LogAnalyzer
from epdoctor.model import Finding, Status

KINDS = ("builtin", "deepep", "trtllm", "plan")
PROBE_FILES = {
    "builtin": ("ep_kernel_test.py", "ep_routing.py"),
    "trtllm": ("trtllm_nccl_ep_probe.py", "ep_routing.py"),
}
# NCCL INFO for init, network and env decisions; channel lines come with INIT.
NCCL_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,ENV"}


@dataclass
class KernelTestConfig:
    kind: str
    nodes: list[Node]
    gpus: int  # processes (GPUs) per node
    run_dir: str  # same path on every node
    python: str = "python3"
    master_addr: str = "127.0.0.1"
    master_port: int = 29511
    test_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)  # the plan's env contract
    deepep_dir: str = ""
    expect: NetworkExpectation = field(default_factory=lambda: NetworkExpectation(efa=None))
    timeout_s: float = 900.0
    counters: bool = True
    backend: str = "nccl"  # builtin only: gloo runs the same exchange on CPU, without NCCL
    specs: list[ProcSpec] = field(default_factory=list)  # plan only: one command per node

    @property
    def world(self) -> int:
        return self.gpus * len(self.nodes)


def probe_dir_local() -> str:
    return str(resources.files("epdoctor.probes"))


def build_specs(cfg: KernelTestConfig) -> list[ProcSpec]:
    """One command per node; the exact argv shown before anything starts."""
    if cfg.kind not in KINDS:
        raise ValueError(f"unknown kernel-test kind {cfg.kind}")
    if cfg.kind == "plan":
        if len(cfg.specs) != len(cfg.nodes):
            raise ValueError("a plan kernel test needs one command per node")
        return list(cfg.specs)
    specs = []
    nnodes = len(cfg.nodes)
    for i, node in enumerate(cfg.nodes):
        env = {**NCCL_ENV, **cfg.env}
        run = cfg.python, "-m", "torch.distributed.run"
        if nnodes == 1:
            rdzv: tuple[str, ...] = ("--standalone",)
        else:
            rdzv = (
                "--nnodes",
                str(nnodes),
                "--node-rank",
                str(i),
                "--master-addr",
                cfg.master_addr,
                "--master-port",
                str(cfg.master_port),
            )
        tee = ("--tee", "3", "--log-dir", f"{cfg.run_dir}/torchrun/node{i}")
        if cfg.kind == "deepep":
            env["NCCL_DEBUG_FILE"] = f"{cfg.run_dir}/nccl/nccl.%h.%p.log"
            argv = (
                *run,
                *rdzv,
                "--nproc-per-node",
                "1",
                *tee,
                "tests/elastic/test_ep.py",
                "--num-processes",
                str(cfg.gpus),
                *cfg.test_args,
            )
            cwd = cfg.deepep_dir or None
        else:
            script = cfg.run_dir + "/probes/" + PROBE_FILES[cfg.kind][0]
            if isinstance(node, LocalNode):
                script = probe_dir_local() + "/" + PROBE_FILES[cfg.kind][0]
            extra: tuple[str, ...] = ()
            if cfg.kind == "builtin":
                extra = (
                    "--nccl-log-dir",
                    f"{cfg.run_dir}/nccl",
                    "--backend",
                    cfg.backend,
                    "--device",
                    "cpu" if cfg.backend == "gloo" else "cuda",
                )
            else:
                env["NCCL_DEBUG_FILE"] = f"{cfg.run_dir}/nccl/nccl.%h.%p.log"
            argv = (
                *run,
                *rdzv,
                "--nproc-per-node",
                str(cfg.gpus),
                *tee,
                script,
                *extra,
                *cfg.test_args,
            )
            cwd = None
        specs.append(ProcSpec(f"node{i}", tuple(argv), f"{cfg.run_dir}/node{i}.log", env, cwd))
    return specs


def staging(cfg: KernelTestConfig) -> list[tuple[Node, str, bytes]]:
    """Probe files a remote node needs in run_dir/probes (local runs use them in place)."""
    out = []
    files = PROBE_FILES.get(cfg.kind, ())
    for node in cfg.nodes:
        if isinstance(node, LocalNode):
            continue
        for name in files:
            data = resources.files("epdoctor.probes").joinpath(name).read_bytes()
            out.append((node, f"{cfg.run_dir}/probes/{name}", data))
    return out


def describe(cfg: KernelTestConfig) -> list[str]:
    lines = []
    for node, path, _ in staging(cfg):
        lines.append(f"[{node.name}] write {path}")
    for node, spec in zip(cfg.nodes, build_specs(cfg), strict=True):
        lines.append(node.describe(spec))
    return lines


OnLine = Callable[[str, str], None]  # (pane, line)


class KernelTestRun:
    """Start, follow, gate. Drive with start(); step() until done; finish()."""

    def __init__(
        self,
        cfg: KernelTestConfig,
        on_line: OnLine | None = None,
        watch_factory: Callable[[str], Any] | None = None,
        on_finding: Callable[[str, Finding], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.on_line = on_line or (lambda pane, line: None)
        self.group = Group()
        # the facts the gates read: one analyzer over every stream, ranks by host:pid
        self.logs = LogAnalyzer(transports=True)
        self.result_lines: list[str] = []  # only the EPDOCTOR_KERNEL_TEST lines are kept
        # node -> (kind, what, line): the first line saying why its test could not start
        self.start_failures: dict[str, tuple[str, str, str]] = {}
        self._factory = watch_factory
        self._watch: dict[str, Any] = {}
        self.on_finding = on_finding or (lambda source, f: None)
        self.findings: list[tuple[str, Finding]] = []
        self._split: dict[str, LineSplitter] = {}
        self._before: dict[str, dict] = {}
        self._t0 = 0.0
        self.follower: Follower | None = None
        self.timed_out = False
        self.failed_early = False

    # --- lifecycle -------------------------------------------------------------
    def start(self) -> None:
        cfg = self.cfg
        for node, path, data in staging(cfg):
            node.put_file(path, data)  # type: ignore[attr-defined]
        if cfg.counters:
            self._before = hwc.snapshots(cfg.nodes)
        self._t0 = time.monotonic()
        for node, spec in zip(cfg.nodes, build_specs(cfg), strict=True):
            self.group.add(node.start(spec))
        dirs = [WatchedDir(n, f"{cfg.run_dir}/nccl", _nccl_source) for n in cfg.nodes]
        self.follower = Follower(self.group.procs, dirs)

    def step(self) -> bool:
        """Read what arrived; True while something still runs."""
        assert self.follower is not None
        for chunk in self.follower.poll():
            self._consume(chunk)
        running = self.group.running()
        codes = [p.poll() for p in self.group.procs]
        if any(c not in (None, 0) for c in codes) and running:
            # a node failed: the others would wait for it until their timeout
            self.failed_early = True
            return False
        if time.monotonic() - self._t0 > self.cfg.timeout_s:
            self.timed_out = True
            return False
        return bool(running)

    def stop(self) -> list[str]:
        return self.group.stop()

    def finish(self) -> KernelReport:
        stopped = self.group.stop() if self.group.running() else []
        if self.follower:
            for chunk in self.follower.drain():
                self._consume(chunk)
        self._flush()
        report = self.gate()
        report.stopped = stopped
        self._save(report)
        return report

    def _save(self, report: KernelReport) -> None:
        """report.json beside the logs on the first node: the run can be re-gated later."""
        cfg = self.cfg
        doc = {
            **report.to_json(),
            "exit_codes": {p.name: p.poll() for p in self.group.procs},
            "timed_out": self.timed_out,
            "config": {
                "kind": cfg.kind,
                "gpus": cfg.gpus,
                "nodes": [n.name for n in cfg.nodes],
                "backend": cfg.backend,
                "expect_efa": cfg.expect.efa,
                "efa_count": cfg.expect.efa_count,
                "multi_node": cfg.expect.multi_node,
                "reason": cfg.expect.reason,
            },
        }
        try:
            cfg.nodes[0].put_file(
                f"{cfg.run_dir}/report.json", (json.dumps(doc, indent=2) + "\n").encode()
            )
        except Exception:
            pass

    # --- streams ---------------------------------------------------------------
    def _consume(self, chunk: Chunk) -> None:
        sp = self._split.setdefault(chunk.source, LineSplitter())
        for line in sp.feed(chunk.data):
            self._line(chunk.source, line)
        self.logs.feed_facts(chunk.data, chunk.source)
        if self._factory:  # the log analyzer explains traps as they appear
            watch = self._watch.get(chunk.source)
            if watch is None:
                watch = self._watch[chunk.source] = self._factory(chunk.source)
            for f in watch.feed(chunk.data):
                self.findings.append((chunk.source, f))
                self.on_finding(chunk.source, f)

    def _flush(self) -> None:
        """The streams ended: their last unterminated lines go to the panes and the facts."""
        for source, sp in self._split.items():
            for line in sp.flush():
                self._line(source, line)
        self.logs.close()

    def _line(self, source: str, line: str) -> None:
        if RESULT_MARKER in line:
            self.result_lines.append(line)
        if source.startswith("node") and source not in self.start_failures:
            failure = start_failure(line)
            if failure:
                self.start_failures[source] = (*failure, line.strip()[:300])
        pane = source
        if source.startswith("node") and " " not in source:
            i = int(source[4:])
            rank = rank_of_line(line, i, self.cfg.gpus if self.cfg.kind != "deepep" else 1)
            if rank is not None and self.cfg.kind != "deepep":
                pane = f"rank{rank}"
        self.on_line(pane, line)

    # --- gates -----------------------------------------------------------------
    @detector("D702", domain="launch")
    def gate(self, codes: dict[str, int | None] | None = None) -> KernelReport:
        cfg = self.cfg
        report = KernelReport(kind=cfg.kind)
        if codes is None:
            codes = {p.name: p.poll() for p in self.group.procs}
        g_exit = exit_code_gate(codes)
        if self.timed_out:
            g_exit = Gate(
                "exit codes",
                Status.FAIL,
                f"did not finish within {cfg.timeout_s:.0f}s: stopped",
                g_exit.evidence,
                "D702",
            )
        report.gates.append(g_exit)
        ranks = self.logs.facts.nccl_ranks()
        results = parse_results(self.result_lines)
        g_start = start_gate(self.start_failures, codes, cfg.python)
        if g_start is not None:
            report.gates.insert(0, g_start)  # the cause comes first
        # no rank said anything because none started: the other gates were never reached
        unreached = g_start is not None and not results and not ranks
        why = "the test never started (see start)"
        if cfg.kind in ("builtin", "trtllm"):
            if unreached:
                report.gates += [not_reached("results", why), not_reached("numerics", why)]
            else:
                report.gates.append(results_gate(results, cfg.world))
                report.gates.append(numerics_gate(results))
            nets = _rank_nets(ranks, results)
            report.per_rank = rank_table(results, nets, cfg.world)
        if cfg.kind == "builtin" and cfg.backend == "gloo":
            report.gates.append(
                Gate("network", Status.SKIP, "gloo backend: NCCL not used, no network gate")
            )
        elif unreached:
            report.gates.append(not_reached("network", why))
        else:
            report.gates.append(network_gate(ranks, cfg.world, cfg.expect))
        if cfg.counters:
            banner = tuple(r.evidence["provider"] for r in ranks if "provider" in r.evidence)
            g_counters, deltas = hwc.gate_since(self._before, cfg.nodes, banner_evidence=banner)
            report.gates.append(g_counters)
            report.counters = {d.node: d.to_json() for d in deltas}
        report.findings_seen = [{"source": src, **f.to_json()} for src, f in self.findings]
        report.logs = {p.name: f"{p.node.name}:{p.spec.log_path}" for p in self.group.procs}
        report.logs["nccl"] = f"{cfg.run_dir}/nccl/"
        return report


def _rank_nets(ranks: list[RankFacts], results: dict[int, dict]) -> dict[int, RankFacts | None]:
    """Which NCCL process is which rank: its own per-rank file, else host and pid.

    NCCL prints the host name cut at the first dot, Python's gethostname() may not.
    """
    by_pid = {(str(d.get("host") or "").split(".")[0], d.get("pid")): r for r, d in results.items()}
    nets: dict[int, RankFacts | None] = {}
    for rn in ranks:
        rank = next(
            (int(m.group(1)) for s in rn.sources if (m := re.match(r"^rank(\d+) nccl$", s))), None
        )
        if rank is None:
            rank = by_pid.get(((rn.host or "").split(".")[0], rn.pid))
        if rank is not None:
            nets[rank] = rn
    return nets


def regate(run_dir: str) -> KernelReport:
    """Gate a finished run again from what it left on disk (report.json, node and NCCL logs).

    The logs are the evidence; report.json gives the exit codes, the configuration and the
    counter deltas that were measured live (counters cannot be re-read after the fact).
    """
    with open(os.path.join(run_dir, "report.json"), encoding="utf-8") as f:
        saved = json.load(f)
    c = saved["config"]
    nodes: list[Node] = [LocalNode(n) for n in c["nodes"]]
    cfg = KernelTestConfig(
        kind=c["kind"],
        nodes=nodes,
        gpus=int(c["gpus"]),
        run_dir=run_dir,
        backend=c.get("backend", "nccl"),
        counters=False,
        expect=NetworkExpectation(
            efa=c.get("expect_efa"),
            efa_count=c.get("efa_count"),
            multi_node=bool(c.get("multi_node")),
            reason=c.get("reason", ""),
        ),
    )
    run = KernelTestRun(cfg)
    run.timed_out = bool(saved.get("timed_out"))
    for i in range(len(nodes)):
        _feed_file(run, os.path.join(run_dir, f"node{i}.log"), f"node{i}")
    nccl_dir = os.path.join(run_dir, "nccl")
    for fname in sorted(os.listdir(nccl_dir)) if os.path.isdir(nccl_dir) else []:
        source = _nccl_source(fname)
        if source:
            _feed_file(run, os.path.join(nccl_dir, fname), source)
    run._flush()
    report = run.gate(codes=dict(saved.get("exit_codes") or {}))
    for g in saved.get("gates") or []:
        if g.get("gate") == "efa counters":
            report.gates.append(
                Gate(
                    "efa counters",
                    Status(g["status"]),
                    g["summary"],
                    tuple(g.get("evidence") or ()),
                    g.get("code"),
                )
            )
    report.counters = saved.get("counters") or {}
    return report


def _feed_file(run: KernelTestRun, path: str, source: str) -> None:
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                run._consume(Chunk(source, chunk))
    except OSError:
        pass


def _nccl_source(fname: str) -> str | None:
    if not fname.endswith(".log"):
        return None
    stem = fname[: -len(".log")]
    if stem.startswith("nccl-rank"):
        return f"rank{stem[len('nccl-rank') :]} nccl"
    return f"{stem} nccl"


def run_to_end(run: KernelTestRun, poll_s: float = 0.2) -> KernelReport:
    """Headless: start, follow until done, gate (the command adds panes around this)."""
    run.start()
    try:
        while run.step():
            time.sleep(poll_s)
    except BaseException:
        run.stop()
        raise
    return run.finish()


def builtin_args(tokens: Sequence[int] | None, baseline: bool) -> tuple[str, ...]:
    out: list[str] = []
    if tokens:
        out += ["--num-tokens", ",".join(str(t) for t in tokens)]
    if baseline:
        out.append("--baseline")
    return tuple(out)


def quote_argv(argv: Sequence[str]) -> str:
    return shlex.join(argv)
