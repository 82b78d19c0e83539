"""Shell rules on recipe-shaped scripts: positive and negative for each."""

from __future__ import annotations

from pathlib import Path

import pytest

from epdoctor.lint import lint_paths
from epdoctor.lint.shell import is_shell_script, pipelines, script_findings

FIXTURES = Path(__file__).parent / "fixtures" / "lint"
STRICT = "#!/usr/bin/env bash\nset -euo pipefail\n"


def hits(text: str) -> list[tuple[str, int]]:
    return [(h.code, h.line) for h in script_findings(text)]


CASES = {
    "S401": (
        "#!/bin/bash\npgrep -af 'vllm serve' >/dev/null\n",
        "#!/bin/bash\npgrep -af '[v]llm serve' >/dev/null\n",
    ),
    "S402": (
        STRICT + "nm -D libnccl.so.2 | grep -q ncclGetLsaDevicePointer\n",
        STRICT + '[ "$(nm -D libnccl.so.2 | grep -c ncclGetLsaDevicePointer)" -gt 0 ]\n',
    ),
    "S403": (
        STRICT + "LEADER_IP=$(getent hosts \"$L\" | awk '{print $1}' | head -1)\n"
        'test -n "$LEADER_IP" || { echo FATAL; exit 1; }\n',
        STRICT + "LEADER_IP=$(getent hosts \"$L\" | awk '{print $1}' | head -1 || true)\n"
        'test -n "$LEADER_IP" || { echo FATAL; exit 1; }\n',
    ),
    "S405": (
        "#!/bin/bash\ngrep -c 'Selected provider' kernel.log\n",
        "#!/bin/bash\ngrep -cE 'Selected provider is efa, fabric is efa-direct' kernel.log\n",
    ),
    "S406": (
        "#!/bin/bash\ntorchrun --nproc-per-node=8 tests/elastic/test_ep.py --num-processes 8\n",
        "#!/bin/bash\ntorchrun --nproc-per-node=1 tests/elastic/test_ep.py --num-processes 8\n",
    ),
    "B407": (
        "#!/bin/bash\npython3 setup.py build_ext --inplace 2>&1 | tail -30\n",
        "#!/bin/bash\npython3 setup.py build_ext --inplace 2>&1 | tee build.log\n",
    ),
    "B409": (
        "#!/bin/bash\nldconfig -p | grep 'libnccl\\.so\\.2 => /opt/nccl'\n",
        "#!/bin/bash\nldconfig -p | grep 'libnccl\\.so\\.2 (libc6,x86-64) => /opt/nccl'\n",
    ),
}


@pytest.mark.parametrize("code", sorted(CASES))
def test_rule_fires(code):
    assert code in [c for c, _ in hits(CASES[code][0])]


@pytest.mark.parametrize("code", sorted(CASES))
def test_rule_quiet(code):
    assert code not in [c for c, _ in hits(CASES[code][1])]


def test_s402_needs_pipefail_and_skips_echo_producers():
    assert hits("#!/bin/bash\nnm -D x | grep -q y\n") == []
    assert hits(STRICT + 'echo "$v" | grep -q y\n') == []
    assert hits("#!/bin/bash\nset -o pipefail\nstrings big | grep --quiet y\n") == [("S402", 3)]
    # set +o pipefail turns it back off
    assert hits("#!/bin/bash\nset -o pipefail\nset +o pipefail\nnm x | grep -q y\n") == []


def test_s403_needs_errexit_a_guard_and_a_plain_assignment():
    guard = 'V="$(ls -d /opt/x* 2>/dev/null | head -1)"\n[ -n "$V" ] || exit 1\n'
    assert ("S403", 3) in hits(STRICT + guard)
    assert hits("#!/bin/bash\n" + guard) == []  # no set -e: the guard runs
    assert hits(STRICT + 'V="$(ls -d /opt/x* | head -1)"\necho "$V"\n') == []  # no guard
    assert hits(STRICT + 'if ! V=$(ls /opt/x*); then exit 1; fi\n[ -n "$V" ]\n') == []
    assert hits(STRICT + 'V=$(ls /opt/x*) || V=""\n[ -z "$V" ] && exit 1\n') == []
    assert ("S403", 2) in hits("#!/bin/bash -e\nX=$(cmd)\n: ${X:?empty}\n")


def test_s401_other_forms():
    assert ("S401", 2) in hits("#!/bin/sh\nif pgrep -f sglang.launch_server; then :; fi\n")
    assert ("S401", 2) in hits("#!/bin/sh\nX=$(pkill -f 'python3 -m dynamo' || true)\n")
    assert hits("#!/bin/sh\npgrep vllm\n") == []  # -f absent: matches the name only


def test_here_documents_are_data():
    text = "#!/bin/bash\ncat > probe.sh <<'EOF'\npgrep -f 'vllm serve'\nEOF\npgrep -f '[v]llm'\n"
    assert hits(text) == []


def test_pipelines_structure():
    ps = list(pipelines("a | b && c; if d | e; then f; fi\nX=$(g | h)\n"))
    shape = [([c.name for c in p.commands], p.prefix) for p in ps]
    assert (["a", "b"], "") in shape and (["d", "e"], "if") in shape
    assert (["g", "h"], "$()") in shape


def test_script_detection(tmp_path):
    p = tmp_path / "serve"
    assert is_shell_script(p, "#!/usr/bin/env bash\n")
    assert not is_shell_script(p, "#!/usr/bin/env python3\n")
    assert is_shell_script(tmp_path / "x.sh", "")


def test_s404_and_fixture_folders():
    bad = lint_paths([FIXTURES / "recipe-bad"])
    got = {(f.path, f.code) for f in bad.active if f.path.startswith("recipe/")}
    assert got == {
        ("recipe/probe-worker.sh", "S401"),
        ("recipe/run-kernel-test.sh", "S403"),
        ("recipe/run-kernel-test.sh", "S405"),
        ("recipe/run-kernel-test.sh", "S406"),
        ("recipe/run-kernel-test.sh", "S404"),
        ("recipe/verify-image.sh", "S402"),
    }
    good = lint_paths([FIXTURES / "recipe-good"])
    assert [f for f in good.active if f.path.startswith("recipe/")] == []


def test_s404_marker_printed_by_a_called_script_counts(tmp_path):
    (tmp_path / "run.sh").write_text(
        "#!/bin/bash\npython3 tests/elastic/test_ep.py\necho DONE-OK\n"
    )
    (tmp_path / "gate.sh").write_text(
        "#!/bin/bash\nbash run.sh tests/elastic/test_ep.py > log\ngrep -q PASS log\n"
    )
    (tmp_path / "gate.sh").chmod(0o755)
    found = [(f.path, f.code) for f in lint_paths([tmp_path]).active]
    assert ("gate.sh", "S404") in found
    (tmp_path / "run.sh").write_text("#!/bin/bash\npython3 tests/elastic/test_ep.py\necho PASS\n")
    found = [(f.path, f.code) for f in lint_paths([tmp_path]).active]
    assert ("gate.sh", "S404") not in found


def test_s407_shebang_without_execute_bit(tmp_path):
    script = tmp_path / "recipe" / "serve.sh"
    script.parent.mkdir()
    script.write_text("#!/bin/bash\nexec vllm serve M\n")
    script.chmod(0o644)
    # Nothing starts it by path: `bash recipe/serve.sh` works at any mode.
    (tmp_path / "run.sh").write_text("#!/bin/bash\nbash recipe/serve.sh\n")
    (tmp_path / "run.sh").chmod(0o755)
    assert lint_paths([tmp_path]).active == []
    # A manifest (or CMD, or ./serve.sh) starts it by path: Permission denied.
    (tmp_path / "sts.yaml").write_text('command: ["/opt/recipe/serve.sh", "leader"]\n')
    found = [(f.path, f.code) for f in lint_paths([tmp_path]).active]
    assert found == [("recipe/serve.sh", "S407")]
    script.chmod(0o755)
    assert lint_paths([tmp_path]).active == []
    lib = tmp_path / "lib.sh"  # sourced, no shebang: needs no execute bit
    lib.write_text("export NCCL_SOCKET_IFNAME=eth0\n")
    assert lint_paths([tmp_path]).active == []


B41X = {
    "B412": (
        "#!/bin/bash\ncd aws-ofi-nccl && ./configure --with-libfabric=/opt/amazon/efa --with-nccl-headers=/x\n",
        "#!/bin/bash\ncd aws-ofi-nccl && ./configure --with-libfabric=/opt/amazon/efa --with-cuda=/usr/local/cuda\n",
    ),
    "B413": (
        "#!/bin/bash\ncd DeepEP && patch -p1 < ../fix.patch\n",
        "#!/bin/bash\ncd DeepEP && git apply --check ../fix.patch && git apply ../fix.patch\n",
    ),
}


@pytest.mark.parametrize("code", sorted(B41X))
def test_build_step_rules(code):
    from epdoctor.lint.shell import build_step_findings

    assert [h.code for h in build_step_findings(B41X[code][0])] == [code]
    assert build_step_findings(B41X[code][1]) == []


def test_b412_only_for_aws_ofi_nccl_configure():
    from epdoctor.lint.shell import build_step_findings

    assert build_step_findings("cd nccl-tests && ./configure --with-nccl=/opt/nccl\n") == []


def test_b413_git_apply_without_check_and_strict_patch():
    from epdoctor.lint.shell import build_step_findings

    assert [h.code for h in build_step_findings("git apply x.patch\n")] == ["B413"]
    assert build_step_findings("patch --dry-run -p1 < x.patch && patch -F0 -p1 < x.patch\n") == []


def test_s403_pipefail_decides_whether_a_filtered_pipeline_can_fail():
    body = 'IP=$(getent hosts "$L" | head -1)\n[ -n "$IP" ] || exit 1\n'
    assert ("S403", 3) in hits(STRICT + body)  # pipefail: getent's failure is the status
    assert hits("#!/bin/bash\nset -e\n" + body) == []  # head's status: cannot fail
    assert ("S403", 3) in hits("#!/bin/bash\nset -e\n" + body.replace(" | head -1", ""))


def test_s403_guard_on_the_same_line_in_a_retry_loop():
    loop = (
        STRICT + 'for i in 1 2 3; do IP=$(getent hosts "$L" | head -1); '
        '[ -n "$IP" ] && break; sleep 1; done\n'
    )
    assert hits(loop) == [("S403", 3)]
    fixed = loop.replace("| head -1)", "| head -1 || true)")
    assert hits(fixed) == []


def test_empty_string_arguments_tokenize():
    assert hits('#!/bin/bash\nset -e\nV=$(cmd)\nif [ "$V" = "" ]; then exit 1; fi\n') == [
        ("S403", 3)
    ]


def test_inline_shells_are_linted_as_new_shells():
    text = (
        "#!/bin/bash\nset -o pipefail\n"
        "kubectl -n ns exec pod-1 -- bash -c \"pgrep -af 'vllm serve'\"\n"
        "kubectl -n ns exec pod-1 -- bash -c 'nm -D x | grep -q y'\n"  # no pipefail in there
        "kubectl -n ns exec pod-1 -- sh -ec 'set -o pipefail; nm -D x | grep -q y'\n"
    )
    assert hits(text) == [("S401", 3), ("S402", 5)]
    assert hits("#!/bin/bash\nbash -c \"pgrep -af '[v]llm serve'\"\n") == []


def test_runs_by_path_forms():
    from epdoctor.lint.shell import _yaml_runs_by_path, runs_by_path

    assert runs_by_path("./serve.sh leader\n", "serve.sh")
    assert runs_by_path("exec /opt/recipe/serve.sh worker\n", "serve.sh")
    assert runs_by_path("timeout 60 ./serve.sh\n", "serve.sh")
    assert runs_by_path("kubectl exec p -- bash -c '/opt/serve.sh'\n", "serve.sh")
    assert not runs_by_path("bash serve.sh\nsbatch serve.sh\necho serve.sh\n", "serve.sh")
    assert not runs_by_path("# ./serve.sh is the launcher\n", "serve.sh")
    assert _yaml_runs_by_path('command: ["/opt/recipe/serve.sh", "leader"]\n', "serve.sh")
    assert _yaml_runs_by_path("args:\n  - /opt/recipe/serve.sh\n", "serve.sh")
    assert not _yaml_runs_by_path("entrypoint: bash /shared/serve.sh\n", "serve.sh")


def test_s407_dockerfile_cmd_by_path(tmp_path):
    (tmp_path / "serve.sh").write_text("#!/bin/bash\nexec vllm serve M\n")
    (tmp_path / "serve.sh").chmod(0o644)
    df = "FROM ubuntu:22.04@sha256:" + "a" * 64 + "\nCOPY serve.sh /opt/\n"
    (tmp_path / "Dockerfile").write_text(df)
    assert lint_paths([tmp_path]).active == []  # COPY alone starts nothing
    (tmp_path / "Dockerfile").write_text(df + 'CMD ["/opt/serve.sh"]\n')
    assert [f.code for f in lint_paths([tmp_path]).active] == ["S407"]


def test_s408_rendezvous_by_ip():
    fires = (
        "#!/bin/bash\nexport MASTER_ADDR=10.240.84.22\n"
        "vllm serve M --headless --data-parallel-address 10.240.84.22\n"
        "torchrun --master_addr=10.1.2.3 t.py\n"
    )
    assert hits(fires) == [("S408", 2), ("S408", 3), ("S408", 4)]
    quiet = (
        "#!/bin/bash\nexport MASTER_ADDR=vllm-deepep-v2-0.vllm-deepep-v2.ns.svc.cluster.local\n"
        'vllm serve M --headless --data-parallel-address "$LEADER_IP"\n'
        "torchrun --master-addr=127.0.0.1 t.py\n"
    )
    assert hits(quiet) == []
