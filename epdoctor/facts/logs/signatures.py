"""The exact upstream wordings the log analyzer reads, and the byte anchors that find them.

Every signature is an upstream string (aws-ofi-nccl, NVIDIA/nccl, DeepEP, vLLM,
TensorRT-LLM, torch, huggingface_hub; see docs/logs.md for the sources). ANCHORS
are short literals such that every line a signature, or the open-world triage
(facts/logs/triage.py), can act on contains at least one of them: the scanner looks
for these in raw bytes and decodes only the lines around a hit, so the bulk of an
NCCL INFO log (channels, rings, COLL lines) is never decoded.
"""

from __future__ import annotations

import re

ANCHORS: tuple[bytes, ...] = (
    b"WARN",  # every NCCL / aws-ofi-nccl warning, UCX WARN, Python logging WARNING
    b"NCCL INFO N",  # NCCL version, NCCL_* set by environment, NET/OFI, NET/Plugin, NET/Socket, NET/IB
    b"NCCL INFO G",  # GIN is disabled., GIN not supported., GIN/Plugin: ...
    b" plugin ",  # Initialized/Assigned/Failed ... NET|GIN plugin, Loaded gin plugin
    b"Using network ",
    b"Bootstrap : Using",  # the interface NCCL's bootstrap picked (T802)
    b"[DeepEP]",  # DeepEP's banners (its errors are exceptions: "rror"; vLLM's manager line below)
    b"all2all manager",
    b"GDAKI-CQE",
    b"enforce_eager",  # vLLM's engine config line (CUDA-graph mode or eager)
    b"exitcode",  # torchrun's failure summary
    # open-world triage: the words every line that signals trouble holds (facts/logs/triage.py)
    b"rror",  # Error, error, ncclSystemError, <error>
    b"ERROR",
    b"ailed",  # failed, Failed
    b"FAIL",
    b"Traceback",
    b"xception",
    b"Segmentation",
    b"SIG",  # SIGSEGV, SIGABRT, SIGKILL, SIGBUS
    b"ignal",  # Signal 11, signal 6
    b"bort",  # abort, Aborted
    b"atal",  # fatal, Fatal Python error
    b"illed",  # Killed, killed, oom-killer
    b"of memory",  # out of memory, Out of memory
    b"med out",  # timed out, Timed out
    b"imeout",  # timeout, Timeout
    b"annot",  # cannot, Cannot
    b"nable to",  # unable to, Unable to
    b"not found",
    b"No such",
    b"denied",
    b"refused",
    b"reset by peer",
    b"nreachable",
    b"upported",  # unsupported, not supported
    b"ssert",  # assert, Assertion
    b"Too many",
    b"<warn>",  # libfabric's warnings
    b"dlerror",
    b"No plugin found",
    b".cc:",  # NCCL's "file.cc:N -> 3" return trail and WARN locations
    b"Duplicate",
    b"Last error",
    b"Bus error",
    b"core dumped",
)
# The channel lines that say which transport connects a rank to each peer. They are the bulk
# of an NCCL INFO log (one per channel, peer and direction), so ``epdoctor logs`` does not
# look for them; the launch gates, whose logs are small, add this anchor (``Feeder(anchors=...)``,
# ``LogAnalyzer(transports=True)``). Every P2P, SHM and NET channel line contains it, the ring
# order lines (``Channel 00/24 : 0 1 2 3``) do not.
TRANSPORT_ANCHORS: tuple[bytes, ...] = (b"] via ",)

# --- NCCL INFO facts (NVIDIA/nccl src/init.cc, src/plugin/*.cc, src/misc/param.cc) -------------
NCCL_VERSION = re.compile(
    r"^NCCL version (?P<v>\d+\.\d+\.\d+)(?:[-+.]\w+)*?(?:\+cuda(?P<cuda>[\d.]+))?\b"
)
ENV_SET = re.compile(r"^(?P<k>[A-Z][A-Z0-9_]+) set by environment to (?P<v>.*?)\.?$")
USING_NETWORK = re.compile(r"^Using network (?P<net>.+?)\s*$")
NET_LOADED = re.compile(r"^NET/Plugin: Loaded net plugin (?P<name>.+?) \((?P<ver>v\d+)\)")
NET_EXTERNAL_OK = re.compile(r"^Successfully loaded external (?:network )?plugin (?P<path>\S+)")
# the plugin itself is absent, in the wordings of NCCL 2.4-2.11 ("No plugin found (%s), using
# internal implementation", after "dlerror=%s" from 2.12), 2.7-2.18 ("Plugin load (%s) returned
# %d : %s") and 2.19+ ("Could not find: %s. Using internal network plugin.")
NET_NOT_FOUND = re.compile(
    r"^NET/Plugin ?: ?(?:Could not find: (?P<p1>\S+?)\.?(?:\s|$)|"
    r"(?:dlerror=.*?)?No plugin found \((?P<p2>[^)]+)\)|"
    r"Plugin load \((?P<p3>[^)]+)\) returned \d+ : (?P<obj>[^:\s]+): cannot open shared object file: "
    r"No such file)"
)
NET_INIT_FAILED = re.compile(r"^Failed to initialize NET plugin (?P<name>.+?)\s*$")
NET_ANY_FAILED = re.compile(r"Failed to initialize any NET plugin")
NET_INITIALIZED = re.compile(r"^Initialized NET plugin (?P<name>.+?)\s*$")
NET_ASSIGNED = re.compile(r"^Assigned NET plugin (?P<name>.+?) to comm")
# aws-ofi-nccl src/nccl_ofi_net.cpp / platform-aws.cpp (NCCL adds the "NET/OFI " prefix)
# "Selected provider is %s, fabric is %s (found %d nics)"; aws-ofi-nccl 1.x wrote
# "Selected Provider is %s (found %d nics)" (no fabric)
# "Selected Provider is %s" (no NIC count) before that
OFI_PROVIDER = re.compile(
    r"Selected [Pp]rovider is (?P<prov>[^,(\s]+)(?:, fabric is (?P<fab>[^\s(]+))?"
    r"(?: \(found (?P<n>\d+) nics?\))?"
)
OFI_VERSION = re.compile(r"^NET/OFI Initializing aws-ofi-nccl (?P<v>\S+)")
LIBFABRIC_VERSION = re.compile(r"^NET/OFI Using Libfabric version (?P<v>\S+)")
OFI_INIT_FAILED = re.compile(
    r"NET/OFI (?:aws-ofi-nccl initialization failed|Initializing plugin failed|"
    r"Failed to initialize (?:sendrecv|rdma) protocol)"
)
# GIN assignment: 2.30.4 "Assigned GIN plugin X to comm"; newer "GIN/Plugin: Assigned plugin X type N to comm"
GIN_ASSIGNED = re.compile(
    r"^(?:Assigned GIN plugin (?P<a>.+?) to comm|GIN/Plugin: Assigned plugin (?P<b>\S+) type (?P<t>\d+) to comm)"
)
GIN_LOADED = re.compile(r"^(?:NET|GIN)/Plugin: Loaded gin plugin (?P<name>.+?) \((?P<ver>v\d+)\)")
GDAKI_CONTEXT_DONE = re.compile(r"gin GDAKI: createContext done")
GDRCOPY_MSG = re.compile(r"GDRCopy|gdrapi|gdr handle|libgdrapi", re.IGNORECASE)
NET_NAMES_OFI = ("Libfabric", "AWS Libfabric", "OFI")
# NCCL src/transport/net_socket.cc: "NET/Socket : Using%s" then one " [%d]%s:%s" per interface
SOCKET_USING = re.compile(r"^NET/Socket : Using (?P<ifs>.+?)\s*$")
# bootstrap.cc "Bootstrap : Using %s" (one interface, or "[0]eth0:... [1]..." in newer releases)
BOOTSTRAP_USING = re.compile(r"^Bootstrap ?: ?Using (?P<ifs>.+?)\s*$")
# one interface of those lines: "[0]eth0:10.0.0.1<0>", "eth0:172.31.94.17<0>", "veth1:fe80::1%veth1<0>"
SOCKET_IF = re.compile(r"(?:\[\d+\])?(?P<name>[\w.@-]+):(?P<addr>[0-9A-Fa-f.:%\w-]+?)<\d+>")
# NCCL src/transport/*.cc, one line per channel, peer and direction (rank[nvmlDev]):
#   p2p.cc "Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/%s%s%s" (CUMEM|MNNVL, /read, /CE),
#          also "via P2P/IPC%s%s" and "via P2P/direct pointer%s"
#   shm.cc "Channel %02d : %d[%d] -> %d[%d] via SHM/%s/%s" (no connection index)
#   net.cc "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s%s" (/GDRDMA, (PCI),
#          /Shared; "%d(%d)" when another rank proxies) and "[receive] via NET/%s/%d%s%s"
# Older releases printed the bus id in the brackets (``3[b1000]``).
CHANNEL_VIA = re.compile(
    r"^Channel \d+(?:/\d+)? : \d+\[\w+\] -> \d+\[\w+\](?: \[(?:send|receive)\])? via (?P<via>\S+)"
)


def transport_kind(via: str) -> str:
    """P2P/CUMEM/read -> P2P; SHM/direct/direct -> SHM; NET/Libfabric/0/GDRDMA -> NET/Libfabric."""
    parts = via.split("/")
    if parts[0] == "NET" and len(parts) > 1:
        return f"NET/{parts[1]}"
    return parts[0]


# --- events: (kind, pattern) searched in the message (NCCL lines) or the whole text ---------
# Order matters only for which kind a line is filed under when several could match.
EVENTS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (k, re.compile(p))
    for k, p in (
        # aws-ofi-nccl GIN / GDAKI (src/rdma/gin/*, src/nccl_ofi_gdrcopy.cpp)
        ("gin_gdrcopy_25", r"GIN requires GDRCopy 2\.5\+"),
        ("gdrcopy_compile", r"GDRCopy support not available at compile time"),
        (
            "gdrcopy_failed",
            r"Could not load libgdrapi\.so|Failed to open gdr handle|"
            r"Failed to resolve libgdrapi\.so symbol|Failed to resolve GDRCopy v2 API|"
            r"Failed to initialize GDRCopy",
        ),
        ("cntr_open_ext", r"cntr_open_ext failed"),
        ("iomem", r"host_register_iomem failed"),
        ("gdaki_platform", r"gin GDAKI: not supported on this platform"),
        ("gdaki_not_capable", r"gin GDAKI: createContext on a non-GDA-capable environment"),
        ("gdaki_context_failed", r"gin GDAKI: createContext failed"),
        ("gin_seq_in_use", r"Next sequence number is in use"),
        (
            "gin_no_net",
            r"GIN requires the OFI NET plugin to be active|OFI NET plugin has not been initialized",
        ),
        ("gin_rdma_only", r"GIN only supports RDMA transport protocol"),
        ("gin_mr_endpoint", r"GIN plugin does not support FI_MR_ENDPOINT"),
        ("gin_any_failed", r"Failed to initialize any GIN plugin"),
        ("net_any_failed", r"Failed to initialize any NET plugin"),
        # NCCL gin_host.cc
        ("gin_disabled", r"^GIN is disabled\."),
        ("gin_unsupported", r"^GIN not supported\.|^No GIN-capable devices found\."),
        ("gin_bad_type", r"Cannot get backend version for invalid GIN type|is not a gin type"),
        # the seeds' recipe greps "GDAKI-CQE .*status 9" (upstream prints the CQE status)
        ("gdaki_cqe9", r"(?i)GDAKI-CQE.*status[ :=]*9\b"),
        # DeepEP (deep_ep/__init__.py check_nccl_so, csrc/kernels/backend/nccl.cu)
        ("deepep_duplicate_nccl", r"Duplicate NCCL runtime found"),
        (
            "deepep_nccl_mismatch",
            r"Prior to NCCL 2\.31, NCCL compile-time and runtime versions|Invalid NCCL versions",
        ),
        ("deepep_gin_unavailable", r"NCCL GIN is unavailable"),
        ("deepep_qp_cap", r"\[DeepEP\] EFA detected: capping num_allocated_qps"),
        # ptxas / CUDA JIT (DeepEP's runtime JIT; seed 001)
        ("jit_ptxas_mov", r"Arguments mismatch for instruction 'mov'"),
        ("jit_ptxas_stbulk", r"ptxas.*st\.bulk|st\.bulk.*(?:not supported|requires|error)"),
        (
            "jit_no_binary",
            r"CUDA_ERROR_NO_BINARY_FOR_GPU|no kernel image is available for execution",
        ),
        ("jit_ptxas", r"ptxas\b.*\b(?:error|fatal)\b|\bptxas fatal\b"),
        # vLLM (vllm/distributed/device_communicators/*)
        ("vllm_manager", r"Using (?P<mgr>\S+) all2all manager\."),
        ("vllm_v2_unavailable", r"DeepEP v2 \(ElasticBuffer\) not available"),
        ("vllm_requires_gin", r"DeepEPv2 requires NCCL GIN"),
        ("vllm_engine_config", r"enforce_eager=(?P<eager>True|False)"),
        # TensorRT-LLM fused_moe/communication/nccl_ep.py
        ("trtllm_ncclep_missing", r"nccl-ep is not installed\."),
        # huggingface_hub HfHubHTTPError / requests HTTPError
        (
            "hf_429",
            r"\b429 Client Error: Too Many Requests|HTTP Error 429|status[_ ]code[=: ]+429\b",
        ),
        # CUDA runtime / driver strings
        ("cuda_illegal", r"an illegal memory access was encountered|CUDA_ERROR_ILLEGAL_ADDRESS"),
        ("cuda_launch", r"unspecified launch failure|CUDA_ERROR_LAUNCH_FAILED"),
        # crashes
        ("segfault", r"Segmentation fault|SIGSEGV|exitcode\s*:\s*-11\b|failed \(exitcode: -11\)"),
        ("torchrun_child", r"ChildFailedError|failed \(exitcode: -?\d+\) local_rank"),
        ("torchrun_exitcode", r"^\s*exitcode\s*:\s*-?\d+"),
        # context for the crash traps (frames and lines that say DeepEP-V2 is in play)
        ("deepep_v2_context", r"deep_ep[/.]|ElasticBuffer|deepep_v2|DeepEPV2"),
    )
)
