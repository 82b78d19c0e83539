"""What a front end asks of the core: where to look, what to diagnose, what to launch.

Plain data, no argparse: the command line (epdoctor.commands) and the terminal app
(epdoctor.screens) both build these, through epdoctor.options, and the core
(epdoctor.targets, epdoctor.diagnose, epdoctor.launch) reads nothing else. Field names are
the dests of the flags that set them, so turning flags into a request is a plain copy and
``epdoctor run --help`` names each field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from epdoctor.model import Context


@dataclass(frozen=True)
class ProbeOptions:
    """What to ask the node probe for. Translated to probe argv by probe_argv()."""

    pids: tuple[int, ...] = ()
    all_pids: bool = False
    timeout_s: float = 60.0  # whole-probe deadline on the target
    root: str | None = None  # read the node's files under this directory (mounted root/image)
    extra: tuple[str, ...] = field(default=())

    def probe_argv(self) -> list[str]:
        argv = ["--deadline", str(int(self.timeout_s))]
        for pid in self.pids:
            argv += ["--pid", str(int(pid))]
        if self.all_pids:
            argv.append("--all-pids")
        if self.root:
            argv += ["--root", self.root]
        return argv + list(self.extra)


@dataclass(frozen=True)
class TargetSpec:
    """Where to look: this host (nothing given), saved bundles, SSH hosts, pods or nodes."""

    bundle: tuple[str, ...] = ()  # saved bundles or probe JSON files, replayed
    # SSH hosts: --ssh values as given (comma lists), hosts files, ~/.ssh/config patterns
    ssh: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    ssh_config_hosts: tuple[str, ...] = ()
    identity: tuple[str, ...] = ()
    user: str | None = None
    accept_new_host_keys: bool = False
    known_hosts: str | None = None
    ssh_config: str | None = None
    sudo: bool = False
    connect_timeout: float = 10.0
    host_timeout: float | None = None
    remote_python: str = "python3"
    # Kubernetes: pods by name or label, or nodes through read-only probe Jobs
    pod: str | None = None
    selector: str | None = None
    namespace: str | None = None
    all_namespaces: bool = False
    context: str | None = None
    kubeconfig: str | None = None
    request_timeout: float | None = None
    container: str | None = None
    nodes: bool = False
    job_image: str | None = None
    yes: bool = False  # create the node-probe Jobs without asking
    show_manifests: bool = False  # print the node-probe Jobs before creating them
    dry_run: bool = False  # print the node-probe Jobs and create nothing
    probe_timeout: float | None = None  # the node-probe Jobs' deadline (diagnose --timeout)

    @property
    def names_targets(self) -> bool:
        """Whether any target is named (else: this host, or what a plan names)."""
        return bool(
            self.bundle
            or self.ssh
            or self.hosts
            or self.ssh_config_hosts
            or self.pod
            or self.selector
            or self.all_namespaces
            or self.nodes
        )


@dataclass(frozen=True)
class DiagnoseRequest:
    """`epdoctor diagnose`: the targets, the intended stack, the probe, and logs to read too."""

    targets: TargetSpec = field(default_factory=TargetSpec)
    context: Context = field(default_factory=Context)
    probe: ProbeOptions = field(default_factory=ProbeOptions)
    parallel: int = 32
    logs: tuple[str, ...] = ()  # NCCL / engine logs ('-' stdin, .gz) analyzed beside it


@dataclass(frozen=True)
class LogSources:
    """`epdoctor logs`: the logs to read, each its own source (ranks are compared across them)."""

    files: tuple[str, ...] = ()  # local files; '-' is stdin, .gz is read
    pod: tuple[str, ...] = ()  # pods whose container log is read
    selector: str | None = None  # pods matching these labels (-l), as --pod each
    since_s: int | None = None  # only lines newer than this many seconds (--since 10m)
    tail: int | None = None  # only the last N lines of each pod log (--tail N)
    namespace: str | None = None
    container: str | None = None
    all_containers: bool = False  # every container of each pod, each its own source
    previous: bool = False  # the previous (crashed) container's log
    context: str | None = None
    kubeconfig: str | None = None
    request_timeout: float | None = None
    ssh: tuple[str, ...] = ()  # files on SSH hosts, [user@]host[:port]:/path
    known_hosts: str | None = None
    identity: tuple[str, ...] = ()


# --------------------------------------------------------------------------- launches
@dataclass(frozen=True)
class KernelTestOptions:
    """`epdoctor run kernel-test`: the EP all-to-all kernel test, gated on every rank."""

    kind: str | None = None  # builtin (default) or trtllm; deepep when `deepep` is given
    deepep: str | None = None  # a DeepEP-V2 checkout
    gpus: int | None = None  # per node (default: the plan's, else 1)
    tokens: str | None = None  # tokens per rank, a comma list sweeps
    baseline: bool = False
    backend: str = "nccl"
    test_arg: tuple[str, ...] = ()
    expect_efa: bool | None = None  # None: on several nodes
    efa_count: int | None = None
    timeout: float = 900.0
    master_port: int = 29511
    master_addr: str | None = None
    regate: str | None = None  # a finished run's folder: gate it again, start nothing
    isolate: bool = False  # node pairs and half-splits, outliers reported
    run_dir: str | None = None
    python: str | None = None


@dataclass(frozen=True)
class ServeOptions:
    """`epdoctor run serve`: the engine on every node, followed until ready."""

    engine: str | None = None
    url: str = "http://127.0.0.1:8000"
    cmd: str | None = None  # leader command (default: the plan's)
    worker_cmd: str | None = None  # worker command (default: the plan's)
    startup_budget: float = 1800.0
    run_dir: str | None = None
    python: str | None = None


@dataclass(frozen=True)
class SmokeOptions:
    """`epdoctor run smoke`: one chat completion at temperature 0 through the leader."""

    engine: str | None = None
    url: str = "http://127.0.0.1:8000"
    model: str | None = None  # default: the first of /v1/models
    max_tokens: int = 64
    run_dir: str | None = None
    python: str | None = None


@dataclass(frozen=True)
class BenchOptions:
    """`epdoctor run bench`: warm-up, then N requests per concurrency level."""

    engine: str | None = None
    url: str = "http://127.0.0.1:8000"
    model: str | None = None
    concurrency: str = "1,4,16"  # levels, comma separated
    requests_per_level: int | None = None  # default 5 x level
    max_tokens: int = 128
    warmup: int = 1
    request_timeout: float = 600.0
    ab: str | None = None  # also serve with the engine's backend switch set to AB, same sweep
    ab_transport: bool = False  # also serve on the other GIN transport (env flip), same sweep
    cmd: str | None = None  # the serve command for --ab (default: the plan's)
    startup_budget: float = 1800.0
    output: str | None = None  # folder for bench.json and bench.csv
    run_dir: str | None = None
    python: str | None = None

    def serve(self) -> ServeOptions:
        """How each --ab arm is served."""
        return ServeOptions(
            engine=self.engine,
            url=self.url,
            cmd=self.cmd,
            startup_budget=self.startup_budget,
            run_dir=self.run_dir,
            python=self.python,
        )


LaunchOptions = KernelTestOptions | ServeOptions | SmokeOptions | BenchOptions
WHATS = ("kernel-test", "serve", "smoke", "bench")


@dataclass(frozen=True)
class RolloutFlags:
    """How a Kubernetes plan is brought up, gated and taken down (epdoctor/launch/kube_rollout.py):
    the rollout's own flags on `run kernel-test|serve --plan`."""

    keep: bool = False  # delete nothing of what is applied
    attach: bool = False  # apply nothing: run in the plan's pods as they are
    schedule_timeout: float = 600.0  # a pod Pending (unschedulable) this long fails the step
    start_timeout: float = 1800.0  # the pods not running this long after the apply fails it
    no_kernel_test: bool = False  # serve at once, no kernel test in idle pods first
    kernel_timeout: float = 900.0  # seconds the kernel test may run (serve)
    bench: str | None = None  # concurrency levels after the smoke request ("1,4,16")
    smoke_max_tokens: int = 64


@dataclass(frozen=True)
class LaunchRequest:
    """`epdoctor run WHAT`: what, with which options, where, and how the operator is asked."""

    what: str  # one of WHATS
    options: LaunchOptions
    targets: TargetSpec = field(default_factory=TargetSpec)
    plan_file: str | None = None  # plan.json from `epdoctor plan`
    plan: dict[str, Any] = field(
        default_factory=dict
    )  # the plan at hand when no plan_file is named
    yes: bool = False  # start without asking
    dry_run: bool = False  # show the commands, start nothing
    preflight: bool = True  # read-only diagnose of every node first
    force: bool = False  # launch although the preflight fails
    detach: bool = False  # leave what started running, and say how to stop it
    json: bool = False
    live: bool = True  # live panes when in a terminal
    rollout: RolloutFlags = field(default_factory=RolloutFlags)
