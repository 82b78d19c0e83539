"""Manifest rules: the Kubernetes review notes, as functions over API-shaped objects.

One implementation for two callers: `epdoctor lint` hands the documents of a
YAML file (with the comments found near each object, since some rules are
about a missing note), and `epdoctor diagnose --pod` hands the live pod, its
StatefulSet and the namespace's Services as the API server returns them. Both
are the API's own camelCase JSON, so the rules cannot tell them apart.

Each rule is a detector (domain "kube") and yields ``Hit``s: a trap code, a verdict, a
message and the path of the field it is about inside its object. A ``Hit`` is the rule-level
form; its two callers turn it into a Finding (lint with the line of that field).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from epdoctor.checks.registry import detector
from epdoctor.knowledge.stack import instance_spec
from epdoctor.model import Status

Path = tuple[str | int, ...]
INSTANCE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
EFA = "vpc.amazonaws.com/efa"
GPU = "nvidia.com/gpu"
# Ports an engine's OpenAI-compatible HTTP server listens on by default
# (vLLM/Dynamo/TensorRT-LLM 8000, SGLang 30000) and the usual port names.
HTTP_PORTS = {8000, 30000}
HTTP_PORT_NAMES = {"http", "api", "openai", "web"}
# Tags that are moved on purpose: an IfNotPresent node keeps whichever it pulled first.
FLOATING_TAGS = {"latest", "main", "master", "nightly", "dev", "edge", "stable", "head", "rc"}
LARGE_EMPTYDIR_BYTES = 100 * 2**30
_NOTE_HUGEPAGES = re.compile(
    r"pre-?allocat|nr_hugepages|hugepages=|boot|kernel (?:cmdline|parameter)|allocatable",
    re.I,
)
_NOTE_STORAGE = re.compile(r"instance[- ]store|nvme|local (?:ssd|disk)|raid|/mnt/k8s-disks", re.I)
_UNITS = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
    "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
}  # fmt: skip


@dataclass(frozen=True)
class Hit:
    code: str
    status: Status
    message: str
    obj: int  # index of the object in the list handed in
    path: Path = ()
    level: Status | None = None  # lint's status when milder than the live verdict (INFO)


@dataclass
class Objects:
    """The objects one set of rules looks at, and what is known around them."""

    items: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)  # comment text near each object (lint)
    instance: str | None = None  # instance type when known from elsewhere (the live node)
    live: bool = False

    def note(self, i: int) -> str:
        return self.notes[i] if i < len(self.notes) else ""

    def of_kind(self, *kinds: str) -> list[tuple[int, dict[str, Any]]]:
        return [(i, o) for i, o in enumerate(self.items) if o.get("kind") in kinds]


def quantity(q: Any) -> float | None:
    """A Kubernetes quantity ("5120Mi", "900Gi", "90", "500m") as a number; None if unparsable."""
    if q is None:
        return None
    if isinstance(q, (int, float)):
        return float(q)
    m = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]*)\s*", str(q))
    if not m:
        return None
    num, unit = float(m.group(1)), m.group(2)
    if unit == "m":
        return num / 1000
    if not unit:
        return num
    return num * _UNITS[unit] if unit in _UNITS else None


# ---- pod templates -------------------------------------------------------------------------


def pod_specs(objs: Objects) -> Iterator[tuple[int, dict[str, Any], Path, dict[str, Any]]]:
    """(object index, pod spec, path to it, pod labels) for every object that carries pods."""
    for i, o in enumerate(objs.items):
        kind = o.get("kind")
        spec = o.get("spec") or {}
        if kind == "Pod":
            yield i, spec, ("spec",), (o.get("metadata") or {}).get("labels") or {}
        elif kind in ("StatefulSet", "Deployment", "DaemonSet", "ReplicaSet", "Job"):
            tpl = spec.get("template") or {}
            labels = (tpl.get("metadata") or {}).get("labels") or {}
            yield i, tpl.get("spec") or {}, ("spec", "template", "spec"), labels
        elif kind == "CronJob":
            tpl = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}
            path: Path = ("spec", "jobTemplate", "spec", "template", "spec")
            yield i, tpl.get("spec") or {}, path, (tpl.get("metadata") or {}).get("labels") or {}


def containers(spec: Mapping[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    for n, c in enumerate(spec.get("containers") or []):
        if isinstance(c, dict):
            yield n, c


def _instance_of(spec: Mapping[str, Any], objs: Objects) -> str | None:
    sel = spec.get("nodeSelector") or {}
    for label in INSTANCE_LABELS:
        if sel.get(label):
            return str(sel[label])
    aff = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in aff.get("nodeSelectorTerms") or []:
        for expr in term.get("matchExpressions") or []:
            vals = expr.get("values") or []
            if (
                expr.get("key") in INSTANCE_LABELS
                and expr.get("operator") == "In"
                and len(vals) == 1
            ):
                return str(vals[0])
    return objs.instance


# ---- the rules -------------------------------------------------------------------------------


@detector("K201", domain="kube")
def rule_headless_http(objs: Objects) -> Iterator[Hit]:
    """K201: a Service over every replica publishes the HTTP port; only the leader serves it."""
    stss = [(i, o) for i, o in objs.of_kind("StatefulSet") if _replicas(o) > 1]
    svcs = objs.of_kind("Service")
    for _, sts in stss:
        labels = ((sts["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}
        name = sts["metadata"]["name"]
        leader_only = [
            o for _, o in svcs if (o.get("spec") or {}).get("selector", {}).get(POD_NAME_LABEL)
        ]
        for i, svc in svcs:
            sel = (svc.get("spec") or {}).get("selector") or {}
            if not sel or POD_NAME_LABEL in sel or not _selects(sel, labels):
                continue
            for n, port in enumerate((svc.get("spec") or {}).get("ports") or []):
                if not _is_http_port(port):
                    continue
                if leader_only:
                    continue
                yield Hit(
                    "K201",
                    Status.WARN,
                    f"Service {svc['metadata']['name']} selects all {_replicas(sts)} replicas of "
                    f"{name} and publishes HTTP port {port.get('port')}; only {name}-0 runs the "
                    f"API server, so HTTP through it round-robins into refused connections. "
                    f"Add a Service selecting {POD_NAME_LABEL}: {name}-0 for HTTP",
                    i,
                    ("spec", "ports", n),
                )


@detector("K202", domain="kube")
def rule_publish_not_ready(objs: Objects) -> Iterator[Hit]:
    """K202: the rendezvous Service hides not-ready pods, so peers cannot find each other."""
    svcs = {o["metadata"]["name"]: (i, o) for i, o in objs.of_kind("Service")}
    for _si, sts in objs.of_kind("StatefulSet"):
        gov = (sts.get("spec") or {}).get("serviceName")
        if not gov or gov not in svcs or _replicas(sts) < 2:
            continue
        i, svc = svcs[gov]
        spec = svc.get("spec") or {}
        if spec.get("clusterIP") != "None" or spec.get("publishNotReadyAddresses"):
            continue  # not headless (no per-pod DNS to rendezvous on), or already publishing
        tpl = (sts["spec"].get("template") or {}).get("spec") or {}
        gated = any(c.get("readinessProbe") for _, c in containers(tpl))
        yield Hit(
            "K202",
            Status.FAIL if gated else Status.WARN,
            f"headless Service {gov} (the StatefulSet's serviceName) lacks "
            "publishNotReadyAddresses: true; per-pod DNS names appear only once a pod is Ready"
            + (
                ", and the readiness probe needs the rendezvous to finish first: a deadlock"
                if gated
                else ""
            ),
            i,
            ("spec",),
        )


@detector("K203", domain="kube")
def rule_hugepages_note(
    objs: Objects, allocatable: Mapping[str, Any] | None = None
) -> Iterator[Hit]:
    """K203: hugepages requested with nothing saying what pre-allocates them on the node."""
    for i, spec, base, _ in pod_specs(objs):
        for n, c in containers(spec):
            res = c.get("resources") or {}
            done: set[str] = set()  # limits and requests of hugepages must be equal: one hit
            for part in ("limits", "requests"):
                for key, val in (res.get(part) or {}).items():
                    if not str(key).startswith("hugepages-") or key in done:
                        continue
                    done.add(key)
                    path = (*base, "containers", n, "resources", part, key)
                    want = quantity(val) or 0
                    if allocatable is not None:
                        have = quantity(allocatable.get(key))
                        if not have or have < want:
                            yield Hit(
                                "K203",
                                Status.FAIL,
                                f"container {c.get('name')} asks {key}: {val} but the node has "
                                f"{allocatable.get(key, '0')} allocatable: 2 MiB pages must be "
                                "pre-allocated at boot (vm.nr_hugepages) or the pod stays Pending",
                                i,
                                path,
                            )
                    elif not objs.live and not _NOTE_HUGEPAGES.search(objs.note(i)):
                        yield Hit(
                            "K203",
                            Status.WARN,
                            f"container {c.get('name')} asks {key}: {val} with no note of what "
                            "pre-allocates them; on a node without boot-time hugepages the pod "
                            "sits Pending with no obvious explanation",
                            i,
                            path,
                        )


@detector("K204", domain="kube")
def rule_privileged_ipc_lock(objs: Objects) -> Iterator[Hit]:
    """K204: privileged already grants every capability; IPC_LOCK next to it does nothing."""
    for i, spec, base, _ in pod_specs(objs):
        for n, c in containers(spec):
            sc = c.get("securityContext") or {}
            adds = ((sc.get("capabilities") or {}).get("add")) or []
            if sc.get("privileged") and any(
                str(a).upper() in ("IPC_LOCK", "CAP_IPC_LOCK") for a in adds
            ):
                yield Hit(
                    "K204",
                    Status.WARN,
                    f"container {c.get('name')}: privileged: true already grants all "
                    "capabilities; capabilities.add [IPC_LOCK] is redundant (say why if it is "
                    "kept for a non-privileged variant)",
                    i,
                    (*base, "containers", n, "securityContext", "capabilities", "add"),
                    level=Status.INFO,
                )


@detector("K205", domain="kube")
def rule_large_emptydir(objs: Objects) -> Iterator[Hit]:
    """K205: a large disk-backed emptyDir draws on the node's (root EBS) ephemeral storage."""
    for i, spec, base, _ in pod_specs(objs):
        for n, vol in enumerate(spec.get("volumes") or []):
            ed = vol.get("emptyDir") if isinstance(vol, dict) else None
            if not isinstance(ed, dict) or ed.get("medium") == "Memory":
                continue
            size = quantity(ed.get("sizeLimit"))
            if size is None or size < LARGE_EMPTYDIR_BYTES:
                continue
            if _NOTE_STORAGE.search(objs.note(i)):
                continue
            yield Hit(
                "K205",
                Status.WARN,
                f"emptyDir volume {vol.get('name')} with sizeLimit {ed.get('sizeLimit')} lives on "
                "node ephemeral storage (/var/lib/kubelet, the root EBS volume on the EKS AMIs): "
                "unsatisfiable or an eviction mid-run unless kubelet's root is on instance store",
                i,
                (*base, "volumes", n, "emptyDir"),
            )


@detector("K206", domain="kube")
def rule_mutable_tag(objs: Objects) -> Iterator[Hit]:
    """K206: a moving tag under IfNotPresent: each node runs whatever it pulled first."""
    for i, spec, base, _ in pod_specs(objs):
        for group in ("initContainers", "containers"):
            for n, c in enumerate(spec.get(group) or []):
                image = str(c.get("image") or "")
                if not image or "@sha256:" in image:
                    continue
                tag = _tag(image)
                policy = c.get("imagePullPolicy")
                if tag is None:
                    tag_text = "no tag (:latest)"
                    floating = True
                else:
                    tag_text = f":{tag}"
                    floating = tag.lower() in FLOATING_TAGS
                if not floating or policy != "IfNotPresent":
                    continue
                yield Hit(
                    "K206",
                    Status.FAIL if tag in (None, "latest") else Status.WARN,
                    f"container {c.get('name')}: image {image} has {tag_text} with "
                    "imagePullPolicy: IfNotPresent; a node that already holds the tag never pulls "
                    "the new build, so nodes silently run different images. Use an immutable "
                    "(dated or digest) tag",
                    i,
                    (*base, group, n, "image"),
                )


@detector("K207", domain="kube")
def rule_instance_resources(objs: Objects) -> Iterator[Hit]:
    """K207: EFA / GPU requests that do not match the instance the pods are pinned to."""
    for i, spec, base, _ in pod_specs(objs):
        inst = _instance_of(spec, objs)
        ispec = instance_spec(inst)
        if ispec is None:
            yield from _efa_env_without_device(i, spec, base)
            continue
        efa = gpu = 0.0
        where: dict[str, Path] = {}
        for n, c in containers(spec):
            res = c.get("resources") or {}
            lim = {**(res.get("requests") or {}), **(res.get("limits") or {})}
            if EFA in lim:
                efa += quantity(lim[EFA]) or 0
                where.setdefault(EFA, (*base, "containers", n, "resources"))
            if GPU in lim:
                gpu += quantity(lim[GPU]) or 0
                where.setdefault(GPU, (*base, "containers", n, "resources"))
        if efa and efa != ispec.efa:
            over = efa > ispec.efa
            yield Hit(
                "K207",
                Status.FAIL if over else Status.WARN,
                f"pods ask {EFA}: {int(efa)} but {inst} has {ispec.efa} EFA interfaces: "
                + ("the pod can never schedule" if over else "NICs are left idle, bandwidth lost"),
                i,
                where[EFA],
            )
        elif not efa and gpu:
            yield Hit(
                "K207",
                Status.WARN,
                f"pods ask {GPU} on {inst} but no {EFA}: without EFA devices in the pod the "
                "all-to-all falls back to sockets",
                i,
                where[GPU],
            )
        if gpu and gpu > ispec.gpus:
            yield Hit(
                "K207",
                Status.FAIL,
                f"pods ask {GPU}: {int(gpu)} but {inst} has {ispec.gpus} GPUs: never schedulable",
                i,
                where[GPU],
            )


# env that only works with EFA devices in the pod: GIN, the OFI plugin, the EFA provider
_EFA_ENV = ("NCCL_GIN_TYPE", "NCCL_GIN_ENABLE", "NCCL_GIN_PLUGIN", "FI_EFA_USE_DEVICE_RDMA")


def _efa_env_without_device(i: int, spec: Mapping[str, Any], base: Path) -> Iterator[Hit]:
    """Where the instance is not known: a container whose env asks for EFA (GIN, the EFA
    provider) and that requests GPUs but no EFA device gets none, and falls back to sockets."""
    for n, c in containers(spec):
        res = c.get("resources") or {}
        lim = {**(res.get("requests") or {}), **(res.get("limits") or {})}
        if EFA in lim or GPU not in lim:
            continue
        env = {
            e.get("name"): str(e.get("value", ""))
            for e in c.get("env") or []
            if isinstance(e, dict)
        }
        asks = [k for k in _EFA_ENV if k in env]
        if env.get("FI_PROVIDER", "").lower() == "efa":
            asks.append("FI_PROVIDER=efa")
        if not asks:
            continue
        yield Hit(
            "K207",
            Status.FAIL,
            f"container {c.get('name')}: env sets {', '.join(asks)} and asks {GPU} but no"
            f" {EFA}: the pod gets no EFA device, so GIN cannot come up and NCCL falls back to"
            " sockets",
            i,
            (*base, "containers", n, "resources"),
        )


@detector("K208", domain="kube")
def rule_pgrep_self_match(objs: Objects) -> Iterator[Hit]:
    """K208: `pgrep -f PATTERN` through a shell matches the shell's own command line."""
    for i, spec, base, _ in pod_specs(objs):
        for n, c in containers(spec):
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                cmd = (((c.get(probe) or {}).get("exec")) or {}).get("command") or []
                bad, pattern = _self_matching_pgrep(cmd)
                if bad:
                    yield Hit(
                        "K208",
                        Status.FAIL,
                        f"container {c.get('name')} {probe}: `{bad}` runs inside a shell whose "
                        "own argv contains the pattern, so it always matches and the probe "
                        "passes with no engine running. Bracket one character: "
                        f"pgrep -f '{_bracketed(pattern)}'",
                        i,
                        (*base, "containers", n, probe, "exec", "command"),
                    )


@detector("K209", domain="kube")
def rule_qos(objs: Objects) -> Iterator[Hit]:
    """K209: not Guaranteed QoS: CPU throttling and first eviction under node pressure."""
    for i, spec, base, _ in pod_specs(objs):
        problems = []
        for _n, c in containers(spec):
            res = c.get("resources") or {}
            req, lim = res.get("requests") or {}, res.get("limits") or {}
            for r in ("cpu", "memory"):
                if r not in lim:
                    problems.append(f"{c.get('name')} has no {r} limit")
                elif r in req and quantity(req[r]) != quantity(lim[r]):
                    problems.append(f"{c.get('name')} {r} request {req[r]} != limit {lim[r]}")
        if problems and any(True for _ in containers(spec)):
            yield Hit(
                "K209",
                Status.WARN,
                "pod QoS is not Guaranteed (" + "; ".join(problems) + "): the CPU proxy threads "
                "get throttled and the pod is evicted before Guaranteed ones",
                i,
                (*base, "containers"),
            )


RULES = (
    rule_headless_http,
    rule_publish_not_ready,
    rule_hugepages_note,
    rule_privileged_ipc_lock,
    rule_large_emptydir,
    rule_mutable_tag,
    rule_instance_resources,
    rule_pgrep_self_match,
    rule_qos,
)


def manifest_hits(objs: Objects, allocatable: Mapping[str, Any] | None = None) -> list[Hit]:
    out: list[Hit] = []
    for rule in RULES:
        if rule is rule_hugepages_note:
            out.extend(rule_hugepages_note(objs, allocatable))
        else:
            out.extend(rule(objs))  # type: ignore[operator]
    return out


def container_envs(objs: Objects) -> Iterator[tuple[int, Path, str, dict[str, tuple[str, Path]]]]:
    """(object, path, container name, env name -> (value, path)) for literal env values."""
    for i, spec, base, _ in pod_specs(objs):
        for n, c in containers(spec):
            env: dict[str, tuple[str, Path]] = {}
            for k, e in enumerate(c.get("env") or []):
                if isinstance(e, dict) and "name" in e and "value" in e:
                    env[str(e["name"])] = (str(e["value"]), (*base, "containers", n, "env", k))
            if env:
                yield i, (*base, "containers", n), str(c.get("name")), env


def engines_of(container: Mapping[str, Any]) -> set[str]:
    """Engines a container launches, from its command line (for the env contract)."""
    text = " ".join(
        str(x) for x in (container.get("command") or []) + (container.get("args") or [])
    )
    found = set()
    if "dynamo.vllm" in text:
        found.add("dynamo")
    if re.search(r"\bvllm\s+serve\b|all2all[-_]backend", text):
        found.add("vllm")
    if "trtllm-serve" in text:
        found.add("tensorrt-llm")
    if "sglang" in text:
        found.add("sglang")
    return found


# ---- helpers ---------------------------------------------------------------------------------


def _replicas(sts: Mapping[str, Any]) -> int:
    r = (sts.get("spec") or {}).get("replicas")
    return int(r) if isinstance(r, int) else 1


def _selects(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _is_http_port(port: Mapping[str, Any]) -> bool:
    name = str(port.get("name") or "").lower()
    if name in HTTP_PORT_NAMES or name.startswith("http"):
        return True
    return port.get("port") in HTTP_PORTS or port.get("targetPort") in HTTP_PORTS


def _tag(image: str) -> str | None:
    last = image.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else None


def _self_matching_pgrep(cmd: Sequence[Any]) -> tuple[str, str]:
    """(the pgrep call, its pattern) when it runs in a shell and can match that shell."""
    words = [str(w) for w in cmd]
    if (
        len(words) >= 3
        and words[0].rsplit("/", 1)[-1] in ("sh", "bash", "dash", "ash")
        and "-c" in words
    ):
        script = words[words.index("-c") + 1] if words.index("-c") + 1 < len(words) else ""
        for m in re.finditer(r"\bpgrep\s+((?:-\w+\s+)*)(\S.*?)(?=\s*(?:[;&|)]|$))", script):
            flags = m.group(1)
            if "f" not in flags.replace("-", " ").replace(" ", ""):
                continue
            try:
                pattern = shlex.split(m.group(2))[0]
            except (ValueError, IndexError):
                continue
            if not re.search(r"\[[^\]]+\]", pattern):
                return m.group(0).strip(), pattern
    return "", ""


def _bracketed(pattern: str) -> str:
    return f"[{pattern[0]}]{pattern[1:]}" if pattern else pattern
