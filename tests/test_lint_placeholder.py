"""B415 through `epdoctor lint`: placeholder images and registries in manifests, Dockerfiles and
env files fire; real references and ones chosen at build time (${VAR}) stay quiet."""

from __future__ import annotations

import json
import textwrap

from epdoctor.cli import main

FIRES = {
    "Dockerfile": """\
        ARG BASE_IMAGE=<your-base-image>:1.0
        # epdoctor: ignore[B403] fixture: the tag is the point here
        FROM REPLACE_ME/cuda:13.0.0-devel-ubuntu22.04
        COPY --from=your-registry/tools:v1 /bin/x /bin/x
        ENV PUSH_REGISTRY=<account>.dkr.ecr.us-east-1.amazonaws.com
    """,
    "setup/env_vars": """\
        export IMAGE=xxxxxxxxxxxx.dkr.ecr.us-west-2.amazonaws.com/vllm:v1
        ECR_REGISTRY="ACCOUNT_ID.dkr.ecr.us-west-2.amazonaws.com"
        REGION=us-west-2
    """,
    "kubernetes/job.yaml": """\
        apiVersion: batch/v1
        kind: Job
        metadata: {name: probe}
        spec:
          template:
            spec:
              restartPolicy: Never
              initContainers:
              - name: fetch
                image: registry.example.com/fetch:v1
              containers:
              - name: probe
                image: CHANGE_ME/probe:v2
    """,
}
QUIET = {
    "Dockerfile": """\
        ARG BASE_IMAGE=nvcr.io/nvidia/cuda:13.0.0-devel-ubuntu22.04
        # epdoctor: ignore[B403] fixture: pinned by tag
        FROM ${BASE_IMAGE}
        ENV PUSH_REGISTRY=${ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com
        ENV GREETING=<not-an-image>
    """,
    "setup/env_vars": """\
        # IMAGE=REPLACE_WITH_YOUR_REGISTRY/x:v1 (the template's comment, not a value)
        export IMAGE=111122223333.dkr.ecr.us-west-2.amazonaws.com/vllm:v1-20261204
        ECR_REGISTRY="${AWS_ACCOUNT_ID}.dkr.ecr.${REGION}.amazonaws.com"
        NOTE=<replace me later>
    """,
    "kubernetes/job.yaml": """\
        apiVersion: batch/v1
        kind: Job
        metadata: {name: probe}
        spec:
          template:
            spec:
              restartPolicy: Never
              containers:
              - name: probe
                image: public.ecr.aws/docker/library/python:3.12-slim
    """,
}


def _write(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (root / ".dockerignore").write_text("setup/\n")
    # an env template is where a placeholder belongs: never a finding
    (root / "setup" / "env_vars.example").write_text("export REGISTRY=REPLACE_WITH_YOUR_REGISTRY\n")


def _b415(capsys, root) -> tuple[int, list[tuple[str, int, str]]]:
    rc = main(["lint", str(root), "--select", "B415", "--json"])
    doc = json.loads(capsys.readouterr().out)
    return rc, [(f["path"], f["line"], f["message"]) for f in doc["findings"]]


def test_placeholders_fire_where_they_are_written(tmp_path, capsys):
    _write(tmp_path, FIRES)
    rc, found = _b415(capsys, tmp_path)
    assert rc == 1
    assert [(p, n) for p, n, _ in found] == [
        (
            "Dockerfile",
            1,
        ),
        ("Dockerfile", 3),
        ("Dockerfile", 4),
        ("Dockerfile", 5),
        ("kubernetes/job.yaml", 10),
        ("kubernetes/job.yaml", 13),
        ("setup/env_vars", 1),
        ("setup/env_vars", 2),
    ]
    messages = dict(((p, n), m) for p, n, m in found)
    assert messages[("Dockerfile", 3)].startswith("base image REPLACE_ME/cuda:")
    assert messages[("kubernetes/job.yaml", 13)].startswith("Job image CHANGE_ME/probe:v2")
    assert "ECR_REGISTRY ACCOUNT_ID.dkr" in messages[("setup/env_vars", 2)]
    # the code explains itself like any other
    assert main(["explain", "B415"]) == 0
    assert "placeholder" in capsys.readouterr().out


def test_real_references_and_build_time_choices_are_quiet(tmp_path, capsys):
    _write(tmp_path, QUIET)
    rc, found = _b415(capsys, tmp_path)
    assert (rc, found) == (0, [])
