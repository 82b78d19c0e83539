"""Manifest rules on the seeds' 2-node StatefulSet shape, each positive and negative.

`fixed.yaml` is the manifest after the seeds' response rounds (no finding);
each case below re-introduces exactly one problem the reviews raised, as a text
edit that keeps the comments, and expects exactly that code. `round1.yaml`
carries all of them at once. The live path (checks/kube.py) runs the same rule
functions on API objects; its cases are at the end.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from epdoctor.checks import kube_rules
from epdoctor.lint import lint_paths
from epdoctor.model import Status

FIX = Path(__file__).parent / "fixtures" / "kube"
FIXED = (FIX / "fixed.yaml").read_text()

HUGEPAGES_NOTE = (
    "            # hugepages-2Mi are pre-allocated at boot by the node group's user data\n"
    "            # (vm.nr_hugepages); without them this pod stays Pending.\n"
)
WORK_VOLUME = """        # The work volume lives on the instance-store NVMe RAID, not the root EBS volume.
        - name: work
          hostPath:
            path: /mnt/k8s-disks/0/work
            type: DirectoryOrCreate
"""


def lint_text(tmp_path: Path, text: str, name: str = "statefulset.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return lint_paths([p]).active


def edit(old: str, new: str, text: str = FIXED) -> str:
    assert old in text, old
    return text.replace(old, new)


def test_fixed_manifest_is_clean(tmp_path):
    assert lint_text(tmp_path, FIXED) == []


def test_round1_manifest_has_every_finding():
    got = lint_paths([FIX / "round1.yaml"]).active
    by_code = {f.code: f for f in got}
    assert set(by_code) == {
        "K201", "K202", "K203", "K204", "K205", "K206", "K207", "K208", "K209", "C103",
    }  # fmt: skip
    text = (FIX / "round1.yaml").read_text().splitlines()
    # each finding points at the field it is about
    assert "port: 8000" in text[by_code["K201"].line] or "http" in text[by_code["K201"].line - 1]
    assert "image:" in text[by_code["K206"].line - 1]
    assert "OFI_NCCL_GDRCOPY_FORCED_PCIE_COPY" in text[by_code["C103"].line - 1]
    assert "hugepages-2Mi" in text[by_code["K203"].line - 1]
    assert "emptyDir" in text[by_code["K205"].line - 1]
    assert by_code["K204"].level() == "info"
    assert by_code["K206"].level() == "fail"


CASES = {
    # headless Service publishing the HTTP port on workers, no leader-only Service
    "K201": [
        edit("statefulset.kubernetes.io/pod-name: vllm-deepep-v2-0", "app: vllm-deepep-v2"),
    ],
    # rendezvous Service hiding not-ready pods (readiness probe present: a deadlock)
    "K202": [edit("publishNotReadyAddresses: true", "publishNotReadyAddresses: false")],
    "K203": [edit(HUGEPAGES_NOTE, "")],
    "K204": [
        edit(
            "            privileged: true\n",
            "            privileged: true\n            capabilities:\n              add: [IPC_LOCK]\n",
        )
    ],
    "K205": [
        edit(
            WORK_VOLUME, "        - name: work\n          emptyDir:\n            sizeLimit: 900Gi\n"
        )
    ],
    "K206": [
        edit(":v1-20260818", ":latest"),
        edit(":v1-20260818", ":nightly"),
        edit(":v1-20260818", ""),
    ],
    "K207": [
        edit('vpc.amazonaws.com/efa: "16"', 'vpc.amazonaws.com/efa: "32"'),
        edit('vpc.amazonaws.com/efa: "16"', 'vpc.amazonaws.com/efa: "8"'),
        edit("p5en.48xlarge", "p6-b200.48xlarge"),
        edit('nvidia.com/gpu: "8"', 'nvidia.com/gpu: "16"'),
    ],
    "K208": [
        edit("pgrep -f '[v]llm serve'", "pgrep -af 'vllm serve'"),
        edit(
            """["/bin/bash", "-c", "pgrep -f '[v]llm serve' > /dev/null"]""",
            """["sh", "-c", "pgrep -f \\"vllm serve\\" && curl -sf localhost:8000/health"]""",
        ),
    ],
    "K209": [
        edit('            limits:\n              cpu: "90"\n', "            limits:\n"),
        edit(
            '            limits:\n              cpu: "90"\n',
            '            limits:\n              cpu: "96"\n',
        ),
    ],
    "C103": [
        edit(
            "            - name: EP_REUSE_NCCL_COMM\n",
            "            - name: OFI_NCCL_GDRCOPY_FORCED_PCIE_COPY\n"
            '              value: "1"\n'
            "            - name: EP_REUSE_NCCL_COMM\n",
        )
    ],
}


@pytest.mark.parametrize(
    ("code", "text"),
    [(code, t) for code, texts in CASES.items() for t in texts],
    ids=[f"{code}-{i}" for code, texts in CASES.items() for i in range(len(texts))],
)
def test_one_problem_one_code(tmp_path, code, text):
    got = {f.code for f in lint_text(tmp_path, text)}
    assert got == {code}


NEGATIVE = {
    # a digest is immutable; Always pulls whatever :latest is now
    "K206": [
        edit(":v1-20260818", "@sha256:" + "a" * 64),
        edit("imagePullPolicy: IfNotPresent", "imagePullPolicy: Always", edit(":v1-20260818", ":latest")),
    ],
    # pgrep without a shell cannot match a parent shell; a bracketed pattern cannot match itself
    "K208": [
        edit(
            """["/bin/bash", "-c", "pgrep -f '[v]llm serve' > /dev/null"]""",
            """["pgrep", "-f", "vllm serve"]""",
        ),
        edit("pgrep -f '[v]llm serve'", "pgrep vllm"),
    ],
    # memory-backed emptyDir is RAM, not node disk; small scratch is fine
    "K205": [
        edit(WORK_VOLUME, "        - name: shm\n          emptyDir:\n            medium: Memory\n            sizeLimit: 900Gi\n"),
        edit(WORK_VOLUME, "        - name: work\n          emptyDir:\n            sizeLimit: 20Gi\n"),
    ],
    # p5 has 32 EFA; an unknown instance type says nothing
    "K207": [
        edit('vpc.amazonaws.com/efa: "16"', 'vpc.amazonaws.com/efa: "32"', edit("p5en.48xlarge", "p5.48xlarge")),
        edit("p5en.48xlarge", "g6.48xlarge"),
    ],
    # one replica: nobody to round-robin to, nobody to rendezvous with
    "K201": [
        edit("replicas: 2", "replicas: 1", edit("statefulset.kubernetes.io/pod-name: vllm-deepep-v2-0", "app: vllm-deepep-v2")),
    ],
}  # fmt: skip


@pytest.mark.parametrize(
    ("code", "text"),
    [(code, t) for code, texts in NEGATIVE.items() for t in texts],
    ids=[f"not-{code}-{i}" for code, texts in NEGATIVE.items() for i in range(len(texts))],
)
def test_near_misses_are_clean(tmp_path, code, text):
    assert [f.code for f in lint_text(tmp_path, text)] == []


def test_k202_warns_without_readiness_probe(tmp_path):
    text = edit("publishNotReadyAddresses: true", "publishNotReadyAddresses: false")
    start = text.index("          readinessProbe:")
    end = text.index("          securityContext:")
    got = lint_text(tmp_path, text[:start] + text[end:])
    assert [(f.code, f.level()) for f in got] == [("K202", "warn")]


def test_helm_templates_and_non_manifests_are_skipped(tmp_path):
    assert lint_text(tmp_path, FIXED.replace("replicas: 2", "replicas: {{ .Values.n }}")) == []
    assert lint_text(tmp_path, "key: value\nother: 1\n", "values.yaml") == []


def test_suppression_with_reason(tmp_path):
    text = edit(
        "            privileged: true\n",
        "            privileged: true\n            capabilities:\n"
        "              # epdoctor: ignore[K204] kept for the documented non-privileged variant\n"
        "              add: [IPC_LOCK]\n",
    )
    p = tmp_path / "m.yaml"
    p.write_text(text)
    report = lint_paths([p])
    assert report.active == [] and [f.code for f in report.suppressed] == ["K204"]


# ---- the same rules on live objects ---------------------------------------------------------


def _live(pod_spec: dict, instance: str | None = "p5en.48xlarge") -> kube_rules.Objects:
    pod = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"}, "spec": pod_spec}
    return kube_rules.Objects([pod], instance=instance, live=True)


HP = {"containers": [{"name": "c", "resources": {"limits": {"hugepages-2Mi": "5120Mi"}}}]}


def test_live_hugepages_compared_with_node_allocatable():
    short = kube_rules.manifest_hits(_live(HP), {"hugepages-2Mi": "0"})
    assert [(h.code, h.status) for h in short if h.code == "K203"] == [("K203", Status.FAIL)]
    enough = kube_rules.manifest_hits(_live(HP), {"hugepages-2Mi": "42242Mi"})
    assert not [h for h in enough if h.code == "K203"]
    # live objects carry no comments: without the node, no note-based finding
    assert not [h for h in kube_rules.manifest_hits(_live(HP)) if h.code == "K203"]


def test_live_instance_from_node_label():
    spec = {"containers": [{"name": "c", "resources": {"limits": {"vpc.amazonaws.com/efa": "16"}}}]}
    hits = kube_rules.manifest_hits(_live(spec, "p6-b200.48xlarge"))
    assert [(h.code, h.status) for h in hits if h.code == "K207"] == [("K207", Status.FAIL)]
    assert not [
        h for h in kube_rules.manifest_hits(_live(spec, "p5en.48xlarge")) if h.code == "K207"
    ]


@pytest.mark.parametrize(
    ("q", "value"),
    [("5120Mi", 5120 * 2**20), ("900Gi", 900 * 2**30), ("90", 90), ("500m", 0.5), ("1e3", None)],
)
def test_quantity(q, value):
    assert kube_rules.quantity(q) == value
