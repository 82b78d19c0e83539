"""The flags, in one place: argparse fragments and what turns parsed flags into requests.

The command line (epdoctor.commands) and the terminal app (epdoctor.screens, whose target and
launch fields take the same flags) both read flags through here, so a flag means the same in
both and the core below sees only typed requests (epdoctor.requests), never a Namespace.
Light on purpose: `epdoctor --help` imports this, so no transport client, UI toolkit or YAML.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import math
import os
import shlex
from collections.abc import Sequence
from typing import Any

from epdoctor import exitcodes
from epdoctor.checks.base import TRANSPORTS
from epdoctor.model import Context
from epdoctor.redact import redact_text
from epdoctor.requests import (
    BenchOptions,
    KernelTestOptions,
    LaunchRequest,
    ProbeOptions,
    RolloutFlags,
    ServeOptions,
    SmokeOptions,
    TargetSpec,
)

ENGINES = ("vllm", "dynamo", "tensorrt-llm", "sglang")


# --------------------------------------------------------------------------- the parser
class Parser(argparse.ArgumentParser):
    """argparse with a short answer to wrong input: the command's own usage line and the error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        message = redact_text(message)  # argparse quotes what was typed (--api-key X, a token)
        self.exit(exitcodes.ERROR, f"usage: {short_usage(self)}\n{self.prog}: error: {message}\n")


def short_usage(p: argparse.ArgumentParser) -> str:
    """`epdoctor lint [options] PATH [PATH ...]`: positionals only, options behind --help."""
    parts = [p.prog]
    if any(a.option_strings and a.help is not argparse.SUPPRESS for a in p._actions):
        parts.append("[options]")
    for a in p._actions:
        if a.option_strings or a.help is argparse.SUPPRESS:
            continue
        if isinstance(a, argparse._SubParsersAction):
            parts.append(f"{a.metavar or '{' + ','.join(a.choices) + '}'} ...")
            continue
        name = a.metavar if isinstance(a.metavar, str) else a.dest.upper()
        shapes = {"?": f"[{name}]", "*": f"[{name} ...]", "+": f"{name} [{name} ...]"}
        parts.append(shapes.get(str(a.nargs), name))
    return " ".join(parts) + f"  (`{p.prog} --help` lists them all)"


# Numeric flags where 0 is a real answer; every other int/float flag must be above 0.
ZERO_OK = {"warmup"}


def _number(kind: type, dest: str) -> argparse.Action:
    low = 0 if dest in ZERO_OK else None
    port = dest.endswith("port")
    word = "a whole number" if kind is int else "a number"
    want = f"{word} of 0 or more" if low == 0 else f"{word} above 0"
    if port:
        want = "a port number (1-65535)"

    def parse(text: str):  # type: ignore[no-untyped-def]
        try:
            value = kind(text)
        except ValueError:
            value = None
        ok = value is not None and math.isfinite(value)
        ok = ok and (value >= 0 if low == 0 else value > 0) and (not port or value <= 65535)
        if not ok:
            raise argparse.ArgumentTypeError(f"must be {want}, not {text!r}")
        return value

    parse.__name__ = kind.__name__
    return parse  # type: ignore[return-value]


def _walk(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += _walk(child)
    return found


def checked(parser: argparse.ArgumentParser) -> None:
    """Every numeric flag of every command refuses zero, negatives, nan and inf at parse time,
    and each parser remembers itself so a stray argument is answered by its own usage."""
    for p in _walk(parser):
        p.set_defaults(_parser=p)
        for a in p._actions:
            if a.type in (int, float):
                a.type = _number(a.type, a.dest)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- where to look
def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that name targets: bundles, SSH hosts, Kubernetes pods or nodes."""
    parser.add_argument(
        "--bundle",
        metavar="FILE",
        action="append",
        default=[],
        help="replay a saved bundle (from `epdoctor collect`) or the node probe's JSON "
        "(python3 probes/node_probe.py > node.json) instead of probing live",
    )
    add_ssh_arguments(parser)
    add_kube_arguments(parser)


def add_ssh_arguments(parser: argparse.ArgumentParser) -> None:
    """ssh-like flags: hosts by name, from a file, or from ~/.ssh/config."""
    g = parser.add_argument_group("SSH hosts")
    g.add_argument(
        "--ssh",
        metavar="HOST[,HOST...]",
        action="append",
        default=[],
        help="diagnose these hosts over SSH ([user@]host[:port]; ~/.ssh/config aliases work)",
    )
    g.add_argument(
        "--hosts",
        metavar="FILE",
        action="append",
        default=[],
        help="hosts from FILE, one [user@]host[:port] a line; # starts a comment",
    )
    g.add_argument(
        "--ssh-config-hosts",
        metavar="PATTERN",
        action="append",
        default=[],
        help="every Host in ~/.ssh/config matching PATTERN (e.g. 'p5en-*')",
    )
    g.add_argument(
        "-i",
        "--identity",
        metavar="KEY",
        action="append",
        default=[],
        help="private key file to offer first (also IdentityFile, ssh-agent, ~/.ssh/id_*)",
    )
    g.add_argument(
        "--user", metavar="NAME", help="remote user (default: ~/.ssh/config, then yours)"
    )
    g.add_argument(
        "--accept-new-host-keys",
        action="store_true",
        help="record host keys not yet in known_hosts (a changed key is still refused)",
    )
    g.add_argument(
        "--known-hosts",
        metavar="FILE",
        help="known_hosts file (default: UserKnownHostsFile, else ~/.ssh/known_hosts)",
    )
    g.add_argument("--ssh-config", metavar="FILE", help="ssh config (default: ~/.ssh/config)")
    g.add_argument(
        "--sudo",
        action="store_true",
        help="run the probe with `sudo -n` (non-interactive) for reads that need root",
    )
    g.add_argument(
        "--connect-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds for TCP connect, SSH banner, key exchange and auth, each (default 10)",
    )
    g.add_argument(
        "--host-timeout",
        type=float,
        metavar="S",
        help="overall seconds per host, connect to result (default: probe --timeout + 30)",
    )
    g.add_argument(
        "--remote-python",
        metavar="PATH",
        default="python3",
        help="python on the hosts that runs the probe (default python3)",
    )
    # --parallel N (hosts at once) belongs to the diagnose command: it bounds every target kind.


def add_kube_arguments(parser: argparse.ArgumentParser) -> None:
    """kubectl-like flags: pods by name or label, or nodes via a Job."""
    g = parser.add_argument_group("Kubernetes")
    g.add_argument("--pod", metavar="NAME", help="diagnose this pod (probe runs in its container)")
    g.add_argument(
        "-l", "--selector", metavar="SELECTOR", help="pods (or with --nodes, nodes) matching labels"
    )
    g.add_argument("-n", "--namespace", metavar="NS", help="namespace (default: the context's)")
    g.add_argument(
        "-A", "--all-namespaces", action="store_true", help="select pods in every namespace"
    )
    g.add_argument("--context", metavar="NAME", help="kubeconfig context (default: current)")
    g.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG)")
    g.add_argument(
        "--request-timeout",
        type=float,
        metavar="S",
        help="seconds to wait for each API call (default 20; the probe's exec waits for --timeout)",
    )
    g.add_argument("-c", "--container", metavar="NAME", help="container to probe (default: first)")
    g.add_argument(
        "--nodes",
        action="store_true",
        help="probe nodes, not pods: one read-only Job pod per node selected by -l",
    )
    g.add_argument(
        "--job-image",
        metavar="IMAGE",
        help="image for --nodes pods (needs python3; default: the probe image in docs/kubernetes.md)",
    )
    g.add_argument("--yes", "-y", action="store_true", help="create the --nodes Job without asking")


def to_target_spec(args: argparse.Namespace) -> TargetSpec:
    """The targets the flags name; a flag this command does not have keeps its default."""
    a = vars(args)

    def seq(name: str) -> tuple[str, ...]:
        return tuple(a.get(name) or ())

    return TargetSpec(
        bundle=seq("bundle"),
        ssh=seq("ssh"),
        hosts=seq("hosts"),
        ssh_config_hosts=seq("ssh_config_hosts"),
        identity=seq("identity"),
        user=a.get("user"),
        accept_new_host_keys=bool(a.get("accept_new_host_keys")),
        known_hosts=a.get("known_hosts"),
        ssh_config=a.get("ssh_config"),
        sudo=bool(a.get("sudo")),
        connect_timeout=a.get("connect_timeout") or 10.0,
        host_timeout=a.get("host_timeout"),
        remote_python=a.get("remote_python") or "python3",
        pod=a.get("pod"),
        selector=a.get("selector"),
        namespace=a.get("namespace"),
        all_namespaces=bool(a.get("all_namespaces")),
        context=a.get("context"),
        kubeconfig=a.get("kubeconfig"),
        request_timeout=a.get("request_timeout"),
        container=a.get("container"),
        nodes=bool(a.get("nodes")),
        job_image=a.get("job_image"),
        yes=bool(a.get("yes")),
        show_manifests=bool(a.get("show_manifests")),
        dry_run=bool(a.get("dry_run")) and bool(a.get("nodes")),
        probe_timeout=a.get("timeout"),
    )


def parse_target_flags(argv: list[str]) -> TargetSpec:
    """The same flags `epdoctor diagnose` takes, from a free-text field (the app's target)."""
    p = argparse.ArgumentParser(prog="targets", add_help=False, exit_on_error=False)
    add_target_arguments(p)
    try:
        ns, rest = p.parse_known_args(argv)
    except (argparse.ArgumentError, SystemExit) as exc:
        raise ValueError(f"bad target flags: {exc}") from exc
    if rest:
        raise ValueError(f"unknown target flags: {' '.join(rest)}")
    return to_target_spec(ns)


# --------------------------------------------------------------------------- the intended stack
def add_context_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("intended stack")
    g.add_argument(
        "--transport",
        choices=TRANSPORTS,
        help="judge floors for this transport (default: NCCL_GIN_TYPE of the workload, "
        "else report what each transport would need)",
    )
    g.add_argument(
        "--engine", choices=ENGINES, help="the serving engine, when not evident from the node"
    )
    g.add_argument(
        "--instance",
        metavar="TYPE",
        help="instance type when the node cannot tell (e.g. p5en.48xlarge)",
    )
    add_expect_efa_argument(g)


def add_expect_efa_argument(g: Any) -> None:
    """EFA is the goal across nodes: a rank off EFA fails unless the operator says the run never
    meant it; a log that shows one host is judged as one (intra-node Socket or shm is fine)
    unless --expect-efa says the run must be on EFA all the same."""
    efa = g.add_mutually_exclusive_group()
    efa.add_argument(
        "--no-expect-efa",
        dest="expect_efa",
        action="store_const",
        const=False,
        default=None,
        help="the run was not meant to use EFA (one node, another fabric): a rank on Socket, "
        "IB or a non-EFA provider is then a warning, not a failure",
    )
    efa.add_argument(
        "--expect-efa",
        dest="expect_efa",
        action="store_const",
        const=True,
        help="every rank must be on EFA, also where the log shows only one host",
    )


def context_from(args: argparse.Namespace) -> Context:
    want = getattr(args, "expect_efa", None)
    opts = {} if want is None else {"expect_efa": want}
    return Context(
        transport=args.transport, engine=args.engine, instance=args.instance, options=opts
    )


# --------------------------------------------------------------------------- the node probe
def add_probe_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("probe")
    g.add_argument(
        "--pid",
        type=int,
        action="append",
        default=[],
        metavar="N",
        help="also read what process N really loaded (/proc/N/maps) and its environment",
    )
    g.add_argument(
        "--all-pids", action="store_true", help="every process that has a libnccl mapped"
    )
    g.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="probe deadline per target (default 60)",
    )
    g.add_argument(
        "--root",
        metavar="DIR",
        help="read the node's files under DIR (a mounted host root or an unpacked image)",
    )


def probe_options_from(args: argparse.Namespace, targets: Sequence[Any] = ()) -> ProbeOptions:
    """The probe's flags; a --root that this host is to read must be a folder here (for SSH
    hosts and pods it names a folder over there, which only the probe can judge)."""
    root = args.root
    if root and any(t.info.kind == "local" for t in targets) and not os.path.isdir(root):
        from epdoctor.model import EpdoctorError
        from epdoctor.safeio import plain

        why = "is not a folder" if os.path.exists(root) else "no such folder"
        raise EpdoctorError(f"--root {plain(root)}: {why} (a mounted host root or unpacked image)")
    return ProbeOptions(
        pids=tuple(args.pid), all_pids=args.all_pids, timeout_s=args.timeout, root=args.root
    )


# --------------------------------------------------------------------------- launches
def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """`epdoctor run {kernel-test,serve,smoke,bench}` and their flags."""
    sub = parser.add_subparsers(dest="what", metavar="WHAT")
    kt = sub.add_parser(
        "kernel-test",
        conflict_handler="resolve",
        help="EP all-to-all kernel test, gated on every rank",
        description="EP all-to-all kernel test gated on every node's exit code, "
        "every rank's numerics and network, and EFA counters.",
    )
    _launch_common(kt)
    kind = kt.add_mutually_exclusive_group()
    kind.add_argument(
        "--builtin",
        action="store_const",
        dest="kind",
        const="builtin",
        help="epdoctor's own dispatch/combine test, PyTorch only (default)",
    )
    kind.add_argument(
        "--deepep", metavar="DIR", help="DeepEP-V2 checkout: tests/elastic/test_ep.py"
    )
    kind.add_argument(
        "--trtllm",
        action="store_const",
        dest="kind",
        const="trtllm",
        help="TensorRT-LLM NcclEP CommunicationFactory probe",
    )
    kt.add_argument("--gpus", type=int, help="processes (GPUs) per node (default: plan, else 1)")
    kt.add_argument(
        "--tokens", help="tokens per rank, a comma list sweeps (built-in; default 4096)"
    )
    kt.add_argument(
        "--baseline",
        action="store_true",
        help="also time plain all_to_all_single of the same bytes (built-in)",
    )
    kt.add_argument(
        "--backend",
        choices=("nccl", "gloo"),
        default="nccl",
        help="built-in only: gloo runs the same exchange on CPU",
    )
    kt.add_argument(
        "--test-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for the test (repeatable), e.g. --test-arg=--hidden=4096",
    )
    efa = kt.add_mutually_exclusive_group()
    efa.add_argument(
        "--expect-efa",
        dest="expect_efa",
        action="store_const",
        const=True,
        help="demand the efa-direct banner on every rank (default on several nodes)",
    )
    efa.add_argument(
        "--no-expect-efa",
        dest="expect_efa",
        action="store_const",
        const=False,
        help="a rank off EFA is not a failure (a single-node test on purpose)",
    )
    kt.add_argument("--efa-count", type=int, help="EFA NICs per node (default: plan)")
    kt.add_argument("--timeout", type=float, default=900.0, help="seconds before it is stopped")
    kt.add_argument(
        "--master-port", type=int, default=29511, help="torch.distributed port (default 29511)"
    )
    kt.add_argument(
        "--master-addr", help="rendezvous address of the first node (default: its address as given)"
    )
    kt.add_argument(
        "--regate",
        metavar="RUN_DIR",
        help="start nothing: gate a finished run again from its logs and report.json",
    )
    kt.add_argument(
        "--isolate",
        action="store_true",
        help="run the built-in test on node pairs and half-splits; report outliers",
    )
    _rollout_arguments(kt, "kernel-test")

    sv = sub.add_parser(
        "serve",
        conflict_handler="resolve",
        help="start the engine, follow every log, wait for readiness",
    )
    _launch_common(sv)
    _engine_arguments(sv)
    sv.add_argument("--cmd", help="leader command (default: the plan's)")
    sv.add_argument("--worker-cmd", default=None, help="worker command (default: the plan's)")
    sv.add_argument(
        "--startup-budget",
        type=float,
        default=1800.0,
        metavar="S",
        help="seconds the engine may take to become ready (default 1800)",
    )
    _rollout_arguments(sv, "serve")

    sm = sub.add_parser(
        "smoke",
        conflict_handler="resolve",
        help="one chat completion at temperature 0 through the leader",
    )
    _launch_common(sm)
    _engine_arguments(sm)
    sm.add_argument("--model", help="model name (default: the first of /v1/models)")
    sm.add_argument(
        "--max-tokens", type=int, default=64, help="tokens the completion may return (default 64)"
    )

    bn = sub.add_parser(
        "bench",
        conflict_handler="resolve",
        help="warm-up + N requests per concurrency level, honest stats",
    )
    _launch_common(bn)
    _engine_arguments(bn)
    bn.add_argument("--model", help="model name (default: the first of /v1/models)")
    bn.add_argument("--concurrency", default="1,4,16", help="levels, comma separated")
    bn.add_argument("--requests-per-level", type=int, help="requests per level (default 5 x level)")
    bn.add_argument("--max-tokens", type=int, default=128, help="tokens per request (default 128)")
    bn.add_argument("--warmup", type=int, default=1, help="unmeasured requests before the sweep")
    bn.add_argument(
        "--request-timeout",
        type=float,
        default=600.0,
        help="seconds one request may take (default 600)",
    )
    bn.add_argument(
        "--ab",
        metavar="BACKEND",
        help="also serve every node with the engine's own backend switch set to BACKEND "
        "(vLLM/Dynamo --all2all-backend, SGLang --moe-a2a-backend, TensorRT-LLM "
        "TRTLLM_FORCE_COMM_METHOD) and run the same sweep: needs --cmd or a plan",
    )
    bn.add_argument(
        "--ab-transport",
        action="store_true",
        help="also serve on the other GIN transport (CPU proxy <-> EFA-GDA) with the same "
        "nodes, image and commands: an env flip only; needs a plan on NCCL >= 2.31.2",
    )
    bn.add_argument("--cmd", help="serve command for --ab (default: the plan's leader command)")
    bn.add_argument(
        "--startup-budget",
        type=float,
        default=1800.0,
        metavar="S",
        help="seconds the engine may take to become ready (default 1800)",
    )
    bn.add_argument("-o", "--output", metavar="DIR", help="write bench.json and bench.csv here")
    _down_parser(sub)


def _rollout_arguments(p: argparse.ArgumentParser, what: str) -> None:
    """The flags of a Kubernetes plan's rollout (epdoctor/launch/kube_rollout.py), on the
    kernel-test and serve parsers."""
    g = p.add_argument_group("Kubernetes plan (--plan of a Kubernetes plan, no target flags)")
    g.add_argument(
        "--keep",
        action="store_true",
        help="delete nothing of what is applied, whatever happens (default: a failed gate, "
        "Ctrl-C, SIGTERM and the end of the run delete it)",
    )
    g.add_argument(
        "--attach",
        action="store_true",
        help="apply nothing: run in the plan's pods as they are (NAME-0 .. NAME-N-1)",
    )
    g.add_argument(
        "--schedule-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="fail when a pod is still Pending (unschedulable) after S seconds (default 600)",
    )
    g.add_argument(
        "--start-timeout",
        type=float,
        default=1800.0,
        metavar="S",
        help="fail when the pods are not running S seconds after the apply (default 1800: "
        "image pulls)",
    )
    if what == "serve":
        g.add_argument(
            "--no-kernel-test",
            action="store_true",
            help="serve at once, without the kernel test in idle pods first",
        )
        g.add_argument(
            "--kernel-timeout", type=float, default=900.0, metavar="S",
            help="seconds the kernel test may run (default 900)",
        )  # fmt: skip
        g.add_argument(
            "--bench",
            metavar="LEVELS",
            help="after the smoke request, benchmark at these concurrency levels (e.g. 1,4,16)",
        )
        g.add_argument(
            "--smoke-max-tokens",
            type=int,
            default=64,
            metavar="N",
            help="tokens of the smoke completion (default 64)",
        )


def _down_parser(sub: Any) -> None:
    """`epdoctor run down --plan FILE`: delete what a rollout applied (only that)."""
    dn = sub.add_parser(
        "down",
        help="delete what `run kernel-test|serve --plan` applied for a Kubernetes plan (only that)",
        description="Delete the Services and StatefulSet that `epdoctor run kernel-test|serve "
        "--plan` applied for this Kubernetes plan: only objects epdoctor's field manager applied "
        "and that carry its label; anything else of the same name is left alone and named.",
    )
    dn.add_argument("--plan", metavar="FILE", required=True, help="plan.json from `epdoctor plan`")
    g = dn.add_argument_group("Kubernetes")
    g.add_argument("-n", "--namespace", metavar="NS", help="namespace (default: the plan's)")
    g.add_argument("--context", metavar="NAME", help="kubeconfig context (default: current)")
    g.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG)")
    g.add_argument("--request-timeout", type=float, metavar="S", help="seconds per API call")
    dn.add_argument("-y", "--yes", action="store_true", help="do not ask before deleting")
    dn.add_argument("--dry-run", action="store_true", help="say what would be deleted and exit")
    dn.add_argument("--timeout", type=float, default=300.0, metavar="S",
                    help="how long to wait for the pods to go (default 300)")  # fmt: skip
    dn.add_argument("--json", action="store_true", help="print the result as JSON")


def _launch_common(p: argparse.ArgumentParser) -> None:
    # where to run: this host (default), SSH hosts, Kubernetes pods; the flags of diagnose.
    # Ours come after, so our -y/--yes is the one that stays.
    add_target_arguments(p)
    p.add_argument("--plan", metavar="FILE", help="plan.json from `epdoctor plan`")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask before starting")
    p.add_argument("--dry-run", action="store_true", help="print the commands and exit")
    p.add_argument("--no-preflight", action="store_true", help="skip the read-only diagnose")
    p.add_argument("--force", action="store_true", help="launch even if the preflight fails")
    p.add_argument(
        "--detach",
        action="store_true",
        help="leave the processes running and exit, printing the command that stops them "
        "(without it, everything started is stopped on any exit: Ctrl-C, SIGTERM, SIGHUP)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--no-live", action="store_true", help="no live panes, even in a terminal")
    p.add_argument(
        "--run-dir", help="where logs go on each node (default /tmp/epdoctor-run-<time>)"
    )
    p.add_argument(
        "--python",
        help="python with PyTorch on the nodes (default: this one if it has torch, else python3)",
    )


def _engine_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=ENGINES, help="engine (default: plan, else vllm)")
    from epdoctor.launch.http import DefaultURL

    p.add_argument(
        "--url",
        default=DefaultURL("http://127.0.0.1:8000"),
        help="the leader's HTTP address (a Kubernetes plan: through the API server unless given)",
    )


OPTIONS = {
    "kernel-test": KernelTestOptions,
    "serve": ServeOptions,
    "smoke": SmokeOptions,
    "bench": BenchOptions,
}


def to_launch_request(
    args: argparse.Namespace, plan: dict[str, Any] | None = None
) -> LaunchRequest:
    """`epdoctor run WHAT ...` as a request; ``plan`` is the plan at hand when no --plan is
    given (the app's). The options' fields are the flags' dests: a plain copy."""
    a = vars(args)
    kind = OPTIONS[args.what]
    fields = {f.name: a[f.name] for f in dataclasses.fields(kind) if f.name in a}
    if "test_arg" in fields:
        fields["test_arg"] = tuple(fields["test_arg"])
    rollout = RolloutFlags(
        **{f.name: a[f.name] for f in dataclasses.fields(RolloutFlags) if f.name in a}
    )
    return LaunchRequest(
        what=args.what,
        options=kind(**fields),
        targets=to_target_spec(args),
        plan_file=args.plan,
        plan=dict(plan or {}),
        yes=args.yes,
        dry_run=args.dry_run,
        preflight=not args.no_preflight,
        force=args.force,
        detach=args.detach,
        json=args.json,
        live=not args.no_live,
        rollout=rollout,
    )


def run_parser() -> argparse.ArgumentParser:
    """`epdoctor run ...` alone, checked as the command line checks it."""
    parser = Parser(prog="epdoctor")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_run_arguments(sub.add_parser("run"))
    checked(parser)
    return parser


def parse_run_flags(what: str, flags: str, target_argv: Sequence[str] = ()) -> argparse.Namespace:
    """`epdoctor run WHAT TARGET-FLAGS FLAGS` from a free-text field (errors as ValueError, in
    the command line's words). Target flags in `flags` come last, so they override the app's."""
    err = io.StringIO()
    try:
        argv = ["run", what, *target_argv, *shlex.split(flags)]
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            return run_parser().parse_args(argv)
    except SystemExit as exc:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        raise ValueError(lines[-1] if lines else f"bad flags for {what}") from exc
    except ValueError as exc:
        raise ValueError(f"cannot read the flags: {exc}") from exc
