"""`epdoctor lint` as CI runs it: real columns, --ignore/--exclude, a settings file, every file
not linted listed with why, manifests judged like scripts, an empty folder one clear error.

Each case runs the real command in a subprocess on a folder written here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

STS = """\
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: engine
spec:
  serviceName: engine
  selector:
    matchLabels: {app: engine}
  template:
    metadata:
      labels: {app: engine}
    spec:
      containers:
        - name: engine
          image: 123456789012.dkr.ecr.us-east-1.amazonaws.com/engine:2026-12-01
          command: ["/opt/start.sh"]
          env:
            - name: NCCL_GIN_TYPE
              value: "2"
            - name: EP_REUSE_NCCL_COMM
              value: "1"
          resources:
            limits: {nvidia.com/gpu: 8, cpu: 16, memory: 64Gi}
            requests: {nvidia.com/gpu: 8, cpu: 16, memory: 64Gi}
"""
SERVE = """\
#!/bin/bash
set -euo pipefail
export NCCL_GIN_TYPE=2
export EP_REUSE_NCCL_COMM=1
exec vllm serve deepseek-ai/DeepSeek-V3 --enable-expert-parallel --all2all-backend deepep_v2
"""


def lint(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "epdoctor", "lint", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=cwd or REPO,
    )


def recipe(tmp_path: Path) -> Path:
    d = tmp_path / "recipe"
    d.mkdir()
    (d / ".git").mkdir()  # the settings search stops here
    (d / "sts.yaml").write_text(STS)
    (d / "serve.sh").write_text(SERVE)
    (d / "env.example").write_text("NCCL_GIN_TYPE=2\nFI_PROVIDER=tcp\n")
    (d / "NOTES.txt").write_text("how we run it\n")
    return d


def findings(d: Path, *args: str) -> list[dict]:
    r = lint(str(d), "--json", *args)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)["findings"]


def test_manifest_env_is_judged_like_the_script_and_gin_without_efa_fails(tmp_path):
    d = recipe(tmp_path)
    got = {(f["path"], f["code"]): f for f in findings(d)}
    # the same EP_REUSE_NCCL_COMM=1 line is D101 in both, at the value's line
    assert got[("serve.sh", "D101")]["line"] == 4
    assert got[("sts.yaml", "D101")]["line"] == 20
    # GIN env and GPUs, no vpc.amazonaws.com/efa request: no EFA device in the pod
    k207 = got[("sts.yaml", "K207")]
    assert k207["severity"] == "fail" and "NCCL_GIN_TYPE" in k207["message"]


def test_findings_carry_the_real_column(tmp_path):
    d = recipe(tmp_path)
    got = {(f["path"], f["code"]): f for f in findings(d)}
    line = STS.splitlines()[19]  # - name: EP_REUSE_NCCL_COMM
    assert got[("sts.yaml", "D101")]["column"] == line.index("EP_REUSE_NCCL_COMM") + 1
    assert got[("serve.sh", "D101")]["column"] == len("export ") + 1
    r = lint(str(d))
    assert f"sts.yaml:20:{line.index('EP_REUSE_NCCL_COMM') + 1}: D101 [fail]" in r.stdout


def test_env_example_is_linted_and_every_other_file_is_listed_with_why(tmp_path):
    d = recipe(tmp_path)
    r = lint(str(d))
    assert "env.example:" in r.stdout, "env.example is an env file"
    assert "not linted: NOTES.txt: no linter reads this kind of file" in r.stdout
    doc = json.loads(lint(str(d), "-o", "json").stdout)
    assert "NOTES.txt: no linter reads this kind of file" in doc["not_linted"]


def test_ignore_and_exclude_flags(tmp_path):
    d = recipe(tmp_path)
    codes = {f["code"] for f in findings(d, "--ignore", "D101,K2")}
    assert "D101" not in codes and not any(c.startswith("K2") for c in codes)
    r = lint(str(d), "--exclude", "*.example", "--exclude", "serve.sh")
    assert "not linted: env.example: excluded by '*.example'" in r.stdout
    assert "not linted: serve.sh: excluded by 'serve.sh'" in r.stdout
    assert "serve.sh:" not in r.stdout.replace("not linted: serve.sh", "")
    bad = lint(str(d), "--ignore", "Z999")
    assert bad.returncode == 2 and "--ignore Z999: no such code" in bad.stderr


def test_pyproject_table_and_dot_file_are_read_from_the_folder_or_above(tmp_path):
    d = recipe(tmp_path)
    (d / "pyproject.toml").write_text(
        '[tool.epdoctor.lint]\nignore = ["D101"]\nexclude = ["NOTES.txt"]\nfail-on = "fail"\n'
    )
    r = lint(str(d / "sts.yaml"), "--json")
    doc = json.loads(r.stdout)
    assert doc["config"].endswith("pyproject.toml")
    assert "D101" not in {f["code"] for f in doc["findings"]}
    assert lint(str(d), "--isolated", "--select", "D101").returncode == 1
    (d / ".epdoctor.toml").write_text('[lint]\nselect = ["K209"]\n')  # nearer file wins
    r = lint(str(d))
    assert r.returncode == 0, r.stdout + r.stderr
    (d / ".epdoctor.toml").write_text('[lint]\nignroe = ["K209"]\n')
    r = lint(str(d))
    assert r.returncode == 2 and "unknown key(s) ignroe" in r.stderr and "Traceback" not in r.stderr


def test_empty_folder_is_one_clear_error(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = lint(str(empty))
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and "empty folder: nothing to lint" in r.stderr
    (empty / "README.md").write_text("# notes\n")
    r = lint(str(empty))
    assert r.returncode == 2 and r.stdout == ""
    assert "nothing to lint" in r.stderr and "README.md: no linter reads" in r.stderr


def test_o_takes_a_format_as_kubectl_users_type_it(tmp_path):
    d = recipe(tmp_path)
    assert json.loads(lint(str(d), "-o", "json").stdout)["tool"] == "epdoctor"
    r = lint(str(d), "-o", "yaml")
    assert r.returncode == 2 and "lint writes text, json, sarif, junit" in r.stderr
