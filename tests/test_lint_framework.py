"""The lint framework: discovery by kind, suppressions with reasons, plug-in linters."""

from __future__ import annotations

from pathlib import Path

import pytest

from epdoctor.lint import base


@pytest.fixture
def registry(monkeypatch):
    """A private linter registry, so a test linter never leaks into other tests."""
    base.load_linters()  # the real modules register into the real list first
    reg: list[base.Linter] = []
    monkeypatch.setattr(base, "LINTERS", reg)
    return reg


def _flag_todo(file, ctx):
    for i, line in enumerate(file.lines, start=1):
        if "TODO" in line:
            yield base.finding(file, i, "S400", "todo found")


def test_discovery_classifies_by_matcher_and_skips_vcs_and_binaries(tmp_path: Path, registry):
    base.register_linter("text", base.by_suffix(".txt"), _flag_todo)
    (tmp_path / "a.txt").write_text("ok\nTODO here\n")
    (tmp_path / "b.bin").write_bytes(b"\0\1TODO")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "c.txt").write_text("TODO in git\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.txt").write_text("TODO\n")
    report = base.lint_paths([tmp_path])
    assert [(f.path, f.line) for f in report.findings] == [("a.txt", 2), ("sub/d.txt", 1)]
    kinds = {f.rel: f.kinds for f in report.files}
    assert kinds["a.txt"] == ("text",)
    assert "b.bin" not in kinds  # skipped: a NUL byte in its head means binary
    assert "c.txt" not in " ".join(kinds)


def test_suppression_with_reason_silences_same_and_next_line(tmp_path: Path, registry):
    base.register_linter("text", base.by_suffix(".txt"), _flag_todo)
    (tmp_path / "a.txt").write_text(
        "TODO one  # epdoctor: ignore[S400] tracked elsewhere\n"
        "# epdoctor: ignore[S400] the next line is fine\n"
        "TODO two\n"
        "TODO three\n"
    )
    report = base.lint_paths([tmp_path])
    assert [(f.line, f.suppressed) for f in report.findings] == [
        (1, "tracked elsewhere"),
        (3, "the next line is fine"),
        (4, None),
    ]
    assert [f.line for f in report.active] == [4]


def test_suppression_without_reason_suppresses_nothing_and_is_reported(tmp_path, registry):
    base.register_linter("text", base.by_suffix(".txt"), _flag_todo)
    (tmp_path / "a.txt").write_text("TODO  # epdoctor: ignore[S400]\n")
    report = base.lint_paths([tmp_path])
    assert len(report.active) == 2
    assert {f.message.split(" ")[0] for f in report.active} == {"suppression", "todo"}


def test_suppression_for_another_code_does_not_apply(tmp_path, registry):
    base.register_linter("text", base.by_suffix(".txt"), _flag_todo)
    (tmp_path / "a.txt").write_text("TODO  # epdoctor: ignore[B402] wrong code\n")
    assert len(base.lint_paths([tmp_path]).active) == 1


def test_a_crashing_linter_is_reported_and_others_still_run(tmp_path, registry):
    def boom(file, ctx):
        raise ValueError("bad input")

    base.register_linter("text", base.by_suffix(".txt"), boom)
    base.register_linter("text", base.by_suffix(".txt"), _flag_todo)
    (tmp_path / "a.txt").write_text("TODO\n")
    report = base.lint_paths([tmp_path])
    assert len(report.findings) == 1
    assert report.errors and "ValueError: bad input" in report.errors[0]


def test_missing_path_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        base.lint_paths([tmp_path / "nope"])


def test_unparseable_file_is_skipped_not_an_error(tmp_path, registry):
    def picky(file, ctx):
        raise base.Unparseable("templated: ${FSX_CLAIM}")

    base.register_linter("text", base.by_suffix(".txt"), picky)
    base.register_linter("text", base.by_suffix(".txt"), _flag_todo)
    (tmp_path / "a.txt").write_text("TODO\n")
    report = base.lint_paths([tmp_path])
    assert report.errors == [] and len(report.findings) == 1
    assert report.skipped == ["a.txt: not read as text: templated: ${FSX_CLAIM}"]
