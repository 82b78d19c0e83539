"""Planted secrets: each secret form in each carrier, every output format grepped for it.

The bar is 0 leaks. Every value below is made up here and planted on purpose; none is a
real credential. Carriers are what epdoctor reads: the local probe's environment, the argv
and environ of a real process read with ``--pid``, a log file (``logs``, ``diagnose --log``,
``collect --log``), a recipe folder (``lint``), a hand-made bundle (``diagnose --bundle``, the
TUI) and launch stream lines (the panes). Formats are everything epdoctor writes from them:
text, ``--json``, ``--markdown``, SARIF, every member of a written bundle, the TUI's screen
and the launch panes. Commands run as ``python -m epdoctor`` subprocesses.

``pytest -s`` prints the matrix (carrier x format: forms tried, forms leaked).
"""

from __future__ import annotations

import base64
import concurrent.futures
import hashlib
import html
import io
import json
import os
import re
import runpy
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE_BUNDLE = REPO / "tests" / "fixtures" / "tui" / "three-nodes.tar.gz"


# --------------------------------------------------------------------------- the forms
def _b64_line(seed: str, nbytes: int) -> str:
    raw = b"".join(hashlib.sha256(f"{seed}{i}".encode()).digest() for i in range(4))
    return base64.b64encode(raw[:nbytes]).decode()


PEM_LINES = [_b64_line(f"planted pem line {i}", 48) for i in range(3)] + [
    _b64_line("planted pem tail", 20)  # a short last line with '=' padding
]
PEM = "\n".join(["-----BEGIN PRIVATE KEY-----", *PEM_LINES, "-----END PRIVATE KEY-----"])
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.PlantedJwtSig0abcDEF12"

# form -> (text carrying it, the planted values that must never be printed)
SHAPES: dict[str, tuple[str, list[str]]] = {
    "hf_": ("hf_PlAnTeDhF0a1b2c3d4e5f6g7h8i9j0kLmN", ["hf_PlAnTeDhF0a1b2c3d4e5f6g7h8i9j0kLmN"]),
    "ghp_": ("ghp_PlantedGhp0a1b2c3d4e5f6g7h8i9j0kLmN", ["PlantedGhp0a1b2c3d4e5f6g7h8i9j0kLmN"]),
    "gho_": ("gho_PlantedGho0a1b2c3d4e5f6g7h8i9j0kLmN", ["PlantedGho0a1b2c3d4e5f6g7h8i9j0kLmN"]),
    "ghu_": ("ghu_PlantedGhu0a1b2c3d4e5f6g7h8i9j0kLmN", ["PlantedGhu0a1b2c3d4e5f6g7h8i9j0kLmN"]),
    "ghs_": ("ghs_PlantedGhs0a1b2c3d4e5f6g7h8i9j0kLmN", ["PlantedGhs0a1b2c3d4e5f6g7h8i9j0kLmN"]),
    "github_pat_": (
        "github_pat_11PLANTED0_PlantedFineGrained0a1b2c3d4e5f6g7h8i9j0k",
        ["PlantedFineGrained0a1b2c3d4e5f6g7h8i9j0k"],
    ),
    "AKIA": ("AKIAPLANTED0KEYID123", ["AKIAPLANTED0KEYID123"]),
    "ASIA": ("ASIAPLANTED0SESS4567", ["ASIAPLANTED0SESS4567"]),
    "Bearer": ("Bearer PlantedBearer0paque9x8y7", ["PlantedBearer0paque9x8y7"]),
    "Authorization": (
        "Authorization: Basic UGxhbnRlZEJhc2ljOnMzY3IzdA==",
        ["UGxhbnRlZEJhc2ljOnMzY3IzdA"],
    ),
    "url user:pass@": ("https://alice:PlantedUrlPass77@hub.example.com/x", ["PlantedUrlPass77"]),
    "url TOKEN@": (
        "https://PlantedUrlToken0abcdefgh12@github.com/org/repo.git",
        ["PlantedUrlToken0abcdefgh12"],
    ),
    "JWT": (JWT, [JWT, "PlantedJwtSig0abcDEF12", "eyJzdWIiOiJwbGFudGVkIn0"]),
}
PEM_NEEDLES = [ln.rstrip("=") for ln in PEM_LINES]
# variables whose names make them secret (values have no secret shape of their own)
NAMES: dict[str, str] = {
    "HF_TOKEN": "plantedHfTok1",
    "HUGGING_FACE_HUB_TOKEN": "plantedHubTok2",
    "AWS_SECRET_ACCESS_KEY": "plantedAwsSecret3",
    "AWS_SESSION_TOKEN": "plantedAwsSess4",
    "VLLM_API_KEY": "plantedVllmKey5",
    "NCCL_PLANTED_PASSWORD": "plantedNcclPw6",
    "EP_NIC_KEY": "plantedEpKey7",
    "SGL_AUTH": "plantedSglAuth8",
}
# command-line flags vLLM, SGLang and database clients take secrets by
FLAGS: dict[str, tuple[list[str], str]] = {
    "--api-key KEY": (["--api-key", "plantedFlagKey1"], "plantedFlagKey1"),
    "--api-key=KEY": (["--api-key=plantedFlagKey2"], "plantedFlagKey2"),
    "--password X": (["--password", "plantedFlagPw3"], "plantedFlagPw3"),
    "-pX": (["-u", "root", "-pplantedMyPw4"], "plantedMyPw4"),
    "--token X": (["--token", "plantedFlagTok5"], "plantedFlagTok5"),
    "--hf-token X": (["--hf-token", "plantedFlagHf6"], "plantedFlagHf6"),
    "--hf_token X": (["--hf_token", "plantedFlagHf7"], "plantedFlagHf7"),
}
NCCL_ENV = ("NCCL_PLANTED_TOKEN set by environment to plantedNcclEnv9", ["plantedNcclEnv9"])

# Every form's needles, by name.
FORMS: dict[str, list[str]] = {k: v[1] for k, v in SHAPES.items()}
FORMS["PEM block"] = PEM_NEEDLES
FORMS.update({f"name {k}": [v] for k, v in NAMES.items()})
FORMS.update({f"flag {k}": [v] for k, (_, v) in FLAGS.items()})
FORMS["NCCL set by environment"] = NCCL_ENV[1]
ALL_NEEDLES = [n for ns in FORMS.values() for n in ns]

# name the probe keeps readable next to the secrets: redaction must not blank the stack's knobs
READABLE = {"NCCL_NET_GDR_LEVEL": "PHB", "NCCL_IB_PKEY": "3", "NCCL_DEBUG": "INFO"}


def planted_env() -> dict[str, str]:
    """Stack-prefixed variables (the probe keeps only those) carrying every env-able form."""
    env = dict(NAMES)
    for i, (_, (text, _)) in enumerate(SHAPES.items()):
        env[f"VLLM_PLANTED_{i}"] = text
    env["VLLM_PLANTED_PEM"] = PEM
    env["VLLM_PLANTED_ARGS"] = " ".join(w for ws, _ in FLAGS.values() for w in ws)
    env.update(READABLE)
    return env


ENV_FORMS = [f for f in FORMS if f != "NCCL set by environment"]


def planted_log() -> str:
    """NCCL and engine lines with one form each (WARN lines are quoted as evidence)."""
    out = ["p5en-a-0:9001:9001 [0] NCCL INFO NCCL version 2.30.4+cuda13.0"]
    warn = "p5en-a-0:9001:9050 [0] misc.cc:12 NCCL WARN"
    for text, _ in SHAPES.values():
        out.append(f"{warn} connect failed: {text}")
    for k, v in NAMES.items():
        out.append(f"{warn} {k}={v}")
    for words, _ in FLAGS.values():
        out.append(f"{warn} engine args: vllm serve m {' '.join(words)}")
    out.append(f"p5en-a-0:9001:9001 [0] NCCL INFO {NCCL_ENV[0]}")
    out += ["Traceback (most recent call last):", *PEM.splitlines(), "RuntimeError: bad key"]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- running
def epd(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> tuple[str, str]:
    """Run the CLI; its stdout and its stderr, each an output stream of its own."""
    full = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1", "COLUMNS": "400"}
    full.update(env or {})
    r = subprocess.run(
        [sys.executable, "-m", "epdoctor", *args],
        capture_output=True,
        text=True,
        env=full,
        cwd=REPO,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    return r.stdout, r.stderr


def run_into(out: dict[str, str], name: str, *args: str, **kw) -> str:
    """Run the CLI; `name` is its stdout and `name [stderr]` its stderr in `out`."""
    out[name], out[f"{name} [stderr]"] = epd(*args, **kw)
    return out[name]


def bundle_text(path: Path) -> str:
    """Every member of a bundle, its name and its text."""
    with tarfile.open(path) as tar:
        return "\n".join(
            m.name + "\n" + tar.extractfile(m).read().decode("utf-8", "replace")  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        )


def leaks(text: str, forms: list[str]) -> list[str]:
    """The forms of which some planted value appears in `text` (also JSON-escaped)."""
    hay = text + "\n" + text.replace("\\n", "\n")
    return [f for f in forms if any(n in hay for n in FORMS[f])]


MATRIX: dict[tuple[str, str], tuple[int, list[str]]] = {}


def check(carrier: str, outputs: dict[str, str], forms: list[str]) -> None:
    bad = {}
    for fmt, text in outputs.items():
        found = leaks(text, forms)
        MATRIX[(carrier, fmt)] = (len(forms), found)
        if found:
            bad[fmt] = found
    assert not bad, f"{carrier}: planted secrets printed: {bad}"


@pytest.fixture(scope="module")
def empty_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("root")


@pytest.fixture(scope="module", autouse=True)
def _print_matrix():
    yield
    if not MATRIX:
        return
    tried = sum(n for n, _ in MATRIX.values())
    leaked = sum(len(f) for _, f in MATRIX.values())
    print(f"\nplanted-secret sweep: {len(MATRIX)} carrier x format cells, {tried} form checks, "
          f"{leaked} leaked")  # fmt: skip
    for (carrier, fmt), (n, found) in sorted(MATRIX.items()):
        print(f"  {carrier:<12} {fmt:<34} {n:>3} forms  {len(found)} leaked {found or ''}")


# --------------------------------------------------------------------------- carriers
def test_local_probe_environment(tmp_path, empty_root):
    env = planted_env()
    root = ["--root", str(empty_root)]
    out: dict[str, str] = {}
    run_into(out, "diagnose text", "diagnose", "-v", *root, env=env)
    run_into(out, "diagnose --json", "diagnose", "--json", *root, env=env)
    run_into(out, "diagnose --markdown", "diagnose", "--markdown", "-v", *root, env=env)
    bundle = tmp_path / "b.tar.gz"
    run_into(out, "collect", "collect", "-o", str(bundle), *root, env=env)
    out["collect bundle"] = bundle_text(bundle)
    check("probe env", out, ENV_FORMS)
    # the stack's knobs stay readable beside the masked values
    doc = json.loads(out["diagnose --json"])
    assert {k: doc["facts"]["env"][k] for k in READABLE} == READABLE


@pytest.fixture()
def planted_process():
    argv = [w for ws, _ in FLAGS.values() for w in ws]
    argv += [text for text, _ in SHAPES.values()] + [PEM]
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", *argv],
        env={**os.environ, **planted_env()},
    )
    try:
        yield child.pid
    finally:
        child.kill()
        child.wait()


def test_pid_argv_and_environ(tmp_path, empty_root, planted_process):
    pid = ["--pid", str(planted_process), "--root", str(empty_root)]
    out: dict[str, str] = {}
    run_into(out, "diagnose text", "diagnose", "-v", *pid)
    run_into(out, "diagnose --json", "diagnose", "--json", *pid)
    run_into(out, "diagnose --markdown", "diagnose", "--markdown", "-v", *pid)
    bundle = tmp_path / "b.tar.gz"
    run_into(out, "collect", "collect", "-o", str(bundle), *pid)
    text = bundle_text(bundle)
    out["collect bundle"] = text
    check("pid", out, ENV_FORMS)
    # the process really was read: its cmdline is in the bundle, masked
    assert "time.sleep(120)" in text and "[REDACTED]" in text


def test_log_file(tmp_path, empty_root):
    log = tmp_path / "planted.log"
    log.write_text(planted_log())
    root = ["--root", str(empty_root)]
    out: dict[str, str] = {}
    run_into(out, "logs text", "logs", "-v", str(log))
    run_into(out, "logs --json", "logs", "--json", str(log))
    run_into(out, "logs --markdown", "logs", "--markdown", str(log))
    run_into(out, "logs --follow", "logs", "-f", "--timeout", "2", str(log))
    run_into(out, "diagnose --log text", "diagnose", "-v", *root, "--log", str(log))
    run_into(out, "diagnose --log --json", "diagnose", "--json", *root, "--log", str(log))
    run_into(out, "diagnose --log --md", "diagnose", "--markdown", *root, "--log", str(log))
    # a log whose file name holds tokens: the bundle stores it under its name
    named = tmp_path / f"rank0 {SHAPES['hf_'][0]} {SHAPES['AKIA'][0]} {JWT}.log"
    named.write_text(planted_log())
    bundle = tmp_path / "b.tar.gz"
    logs = ["--log", str(log), "--log", str(named)]
    run_into(out, "collect --log", "collect", "-o", str(bundle), *root, *logs)
    out["collect --log bundle"] = bundle_text(bundle)
    check("log", out, list(FORMS))


def planted_recipe(root: Path) -> Path:
    recipe = root / "recipe"
    recipe.mkdir()
    docker = ["FROM nvcr.io/nvidia/pytorch:25.01-py3"]
    for k, v in NAMES.items():
        docker += [f"ENV {k}={v}", f"ARG {k}_B={v}", f"ENV {k}_C {v}"]
    for i, (text, _) in enumerate(SHAPES.values()):
        docker.append(f"RUN curl -fsSL '{text}' -o /tmp/f{i}")
    docker.append("ENV NCCL_NET_GDR_LEVEL=PHB")
    (recipe / "Dockerfile").write_text("\n".join(docker) + "\n")
    sh = ["#!/bin/bash", "set -euo pipefail"]
    sh += [f"export {k}={v}" for k, v in NAMES.items()]
    sh += [f"vllm serve deepseek-ai/DeepSeek-V3 {' '.join(ws)}" for ws, _ in FLAGS.values()]
    sh += [f"echo '{text}'" for text, _ in SHAPES.values()]
    sh += [f"echo '{NCCL_ENV[0]}'", "cat > key.pem <<'EOF'", PEM, "EOF"]
    (recipe / "run.sh").write_text("\n".join(sh) + "\n")
    (recipe / "job.env").write_text("".join(f"{k}={v}\n" for k, v in NAMES.items()))
    env_items = "".join(f"        - name: {k}\n          value: {v}\n" for k, v in NAMES.items())
    args = "".join(f"        - {json.dumps(w)}\n" for ws, _ in FLAGS.values() for w in ws)
    pem_items = "".join(f'  - "{ln}"\n' for ln in PEM.splitlines())
    (recipe / "deploy.yaml").write_text(
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: vllm\nspec:\n"
        "  template:\n    spec:\n      containers:\n      - name: vllm\n"
        "        image: vllm/vllm-openai:v0.11.0\n        env:\n"
        f"{env_items}        args:\n{args}"
        f"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keys\ndata:\n"
        f"  key: |\n" + "".join(f"    {ln}\n" for ln in PEM.splitlines()) + "---\n"
        "apiVersion: v1\nkind: List\nitems:\n" + pem_items
    )
    # lint quotes NAME=value of the transport variables a serve script exports and its
    # kernel test does not (C401): plant every form in such exports
    serve = ["#!/bin/bash"] + [f"export NCCL_{k}={v}" for k, v in NAMES.items()]
    serve += [f"export NCCL_PLANTED_{i}='{t}'" for i, (t, _) in enumerate(SHAPES.values())]
    serve += [f"export NCCL_PLANTED_ARGS='{' '.join(ws)}'" for ws, _ in FLAGS.values()]
    serve += [f"export NCCL_PLANTED_LOG='{NCCL_ENV[0]}'"]
    (recipe / "serve.sh").write_text("\n".join(serve) + "\n")
    (recipe / "kernel-test.sh").write_text("#!/bin/bash\nexport NCCL_DEBUG=INFO\n")
    # YAML errors quote the line they stopped at: one broken manifest per form
    for i, (_, text) in enumerate(_one_line_forms()):
        (recipe / f"broken{i}.yaml").write_text(
            f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x{i}\ndata:\n"
            f"  a: {text} [unclosed\n  b: : :\n"
        )
    return recipe


def _one_line_forms() -> list[tuple[str, str]]:
    out = [(form, text) for form, (text, _) in SHAPES.items()]
    out += [(f"name {k}", f"{k}={v}") for k, v in NAMES.items()]
    out += [(f"flag {k}", " ".join(ws)) for k, (ws, _) in FLAGS.items()]
    return [*out, ("NCCL set by environment", NCCL_ENV[0])]


def test_lint_recipe(tmp_path):
    recipe = planted_recipe(tmp_path)
    out: dict[str, str] = {}
    run_into(out, "lint text", "lint", "--show-suppressed", str(recipe))
    run_into(out, "lint --json", "lint", "--json", str(recipe))
    run_into(out, "lint --sarif", "lint", "--sarif", str(recipe))
    check("lint", out, list(FORMS))
    assert json.loads(out["lint --json"])["files"], "the recipe was linted"


def hostile_bundle(path: Path, log: str) -> Path:
    """The TUI fixture bundle with every form planted in target 0's probe output and manifest."""
    with tarfile.open(FIXTURE_BUNDLE) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    doc = json.loads(files["targets/0/probe.json"])
    doc["sections"]["env"].update(planted_env())
    argv = ["/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server"]
    argv += [w for ws, _ in FLAGS.values() for w in ws] + [t for t, _ in SHAPES.values()] + [PEM]
    doc["sections"]["processes"] = [
        {"pid": 4242, "exists": True, "cmdline": argv, "env": planted_env(), "mapped": []}
    ]
    conf = [f"{k}={v}" for k, v in NAMES.items()] + [f"NCCL_PLANTED_URL={SHAPES['url TOKEN@'][0]}"]
    doc["sections"]["nccl_conf"] = {"/etc/nccl.conf": "\n".join(conf)}
    doc["errors"] = {"/etc/planted": f"cannot read: {SHAPES['Bearer'][0]} {JWT}"}
    files["targets/0/probe.json"] = json.dumps(doc).encode()
    files["targets/0/logs/planted.log"] = log.encode()
    manifest = json.loads(files["manifest.json"])
    manifest["targets"][0]["detail"] = {
        "note": " ".join(t for t, _ in SHAPES.values()),
        "HF_TOKEN": NAMES["HF_TOKEN"],
    }
    files["manifest.json"] = json.dumps(manifest).encode()
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_hostile_bundle_replayed(tmp_path):
    b = str(hostile_bundle(tmp_path / "hostile.tar.gz", planted_log()))
    out: dict[str, str] = {}
    run_into(out, "diagnose text", "diagnose", "-v", "--bundle", b)
    run_into(out, "diagnose --json", "diagnose", "--json", "--bundle", b)
    run_into(out, "diagnose --markdown", "diagnose", "--markdown", "-v", "--bundle", b)
    bundle = tmp_path / "again.tar.gz"
    run_into(out, "collect --bundle", "collect", "--bundle", b, "-o", str(bundle))
    out["collect --bundle bundle"] = bundle_text(bundle)
    check("bundle", out, ENV_FORMS)
    assert json.loads(out["diagnose --json"])["targets"][0]["target"]["name"] == "p5en-a"


async def test_tui_on_hostile_bundle(tmp_path):
    pytest.importorskip("textual")
    from epdoctor.screens.app import EpdoctorApp

    b = str(hostile_bundle(tmp_path / "hostile.tar.gz", planted_log()))
    app = EpdoctorApp(target_argv=["--bundle", b])
    screens = {}
    async with app.run_test(size=(400, 120)) as pilot:
        summary = app.screen.query_one("#target-summary")
        deadline = time.monotonic() + 60
        while "failing" not in str(summary.render()):
            assert time.monotonic() < deadline, "the bundle was not diagnosed"
            await pilot.pause(0.1)
        screens["TUI targets"] = _screen_text(app)
        tree = app.screen.query_one("#findings")
        tree.focus()
        for _ in range(4):
            await pilot.press("down")
        await pilot.press("enter")
        await pilot.pause(0.3)
        screens["TUI explain"] = _screen_text(app)
    check("bundle", screens, ENV_FORMS)


# token shapes a Host alias of ~/.ssh/config or a file name can hold (no space, colon or slash)
TUI_FORMS = ["hf_", "ghp_", "gho_", "ghu_", "ghs_", "github_pat_", "AKIA", "ASIA", "JWT"]


async def _until(pilot, ok, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not ok():
        assert time.monotonic() < deadline, what
        await pilot.pause(0.1)


def _rows(app) -> int:
    from textual.widgets import DataTable

    return app.screen.query_one("#target-table", DataTable).row_count


def _table_text(app) -> str:
    from textual.widgets import DataTable

    table = app.screen.query_one("#target-table", DataTable)
    return " ".join(str(c) for r in range(table.row_count) for c in table.get_row_at(r))


async def test_tui_before_a_diagnosis(tmp_path, ssh_lab):
    """Target names from ~/.ssh/config while they are probed, the hosts Ctrl+O puts into the
    target flags, the header, a bundle whose file name holds tokens in the flags field, and the
    error line of a bundle that is not there: the screen shows none of the planted values."""
    pytest.importorskip("textual")
    from epdoctor.screens.app import EpdoctorApp

    # accepts and never speaks: the targets stay "probing…" until the test releases them (a
    # connect timeout would end it on its own clock, before a loaded machine drew the table)
    release = threading.Event()
    port = ssh_lab.silent_listener(release)
    aliases = [SHAPES[f][0] for f in TUI_FORMS]
    conf = tmp_path / "ssh_config"
    conf.write_text(
        "".join(
            f"Host {a}\n  HostName 127.0.0.1\n  Port {port}\n  User u\n"
            for a in [*aliases, "p5en-a-0"]
        )
    )
    ssh = ["--ssh-config", str(conf), "--known-hosts", str(ssh_lab.known_hosts)]
    ssh += ["--connect-timeout", "120"]
    screens: dict[str, str] = {}
    app = EpdoctorApp(target_argv=[*ssh, "--ssh-config-hosts", "*"])
    async with app.run_test(size=(400, 120)) as pilot:
        await _until(
            pilot,  # every host listed (a loaded machine adds the rows over several refreshes)
            lambda: "probing…" in _table_text(app) and _rows(app) >= len(aliases),
            "targets never listed",
        )
        await pilot.pause(0.2)
        screens["TUI ssh-config hosts probing"] = _screen_text(app)
        await pilot.press("ctrl+o")
        await pilot.pause(1.0)
        screens["TUI Ctrl+O hosts in the flags"] = _screen_text(app)
        toasts = getattr(app, "_notifications", [])  # what notify() said, toasts included
        screens["TUI notifications"] = "\n".join(str(n.message) for n in toasts)
        release.set()  # the hosts hang up: every probe ends now, with an error
        await _until(pilot, lambda: "probing…" not in _table_text(app), "probes never ended")
        screens["TUI ssh-config hosts done"] = _screen_text(app)
    release2 = threading.Event()
    port2 = ssh_lab.silent_listener(release2)
    conf.write_text(conf.read_text().replace(f"Port {port}\n", f"Port {port2}\n"))
    app = EpdoctorApp(target_argv=[*ssh, "--ssh", aliases[0]])
    async with app.run_test(size=(400, 120)) as pilot:
        await _until(pilot, lambda: "probing…" in _table_text(app), "target never listed")
        screens["TUI one ssh host probing"] = _screen_text(app)
        release2.set()
    named = tmp_path / f"{aliases[0]}-{SHAPES['AKIA'][0]}.tar.gz"
    hostile_bundle(named, planted_log())
    app = EpdoctorApp(target_argv=["--bundle", str(named)])
    async with app.run_test(size=(400, 120)) as pilot:
        summary = app.screen.query_one("#target-summary")
        await _until(pilot, lambda: "failing" in str(summary.render()), "not diagnosed")
        screens["TUI bundle named by tokens"] = _screen_text(app)
        await pilot.press("ctrl+r")  # the flags field, shown masked, still diagnoses the file
        await pilot.pause(0.5)
        await _until(pilot, lambda: "failing" in str(summary.render()), "not diagnosed again")
        assert app.shared.target_argv == ["--bundle", str(named)]
        screens["TUI bundle named by tokens, again"] = _screen_text(app)
    app = EpdoctorApp(target_argv=["--bundle", str(tmp_path / f"gone-{aliases[1]}.tar.gz")])
    async with app.run_test(size=(400, 120)) as pilot:
        summary = app.screen.query_one("#target-summary")
        await _until(pilot, lambda: "could not" in str(summary.render()), "no error shown")
        screens["TUI missing bundle"] = _screen_text(app)
    check("TUI", screens, TUI_FORMS)
    # the hosts were listed (masked) while probed; Ctrl+O said what it left out
    assert screens["TUI ssh-config hosts probing"].count("[REDACTED]") >= len(aliases)
    assert "--ssh p5en-a-0" in screens["TUI Ctrl+O hosts in the flags"]
    assert "look like secrets left out" in screens["TUI notifications"]


def _screen_text(app) -> str:
    svg = app.export_screenshot()
    text = html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")
    return text


def test_launch_pane_lines():
    from rich.console import Console

    from epdoctor.launch.streams import LineSplitter
    from epdoctor.reports.launch_panes import PaneBoard

    data = planted_log().encode()
    sp = LineSplitter()
    lines = []
    for i in range(0, len(data), 97):  # chunks that cut lines (and secrets) anywhere
        lines += sp.feed(data[i : i + 97])
    lines += sp.flush()
    board = PaneBoard(height=400)
    for ln in lines:
        board.add("rank0", ln[:150])
    con = Console(record=True, width=400, color_system=None)
    con.print(board)
    check("launch", {"pane lines": "\n".join(lines), "panes": con.export_text()}, list(FORMS))


# --------------------------------------------------------------------------- error lines
def _path_forms() -> list[tuple[str, str]]:
    """Every one-line form as a path component (a PEM block cannot be a file name)."""
    return [(form, text.replace("\n", " ")) for form, text in _one_line_forms()]


def test_error_lines_quoting_paths(tmp_path, empty_root):
    """Every error that quotes a path the user gave: the path is masked on stderr too."""
    tmp_path.chmod(0o755)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    commands = {
        "logs FILE": lambda p: ["logs", p],
        "logs -f FILE": lambda p: ["logs", "-f", "--timeout", "1", p],
        "diagnose --bundle": lambda p: ["diagnose", "--bundle", p],
        "diagnose --log": lambda p: ["diagnose", "--root", str(empty_root), "--log", p],
        "collect --log": lambda p: [
            *("collect", "--bundle", str(FIXTURE_BUNDLE), "--log", p),
            *("-o", str(out_dir / "never.tar.gz"), "--force"),
        ],
        "collect -o": lambda p: ["collect", "--bundle", str(FIXTURE_BUNDLE), "-o", p + "/b.tgz"],
        "lint PATH": lambda p: ["lint", p],
        "diagnose --hosts": lambda p: ["diagnose", "--hosts", p],
        "diagnose --kubeconfig": lambda p: ["diagnose", "--pod", "x", "--kubeconfig", p],
        "logs --kubeconfig": lambda p: ["logs", "--pod", "x", "--kubeconfig", p],
        "diagnose --ssh-config": lambda p: ["diagnose", "--ssh", "h", "--ssh-config", p],
    }
    outs: dict[str, str] = {}
    # some 300 short runs, independent of each other: a few at a time (the machine's cores)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        runs = {
            name: [
                pool.submit(epd, *argv(f"{tmp_path}/missing/x {text} y"), timeout=60)  # "//" kept
                for _, text in _path_forms()
            ]
            for name, argv in commands.items()
        }
        for name, futures in runs.items():
            done = [f.result() for f in futures]
            o_all, e_all = "".join(o for o, _ in done), "".join(e for _, e in done)
            assert e_all.strip(), f"{name}: no error line at all"
            outs[name], outs[f"{name} [stderr]"] = o_all, e_all
    check("error line", outs, [f for f, _ in _path_forms()])


# --------------------------------------------------------------------------- SSH
@pytest.fixture(scope="module")
def ssh_planted(ssh_lab):
    """A loopback sshd whose sessions carry planted environment, a planted nccl.conf in the
    user's home and an NCCL_CONF_FILE whose missing path holds a token, a planted log, and a
    process of the SSH user with every form in its argv and environment."""
    import pwd

    from sshd_fixture import USER

    home = Path(pwd.getpwnam(USER).pw_dir)
    env = {k: v for k, v in planted_env().items() if "\n" not in v}  # SetEnv takes one line
    env["NCCL_CONF_FILE"] = f"/nonexistent/{SHAPES['hf_'][0]}/nccl.conf"
    host = ssh_lab.start_host("planted", env=env)
    log = ssh_lab.root / "planted.log"
    log.write_text(planted_log())
    log.chmod(0o644)
    conf_lines = [f"{k}={v}" for k, v in NAMES.items()]
    conf_lines += [f"NCCL_PLANTED_{i}={t}" for i, (t, _) in enumerate(SHAPES.values())]
    conf_lines += [f"NCCL_PLANTED_ARGS={' '.join(w for ws, _ in FLAGS.values() for w in ws)}"]
    conf = home / ".nccl.conf"
    had = conf.exists()
    if not had:
        conf.write_text("\n".join([*conf_lines, PEM]) + "\n")
        conf.chmod(0o644)
    argv = [w for ws, _ in FLAGS.values() for w in ws]
    argv += [text for text, _ in SHAPES.values()] + [PEM]
    child = subprocess.Popen(
        ["/usr/bin/python3", "-c", "import time; time.sleep(300)", *argv],
        env={"PATH": "/usr/bin:/bin", **planted_env()},
        user=USER,
        cwd="/",
    )
    try:
        yield host, log, child.pid
    finally:
        child.kill()
        child.wait()
        if not had:
            conf.unlink(missing_ok=True)


def test_ssh_probe(tmp_path, ssh_lab, ssh_planted):
    host, _, pid = ssh_planted
    args = [*ssh_lab.cli_args(host.spec), "--pid", str(pid)]
    out: dict[str, str] = {}
    run_into(out, "diagnose text", "diagnose", "-v", *args)
    doc = json.loads(run_into(out, "diagnose --json", "diagnose", "--json", *args))
    run_into(out, "diagnose --markdown", "diagnose", "--markdown", "-v", *args)
    bundle = tmp_path / "b.tar.gz"
    run_into(out, "collect", "collect", "-o", str(bundle), *args)
    text = bundle_text(bundle)
    out["collect bundle"] = text
    b = str(bundle)
    run_into(out, "bundle replayed --json", "diagnose", "--json", "-v", "--bundle", b)
    check("ssh", out, ENV_FORMS)
    # the probe really ran over SSH and read what was planted: the session's environment,
    # the process (its cmdline, masked) and the nccl.conf (its lines, masked)
    assert doc["error"] is None, doc["error"]
    assert {k: doc["facts"]["env"].get(k) for k in READABLE} == READABLE
    assert doc["facts"]["env"]["HF_TOKEN"] == "[REDACTED]"
    assert "time.sleep(300)" in text and "[REDACTED]" in text
    assert "NCCL_PLANTED_0=[REDACTED]" in text


def test_ssh_log(tmp_path, ssh_lab, ssh_planted):
    host, log, _ = ssh_planted
    base = ["-i", str(ssh_lab.key), "--known-hosts", str(ssh_lab.known_hosts)]
    src = f"{host.spec}:{log}"
    out: dict[str, str] = {}
    run_into(out, "logs text", "logs", "-v", *base, "--ssh", src)
    doc = json.loads(run_into(out, "logs --json", "logs", "--json", *base, "--ssh", src))
    run_into(out, "logs --markdown", "logs", "--markdown", *base, "--ssh", src)
    run_into(out, "logs --follow", "logs", "-f", "--timeout", "3", *base, "--ssh", src)
    check("ssh log", out, list(FORMS))
    assert doc["findings"], "the remote log was read and analysed"
    # a remote path that holds a secret, in the error line that quotes it
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        done = list(
            pool.map(
                lambda text: epd(
                    "logs", *base, "--ssh", f"{host.spec}:/nonexistent/x {text} y", timeout=90
                ),
                [text for _, text in _path_forms()],
            )
        )
    errs = {
        "missing remote path": "".join(o for o, _ in done),
        "missing remote path [stderr]": "".join(e for _, e in done),
    }
    assert errs["missing remote path [stderr]"].strip()
    check("ssh log", errs, [f for f, _ in _path_forms()])


def test_progress_line_on_a_terminal(tmp_path, ssh_lab):
    """On a terminal, diagnose draws which targets it is probing on stderr before any result
    exists: Host aliases of an ssh config that look like tokens are drawn masked."""
    import pty

    port = ssh_lab.silent_listener()
    aliases = [SHAPES[f][0] for f in TUI_FORMS]
    conf = tmp_path / "ssh_config"
    conf.write_text(
        "".join(f"Host {a}\n  HostName 127.0.0.1\n  Port {port}\n  User u\n" for a in aliases)
    )
    master, slave = pty.openpty()
    full = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1", "COLUMNS": "400"}
    argv = ["diagnose", "--ssh-config", str(conf), "--ssh-config-hosts", "*"]
    argv += ["--known-hosts", str(ssh_lab.known_hosts), "--connect-timeout", "3"]
    p = subprocess.Popen(
        [sys.executable, "-m", "epdoctor", *argv],
        stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, env=full, cwd=REPO,
    )  # fmt: skip
    os.close(slave)
    drawn = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    stdout = p.communicate(timeout=120)[0].decode("utf-8", "replace")
    os.close(master)
    terminal = drawn.decode("utf-8", "replace")
    assert "probing" in terminal, terminal[-500:]
    check("terminal", {"diagnose progress [stderr]": terminal, "diagnose": stdout}, TUI_FORMS)


# --------------------------------------------------------------------------- Kubernetes
KNS = "planted"
KPOD = "vllm-planted-0"


def planted_pod() -> dict:
    """A Running pod whose spec, annotations and statuses carry every form."""
    from kube_emulator import running_pod

    pod = running_pod(KPOD, KNS, restarts=1)
    words = [w for ws, _ in FLAGS.values() for w in ws]
    shapes = [t for t, _ in SHAPES.values()]
    env: list[dict] = [{"name": k, "value": v} for k, v in NAMES.items()]
    env += [{"name": f"VLLM_PLANTED_{i}", "value": t} for i, t in enumerate(shapes)]
    env += [{"name": "VLLM_PLANTED_PEM", "value": PEM}, *READABLE_ENV]
    env += [
        {"name": f"VLLM_FROM_{i}", "valueFrom": {"secretKeyRef": {"name": "hf", "key": t}}}
        for i, t in enumerate(shapes)
    ]
    env.append(
        {"name": "HF_TOKEN_REF", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}
    )
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.11.0",
        "command": ["/bin/bash", "-c", f"exec vllm serve m {' '.join(words)} '{shapes[0]}'"],
        "args": [*words, *shapes, PEM],
        "env": env,
        "envFrom": [{"secretRef": {"name": SHAPES["hf_"][0].lower()}}],
    }
    pod["spec"]["containers"] = [container]
    pod["spec"]["nodeName"] = "ip-10-1-2-3.ec2.internal"
    pod["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps({"spec": pod["spec"]}),
        "planted/note": " ".join(shapes),
    }
    cs = pod["status"]["containerStatuses"][0]
    cs["lastState"] = {
        "terminated": {"exitCode": 1, "reason": "Error", "message": "\n".join(shapes)}
    }
    return pod


READABLE_ENV = [{"name": k, "value": v} for k, v in READABLE.items()]


def planted_events() -> list[dict]:
    out = []
    for i, (_, text) in enumerate(_one_line_forms()):
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{KPOD}.planted{i}", "namespace": KNS},
                "involvedObject": {"kind": "Pod", "name": KPOD, "namespace": KNS},
                "reason": "BackOff" if i % 2 else "Failed",
                "message": f"Error: failed to pull: {text}",
                "type": "Warning",
                "count": i + 1,
            }
        )
    return out


@pytest.fixture(scope="module")
def kube_planted(kube_api):
    kube_api.put(planted_pod(), *planted_events())
    em = kube_api.emulator
    em.logs[(KNS, KPOD, "vllm", False)] = planted_log()
    em.logs[(KNS, KPOD, "vllm", True)] = planted_log()
    em.exec_env = planted_env()  # what the container's processes (the probe) see
    kube_api.kubeconfig.chmod(0o644)
    return kube_api


def test_kube_pod(tmp_path, kube_planted):
    k = ["--pod", KPOD, "-n", KNS, "--kubeconfig", str(kube_planted.kubeconfig)]
    out: dict[str, str] = {}
    run_into(out, "diagnose text", "diagnose", "-v", *k)
    doc = json.loads(run_into(out, "diagnose --json", "diagnose", "--json", *k))
    run_into(out, "diagnose --markdown", "diagnose", "--markdown", "-v", *k)
    bundle = tmp_path / "b.tar.gz"
    run_into(out, "collect", "collect", "-o", str(bundle), *k)
    out["collect bundle"] = bundle_text(bundle)
    run_into(out, "bundle replayed", "diagnose", "-v", "--bundle", str(bundle))
    check("kube", out, list(FORMS))
    # the probe really ran in the pod and saw the planted environment; the pod's own facts
    # (its log tail) were read too
    assert doc["error"] is None, doc["error"]
    assert {k: doc["facts"]["env"].get(k) for k in READABLE} == READABLE
    assert "log_tail" in json.dumps(doc["facts"]), doc["facts"].keys()
    assert "Error: failed to pull: " in out["diagnose --json"], "the events were read"


def test_kube_pod_logs(kube_planted):
    k = ["--pod", KPOD, "-n", KNS, "--kubeconfig", str(kube_planted.kubeconfig)]
    out: dict[str, str] = {}
    run_into(out, "logs text", "logs", "-v", *k)
    doc = json.loads(run_into(out, "logs --json", "logs", "--json", *k))
    run_into(out, "logs --markdown", "logs", "--markdown", *k)
    run_into(out, "logs --previous", "logs", "-v", "--previous", *k)
    run_into(out, "logs --all-containers", "logs", "-v", "--all-containers", *k)
    check("kube logs", out, list(FORMS))
    assert doc["findings"], "the pod's log was read and analysed"


# --------------------------------------------------------------------------- the rules
def test_probe_copy_of_the_rules_is_verbatim():
    begin, end = "# ---- redaction rules: begin ----", "# ---- redaction rules: end ----"

    def block(path: Path) -> str:
        s = path.read_text()
        return s[s.index(begin) : s.index(end)]

    assert block(REPO / "probes" / "node_probe.py") == block(REPO / "epdoctor" / "redact.py")


def test_probe_and_epdoctor_redact_the_same():
    from epdoctor import redact

    probe = runpy.run_path(str(REPO / "probes" / "node_probe.py"))
    texts = [t for t, _ in SHAPES.values()] + [PEM, NCCL_ENV[0], planted_log()]
    texts += [f"{k}={v}" for k, v in NAMES.items()] + [" ".join(ws) for ws, _ in FLAGS.values()]
    for t in texts:
        assert probe["redact_text"](t) == redact.redact_text(t)
        assert not leaks(redact.redact_text(t), list(FORMS))
    env = planted_env()
    assert probe["redact_env"](env) == redact.redact_env(env)
    assert not leaks(json.dumps(redact.redact_env(env)), ENV_FORMS)
    argv = [w for ws, _ in FLAGS.values() for w in ws]
    assert probe["redact_argv"](argv) == redact.redact_argv(argv)
    assert not leaks(json.dumps(redact.redact_argv(argv)), list(FORMS))


def test_every_knob_epdoctor_knows_stays_readable():
    from epdoctor.redact import is_secret_name

    knob = re.compile(r"\b(?:NCCL|FI|OFI_NCCL|OFI|NVSHMEM|UCX|RDMAV|GDRCOPY|TORCH_NCCL)_[A-Z0-9_]+")
    names: set[str] = set()
    sources = [*(REPO / "epdoctor").rglob("*.py"), *(REPO / "epdoctor").rglob("*.toml")]
    for path in [*sources, *(REPO / "docs").rglob("*.md")]:
        names |= set(knob.findall(path.read_text(errors="replace")))
    assert len(names) > 40
    assert sorted(n for n in names if is_secret_name(n)) == []


@pytest.mark.parametrize(
    "text",
    [
        "NCCL INFO NCCL_NET_GDR_LEVEL set by environment to PHB",
        "NCCL_IB_PKEY=3 NCCL_SOCKET_IFNAME=^docker,lo FI_EFA_USE_DEVICE_RDMA=1",
        "vllm serve m --tokenizer deepseek --max-num-batched-tokens 8192 -p8000",
        "TOKENIZERS_PARALLELISM=false PWD=/home/ubuntu",
        "gcc -pthread -O2 /home/ubuntu/DeepEP2/csrc/kernels/internode_ll.cu",
        '{"key": "node.kubernetes.io/instance-type", "operator": "In"}',
        "NCCL INFO Using network Libfabric",
        "LD_LIBRARY_PATH=/opt/amazon/efa/lib:/opt/amazon/ofi-nccl/lib:/usr/local/cuda/lib64",
        "scp ubuntu@p5en-a-0:/var/log/nccl.log ubuntu@p5en-a-1:/tmp/",
        '{"max_tokens": 5, "num_max_dispatch_tokens_per_rank": 128}',
    ],
)
def test_knobs_and_paths_stay_readable(text):
    from epdoctor.redact import redact_text

    assert redact_text(text) == text


def test_masking_is_idempotent_and_keeps_lines():
    from epdoctor.redact import redact_obj, redact_text

    for t in [planted_log(), PEM, json.dumps({"k": PEM, "env": planted_env()})]:
        once = redact_text(t)
        assert redact_text(once) == once
        assert once.count("\n") == t.count("\n")  # lint line numbers hold
    doc = json.loads(json.dumps({"k": PEM, "env": planted_env()}))
    assert redact_obj(redact_obj(doc)) == redact_obj(doc)
    assert json.loads(redact_text(json.dumps(doc)))  # still JSON
