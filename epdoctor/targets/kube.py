"""Kubernetes pods as targets, through the official `kubernetes` client.

Imported only when a Kubernetes flag was given (kube_cli.from_spec), so
`epdoctor --help` and local diagnose never load the client.

One pod is one target. The node probe runs inside the pod's container over the
websocket exec protocol in one round trip: the script goes on stdin of
``python3 -`` and stdin is closed with the v5 close-channel frame. Against an
API server that negotiates only v4 (no way to close stdin), the same script is
read as exactly N bytes by a one-line loader instead.

Besides the probe, ``side_facts`` gathers what the API server knows about the
pod: its object, the owning StatefulSet, the namespace's Services, its events,
its node, and the tail of its container logs (current and previous). Every
call has a timeout; a read that RBAC forbids becomes an "unseen" reason, not a
failure of the whole target.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from epdoctor.model import TargetInfo
from epdoctor.safeio import plain
from epdoctor.targets.base import ProbeOptions, ProbeOutput, Target, TargetError
from epdoctor.targets.logstream import LogStream
from epdoctor.targets.probe_script import node_probe_source

API_TIMEOUT = (5.0, 20.0)  # (connect, read) seconds for every plain API call
LOG_TAIL_LINES = 2000
LOG_MAX_BYTES = 4 << 20
SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
V5_CHANNEL = "v5.channel.k8s.io"

# DNS-1123: namespaces are labels (63), pod names subdomains (253).
_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = re.compile(rf"^{_LABEL}\Z")
DNS1123_SUBDOMAIN = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*\Z")
# Label keys: optional DNS-subdomain prefix + "/" + name; names and values 63 chars.
_LABEL_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"^(?:{_LABEL}(?:\.{_LABEL})*/)?{_LABEL_NAME}\Z")
_LABEL_VALUE = re.compile(rf"^(?:{_LABEL_NAME})?\Z")
_SET_TERM = re.compile(r"^(\S+)\s+(in|notin)\s+\(([^()]*)\)\Z")


def valid_namespace(name: str) -> str:
    if len(name) > 63 or not DNS1123_LABEL.match(name):
        raise TargetError(
            f"invalid namespace {name!r}: a namespace is a DNS-1123 label "
            "(lowercase letters, digits and '-', at most 63 characters)"
        )
    return name


def valid_pod_name(name: str) -> str:
    if len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
        raise TargetError(
            f"invalid pod name {name!r}: a pod name is a DNS-1123 subdomain "
            "(lowercase letters, digits, '-' and '.', at most 253 characters)"
        )
    return name


def valid_container_name(name: str) -> str:
    if len(name) > 63 or not DNS1123_LABEL.match(name):
        raise TargetError(f"invalid container name {name!r}: a container name is a DNS-1123 label")
    return name


def valid_selector(selector: str) -> str:
    """A label selector in kubectl's syntax; anything else is refused before it is sent."""
    for term in _split_terms(selector):
        term = term.strip()
        m = _SET_TERM.match(term)
        if m:
            _check_key(m.group(1), selector)
            for v in m.group(3).split(","):
                _check_value(v.strip(), selector)
            continue
        for op in ("==", "!=", "="):
            if op in term:
                key, value = term.split(op, 1)
                _check_key(key.strip(), selector)
                _check_value(value.strip(), selector)
                break
        else:
            _check_key(term[1:] if term.startswith("!") else term, selector)
    return selector


def _split_terms(selector: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def _check_key(key: str, selector: str) -> None:
    name = key.rsplit("/", 1)[-1]
    if not _LABEL_KEY.match(key) or len(name) > 63:
        raise TargetError(f"invalid label selector {selector!r}: bad key {key!r}")


def _check_value(value: str, selector: str) -> None:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise TargetError(f"invalid label selector {selector!r}: bad value {value!r}")


# ---- connection ---------------------------------------------------------------------------
SHARED_FOR_S = 20.0  # how long one read of a shared object (node, StatefulSet) serves other pods


@dataclass
class KubeSession:
    """One API client for a context, with the namespace that context defaults to."""

    api_client: Any
    namespace: str
    context: str
    timeout: tuple[float, float] = API_TIMEOUT  # (connect, read) for every plain call
    # Reads every pod of one fan-out shares (its node, StatefulSet, the namespace's services):
    # made once, whichever pod asks first; the others wait for that answer. An answer older than
    # SHARED_FOR_S is read again, so a session that lives on (the TUI, a launch that diagnoses
    # twice) never judges with a stale node or StatefulSet.
    _shared: dict[tuple[str, ...], tuple[float, concurrent.futures.Future[dict[str, Any]]]] = field(
        default_factory=dict, repr=False
    )
    _shared_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def connect(
        cls,
        context: str | None = None,
        kubeconfig: str | None = None,
        request_timeout: float | None = None,
    ) -> KubeSession:
        """KUBECONFIG / --kubeconfig / ~/.kube/config, else in-cluster service account."""
        session = cls._connect(context, kubeconfig)
        if request_timeout:
            session.timeout = (min(API_TIMEOUT[0], request_timeout), float(request_timeout))
        return session

    @classmethod
    def _connect(cls, context: str | None, kubeconfig: str | None) -> KubeSession:
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException

        path = _checked_file(kubeconfig, "--kubeconfig") if kubeconfig else _kubeconfig_path()
        if path:
            try:
                contexts, active = config.list_kube_config_contexts(config_file=path)
                chosen = active
                if context:
                    chosen = next((c for c in contexts if c.get("name") == context), None)
                    if chosen is None:
                        names = ", ".join(c.get("name", "?") for c in contexts)
                        raise TargetError(f"no context {context!r} in {path} (have: {names})")
                api = _no_retries(config.new_client_from_config(config_file=path, context=context))
            except ConfigException as exc:
                raise TargetError(f"cannot load kubeconfig {path}: {exc}") from exc
            ns = ((chosen or {}).get("context") or {}).get("namespace") or "default"
            return cls(api, ns, (chosen or {}).get("name", ""))
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            cfg = client.Configuration()
            try:
                config.load_incluster_config(client_configuration=cfg)
            except ConfigException as exc:
                raise TargetError(f"in-cluster config: {exc}") from exc
            ns = _read(SA_NAMESPACE).strip() or "default"
            return cls(_no_retries(client.ApiClient(cfg)), ns, "in-cluster")
        raise TargetError(
            "no Kubernetes configuration: set KUBECONFIG, pass --kubeconfig, "
            "or run inside a pod with a service account"
        )

    def exec_client(self) -> Any:
        """A fresh ApiClient on this session's configuration (for one stream() call)."""
        from kubernetes import client

        return _no_retries(client.ApiClient(self.api_client.configuration))

    @property
    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api_client)

    @property
    def apps(self) -> Any:
        from kubernetes import client

        return client.AppsV1Api(self.api_client)

    @property
    def batch(self) -> Any:
        from kubernetes import client

        return client.BatchV1Api(self.api_client)

    def call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """One API call as a parsed JSON object (the API's own camelCase shape).

        Bounded: each socket read waits at most the read timeout, the whole body at most
        twice that (a server that trickles bytes), MAX_BODY bytes, and no retries (see
        _no_retries). Anything but a JSON object (an HTML proxy page, half a document, a
        list) is a KubeApiError naming the call."""
        from kubernetes.client.exceptions import ApiException

        kwargs.setdefault("_request_timeout", self.timeout)
        try:
            resp = fn(*args, _preload_content=False, **kwargs)
        except ApiException as exc:
            raise KubeApiError(what, exc.status, _api_message(exc)) from exc
        except Exception as exc:  # urllib3 timeouts, refused connections, TLS errors
            raise KubeApiError(what, 0, _short(exc)) from exc
        try:
            data = _read_body(resp, deadline=time.monotonic() + 2 * self.timeout[1])
        except TargetError as exc:
            raise KubeApiError(what, -1, str(exc)) from exc
        except Exception as exc:  # a read timeout or a reset in the middle of the body
            raise KubeApiError(what, 0, _short(exc)) from exc
        finally:
            with contextlib.suppress(Exception):
                resp.release_conn()
        return _json_object(what, data, resp)

    def call_once(
        self, key: tuple[str, ...], what: str, fn: Any, *args: Any, **kwargs: Any
    ) -> dict[str, Any]:
        """call(), made once per session for `key`; a failure is shared like an answer."""
        now = time.monotonic()
        with self._shared_lock:
            at, fut = self._shared.get(key, (0.0, None))
            mine = fut is None or (now - at > SHARED_FOR_S and fut.done())
            if mine:
                fut = concurrent.futures.Future()
                self._shared[key] = (now, fut)
        if mine:
            try:
                fut.set_result(self.call(what, fn, *args, **kwargs))
            except TargetError as exc:
                fut.set_exception(exc)
        assert fut is not None
        return fut.result()

    def close(self) -> None:
        try:
            self.api_client.close()
        except Exception:
            pass


class KubeApiError(TargetError):
    def __init__(self, what: str, status: int, message: str) -> None:
        self.what = what
        self.status = status
        self.message = message
        super().__init__(f"{what}: {_explain(status, message)}")


MAX_BODY = 64 << 20  # a list of every pod in a large cluster stays well under this


def _read_body(resp: Any, deadline: float) -> bytes:
    chunks, size = [], 0
    while True:
        if time.monotonic() > deadline:
            raise TargetError("the API server sent its answer too slowly; gave up")
        chunk = resp.read(1 << 16)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_BODY:
            raise TargetError(f"the answer is larger than {MAX_BODY >> 20} MiB; not read")
        chunks.append(chunk)


def _json_object(what: str, data: bytes, resp: Any) -> dict[str, Any]:
    if not data:
        return {}
    ctype = str((getattr(resp, "headers", None) or {}).get("Content-Type", ""))
    head = data[:200].lstrip().lower()
    if head.startswith((b"<!doctype", b"<html", b"<")) or "html" in ctype:
        raise KubeApiError(
            what, -1, "the answer is an HTML page, not JSON (a proxy or load balancer in the way?)"
        )
    try:
        doc = json.loads(data)
    except RecursionError:
        raise KubeApiError(what, -1, "the JSON answer is nested too deeply") from None
    except ValueError as exc:
        why = "truncated" if "Unterminated" in str(exc) or "Expecting" in str(exc) else "invalid"
        raise KubeApiError(what, -1, f"the answer is {why} JSON ({exc})") from None
    if not isinstance(doc, dict):
        kind = "list" if isinstance(doc, list) else type(doc).__name__
        raise KubeApiError(what, -1, f"the answer is a JSON {kind}, not an object")
    return doc


def _short(exc: BaseException) -> str:
    """urllib3's exceptions repeat the pool and the URL: keep the reason."""
    text = f"{type(exc).__name__}: {exc}"
    if "timed out" in text.lower() or "timeout" in type(exc).__name__.lower():
        return "timed out"
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _no_retries(api: Any) -> Any:
    """urllib3 retries a timed-out read three times by default: four times the timeout the
    user gave. An API call here is tried once; the caller decides what to do next."""
    from urllib3.util.retry import Retry

    pm = getattr(getattr(api, "rest_client", None), "pool_manager", None)
    if pm is not None:
        pm.connection_pool_kw["retries"] = Retry(total=0, connect=0, read=0, redirect=0)
        pm.clear()
    return api


def _explain(status: int, message: str) -> str:
    if status == -1:  # reached, but the answer is not one the API would give
        return message
    if status == 403:
        return f"forbidden by RBAC ({message}); see docs/rbac/ for the read-only role"
    if status == 401:
        return f"unauthorized ({message}): the credentials in this context were refused"
    if status == 404:
        return f"not found ({message})"
    if status == 0:
        if message == "timed out":
            return "API server unreachable or timed out (no answer within --request-timeout)"
        return f"API server unreachable or timed out ({message})"
    return f"HTTP {status}: {message}"


def _api_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if body:
        try:
            return json.loads(body).get("message") or str(body)
        except (ValueError, AttributeError):
            return str(body)[:300]
    return str(getattr(exc, "reason", exc))


def _kubeconfig_path() -> str | None:
    """The first file KUBECONFIG names, else ~/.kube/config. Like kubectl, a KUBECONFIG that is
    set never falls back to ~/.kube/config: one that names no file is an error of its own."""
    env = os.environ.get("KUBECONFIG")
    if env:
        paths = [p for p in env.split(os.pathsep) if p]
        first = next((p for p in paths if os.path.exists(p)), None)
        if first:
            return _checked_file(first, "KUBECONFIG")
        if paths:
            raise TargetError(
                f"KUBECONFIG={plain(env)}: no such file (point it at a kubeconfig, "
                "or unset it to use ~/.kube/config)"
            )
    home = os.path.expanduser("~/.kube/config")
    return home if os.path.exists(home) else None


def _checked_file(path: str, where: str) -> str:
    if os.path.isdir(path):
        raise TargetError(f"{where} {plain(path)}: is a folder, not a kubeconfig file")
    if not os.path.exists(path):
        raise TargetError(f"{where} {plain(path)}: no such file")
    return path


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        return ""


# ---- selection ----------------------------------------------------------------------------


def select_pods(
    session: KubeSession,
    namespace: str | None = None,
    pod: str | None = None,
    selector: str | None = None,
    all_namespaces: bool = False,
) -> list[dict[str, Any]]:
    """The pod objects the flags name. A named pod that does not exist is an error."""
    ns = valid_namespace(namespace or session.namespace)
    core = session.core
    if pod:
        valid_pod_name(pod)
        try:
            what = f"pod {ns}/{pod}"
            return [_checked_pod(what, session.call(what, core.read_namespaced_pod, pod, ns))]
        except KubeApiError as exc:
            if exc.status == 404:
                raise TargetError(f'pod "{pod}" not found in namespace "{ns}"') from exc
            raise
    kw: dict[str, Any] = {}
    if selector:
        kw["label_selector"] = valid_selector(selector)
    if all_namespaces:
        doc = session.call("pods (all namespaces)", core.list_pod_for_all_namespaces, **kw)
    else:
        doc = session.call(f"pods in {ns}", core.list_namespaced_pod, ns, **kw)
    items = doc.get("items") or []
    what_call = "pods (all namespaces)" if all_namespaces else f"pods in {ns}"
    if not isinstance(items, list):
        raise KubeApiError(what_call, -1, "the answer's items are not a list")
    pods = [_checked_pod(what_call, p) for p in items]
    if not pods:
        where = "any namespace" if all_namespaces else f'namespace "{ns}"'
        what = f"matching {selector!r} " if selector else ""
        raise TargetError(f"no pods {what}in {where}")
    return sorted(pods, key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"]))


def _checked_pod(what: str, pod: Any) -> dict[str, Any]:
    """A pod object in the shape the targets read (metadata.name a string), else an error."""
    meta = pod.get("metadata") if isinstance(pod, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        raise KubeApiError(what, -1, "the answer is not a pod object (no metadata.name)")
    for key in ("spec", "status"):
        if pod.get(key) is not None and not isinstance(pod[key], dict):
            raise KubeApiError(what, -1, f"the pod's {key} is not an object")
    return pod


# ---- the pod target ------------------------------------------------------------------------


class KubePodTarget(Target):
    def __init__(self, session: KubeSession, pod: dict[str, Any], container: str | None = None):
        self.session = session
        self.pod = pod
        meta = pod["metadata"]
        self.namespace = valid_namespace(meta.get("namespace") or session.namespace)
        self.name = valid_pod_name(meta["name"])
        self.container = valid_container_name(container) if container else default_container(pod)
        node = (pod.get("spec") or {}).get("nodeName") or ""
        detail = {"namespace": self.namespace, "pod": self.name, "container": self.container}
        if node:
            detail["node"] = node
        if session.context:
            detail["context"] = session.context
        self.info = TargetInfo(name=f"{self.namespace}/{self.name}", kind="pod", detail=detail)

    # -- probe ------------------------------------------------------------------------------

    def run_probe(self, options: ProbeOptions) -> ProbeOutput:
        why = not_runnable(self.pod, self.container)
        if why:
            raise TargetError(why)
        t0 = time.monotonic()
        src = node_probe_source()
        argv = ["python3", "-", *options.probe_argv()]
        rc, out, err, proto = self.exec_argv(argv, src, options.timeout_s + 15)
        if proto != V5_CHANNEL:  # v4, or a server that named no subprotocol
            # v4 cannot close stdin: read exactly the script's length instead.
            loader = (
                f"import sys;s=sys.stdin.buffer.read({len(src)});sys.argv[0]='-';"
                "exec(compile(s,'<stdin>','exec'),{'__name__':'__main__'})"
            )
            argv = ["python3", "-c", loader, *options.probe_argv()]
            rc, out, err, proto = self.exec_argv(argv, src, options.timeout_s + 15, close=False)
        if rc is None and not out:
            raise TargetError(f"exec into {self.info.name}: {err.decode('utf-8', 'replace')}")
        text_err = err.decode("utf-8", "replace")
        if rc not in (0, None) and not out.strip() and "executable file not found" in text_err:
            raise TargetError(
                f"container {self.container!r} of {self.info.name} has no python3: "
                "the probe needs the image's python3 (name another with --container)"
            )
        return ProbeOutput(
            stdout=out.decode("utf-8", "replace"),
            stderr=text_err,
            exit_code=rc,
            elapsed_s=time.monotonic() - t0,
        )

    def exec_argv(
        self, argv: list[str], stdin: bytes, timeout: float, close: bool = True
    ) -> tuple[int | None, bytes, bytes, str | None]:
        """Run argv in the container with stdin; (exit code, stdout, stderr, subprotocol)."""
        from kubernetes.client.exceptions import ApiException
        from kubernetes.stream import stream

        # stream() swaps call_api on the ApiClient it is given for the duration of the
        # call; on the shared client, other threads' plain reads would go out as
        # websocket handshakes. Each exec gets its own client on the same configuration.
        api = self.session.exec_client()
        core = client_core(api)
        _bound_websocket_connect(self.session.timeout[1])
        try:
            ws = stream(
                core.connect_get_namespaced_pod_exec,
                self.name,
                self.namespace,
                container=self.container,
                command=argv,
                stdin=bool(stdin),
                stdout=True,
                stderr=True,
                tty=False,
                _preload_content=False,
                binary=True,
                _request_timeout=self.session.timeout,
            )
        except ApiException as exc:
            api.close()
            raise TargetError(_exec_refusal(self.info.name, exc)) from exc
        proto = getattr(ws, "subprotocol", None)
        try:
            if proto != V5_CHANNEL and stdin and close:
                return None, b"", b"", proto  # caller retries with the bounded loader
            if stdin:
                ws.write_channel(0, stdin)
                if close:
                    ws.close_channel(0)
            ws.run_forever(timeout=timeout)
            if ws.is_open():
                raise TargetError(
                    f"exec into {self.info.name} did not finish within {timeout:.0f}s"
                )
            out = ws.read_channel(1) or b""
            err = ws.read_channel(2) or b""
            rc = _exit_code(ws.read_channel(3))
            if rc is None and not out:
                raise TargetError(f"exec into {self.info.name}: {_status_message(ws)}")
            return rc, out, err, proto
        finally:
            ws.close()
            api.close()

    def exec(self, command: str, stdin: bytes = b"", timeout: float = 30.0):
        """`sh -c command` in the container: the Exec shape the launch protocol drives."""
        rc, out, err, proto = self.exec_argv(["sh", "-c", command], stdin, timeout)
        if proto != V5_CHANNEL and stdin:
            raise TargetError("this API server offers only exec v4; cannot close stdin")
        return rc, out, err

    # -- logs -------------------------------------------------------------------------------

    def read_logs(  # type: ignore[override]
        self, previous: bool = False, tail_lines: int | None = None, **_: object
    ) -> Iterator[bytes]:
        from kubernetes.client.exceptions import ApiException

        kw: dict[str, Any] = {"container": self.container, "previous": previous}
        if tail_lines:
            kw["tail_lines"] = int(tail_lines)
        try:
            resp = self.session.core.read_namespaced_pod_log(
                self.name,
                self.namespace,
                _preload_content=False,
                _request_timeout=self.session.timeout,
                **kw,
            )
        except ApiException as exc:
            raise TargetError(
                f"logs of {self.info.name}: {_explain(exc.status, _api_message(exc))}"
            ) from exc
        except Exception as exc:
            raise TargetError(f"logs of {self.info.name}: {exc}") from exc
        try:
            yield from resp.stream(1 << 16)
        except Exception as exc:  # a read timeout or a reset in the middle of the log
            raise TargetError(f"logs of {self.info.name}: {_explain(0, _short(exc))}") from exc
        finally:
            resp.release_conn()

    def log_stream(
        self,
        name: str,
        container: str | None = None,
        previous: bool = False,
        follow: bool = False,
        since_s: int | None = None,
        tail: int | None = None,
    ) -> LogStream:
        """One container's log as a LogStream (``follow``: the API server streams new lines
        until the container ends; ``since_s``/``tail``: kubectl's --since and --tail).
        Nothing is requested until it is iterated."""
        log = _PodLog(self, name, container or self.container, previous, follow)
        log.window = {
            k: v for k, v in (("since_seconds", since_s), ("tail_lines", tail)) if v is not None
        }
        return log.stream

    def log_tail(self, previous: bool) -> tuple[str | None, str]:
        """(text, reason it is absent) of the last LOG_TAIL_LINES lines."""
        try:
            chunks, size = [], 0
            for chunk in self.read_logs(previous=previous, tail_lines=LOG_TAIL_LINES):
                chunks.append(chunk)
                size += len(chunk)
                if size > LOG_MAX_BYTES:
                    break
            return b"".join(chunks).decode("utf-8", "replace"), ""
        except TargetError as exc:
            return None, str(exc)

    # -- what the API server knows ----------------------------------------------------------

    def side_facts(self, diagnosis: Any = None) -> dict[str, Any]:
        """Raw objects for the kube checks (domain "kube"); forbidden reads become reasons."""
        s = self.session
        core, apps = s.core, s.apps
        facts: dict[str, Any] = {"pod": self.pod, "container": self.container, "unseen": {}}
        unseen: dict[str, str] = facts["unseen"]

        def get(key: str, what: str, fn: Any, *args: Any, shared: bool = False, **kw: Any) -> Any:
            try:
                if shared:  # the same object for every pod that names it: read once a run
                    return s.call_once((key, *map(str, args)), what, fn, *args, **kw)
                return s.call(what, fn, *args, **kw)
            except TargetError as exc:
                unseen[key] = str(exc)
                return None

        fresh = get(
            "pod", f"pod {self.info.name}", core.read_namespaced_pod, self.name, self.namespace
        )
        if isinstance(fresh, dict):
            facts["pod"] = self.pod = fresh
            unseen.pop("pod", None)
        sel = f"involvedObject.name={self.name},involvedObject.kind=Pod"
        ev = get("events", "events", core.list_namespaced_event, self.namespace, field_selector=sel)
        facts["events"] = (ev or {}).get("items") if isinstance(ev, dict) else None
        node_name = (self.pod.get("spec") or {}).get("nodeName")
        if node_name:
            facts["node"] = get("node", f"node {node_name}", core.read_node, node_name, shared=True)
        else:
            facts["node"] = None
            unseen["node"] = "the pod is not scheduled on a node yet"
        owner = next(
            (
                o
                for o in self.pod["metadata"].get("ownerReferences") or []
                if o.get("kind") == "StatefulSet"
            ),
            None,
        )
        if owner:
            facts["statefulset"] = get(
                "statefulset",
                f"statefulset {owner['name']}",
                apps.read_namespaced_stateful_set,
                owner["name"],
                self.namespace,
                shared=True,
            )
        svcs = get(
            "services", "services", core.list_namespaced_service, self.namespace, shared=True
        )
        facts["services"] = (svcs or {}).get("items") if isinstance(svcs, dict) else None
        restarted = any(
            (cs.get("restartCount") or 0) > 0 or (cs.get("lastState") or {}).get("terminated")
            for cs in (self.pod.get("status") or {}).get("containerStatuses") or []
            if cs.get("name") == self.container
        )
        logs: dict[str, Any] = {}
        if _container_started(self.pod, self.container):
            logs["current"], why = self.log_tail(previous=False)
            if why:
                unseen["logs"] = why
        if restarted:
            logs["previous"], why = self.log_tail(previous=True)
            if why:
                unseen["logs.previous"] = why
        facts["logs"] = logs
        node = getattr(diagnosis, "node", None) if diagnosis is not None else None
        facts["probe_ran"] = node is not None
        error = getattr(getattr(diagnosis, "result", None), "error", None)
        if error:
            facts["probe_error"] = error
            facts["probe_error_is_finding"] = True  # K115 reports it next to the pod's state
        facts["summary"] = summary(facts)
        return {"kube": facts}

    def close(self) -> None:
        pass  # the session is shared by every pod target; kube_cli closes it


class _PodLog:
    """A pod log read through the client with ``_preload_content=False``, chunk by chunk.

    ``read1`` returns whatever has arrived, so a followed line reaches the analyzer at once
    (``stream(n)`` would wait for n bytes). A follow has no read timeout, a quiet log being
    normal; ``stop()`` shuts the socket down, which wakes the blocked read from any thread,
    then closes the response: the API server sees the stream end.
    """

    def __init__(
        self, target: KubePodTarget, name: str, container: str, previous: bool, follow: bool
    ) -> None:
        self.target = target
        self.container = valid_container_name(container)
        self.previous = previous
        self.follow = follow
        self.what = f"logs of {target.info.name} container {self.container}"
        self._lock = threading.Lock()  # held while opening or stopping: never both at once
        self._done = False
        self._resp: Any = None
        self.window: dict[str, int] = {}  # since_seconds, tail_lines
        self.stream = LogStream(name, self.chunks, stop=self._stop)

    def _open(self) -> Any:
        from kubernetes.client.exceptions import ApiException

        t = self.target
        try:
            resp = t.session.core.read_namespaced_pod_log(
                t.name,
                t.namespace,
                container=self.container,
                previous=self.previous,
                follow=self.follow,
                **self.window,
                _preload_content=False,
                _request_timeout=t.session.timeout,  # up to the response's headers
            )
        except ApiException as exc:
            raise TargetError(f"{self.what}: {_explain(exc.status, _api_message(exc))}") from exc
        except Exception as exc:  # urllib3 timeouts, refused connections, TLS errors
            raise TargetError(f"{self.what}: {exc}") from exc
        if self.follow:
            _quiet_ok(_socket_of(resp))
        return resp

    def chunks(self) -> Iterator[bytes]:
        with self._lock:
            if self._done:
                return
            resp = self._resp = self._open()
        try:
            while not self.stream.stopping.is_set():
                data = resp.read1(1 << 16)
                if not data:
                    with self._lock:  # read to its end: the connection can be reused
                        self._resp = None
                    resp.release_conn()
                    return
                yield data
        except Exception as exc:
            if self.stream.stopping.is_set():
                return  # our own shutdown woke the read
            raise TargetError(f"{self.what}: stream lost ({exc})") from exc
        finally:
            self.stream.stop()

    def _stop(self) -> None:
        with self._lock:
            self._done = True
            resp, self._resp = self._resp, None
        if resp is None:
            return
        sock = _socket_of(resp)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the far side
        try:
            resp.close()
        except Exception:
            pass


def _quiet_ok(sock: Any) -> None:
    """A followed log may be quiet for hours: no read timeout on its socket (the client
    validates _request_timeout and takes no None), TCP keepalive to notice a dead peer."""
    if sock is None:
        return
    try:
        sock.settimeout(None)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for opt, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 6)):
            if hasattr(socket, opt):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, opt), value)
    except OSError:
        pass


def _socket_of(resp: Any) -> Any:
    """The socket under a urllib3 response (urllib3 2: its connection's; else the file's)."""
    conn = getattr(resp, "connection", None)
    sock = getattr(conn, "sock", None)
    if sock is not None:
        return sock
    fp = getattr(getattr(resp, "_fp", None), "fp", None)
    return getattr(getattr(fp, "raw", None), "_sock", None)


def pod_containers(pod: dict[str, Any]) -> list[str]:
    """Every container of the pod in kubectl's --all-containers order: init, app, ephemeral."""
    spec = pod.get("spec") or {}
    out: list[str] = []
    for key in ("initContainers", "containers", "ephemeralContainers"):
        out += [c["name"] for c in spec.get(key) or [] if c.get("name")]
    return out


def log_absent(pod: dict[str, Any], container: str, previous: bool) -> str:
    """Why the container has no log to read yet ("" when it may have one).

    Only the pod's own statuses decide: a container still waiting that never ran has
    written nothing, and --previous needs an earlier instance. No status at all: ask."""
    st = pod.get("status") or {}
    for key in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
        for cs in st.get(key) or []:
            if cs.get("name") != container:
                continue
            ran_before = bool(cs.get("restartCount")) or bool(
                (cs.get("lastState") or {}).get("terminated")
            )
            if previous:
                return "" if ran_before else "it has no previous instance"
            state = cs.get("state") or {}
            if "waiting" in state and not ran_before:
                reason = (state.get("waiting") or {}).get("reason") or "waiting"
                return f"it has not started ({reason})"
            return ""
    return ""


SUMMARY_LOG_LINES = 30
SUMMARY_RESOURCES = ("nvidia.com/gpu", "vpc.amazonaws.com/efa", "hugepages-2Mi")


def pod_status(pod: dict[str, Any]) -> str:
    """The STATUS column of `kubectl get pods`: a container's waiting or terminated reason
    (CrashLoopBackOff, ImagePullBackOff, OOMKilled, Completed), Terminating, else the phase."""
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return "Terminating"
    st = pod.get("status") or {}
    for cs in [*(st.get("initContainerStatuses") or []), *(st.get("containerStatuses") or [])]:
        state = cs.get("state") or {}
        reason = (state.get("waiting") or {}).get("reason") or (
            (state.get("terminated") or {}).get("reason")
            if (state.get("terminated") or {}).get("exitCode")
            else None
        )
        if reason:
            return str(reason)
    return str(st.get("reason") or st.get("phase") or "Unknown")


def summary(facts: dict[str, Any]) -> dict[str, Any]:
    """What the report shows about the pod next to the probe's facts (and the raw log tails)."""
    pod = facts["pod"]
    st = pod.get("status") or {}
    cs = next(
        (c for c in st.get("containerStatuses") or [] if c.get("name") == facts["container"]), {}
    )
    state = cs.get("state") or {}
    out: dict[str, Any] = {
        "phase": st.get("phase"),
        "container": facts["container"],
        "state": next(iter(state), None),
        "ready": cs.get("ready"),
        "restarts": cs.get("restartCount"),
        "qos": st.get("qosClass"),
    }
    if (state.get("waiting") or {}).get("reason"):
        out["waiting"] = state["waiting"]["reason"]
    term = (cs.get("lastState") or {}).get("terminated")
    if term:
        out["last_termination"] = {k: term.get(k) for k in ("exitCode", "reason", "finishedAt")}
    out["status"] = pod_status(pod)
    out["created"] = (pod.get("metadata") or {}).get("creationTimestamp")
    out["node"] = (pod.get("spec") or {}).get("nodeName")
    node = facts.get("node")
    if isinstance(node, dict):
        labels = (node.get("metadata") or {}).get("labels") or {}
        alloc = (node.get("status") or {}).get("allocatable") or {}
        cap = (node.get("status") or {}).get("capacity") or {}
        out["node"] = node["metadata"]["name"]
        out["instance_type"] = labels.get("node.kubernetes.io/instance-type") or labels.get(
            "beta.kubernetes.io/instance-type"
        )
        out["zone"] = labels.get("topology.kubernetes.io/zone") or labels.get(
            "failure-domain.beta.kubernetes.io/zone"
        )
        out["capacity"] = {k: cap.get(k) for k in SUMMARY_RESOURCES}
        out["allocatable"] = {k: alloc.get(k) for k in SUMMARY_RESOURCES}
    tails = {}
    for which, text in (facts.get("logs") or {}).items():
        if text:
            tails[which] = text.splitlines()[-SUMMARY_LOG_LINES:]
    if tails:
        out["log_tail"] = tails
    if facts.get("unseen"):
        out["unseen"] = dict(facts["unseen"])
    return out


def _bound_websocket_connect(seconds: float) -> None:
    """The client opens exec websockets with no connect timeout; give them the API one.

    websocket-client reads its default per socket at creation, and epdoctor is its only
    user in the process, so the process-wide default is the one place to set it.
    """
    import websocket

    if websocket.getdefaulttimeout() is None:
        websocket.setdefaulttimeout(seconds)


def client_core(api: Any) -> Any:
    from kubernetes import client

    return client.CoreV1Api(api)


def default_container(pod: dict[str, Any]) -> str:
    ann = (pod["metadata"].get("annotations") or {}).get("kubectl.kubernetes.io/default-container")
    containers = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
    if ann and ann in containers:
        return ann
    if not containers:
        raise TargetError(f"pod {pod['metadata']['name']} has no containers")
    return containers[0]


def not_runnable(pod: dict[str, Any], container: str) -> str:
    """Why the probe cannot run in this pod's container now ("" when it can)."""
    name = pod["metadata"]["name"]
    phase = (pod.get("status") or {}).get("phase") or "Unknown"
    if phase != "Running":
        return f"pod {name} is {phase}: the probe cannot run until it is Running"
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") != container:
            continue
        state = cs.get("state") or {}
        if "running" not in state:
            waiting = (state.get("waiting") or {}).get("reason") or next(iter(state), "not running")
            return f"container {container} of pod {name} is {waiting}: the probe cannot run in it"
        return ""
    names = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
    if container not in names:
        return f"pod {name} has no container {container!r} (has: {', '.join(names)})"
    return ""


def _container_started(pod: dict[str, Any], container: str) -> bool:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == container:
            state = cs.get("state") or {}
            return "running" in state or "terminated" in state or bool(cs.get("restartCount"))
    return False


def _exit_code(status: bytes | str | None) -> int | None:
    if not status:
        return None
    try:
        doc = json.loads(status)
    except ValueError:
        return None
    if doc.get("status") == "Success":
        return 0
    for cause in (doc.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            try:
                return int(cause.get("message"))
            except (TypeError, ValueError):
                return None
    return None


def _status_message(ws: Any) -> str:
    try:
        doc = json.loads(ws.read_channel(3) or b"{}")
        return doc.get("message") or "no output and no exit status"
    except ValueError:
        return "no output and no exit status"


def _exec_refusal(target: str, exc: Any) -> str:
    # The websocket client folds the handshake's HTTP status into the reason text.
    text = str(getattr(exc, "reason", "") or exc)
    if getattr(exc, "status", 0) == 403 or "403" in text or "Forbidden" in text:
        return (
            f"exec into {target} is forbidden: this identity lacks `create` on pods/exec in the "
            "pod's namespace, so the node probe cannot run inside the container. Pod state, "
            "events and logs are still read. Grant docs/rbac/diagnose-exec.yaml, or run "
            "`epdoctor diagnose` on the node itself."
        )
    if "404" in text:
        return f"exec into {target}: the pod is gone (404)"
    return f"exec into {target} failed: {text}"
