"""The Dockerfile a plan's pins imply, with the reference recipes' load-bearing mechanisms:
base image, EFA installer (aws-ofi-nccl and libfabric come with it) gated on the GIN export
and on GDRCopy having been compiled into the plugin, GDRCopy userspace, torch cu130, the
engine (vLLM from its per-commit wheel index by full SHA, ai-dynamo with --no-deps), the
DeepEP fork's source at its full commit, one NCCL that wins (ldconfig, asserted by symbol)
re-pinned after every pip layer, the plan's image/ files, and last the image gate.

Pins come from Plan.pins (pins.toml) and image.toml, so the Dockerfile, plan.json and the
gate's expectations cannot name different versions. Written for `epdoctor lint` to pass;
epdoctor does not build it.
"""

from __future__ import annotations

from epdoctor.knowledge import stack
from epdoctor.plan import gate
from epdoctor.plan.model import Plan

BASES = ("CUDA base image", "TensorRT-LLM base image")
DOCKERIGNORE = "# The plan's own files are not build context (B406: plan.env is an env file).\n"
NCCL_ROOT = (
    "NCCL_ROOT=\"$(python3 -c 'import nvidia.nccl, pathlib; "
    "print(pathlib.Path(list(nvidia.nccl.__path__)[0]))')\""
)


def _pin(plan: Plan, component: str) -> str:
    return gate.pin(plan, component)


def base_image(plan: Plan) -> str:
    """The base image the plan pins for its engine; "" when it pins none (SGLang)."""
    return next((v for c in BASES if (v := _pin(plan, c))), "")


def _args(plan: Plan, deepep: bool) -> list[str]:
    engine = plan.input.engine
    v = [
        "ARG EFA_INSTALLER_VERSION=" + _pin(plan, "EFA installer"),
        "ARG GDRCOPY_COMMIT=" + stack.image_pin("gdrcopy_commit"),
    ]
    if plan.nccl:
        v.append("ARG NCCL_VERSION=" + plan.nccl)
    if nvshmem := _pin(plan, "nvidia-nvshmem-cu13"):
        v.append("ARG NVSHMEM_VERSION=" + nvshmem)
    if engine in ("vllm", "dynamo"):
        v += [
            "ARG TORCH_SPEC=" + stack.image_pin("torch_spec"),
            "ARG TORCH_INDEX=" + stack.image_pin("torch_index"),
            "ARG TORCH_VERSION=" + stack.image_pin("torch"),
            "ARG NINJA_VERSION=" + stack.image_pin("ninja"),
        ]
    if plan.vllm_pin:
        v.append("ARG VLLM_SHA=" + (stack.vllm_full_sha(plan.vllm_pin) or plan.vllm_pin))
    if engine == "dynamo":
        v.append("ARG AI_DYNAMO_VERSION=" + _pin(plan, "ai-dynamo, ai-dynamo-runtime"))
    if engine == "tensorrt-llm":
        v.append("ARG NCCL4PY_VERSION=" + _pin(plan, "nccl4py").split()[0])
    if deepep:
        v += [
            "ARG DEEPEP_REPO=" + stack.image_pin("deepep_repo"),
            "ARG DEEPEP_COMMIT=" + stack.image_pin("deepep_commit"),
        ]
    return v


# TensorRT-LLM's NGC base (Ubuntu 24.04, its own Python): the TensorRT-LLM recipe's first layer
# (awslabs/awsome-distributed-ai#1240, examples/inference/tensorrt-llm/nccl-ep-efa/Dockerfile
# @56e05f63 Layer 1): libevent-{core,pthreads} are prrte-aws dependencies the EFA installer needs,
# and no apt python3 or pip, which would reinstall Ubuntu's over the image's (and with them its
# EXTERNALLY-MANAGED marker, PEP 668, that turns every later pip install into an error).
TRTLLM_APT = (
    "build-essential autoconf automake libtool pkg-config git curl wget ca-certificates "
    "libnuma-dev libhwloc-dev libudev-dev libevent-core-2.1-7t64 libevent-pthreads-2.1-7t64 "
    "pciutils environment-modules tcl udev dmidecode ethtool iproute2 kmod binutils"
)
CUDA_APT = (
    "ca-certificates curl git build-essential binutils ninja-build python3 python3-dev python3-pip"
)


def _apt(plan: Plan) -> list[str]:
    """The system packages of the base image at hand. The lists stay in place for the EFA
    installer, which runs its own apt-get install (the layer after it removes them)."""
    if plan.input.engine == "tensorrt-llm":
        return [
            "# The TensorRT-LLM recipe's system layer (pull/1240): no apt Python over the image's.",
            "RUN apt-get update \\",
            f"    && apt-get install -y --no-install-recommends {TRTLLM_APT}",
        ]
    return [
        "RUN apt-get update \\",
        f"    && apt-get install -y --no-install-recommends {CUDA_APT} \\",
        "    && rm -rf /var/lib/apt/lists/*",
    ]


def _efa(plan: Plan) -> list[str]:
    efa = _pin(plan, "EFA installer")
    out = [
        f"# EFA userspace {efa} (H124): libfabric and the bundled aws-ofi-nccl plugin in",
        "# /opt/amazon/ofi-nccl/lib (N102); the kernel module is the host's. --disable-ngc:",
        "# the installer's NGC branch must not run on an nvcr.io base (B404).",
        'RUN apt-get update && curl -fsSLO "https://efa-installer.amazonaws.com/aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" \\',
        '    && tar -xzf "aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" \\',
        "    && cd aws-efa-installer \\",
        "    && ./efa_installer.sh -y --skip-kmod --skip-limit-conf --no-verify --disable-ngc \\",
        '    && cd .. && rm -rf aws-efa-installer "aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" \\',
        "    && rm -rf /var/lib/apt/lists/* && ldconfig",
    ]
    if plan.gin_type is not None:
        symbol = "ncclGinPlugin_v14" if plan.gin_type == 5 else "ncclGinPlugin_v13"
        # _v14 also on the proxy, as the vLLM recipe gates (pull/1230, Dockerfile Layer 2): a
        # pre-1.21 plugin exports _v11/_v13 only (aws-ofi-nccl@v1.20.0:src/rdma/gin/
        # nccl_ofi_gin_api.cpp:514,543; v1.21.1 adds _v14 at nccl_ofi_gin_gdaki.cpp:1225)
        also = (
            f" \\\n    && nm -D --defined-only {gate.PLUGIN} | grep -c ncclGinPlugin_v14"
            if symbol != "ncclGinPlugin_v14"
            else ""
        )
        out += [
            f"# Fail the build when the bundled plugin has no {symbol} (GIN type {plan.gin_type}, N102)",
            "# or is older than 1.21 (no _v14 table), or was compiled without GDRCopy (N103): GIN",
            "# then fails at serve with ginType NONE.",
            f"RUN nm -D --defined-only {gate.PLUGIN} | grep -c {symbol}{also} \\",
            f"    && ! grep -q -a 'GDRCopy support not available at compile time' {gate.PLUGIN}",
        ]
    return out


def _gdrcopy() -> list[str]:
    return [
        "# GDRCopy userspace (libgdrapi) at v2.5.2's full commit: the GIN plugin dlopens it;",
        "# the host's gdrdrv must be >= 2.5 too (H111).",
        "RUN git clone https://github.com/NVIDIA/gdrcopy.git /tmp/gdrcopy \\",
        '    && git -C /tmp/gdrcopy checkout "${GDRCOPY_COMMIT}" \\',
        '    && make -C /tmp/gdrcopy -j"$(nproc)" prefix=/usr/local lib lib_install \\',
        "    && rm -rf /tmp/gdrcopy && ldconfig",
    ]


def _vllm_layers(plan: Plan) -> list[str]:
    out = [
        "# torch cu130 pinned: DeepEP's in-pod build links this exact ABI; ninja is baked so",
        "# the first boot needs no package index.",
        'RUN python3 -m pip install --no-cache-dir --index-url "${TORCH_INDEX}" "${TORCH_SPEC}" \\',
        '    && python3 -m pip install --no-cache-dir "ninja==${NINJA_VERSION}"',
        "",
        f"# vLLM {plan.vllm_pin} (E503) by full commit: the per-commit index lists the wheel as",
        "# ../../<sha>/<file>, served at https://wheels.vllm.ai/<sha>/<file> (B414).",
        'RUN href="$(curl -fsSL "https://wheels.vllm.ai/${VLLM_SHA}/vllm/" '
        '| grep -oE \'href="[^"]*manylinux[^"]*x86_64[.]whl"\' | head -1 | cut -d\'"\' -f2 || true)" \\',
        '    && if [ -z "$href" ]; then echo "FATAL: no x86_64 vLLM wheel indexed for ${VLLM_SHA}" >&2; exit 1; fi \\',
        '    && python3 -m pip install --no-cache-dir "https://wheels.vllm.ai/${VLLM_SHA}/$(basename "$href")"',
    ]
    if plan.input.engine == "dynamo":
        out += [
            "",
            "# NVIDIA Dynamo with --no-deps: its unconditional dependencies would be re-resolved",
            "# over the pinned vLLM wheel's (transformers, pyzmq, msgspec, prometheus-client).",
            "RUN python3 -m pip install --no-cache-dir --no-deps "
            '"ai-dynamo-runtime==${AI_DYNAMO_VERSION}" "ai-dynamo==${AI_DYNAMO_VERSION}" \\',
            '    && python3 -c "import dynamo.vllm.main, dynamo.frontend.main"',
        ]
    return out


def _deepep() -> list[str]:
    return [
        "# The DeepEP fork at its full commit (D406), source only: the one build is in the pod on",
        "# first boot (image/build_deepep.sh; the reference recipes' choice, B410).",
        'RUN git clone "${DEEPEP_REPO}" /opt/DeepEP \\',
        '    && git -C /opt/DeepEP checkout "${DEEPEP_COMMIT}" \\',
        "    && git -C /opt/DeepEP submodule update --init --recursive \\",
        "    && grep -q 'class ElasticBuffer' /opt/DeepEP/deep_ep/buffers/elastic.py",
    ]


def _repin(plan: Plan) -> list[str]:
    pkgs = '"nvidia-nccl-cu13==${NCCL_VERSION}"'
    if _pin(plan, "nvidia-nvshmem-cu13"):
        pkgs += ' "nvidia-nvshmem-cu13==${NVSHMEM_VERSION}"'
    trt = plan.input.engine == "tensorrt-llm"
    code = "L505" if trt else "L101"
    out = [
        f"# Re-pin NCCL {plan.nccl} LAST, after every pip layer ({code}): the resolver pulls it back",
        "# otherwise. One NCCL wins: its directory first in the ldconfig cache"
        + (" and in /usr/local/lib, over the base's own" if trt else "")
        + ";",
        "# asserted by version string and by the GIN/LSA export, not by path alone.",
        f"RUN python3 -m pip install --no-cache-dir --no-deps --force-reinstall {pkgs} \\",
    ]
    if trt:
        out.append('    && python3 -m pip install --no-cache-dir "nccl4py==${NCCL4PY_VERSION}" \\')
    out += [f"    && {NCCL_ROOT} \\"]
    if trt:
        out += [
            '    && ln -sf "$NCCL_ROOT/lib/libnccl.so.2" /usr/local/lib/libnccl.so.2 \\',
            '    && ln -sf "$NCCL_ROOT/lib/libnccl.so.2" /usr/local/lib/libnccl.so \\',
        ]
    out += [
        '    && echo "$NCCL_ROOT/lib" > /etc/ld.so.conf.d/00-pip-nccl.conf \\',
        *(
            [
                "    && python3 -c 'import importlib.util, os; "
                's = importlib.util.find_spec("nvidia.nvshmem"); '
                'print(os.path.join(s.submodule_search_locations[0], "lib"))\' '
                "> /etc/ld.so.conf.d/01-pip-nvshmem.conf \\",
            ]
            if _pin(plan, "nvidia-nvshmem-cu13")
            else []
        ),
        "    && ldconfig \\",
        "    && ldconfig -p | awk '$1 == \"libnccl.so.2\" && !f {print $NF; f = 1}' "
        '| grep -cF "$NCCL_ROOT/lib" \\',
        '    && grep -q -a "NCCL version ${NCCL_VERSION}" "$NCCL_ROOT/lib/libnccl.so.2" \\',
        '    && nm -D --defined-only "$NCCL_ROOT/lib/libnccl.so.2" | grep -c ncclGetLsaDevicePointer',
    ]
    if not trt:
        out[-1] += " \\"
        out.append(
            "    && python3 -c \"import sys, torch; sys.exit(torch.__version__ != '${TORCH_VERSION}')\""
        )
    return out


def dockerfile(plan: Plan) -> str:
    """The Dockerfile text; "" when the plan has no base image to build on."""
    base = base_image(plan)
    if not base:
        return ""
    engine = plan.input.engine
    deepep = stack.engines()[engine].uses_deepep and plan.gin_type is not None
    out = [
        f"# epdoctor plan: the image for {plan.extra['engine_label']} over "
        f'{plan.extra["transport_label"]}, from the plan\'s pins (plan.json "pins").',
        "# Build and push it under an immutable tag, then name that image in the manifest",
        "# (epdoctor plan --image REGISTRY/NAME:TAG):",
        f"#   docker build -t {plan.image} . && docker push {plan.image}",
        "# The last layer runs the image gate (epdoctor verify-image): a wrong image fails its build.",
        "# epdoctor: ignore[B403] the plan pins the exact tag its reference recipe built on; "
        "add @sha256:DIGEST for byte reproducibility",
        f"FROM {base}",
        "",
        "# Whole-line comments only: an inline comment holding == breaks an ARG (B401).",
        *_args(plan, deepep),
        "ENV DEBIAN_FRONTEND=noninteractive",
        'SHELL ["/bin/bash", "-euo", "pipefail", "-c"]',
        "",
        *_apt(plan),
        "",
        *_efa(plan),
        "",
        *_gdrcopy(),
        "",
    ]
    if plan.vllm_pin:
        out += [*_vllm_layers(plan), ""]
    if deepep:
        out += [*_deepep(), ""]
    if plan.nccl:
        out += [*_repin(plan), ""]
    out += [
        f"# The plan's own files: the image gate and its expectations{_extra_files(plan)}.",
        f"COPY image/ {gate.RECIPE_DIR}/",
        "RUN chmod 755 "
        + " ".join(
            f"{gate.RECIPE_DIR}/{name.split('/', 1)[1]}"
            for name in sorted(gate.image_files(plan))
            if name.endswith((".sh", ".py"))
        ),
        "# The image gate, last: a wrong image fails its build here.",
        f"RUN {gate.gate_command('build')}",
    ]
    return "\n".join(out) + "\n"


def _extra_files(plan: Plan) -> str:
    if plan.input.engine == "tensorrt-llm":
        return ", the NcclEP probe the kernel test runs and its routing oracle"
    if stack.engines()[plan.input.engine].uses_deepep and plan.gin_type is not None:
        return ", the in-pod DeepEP build"
    return ""


def dockerignore(plan: Plan) -> str:
    return DOCKERIGNORE + "plan.env\nplan.json\nkubernetes/\n*.sh\n"
