"""`epdoctor logs` end to end: real process, exit codes, JSON schema, stdin, .gz, --follow."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

LOGS = Path(__file__).parent / "fixtures" / "logs"
REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "PYTHONPATH": str(REPO)}


def epdoctor(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "epdoctor", "logs", *args],
        input=stdin,
        capture_output=True,
        env=ENV,
        timeout=60,
    )


def test_text_report_and_exit_codes():
    r = epdoctor(str(LOGS / "real-p5en-gin-proxy.log"), "--instance", "p5en.48xlarge")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "deepep-efa-bench-0:70124" in out and "efa / efa-direct" in out and "logs: PASS" in out
    r = epdoctor(str(LOGS / "real-p4d-socket-fallback.log"))
    assert r.returncode == 1 and "FAIL    T701" in r.stdout.decode()
    assert epdoctor(str(LOGS / "composed-nothing.log")).returncode == 0
    assert epdoctor(str(LOGS / "composed-nothing.log"), "--fail-on", "unknown").returncode == 1
    r = epdoctor(str(LOGS / "does-not-exist.log"))
    assert r.returncode == 2 and b"no such log file" in r.stderr


def test_json_schema():
    r = epdoctor("--json", str(LOGS / "composed-16rank-mixed.log"), "--expect-nics", "16")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "fail" and doc["context"]["expect_nics"] == 16
    assert len(doc["ranks"]) == 16
    for rank in doc["ranks"]:
        for key in (
            "rank_key",
            "nccl_version",
            "network",
            "ofi_provider",
            "ofi_fabric",
            "ofi_nics",
        ):
            assert key in rank
    socket = [x for x in doc["ranks"] if x["network"] == "Socket"]
    assert len(socket) == 2 and all(
        x["ofi_provider"] is None and x["ofi_nics"] is None for x in socket
    )
    for f in doc["findings"]:
        assert {"code", "severity", "title", "evidence"} <= set(f)
    assert {"T701", "F201", "N105"} <= {f["code"] for f in doc["findings"]}


def test_stdin_gzip_and_markdown(tmp_path):
    data = (LOGS / "composed-tcp-provider.log").read_bytes()
    r = epdoctor("--markdown", "-", stdin=data)
    assert r.returncode == 1
    md = r.stdout.decode()
    assert md.startswith("### epdoctor logs: FAIL") and "tcp;ofi_rxm" in md and "| rank |" in md
    gz = tmp_path / "tcp.log.gz"
    gz.write_bytes(gzip.compress(data))
    doc = json.loads(epdoctor("--json", str(gz)).stdout)
    assert doc["ranks"][0]["ofi_provider"] == "tcp;ofi_rxm"


def test_follow_prints_findings_as_lines_arrive(tmp_path):
    log = tmp_path / "live.log"
    log.write_bytes(b"")
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "epdoctor",
            "logs",
            "--follow",
            "--findings-only",
            "--transport",
            "gin-proxy",
            str(log),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    try:
        time.sleep(1.0)
        with log.open("ab") as f:
            f.write(b"h:1:1 [0] NCCL INFO NCCL version 2.30.4+cuda13.0\n")
            f.write(b"h:1:1 [0] NCCL INFO Using network Socket\n")
        line = p.stdout.readline().decode()
        assert line.startswith("FAIL T701") and str(log) in line
    finally:
        p.send_signal(2)
        p.communicate(timeout=20)
    assert p.returncode == 130  # Ctrl-C, as every Unix tool


def test_follow_on_stdin_ends_at_eof():
    data = (LOGS / "real-p5en-gin-proxy.log").read_bytes()
    r = subprocess.run(
        [sys.executable, "-m", "epdoctor", "logs", "-f", "--findings-only", "-"],
        input=data,
        capture_output=True,
        env=ENV,
        timeout=60,
    )
    assert r.returncode == 0
    assert "PASS T701" in r.stdout.decode()


def test_follow_lines_are_prefixed_redacted_and_colourless_when_piped(tmp_path):
    """The stern-like lines: each prefixed by its source, a token in a line or in the file's
    name never printed, no escape codes when piped; the summary after the lines."""
    token = "hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2"
    log = tmp_path / f"rank-{token}.log"
    log.write_text(
        "h:1:1 [0] NCCL INFO NCCL version 2.30.4+cuda13.0\n"
        f"HF_TOKEN={token} python3 -m vllm serve\n"
        "h:1:1 [0] NCCL INFO Using network Socket\n"
    )
    env = {k: v for k, v in ENV.items() if k != "NO_COLOR"}
    r = subprocess.run(
        [sys.executable, "-m", "epdoctor", "logs", "-f", "--timeout", "2", str(log)],
        capture_output=True,
        env=env,
        timeout=60,
    )
    out = r.stdout.decode()
    assert token not in out + r.stderr.decode()
    lines = out.splitlines()
    assert lines[0].startswith("rank-[REDACTED].log ") and lines[0].endswith("2.30.4+cuda13.0")
    assert lines[2].endswith("Using network Socket")
    assert lines[3].startswith("  ^ FAIL T701"), lines[:5]  # under the line that proves it
    assert "\x1b[" not in out  # piped: no colour
    assert "logs: FAIL" in out.split("---", 1)[1]


def test_line_colours_per_source_and_no_color(monkeypatch):
    import io

    from epdoctor.reports.log_lines import LinePrinter, use_colour

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_colour(Tty())
    out = Tty()
    p = LinePrinter(out)
    p.line("pod/ml/a", b"hello\n")
    p.line("pod/ml/b", b"hello\n")
    a, b = out.getvalue().splitlines()
    assert a.startswith("\x1b[") and b.startswith("\x1b[") and a[:8] != b[:8]  # a colour each
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_colour(Tty())
