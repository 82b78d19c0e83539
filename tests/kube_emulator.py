"""A Kubernetes API server stand-in for tests: kmock over real HTTP on loopback, plus exec.

No real kube-apiserver can run on the test machines (see the shared test-infra
notes), so this is kmock's KubernetesEmulator with what the real clients need
corrected or added:

* discovery: kmock answers ``/api/v1`` and ``/apis/<g>/<v>`` from its LIST
  fallback, with ``groupVersion: "/v1"`` (kubectl then maps pods to
  metrics.k8s.io). We serve an APIResourceList in the real server's shape for
  the resources epdoctor reads or creates.
* lists lack ``kind``/``apiVersion``; we add them. Label selectors (equality,
  ``!=``, ``in``, bare key) and the field selectors epdoctor uses
  (``involvedObject.*`` on events, ``spec.nodeName``, ``metadata.name``) are
  applied, as the real server does, instead of being ignored.
* pod logs: ``/pods/<name>/log`` answers ``text/plain`` from ``logs`` (keyed
  by namespace, pod, container, previous), with ``tailLines`` applied. With
  ``follow=true`` it streams (chunked, as the real server does) what is there,
  then what ``RunningEmulator.append_log`` adds, until the log is in
  ``ended_logs`` (its container ended) or the client closes; ``log_followers``
  counts the streams open per log.
* exec: the websocket channel protocol (v5 and v4 subprotocols; channel 0
  stdin, 1 stdout, 2 stderr, 3 status, 4 resize, 255 close), running the
  requested command as a real local subprocess, so the node probe really runs
  through the real exec protocol. ``forbid_exec`` answers the handshake with
  403 the way RBAC does.
* hostile mode: ``hostile`` maps a regular expression on the request path to
  a bad answer, the ones a real client meets behind a broken proxy or an
  overloaded server: ``html`` (200 with an HTML proxy page), ``truncated``
  (half a JSON object), ``shape`` (valid JSON of the wrong type), ``stall``
  (headers and a few bytes of body, then silence until the client gives up), ``wrong-object``
  (200 with a JSON object that is not the one asked for),
  ``exec-drop`` (an exec websocket that closes with no frame and no status), or an HTTP
  code (``"401"``, ``"403"``, ``"500"``: the API's Status of that code). A rule ``"DELETE
  /statefulsets/"`` matches that method only; a mode ``"after:N:MODE"`` answers the first N
  matching requests as usual (a failure in the middle of a rollout).

* workloads (tests/kube_workloads.py): server-side apply with field managers and
  ``dryRun=All``, a StatefulSet controller, a scheduler with FailedScheduling events, a
  kubelet whose containers are local processes (image pulls, CrashLoopBackOff, readiness
  probes, deletion), cluster DNS for headless Services and the pods/services proxy.

Everything runs on its own event loop in a background thread, so the
synchronous kubernetes client and the kubectl binary can talk to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import aiohttp.web
import kmock
from kube_workloads import Image, WorkloadsMixin

__all__ = ["Image", "KubeEmulator", "RunningEmulator", "running", "running_pod"]

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"

# (group, version, plural, kind, namespaced, subresources) the real server serves.
RESOURCES = [
    ("", "v1", "pods", "Pod", True, ("log", "exec", "status", "proxy")),
    ("", "v1", "nodes", "Node", False, ("status",)),
    ("", "v1", "events", "Event", True, ()),
    ("", "v1", "services", "Service", True, ("proxy",)),
    ("", "v1", "namespaces", "Namespace", False, ()),
    ("apps", "v1", "statefulsets", "StatefulSet", True, ()),
    ("batch", "v1", "jobs", "Job", True, ()),
]
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]

_NS_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<g>[a-z0-9.]+)/v1)(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[a-z]+)"
    r"(?:/(?P<name>[^/]+))?(?:/(?P<sub>[a-z]+))?$"
)


def _discovery(group: str) -> dict[str, Any]:
    resources = []
    for g, _v, plural, kind, namespaced, subs in RESOURCES:
        if g != group:
            continue
        resources.append(
            {
                "name": plural,
                "singularName": kind.lower(),
                "namespaced": namespaced,
                "kind": kind,
                "verbs": VERBS,
            }
        )
        for sub in subs:
            verbs = ["get", "create"] if sub == "exec" else ["get"]
            resources.append(
                {"name": f"{plural}/{sub}", "singularName": "", "namespaced": namespaced,
                 "kind": "PodExecOptions" if sub == "exec" else kind, "verbs": verbs}
            )  # fmt: skip
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/v1" if group else "v1",
        "resources": resources,
    }


def _hostile_match(rule: str, method: str, path: str) -> bool:
    """A hostile rule: a path regular expression, or ``METHOD regex`` for one method only."""
    verb, _, rx = rule.partition(" ")
    if rx and verb.isupper():
        return method == verb and re.search(rx, path) is not None
    return re.search(rule, path) is not None


def _label_match(labels: dict[str, str], selector: str) -> bool:
    for term in _split_selector(selector):
        term = term.strip()
        if not term:
            continue
        m = re.match(r"^(\S+?)\s+(in|notin)\s+\((.*)\)$", term)
        if m:
            key, op, vals = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            if (labels.get(key) in vals) != (op == "in"):
                return False
        elif "!=" in term:
            key, val = term.split("!=", 1)
            if labels.get(key) == val:
                return False
        elif "=" in term:
            key, val = term.replace("==", "=").split("=", 1)
            if labels.get(key) != val:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _split_selector(selector: str) -> list[str]:
    # Commas inside `in (a,b)` do not separate terms.
    out, depth, cur = [], 0, ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def _field(obj: dict[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


def _field_match(obj: dict[str, Any], selector: str) -> bool:
    for term in selector.split(","):
        if not term:
            continue
        if "!=" in term:
            key, val = term.split("!=", 1)
            if str(_field(obj, key) or "") == val:
                return False
        else:
            key, val = term.replace("==", "=").split("=", 1)
            if str(_field(obj, key) or "") != val:
                return False
    return True


class KubeEmulator(WorkloadsMixin, kmock.KubernetesEmulator):
    """kmock's emulator with discovery/list fixes, selectors, pod logs, websocket exec and
    the workloads behind them (tests/kube_workloads.py)."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.init_workloads()
        # Declare the resources so kmock serves fetch/list for them even when empty.
        for g, v, plural, _kind, _ns, _subs in RESOURCES:
            self.resources[kmock.resource(g, v, plural)] = kmock.ResourceInfo()
        self.logs: dict[tuple[str, str, str, bool], str] = {}
        # follow=true streams: how many are open per log key, and the logs whose container ended
        self.log_followers: dict[tuple[str, str, str, bool], int] = {}
        self.ended_logs: set[tuple[str, str, str, bool]] = set()
        self.forbid_exec: set[tuple[str, str]] = set()
        self.hostile: dict[str, str] = {}  # path regex -> a mode (see the module docstring)
        self.hostile_seen: dict[str, int] = {}  # "after:N:MODE" rules: requests matched so far
        self.exec_calls: list[dict[str, Any]] = []
        self.exec_env: dict[str, str] = {}
        self.seen: list[str] = []  # "METHOD path?query" of every request, in order
        self.run_jobs = True
        self.exec_protocols: tuple[str, ...] = (V5, V4)  # (V4,): an API server before v5
        self.host_root: Path | None = None  # where the Job pods' hostPath mounts are laid out
        self._tasks: list[asyncio.Task[None]] = []

    # -- object helpers ---------------------------------------------------------------------

    def put(self, obj: dict[str, Any]) -> None:
        """Store an object as the server would after a create."""
        api = obj["apiVersion"]
        group, _, version = api.rpartition("/")
        kind = obj["kind"]
        plural = next(p for g, _v, p, k, _n, _s in RESOURCES if k == kind and g == group)
        ns = obj["metadata"].get("namespace")
        self.objects[kmock.resource(group, version, plural), ns, obj["metadata"]["name"]] = obj

    def get(self, plural: str, ns: str | None, name: str, group: str = "") -> dict[str, Any] | None:
        key = (kmock.resource(group, "v1", plural), ns, name)
        if key not in self.objects or self.objects[key].deleted:
            return None
        return dict(self.objects[key].raw)

    # -- request routing ---------------------------------------------------------------------

    async def __call__(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        path = raw.path
        self.seen.append(f"{raw.method} {raw.path_qs}")
        rule = next((rx for rx in self.hostile if _hostile_match(rx, raw.method, path)), None)
        mode = self.hostile[rule] if rule is not None else None
        if mode and mode.startswith("after:"):  # "after:N:MODE": N good answers first
            _, n, real = mode.split(":", 2)
            self.hostile_seen[rule] = self.hostile_seen.get(rule, 0) + 1
            mode = real if self.hostile_seen[rule] > int(n) else None
        if mode:
            return await self._hostile(raw, mode)
        if raw.method == "GET" and path in ("/api/v1", "/apis/apps/v1", "/apis/batch/v1"):
            group = "" if path == "/api/v1" else path.split("/")[2]
            return aiohttp.web.json_response(_discovery(group))
        proxied = await self.serve_proxy(raw)
        if proxied is not None:
            return proxied
        m = _NS_PATH.match(path)
        if m and m.group("name") and not m.group("sub"):
            if raw.method == "PATCH" and raw.content_type.startswith("application/apply-patch"):
                group = m.group("g") or ""
                return await self.serve_apply(raw, group, m.group("plural"), m.group("ns"), m.group("name"))
            if raw.method == "DELETE" and m.group("plural") == "pods":
                pod = self.get("pods", m.group("ns"), m.group("name"))
                if pod is None:
                    return self._status(404, "NotFound", f'pods "{m.group("name")}" not found')
                if pod["metadata"].get("uid") in self._managed:
                    self._delete_pod(m.group("ns"), m.group("name"))
                    return aiohttp.web.json_response(self.get("pods", m.group("ns"), m.group("name")) or pod)
        if m and m.group("plural") == "pods" and m.group("sub") == "exec":
            return await self._exec(raw, m.group("ns"), m.group("name"))
        if m and m.group("plural") == "pods" and m.group("sub") == "log" and raw.method == "GET":
            if raw.query.get("follow") in ("true", "1"):
                return await self._follow_log(raw, m.group("ns"), m.group("name"))
            return self._log(raw, m.group("ns"), m.group("name"))
        resp = await super().__call__(raw)
        if m and m.group("plural") == "jobs" and self.run_jobs and resp.status in (200, 201):
            if raw.method == "POST":
                job = json.loads(await raw.read())
                job["metadata"].setdefault("namespace", m.group("ns"))
                self._tasks.append(asyncio.create_task(self._run_job(job)))
            elif raw.method == "DELETE" and m.group("name"):
                self._collect_job_pods(m.group("ns"), m.group("name"))
        if (
            m
            and raw.method == "GET"
            and not m.group("name")
            and isinstance(resp, aiohttp.web.Response)
        ):
            return self._fix_list(raw, resp, m.group("g") or "", m.group("plural"))
        return resp

    def _fix_list(
        self, raw: aiohttp.web.BaseRequest, resp: aiohttp.web.Response, group: str, plural: str
    ) -> aiohttp.web.StreamResponse:
        if resp.status != 200 or resp.body is None or raw.query.get("watch") in ("true", "1"):
            return resp
        try:
            doc = json.loads(bytes(resp.body))  # type: ignore[arg-type]
        except ValueError:
            return resp
        if not isinstance(doc, dict) or "items" not in doc:
            return resp
        kind = next(k for g, _v, p, k, _n, _s in RESOURCES if p == plural and g == group)
        items = doc["items"]
        if ls := raw.query.get("labelSelector"):
            items = [
                o for o in items if _label_match(o.get("metadata", {}).get("labels") or {}, ls)
            ]
        if fs := raw.query.get("fieldSelector"):
            items = [o for o in items if _field_match(o, fs)]
        doc["items"] = items
        doc["kind"] = f"{kind}List"
        doc["apiVersion"] = f"{group}/v1" if group else "v1"
        doc.setdefault("metadata", {})["resourceVersion"] = "1"
        return aiohttp.web.json_response(doc)

    async def _hostile(self, raw: aiohttp.web.BaseRequest, mode: str) -> aiohttp.web.StreamResponse:
        """A bad answer of the kind ``mode`` names (see the module docstring)."""
        if mode == "html":
            page = "<html><head><title>502 Bad Gateway</title></head><body>proxy</body></html>"
            return aiohttp.web.Response(text=page, content_type="text/html")
        if mode == "truncated":
            return aiohttp.web.Response(
                body=b'{"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "tru',
                content_type="application/json",
            )
        if mode == "shape":
            return aiohttp.web.json_response(["not", "an", "object"])
        if mode == "stall":
            resp = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
            resp.content_length = 4096
            await resp.prepare(raw)
            await resp.write(b'{"kind": "Pod", ')
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await asyncio.sleep(3600)  # the client's timeout ends this request
            return resp
        if mode == "wrong-object":  # 200 with a JSON object that is not the one asked for
            return aiohttp.web.json_response({"kind": "Status", "apiVersion": "v1",
                                              "status": "Success", "metadata": {}})  # fmt: skip
        if mode.isdigit():  # an API Status of that HTTP code (401, 403, 409, 500, 503...)
            reasons = {401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
                       500: "InternalError", 503: "ServiceUnavailable"}  # fmt: skip
            code = int(mode)
            return self._status(code, reasons.get(code, "Unknown"), f"hostile answer {code}")
        if mode == "exec-drop":
            ws = aiohttp.web.WebSocketResponse(protocols=self.exec_protocols, max_msg_size=0)
            await ws.prepare(raw)
            await ws.close()
            return ws
        raise ValueError(f"unknown hostile mode {mode!r}")

    def _status(self, code: int, reason: str, message: str) -> aiohttp.web.Response:
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
        return aiohttp.web.json_response(body, status=code)

    def _log(self, raw: aiohttp.web.BaseRequest, ns: str, name: str) -> aiohttp.web.StreamResponse:
        pod = self.get("pods", ns, name)
        if pod is None:
            return self._status(404, "NotFound", f'pods "{name}" not found')
        containers = [c["name"] for c in pod["spec"]["containers"]]
        container = raw.query.get("container") or containers[0]
        previous = raw.query.get("previous") in ("true", "1")
        key = (ns, name, container, previous)
        waiting = self._waiting_reason(pod, container)
        if waiting and not previous and not self.logs.get(key):
            msg = f'container "{container}" in pod "{name}" is waiting to start: {waiting}'
            return self._status(400, "BadRequest", msg)
        if key not in self.logs:
            if previous:
                msg = f'previous terminated container "{container}" in pod "{name}" not found'
                return self._status(400, "BadRequest", msg)
            return aiohttp.web.Response(text="", content_type="text/plain")
        text = self.logs[key]
        if tail := raw.query.get("tailLines"):
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-int(tail) :])
        return aiohttp.web.Response(text=text, content_type="text/plain")

    async def _follow_log(
        self, raw: aiohttp.web.BaseRequest, ns: str, name: str
    ) -> aiohttp.web.StreamResponse:
        """``follow=true``: what is there, then what is appended (``logs[key]`` grows), as
        chunked HTTP, until the container ends (``ended_logs``) or the client goes away."""
        pod = self.get("pods", ns, name)
        if pod is None:
            return self._status(404, "NotFound", f'pods "{name}" not found')
        containers = [c["name"] for c in pod["spec"]["containers"]]
        container = raw.query.get("container") or containers[0]
        key = (ns, name, container, raw.query.get("previous") in ("true", "1"))
        waiting = self._waiting_reason(pod, container)
        if waiting and not key[3] and not self.logs.get(key):
            msg = f'container "{container}" in pod "{name}" is waiting to start: {waiting}'
            return self._status(400, "BadRequest", msg)
        resp = aiohttp.web.StreamResponse(headers={"Content-Type": "text/plain"})
        resp.enable_chunked_encoding()
        await resp.prepare(raw)
        self.log_followers[key] = self.log_followers.get(key, 0) + 1
        sent = 0
        generation = self.log_generation.get(key, 0)  # a restarted container is a new log
        try:
            while True:
                text = self.logs.get(key, "")
                if self.log_generation.get(key, 0) != generation:
                    break
                if len(text) > sent:
                    await resp.write(text[sent:].encode())
                    sent = len(text)
                elif key in self.ended_logs:
                    break
                elif raw.transport is None or raw.transport.is_closing():
                    return resp  # the client closed the stream
                else:
                    await asyncio.sleep(0.02)
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.log_followers[key] -= 1
        return resp

    @staticmethod
    def _waiting_reason(pod: dict[str, Any], container: str) -> str:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            if cs.get("name") == container and not cs.get("restartCount"):
                return str(((cs.get("state") or {}).get("waiting") or {}).get("reason") or "")
        return ""

    # -- Job controller + kubelet, for the node Job mode ---------------------------------------

    async def _run_job(self, job: dict[str, Any]) -> None:
        """What the Job controller and a kubelet do: one pod, its container run for real.

        hostPath volumes are laid out as symlinks under ``host_root`` (this machine
        is the node), and the container's paths under a mountPath are mapped there.
        """
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        tpl = job["spec"]["template"]
        pod_name = f"{name}-{os.urandom(3).hex()[:5]}"
        labels = {**(tpl.get("metadata") or {}).get("labels", {}), "job-name": name}
        spec = dict(tpl["spec"])
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod_name, "namespace": ns, "labels": labels},
            "spec": {
                **spec,
                "nodeName": spec.get("nodeSelector", {}).get("kubernetes.io/hostname"),
            },
            "status": {"phase": "Pending"},
        }
        self.put(pod)
        container = spec["containers"][0]
        root = self.host_root or Path("/nonexistent")
        vols = {v["name"]: v for v in spec.get("volumes") or []}
        prefixes = []
        for mnt in container.get("volumeMounts") or []:
            host = (vols.get(mnt["name"]) or {}).get("hostPath", {}).get("path")
            if host is None:
                continue
            target = root / mnt["mountPath"].lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists() and os.path.exists(host):
                target.symlink_to(host)
            prefixes.append(mnt["mountPath"].rstrip("/").rsplit("/", 1)[0] or "/")
        mount_root = min(prefixes, key=len) if prefixes else None

        def mapped(arg: str) -> str:
            if mount_root and mount_root != "/" and arg.startswith(mount_root):
                return str(root) + arg
            return arg

        argv = [mapped(a) for a in container["command"] + container.get("args", [])]
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        self._set_phase(ns, pod_name, "Running")
        out, _ = await proc.communicate()
        self.logs[(ns, pod_name, container["name"], False)] = out.decode("utf-8", "replace")
        self._set_phase(ns, pod_name, "Succeeded" if proc.returncode == 0 else "Failed")

    def _set_phase(self, ns: str, name: str, phase: str) -> None:
        key = (kmock.resource("", "v1", "pods"), ns, name)
        if key in self.objects and not self.objects[key].deleted:
            self.objects[key].patch({"status": {"phase": phase}})

    def _collect_job_pods(self, ns: str, job: str) -> None:
        """The garbage collector: a deleted Job's pods go too (propagationPolicy Background)."""
        for (res, pns, _name), obj in list(self.objects.items()):
            labels = obj.get("metadata", {}).get("labels") or {} if not obj.deleted else {}
            if res.plural == "pods" and pns == ns and labels.get("job-name") == job:
                obj.delete()

    # -- exec over websocket -----------------------------------------------------------------

    async def _exec(
        self, raw: aiohttp.web.BaseRequest, ns: str, name: str
    ) -> aiohttp.web.StreamResponse:
        pod = self.get("pods", ns, name)
        if pod is None:
            return self._status(404, "NotFound", f'pods "{name}" not found')
        if (ns, name) in self.forbid_exec:
            msg = (
                f'pods "{name}" is forbidden: User "system:serviceaccount:{ns}:reader" cannot '
                f'create resource "pods/exec" in API group "" in the namespace "{ns}"'
            )
            return self._status(403, "Forbidden", msg)
        if (pod.get("status") or {}).get("phase") != "Running":
            return self._status(400, "BadRequest", f"pod {name} is not running")
        command = raw.query.getall("command", [])
        use_stdin = raw.query.get("stdin") in ("true", "1")
        self.exec_calls.append({"namespace": ns, "pod": name, "command": command,
                                "container": raw.query.get("container")})  # fmt: skip
        ws = aiohttp.web.WebSocketResponse(protocols=self.exec_protocols, max_msg_size=0)
        await ws.prepare(raw)
        argv, pod_env, cwd = self.exec_setup(ns, name, command)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if use_stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=pod_env if pod_env is not None else {**os.environ, **self.exec_env},
                cwd=cwd,
                # its own session, as a container's process is: deleting the pod signals this
                # process group, never the one of the process hosting the emulator (pytest, CI)
                start_new_session=True,
            )
        except OSError as exc:
            # What the kubelet answers when the executable is missing in the container.
            msg = f'exec: "{command[0] if command else ""}": {exc.strerror}'
            await ws.send_bytes(b"\x03" + json.dumps(
                {"metadata": {}, "status": "Failure", "message": msg,
                 "reason": "InternalError"}).encode())  # fmt: skip
            await ws.close()
            return ws

        async def pump(stream: asyncio.StreamReader, channel: int) -> None:
            while chunk := await stream.read(32768):
                await ws.send_bytes(bytes([channel]) + chunk)

        async def feed() -> None:
            async for msg in ws:
                if msg.type not in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT):
                    break
                data = msg.data if isinstance(msg.data, bytes) else msg.data.encode()
                if not data:
                    continue
                channel, payload = data[0], data[1:]
                if channel == 0 and proc.stdin is not None:
                    proc.stdin.write(payload)
                    await proc.stdin.drain()
                elif channel == 255 and payload[:1] == b"\x00" and proc.stdin is not None:
                    proc.stdin.close()
            if proc.stdin is not None and not proc.stdin.is_closing():
                proc.stdin.close()  # the stream ended: the process sees end of input

        feeder = asyncio.create_task(feed())
        assert proc.stdout is not None and proc.stderr is not None
        await asyncio.gather(pump(proc.stdout, 1), pump(proc.stderr, 2))
        rc = await proc.wait()
        feeder.cancel()
        if rc == 0:
            status: dict[str, Any] = {"metadata": {}, "status": "Success"}
        else:
            status = {
                "metadata": {},
                "status": "Failure",
                "message": f"command terminated with non-zero exit code: exit status {rc}",
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": str(rc)}]},
            }
        await ws.send_bytes(b"\x03" + json.dumps(status).encode())
        await ws.close()
        return ws


class RunningEmulator:
    """An emulator serving on 127.0.0.1 from a background thread, with a kubeconfig for it."""

    def __init__(self, tmp: Path) -> None:
        self.emulator = KubeEmulator()
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.url = ""
        self.kubeconfig = tmp / "kubeconfig"
        self.emulator.workdir = tmp

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with self.emulator, kmock.Server(self.emulator) as server:
            self.url = str(server.url).rstrip("/")
            self.emulator.start_controllers()
            self._ready.set()
            await self._stop.wait()
            await self.emulator.stop_workloads()

    def start(self) -> RunningEmulator:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("emulator did not start")
        self.kubeconfig.write_text(kubeconfig_text(self.url))
        return self

    def stop(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def put(self, *objs: dict[str, Any]) -> None:
        for obj in objs:
            asyncio.run_coroutine_threadsafe(_put(self.emulator, obj), self.loop).result(5)

    def call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the emulator's loop (its objects change only there)."""

        async def run() -> Any:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def append_log(self, key: tuple[str, str, str, bool], text: str, end: bool = False) -> None:
        """A container writes ``text`` (and ends, with ``end``), on the emulator's loop."""

        async def write() -> None:
            self.emulator.logs[key] = self.emulator.logs.get(key, "") + text
            if end:
                self.emulator.ended_logs.add(key)

        asyncio.run_coroutine_threadsafe(write(), self.loop).result(5)


async def _put(em: KubeEmulator, obj: dict[str, Any]) -> None:
    em.put(obj)


def running_pod(
    name: str,
    namespace: str,
    containers: tuple[str, ...] = ("vllm",),
    restarts: int = 0,
    init_containers: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A Running pod on 127.0.0.1 whose containers (and finished init containers) are in
    their real status shape, labelled app=engine."""

    def status(c: str, state: dict[str, Any], n: int) -> dict[str, Any]:
        return {"name": c, "ready": "running" in state, "restartCount": n,
                "image": "x", "imageID": "x", "state": state}  # fmt: skip

    running = {"running": {"startedAt": "2026-12-03T10:00:00Z"}}
    done = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "engine"}},
        "spec": {"containers": [{"name": c, "image": "x"} for c in containers]},
        "status": {
            "phase": "Running",
            "podIP": "127.0.0.1",
            "containerStatuses": [status(c, running, restarts) for c in containers],
        },
    }
    if init_containers:
        pod["spec"]["initContainers"] = [{"name": c, "image": "x"} for c in init_containers]
        pod["status"]["initContainerStatuses"] = [status(c, done, 0) for c in init_containers]
    return pod


def kubeconfig_text(url: str, context: str = "emulator", namespace: str = "default") -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emu", "cluster": {"server": url}}],
        "users": [{"name": "reader", "user": {"token": "emulator-token"}}],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": "emu", "user": "reader", "namespace": namespace},
            }
        ],
        "current-context": context,
    }
    return json.dumps(doc)


@contextlib.contextmanager
def running(tmp: Path) -> Iterator[RunningEmulator]:
    emu = RunningEmulator(tmp).start()
    try:
        yield emu
    finally:
        emu.stop()
