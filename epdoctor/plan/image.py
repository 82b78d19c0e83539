"""The Dockerfile a plan's pins imply: base image, EFA installer (aws-ofi-nccl and libfabric
come with it), GDRCopy userspace, the engine, the DeepEP fork's source and, last, the NCCL /
NVSHMEM re-pin. Every value comes from Plan.pins (data/pins.toml), so the Dockerfile and
plan.json cannot name different versions. Written for `epdoctor lint` to pass; epdoctor
does not build it.
"""

from __future__ import annotations

import re

from epdoctor.plan.model import Plan

BASES = ("CUDA base image", "TensorRT-LLM base image")
DOCKERIGNORE = "# The plan's own files are not build context (B406: plan.env is an env file).\n"


def _pin(plan: Plan, component: str) -> str:
    return next((p.value for p in plan.pins if p.component == component), "")


def base_image(plan: Plan) -> str:
    """The base image the plan pins for its engine; "" when it pins none (SGLang)."""
    return next((v for c in BASES if (v := _pin(plan, c))), "")


def _first(pattern: str, text: str) -> str:
    m = re.search(pattern, text)
    return m.group(1) if m else ""


def dockerfile(plan: Plan) -> str:
    """The Dockerfile text; "" when the plan has no base image to build on."""
    base = base_image(plan)
    if not base:
        return ""
    engine = plan.input.engine
    efa = _pin(plan, "EFA installer")
    gdr = _first(r"= ([0-9a-f]{7,40})", _pin(plan, "gdrcopy / gdrdrv (host)"))
    nvshmem = _pin(plan, "nvidia-nvshmem-cu13")
    deepep_repo, _, deepep_commit = _pin(plan, "DeepEP").partition(" @ ")
    gin = plan.gin_type is not None
    v = ["ARG EFA_INSTALLER_VERSION=" + efa, "ARG GDRCOPY_COMMIT=" + gdr]
    if plan.nccl:
        v.append("ARG NCCL_VERSION=" + plan.nccl)
    if nvshmem:
        v.append("ARG NVSHMEM_VERSION=" + nvshmem)
    if plan.vllm_pin:
        v.append("ARG VLLM_SHA=" + plan.vllm_pin)
    if deepep_commit:
        v += [
            f"ARG DEEPEP_REPO=https://github.com/{deepep_repo}.git",
            "ARG DEEPEP_COMMIT=" + deepep_commit,
        ]
    out = [
        f"# epdoctor plan: the image for {plan.extra['engine_label']} over "
        f'{plan.extra["transport_label"]}, from the plan\'s pins (plan.json "pins").',
        "# Build and push it under an immutable tag, then name that image in the manifest",
        "# (epdoctor plan --image REGISTRY/NAME:TAG):",
        f"#   docker build -t {plan.image} . && docker push {plan.image}",
        "# Written from the pins and checked by `epdoctor lint`; epdoctor does not build it.",
        "# epdoctor: ignore[B403] the plan pins the exact tag its reference recipe built on; "
        "add @sha256:DIGEST for byte reproducibility",
        f"FROM {base}",
        "",
        "# Whole-line comments only: an inline comment holding == breaks an ARG (B401).",
        *v,
        "ENV DEBIAN_FRONTEND=noninteractive",
        'SHELL ["/bin/bash", "-euo", "pipefail", "-c"]',
        "",
        "RUN apt-get update \\",
        "    && apt-get install -y --no-install-recommends ca-certificates curl git \\",
        "       build-essential binutils ninja-build python3 python3-dev python3-pip \\",
        "    && rm -rf /var/lib/apt/lists/*",
        "",
        f"# EFA userspace {efa} (H124): libfabric and the bundled aws-ofi-nccl plugin in",
        "# /opt/amazon/ofi-nccl/lib (N102); the kernel module is the host's. --disable-ngc:",
        "# the installer's NGC branch must not run on an nvcr.io base (B404).",
        'RUN curl -fsSLO "https://efa-installer.amazonaws.com/aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" \\',
        '    && tar -xzf "aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" \\',
        "    && cd aws-efa-installer \\",
        "    && ./efa_installer.sh -y --skip-kmod --skip-limit-conf --no-verify --disable-ngc \\",
        '    && cd .. && rm -rf aws-efa-installer "aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz"',
    ]
    if gin:
        symbol = "ncclGinPlugin_v14" if plan.gin_type == 5 else "ncclGinPlugin_v13"
        out += [
            f"# Fail the build when the bundled plugin has no {symbol} (GIN type {plan.gin_type}).",
            f"RUN nm -D --defined-only /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so | grep -c {symbol}",
        ]
    out += [
        "",
        "# GDRCopy userspace (libgdrapi) at the pinned commit; host gdrdrv >= 2.5 (H111).",
        "RUN git clone https://github.com/NVIDIA/gdrcopy.git /opt/gdrcopy \\",
        '    && git -C /opt/gdrcopy checkout "${GDRCOPY_COMMIT}" \\',
        '    && make -C /opt/gdrcopy -j"$(nproc)" prefix=/usr/local lib lib_install \\',
        "    && ldconfig",
        "",
    ]
    if plan.vllm_pin:
        out += [
            f"# vLLM {plan.vllm_pin} (E503), its wheel resolved from the per-commit index, so",
            "# bumping VLLM_SHA alone is enough (B414); wheels.vllm.ai keys its folders by full",
            "# commit: if this prefix does not resolve, set VLLM_SHA to the full SHA.",
            'RUN index="https://wheels.vllm.ai/${VLLM_SHA}/vllm/" \\',
            '    && curl -fsSL "$index" -o /tmp/vllm-index.html \\',
            '    && wheel="$(grep -o -m1 \'vllm-[^"]*x86_64[.]whl\' /tmp/vllm-index.html)" \\',
            '    && python3 -m pip install --no-cache-dir "${index}${wheel}" \\',
            "    && rm /tmp/vllm-index.html",
        ]
    if engine == "dynamo":
        dyn = _pin(plan, "ai-dynamo, ai-dynamo-runtime")
        out += [
            f"# NVIDIA Dynamo {dyn}, the version the reference recipe ran end to end.",
            f'RUN python3 -m pip install --no-cache-dir "ai-dynamo=={dyn}" "ai-dynamo-runtime=={dyn}"',
        ]
    if engine == "tensorrt-llm":
        nccl4py = _pin(plan, "nccl4py").split()[0]
        out += [
            f"# nccl4py {nccl4py}: the only wheel that ships libnccl_ep 0.1.0 (L505).",
            f'RUN python3 -m pip install --no-cache-dir "nccl4py=={nccl4py}"',
        ]
    if deepep_commit:
        out += [
            "",
            f"# DeepEP fork {deepep_commit} (D101), source only: it is built in the pod on first",
            "# boot (the build needs a CUDA context and the pod's torch ABI).",
            'RUN git clone "${DEEPEP_REPO}" /opt/DeepEP \\',
            '    && git -C /opt/DeepEP checkout "${DEEPEP_COMMIT}"',
        ]
    if plan.nccl:
        pkgs = '"nvidia-nccl-cu13==${NCCL_VERSION}"'
        if nvshmem:
            pkgs += ' "nvidia-nvshmem-cu13==${NVSHMEM_VERSION}"'
        code = "L505" if engine == "tensorrt-llm" else "L101"
        out += [
            "",
            f"# Re-pin NCCL {plan.nccl} LAST, after every pip layer ({code}): the resolver pulls",
            "# it back otherwise. Fail the build when the GIN symbols are missing.",
            f"RUN python3 -m pip install --no-cache-dir {pkgs} \\",
            "    && lib=\"$(python3 -c 'import nvidia.nccl, os; "
            'print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))\')" \\',
            '    && nm -D --defined-only "$lib" | grep -c ncclGetLsaDevicePointer',
        ]
    return "\n".join(out) + "\n"


def dockerignore(plan: Plan) -> str:
    return DOCKERIGNORE + "plan.env\nplan.json\nkubernetes/\n*.sh\n"
