"""Write a plan to a directory: plan.json, plan.env, the Dockerfile its pins imply, role
scripts and, for Kubernetes, the manifest and kubectl wrappers. A plan that is not supported
writes plan.json only: there is nothing safe to launch.
"""

from __future__ import annotations

import json
import re
import shlex
import textwrap
from pathlib import Path

from epdoctor.plan import manifests
from epdoctor.plan.model import Plan

SAFE_VALUE = re.compile(r"^[A-Za-z0-9_./,^:=@+-]*\Z")


def env_file(plan: Plan) -> str:
    """NAME=VALUE lines (docker --env-file and `set -a; .` both read them)."""
    out = [
        f"# epdoctor plan env contract: {plan.input.engine} over {plan.input.transport} "
        f"on {plan.input.nodes} x {plan.instance} (verdict: {plan.verdict.value})",
    ]
    for e in plan.env:
        value = e.value if SAFE_VALUE.match(e.value) else shlex.quote(e.value)
        out.append(f"# {e.code} ({e.reader}): {e.why}")
        out.append(f"{e.name}={value}")
    if plan.forbidden:
        out.append("# Must NOT be set (dead or harmful at these versions):")
        out += [f"#   {f.name}  ({f.code}) {f.why}" for f in plan.forbidden]
    from epdoctor.plan.contract import refused

    if rows := refused(plan.input.engine):
        out.append("# Set by a reference recipe, not adopted here:")
        out += [f"#   {r['name']}: {r['why']} ({r['recipe']})" for r in rows]
    return "\n".join(out) + "\n"


def _script(title: str, body: list[str], env: bool = True) -> str:
    head = [
        "#!/usr/bin/env bash",
        f"# {title}",
        "# Written by `epdoctor plan`; the commands are the plan's, verbatim.",
        "set -euo pipefail",
    ]
    if env:
        head += [
            'HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"',
            'set -a; . "$HERE/plan.env"; set +a',
        ]
    return "\n".join(head + body) + "\n"


def _leader_default(plan: Plan) -> str:
    if plan.input.hosts:
        return f'export LEADER_ADDR="${{LEADER_ADDR:-{plan.input.hosts[0]}}}"'
    return ': "${LEADER_ADDR:?export LEADER_ADDR=<the leader node address>}"'


def bare_scripts(plan: Plan) -> dict[str, str]:
    c = plan.commands
    boot = manifests.first_boot(plan)
    need_rank = ': "${NODE_RANK:?export NODE_RANK=<0 on the leader, 1..N-1 on workers>}"'
    scripts = {
        "leader.sh": _script(
            "Serve: the leader node (NODE_RANK=0).",
            [_leader_default(plan), "export NODE_RANK=0", *boot, manifests._exec(c.leader)],
        ),
        "kernel-test.sh": _script(
            "Kernel test on this node; run on every node at once before serving. "
            "Passes on exit 0 and, across nodes, the efa-direct banner.",
            [
                _leader_default(plan),
                need_rank,
                *boot,
                c.kernel_test,
                'echo "KERNEL-TEST PASS (node_rank=$NODE_RANK)"',
            ],
        ),
        "smoke.sh": _script(
            "Smoke request to the leader's OpenAI endpoint.",
            [_leader_default(plan), c.smoke, "echo"],
        ),
    }
    if c.worker:
        scripts["worker.sh"] = _script(
            "Serve: a worker node (NODE_RANK=1..N-1).",
            [_leader_default(plan), need_rank, *boot, manifests._exec(c.worker)],
        )
    return scripts


def kube_scripts(plan: Plan) -> dict[str, str]:
    ns = shlex.quote(plan.input.namespace)
    pods = " ".join(f"{plan.name}-{i}" for i in range(plan.input.nodes))
    resolve = (
        f'NODE_RANK="{manifests.POD_RANK}"; LEADER_ADDR=$(getent hosts '
        f"{manifests.leader_address(plan)} "
        "| awk '{print $1; exit}'); export NODE_RANK LEADER_ADDR; "
    )
    kernel = resolve + plan.commands.kernel_test
    return {
        "kernel-test.sh": _script(
            "Kernel test in every pod at once, with the pods idle: first "
            f"`kubectl -n {ns} set env statefulset/{plan.name} RUN_SERVE=0 && kubectl -n {ns} "
            f"delete pod -l app.kubernetes.io/name={plan.name}` (the StatefulSet updates "
            "OnDelete: its pods restart together), and the same with RUN_SERVE=1 to serve.",
            [
                # idle (Ready under RUN_SERVE=0) only after the in-pod build and the image gate
                f"kubectl -n {ns} wait --for=condition=Ready pod "
                f"-l app.kubernetes.io/name={plan.name} --timeout={manifests.STARTUP_BUDGET_S}s",
                "pids=()",
                f"for pod in {pods}; do",
                f'  kubectl -n {ns} exec "$pod" -- bash -c {shlex.quote(kernel)} &',
                '  pids+=("$!")',
                "done",
                "rc=0",
                'for pid in "${pids[@]}"; do wait "$pid" || rc=1; done',
                'if [ "$rc" = 0 ]; then echo "KERNEL-TEST PASS on every pod"; fi',
                'exit "$rc"',
            ],
            env=False,
        ),
        "smoke.sh": _script(
            "Smoke request from inside the leader pod.",
            [
                f"kubectl -n {ns} exec {plan.name}-0 -- bash -c {shlex.quote(plan.commands.smoke)}",
                "echo",
            ],
            env=False,
        ),
    }


def manifest_yaml(plan: Plan) -> str:
    import yaml  # lazily: only rendering needs it

    header = (
        f"# epdoctor plan: {plan.extra['engine_label']} over {plan.extra['transport_label']}, "
        f"{plan.input.nodes} x {plan.instance} ({plan.gpus_per_node} GPU, "
        f"{plan.efa_per_node} EFA per node), {plan.input.model}\n"
        f"# verdict: {plan.verdict.value}; reasons and the env contract are in plan.json.\n"
    )
    parts = []
    for obj, note in zip(manifests.objects(plan), manifests.notes(plan), strict=True):
        comment = "".join(f"# {line}\n" for line in textwrap.wrap(note, 96, break_on_hyphens=False))
        # The note sits inside its document (after ---), so it travels with the object.
        parts.append("---\n" + comment + yaml.safe_dump(obj, sort_keys=False, width=100))
    return header + "".join(parts)


def render(plan: Plan, directory: str | Path, force: bool = False) -> list[str]:
    """Write the plan's files; returns the paths written, relative to `directory`.

    Every path is checked before the first file is written: none is a symbolic link or a
    special file, and none exists unless ``force`` (epdoctor.safeio.check_output); each file
    is written whole."""
    from epdoctor.safeio import BadInput, check_output, write_file

    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise BadInput(f"cannot write the plan to {root}: it exists and is not a directory")
    files: dict[str, str] = {"plan.json": json.dumps(plan_json(plan), indent=2) + "\n"}
    if plan.supported:
        files["plan.env"] = env_file(plan)
        from epdoctor.plan.image import dockerfile, dockerignore

        if text := dockerfile(plan):  # the image the pins imply (none where no base is pinned)
            files["Dockerfile"] = text
            files[".dockerignore"] = dockerignore(plan)
            from epdoctor.plan.gate import image_files

            files.update(image_files(plan))
        if plan.extra["target"] == "kubernetes":
            files[f"kubernetes/{plan.name}.yaml"] = manifest_yaml(plan)
            files.update({f"kubernetes/{k}": v for k, v in kube_scripts(plan).items()})
        else:
            files.update(bare_scripts(plan))
    for rel in files:
        for d in list(Path(rel).parents)[:-1]:
            if (root / d).is_symlink():
                raise BadInput(f"{root / d} is a symbolic link; not writing through it")
        if (root / rel).parent.is_dir():
            check_output(str(root / rel), force)
        elif (root / rel).parent.exists():
            raise BadInput(f"cannot write {root / rel}: {(root / rel).parent} is not a directory")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"cannot write {root}: {exc.strerror or exc}") from None
    written = []
    for rel, text in files.items():
        path = root / rel
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BadInput(f"cannot write {path.parent}: {exc.strerror or exc}") from None
        mode = 0o755 if rel.endswith(".sh") else 0o644
        write_file(str(path), text.encode("utf-8"), force=force, mode=mode)
        written.append(rel)
    return written


def plan_json(plan: Plan) -> dict[str, object]:
    """plan.to_json() plus what the shared env checks say about its contract."""
    from epdoctor.plan.contract import refused
    from epdoctor.plan.verify import env_check

    data = plan.to_json()
    data["env_refused"] = refused(plan.input.engine)
    data["env_check"] = [f.to_json() for f in env_check(plan)] if plan.supported else []
    return data
