"""The API calls that bring a plan's objects up and take them down, through the `kubernetes`
client on a KubeSession (targets/kube.py: its timeouts, no retries, bounded answers).

* ``apply``: server-side apply (``PATCH`` with ``application/apply-patch+yaml``) under
  epdoctor's field manager, never forced: a field another manager set to another value is a
  409 Conflict, not taken over. ``dry_run=True`` asks the API server what it would store
  (``dryRun=All``), which is what the diff shown before anything changes compares.
* ``read`` / ``delete`` one object; ``pods`` of a label selector; the namespace's ``events``.
* ``proxy``: an HTTP request to a pod's or a Service's port through the API server's proxy
  (``/api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH``), so the engine's readiness and the
  smoke request reach the pods from where epdoctor runs, with the kubeconfig's credentials.

Only Services and StatefulSets are applied or deleted here: what `epdoctor plan` writes.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from epdoctor.targets.base import TargetError
from epdoctor.targets.kube import (
    KubeApiError,
    KubeSession,
    _api_message,
    _short,
    valid_namespace,
    valid_pod_name,
    valid_selector,
)

FIELD_MANAGER = "epdoctor"
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
# (apiVersion, kind) -> the plural the API serves it under
KINDS: dict[tuple[str, str], str] = {
    ("v1", "Service"): "services",
    ("apps/v1", "StatefulSet"): "statefulsets",
}
_PROXY_PATH = re.compile(r"^/[A-Za-z0-9_./-]*\Z")
MAX_PROXY_BODY = 16 << 20


def plural_of(obj: dict[str, Any]) -> str:
    key = (str(obj.get("apiVersion")), str(obj.get("kind")))
    if key not in KINDS:
        raise TargetError(f"epdoctor applies Services and StatefulSets only, not {key[1]}")
    return KINDS[key]


def kind_of(plural: str) -> str:
    return next(k for (_, k), p in KINDS.items() if p == plural)


@dataclass(frozen=True)
class ProxyReply:
    """What came back through the proxy: an HTTP status and body, or why nothing did."""

    status: int | None
    body: bytes
    elapsed_s: float
    error: str = ""


class KubeApply:
    """Apply, read and delete a plan's objects; list its pods and events; reach its ports."""

    def __init__(self, session: KubeSession) -> None:
        self.session = session

    # -- objects -------------------------------------------------------------------------------

    def _methods(self, plural: str) -> tuple[Any, Any, Any]:
        """(patch, read, delete) of the typed API for a plural."""
        s = self.session
        if plural == "services":
            core = s.core
            return (core.patch_namespaced_service, core.read_namespaced_service,
                    core.delete_namespaced_service)  # fmt: skip
        apps = s.apps
        return (apps.patch_namespaced_stateful_set, apps.read_namespaced_stateful_set,
                apps.delete_namespaced_stateful_set)  # fmt: skip

    def apply(self, obj: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        """Server-side apply of one object; the object as the API server stored (or would)."""
        plural = plural_of(obj)
        meta = obj.get("metadata") or {}
        ns, name = (
            valid_namespace(str(meta.get("namespace"))),
            valid_pod_name(str(meta.get("name"))),
        )
        patch, _, _ = self._methods(plural)
        kw: dict[str, Any] = {"field_manager": FIELD_MANAGER, "_content_type": APPLY_CONTENT_TYPE}
        if dry_run:
            kw["dry_run"] = "All"
        what = f"{'dry-run ' if dry_run else ''}apply {kind_of(plural).lower()}/{name} in {ns}"
        return self.session.call(what, patch, name, ns, obj, **kw)

    def read(self, plural: str, ns: str, name: str) -> dict[str, Any] | None:
        """The live object, or None when there is none."""
        _, read, _ = self._methods(plural)
        what = f"{kind_of(plural).lower()}/{name}"
        try:
            doc = self.session.call(what, read, name, ns)
        except KubeApiError as exc:
            if exc.status == 404:
                return None
            raise
        return checked_object(what, doc, kind_of(plural), name)

    def delete(self, plural: str, ns: str, name: str) -> bool:
        """Delete one object (its pods follow it: propagation Background); False when gone."""
        _, _, delete = self._methods(plural)
        try:
            self.session.call(
                f"delete {kind_of(plural).lower()}/{name}", delete, name, ns,
                propagation_policy="Background",
            )  # fmt: skip
        except KubeApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def listed(self, plural: str, ns: str, selector: str) -> list[dict[str, Any]]:
        """Services or StatefulSets in ``ns`` matching a label selector."""
        s = self.session
        fn = (s.core.list_namespaced_service if plural == "services"
              else s.apps.list_namespaced_stateful_set)  # fmt: skip
        doc = s.call(f"{plural} in {ns}", fn, ns, label_selector=valid_selector(selector))
        return _items(f"{plural} in {ns}", doc)

    # -- pods and events -----------------------------------------------------------------------

    def pods(self, ns: str, selector: str) -> list[dict[str, Any]]:
        doc = self.session.call(
            f"pods in {ns}", self.session.core.list_namespaced_pod, ns,
            label_selector=valid_selector(selector),
        )  # fmt: skip
        pods = _items(f"pods in {ns}", doc)
        return sorted(pods, key=lambda p: str(p["metadata"].get("name")))

    def delete_pod(self, ns: str, name: str, uid: str) -> bool:
        """Delete one pod, only while it is the pod of that UID (a precondition: a replacement
        of the same name is never deleted by mistake); False when it is gone or replaced."""
        try:
            self.session.call(
                f"delete pod/{valid_pod_name(name)}", self.session.core.delete_namespaced_pod,
                name, ns, body={"preconditions": {"uid": uid}},
            )  # fmt: skip
        except KubeApiError as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True

    def events(self, ns: str) -> list[dict[str, Any]]:
        doc = self.session.call(
            f"events in {ns}", self.session.core.list_namespaced_event, ns,
            field_selector="involvedObject.kind=Pod",
        )  # fmt: skip
        return [e for e in doc.get("items") or [] if isinstance(e, dict)]

    # -- HTTP through the API server -----------------------------------------------------------

    def proxy(
        self,
        ns: str,
        kind: str,
        name: str,
        port: int | str,
        path: str,
        payload: dict[str, Any] | None = None,
        timeout_s: float = 10.0,
    ) -> ProxyReply:
        """GET (or POST ``payload`` as JSON) ``path`` on a pod's or Service's port."""
        from kubernetes.client.exceptions import ApiException

        if kind not in ("pods", "services"):
            raise ValueError(kind)
        valid_namespace(ns)
        valid_pod_name(name)
        if not _PROXY_PATH.match(path) or ".." in path:
            raise ValueError(f"proxy path {path!r}")
        if not re.fullmatch(r"[a-z0-9-]{1,15}|\d{1,5}", str(port)):
            raise ValueError(f"port {port!r}")
        api = self.session.api_client
        resource = f"/api/v1/namespaces/{ns}/{kind}/{name}:{port}/proxy{path}"
        params = api.param_serialize(
            method="POST" if payload is not None else "GET",
            resource_path=resource,
            header_params={"Content-Type": "application/json", "Accept": "application/json, */*"},
            body=payload,
            auth_settings=["BearerToken"],
        )
        t0 = time.monotonic()
        try:
            resp = api.call_api(*params, _request_timeout=(self.session.timeout[0], timeout_s))
            try:
                data = resp.response.read(MAX_PROXY_BODY)
                status = int(resp.status)
            finally:
                resp.response.release_conn()
        except ApiException as exc:
            return ProxyReply(exc.status or None, b"", time.monotonic() - t0, _api_message(exc))
        except Exception as exc:  # refused, timed out, reset
            return ProxyReply(None, b"", time.monotonic() - t0, _short(exc))
        elapsed = time.monotonic() - t0
        unreachable = _proxy_failure(status, data)
        if unreachable:  # the API server answered for the pod: nothing listened there
            return ProxyReply(None, b"", elapsed, unreachable)
        return ProxyReply(status, data, elapsed)


def checked_object(what: str, doc: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    """The answer to a read, if it is the object asked for: an answer of another kind or name,
    or with no metadata (a proxy's JSON, a Status with code 200) is an error, never an object
    that "epdoctor did not apply"."""
    meta = doc.get("metadata")
    if (
        not isinstance(meta, dict)
        or meta.get("name") != name
        or doc.get("kind") not in (None, kind)
        or not isinstance(meta.get("managedFields") or [], list)
        or not isinstance(meta.get("labels") or {}, dict)
    ):
        raise KubeApiError(what, -1, f"the answer is not the {kind} asked for (kind "
                                     f"{str(doc.get('kind'))[:40]!r}); not trusted")  # fmt: skip
    return doc


def _items(what: str, doc: dict[str, Any]) -> list[dict[str, Any]]:
    """A list's items that are objects with metadata and a name; a list that is not one is an
    error (an empty list would read as "nothing there")."""
    items = doc.get("items")
    if items is None:
        items = []
    if not isinstance(items, list) or ("kind" in doc and not str(doc["kind"]).endswith("List")):
        raise KubeApiError(what, -1, "the answer is not a list of objects; not trusted")
    return [
        o for o in items
        if isinstance(o, dict) and isinstance(o.get("metadata"), dict)
        and isinstance(o["metadata"].get("name"), str)
    ]  # fmt: skip


def _proxy_failure(status: int, data: bytes) -> str:
    """The API server's own Status (not the engine's answer): why the pod was not reached."""
    if status < 400 or not data.lstrip().startswith(b"{"):
        return ""
    try:
        doc = json.loads(data)
    except ValueError:
        return ""
    if isinstance(doc, dict) and doc.get("kind") == "Status" and doc.get("apiVersion") == "v1":
        return f"API server proxy: HTTP {status}: {doc.get('message') or doc.get('reason')}"
    return ""
