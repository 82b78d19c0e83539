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
    b"NCCL version ",  # also the banner NCCL prints with printf, without its prefix (F202)
    # a channel over NCCL's own Socket or IB network: the network where no "Using network" line
    # was kept (an excerpt); absent from a run on the OFI plugin, so EFA logs never pay for it
    b"[send] via NET/Socket",
    b"[send] via NET/IB",
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
    # the rest of the lexicon (knowledge/log_lexicon.toml): every word it reads must be found
    b"ailure",  # failure, Failure
    b"xit code",  # exit code, Exited with exit code
    b"xit status",
    b"on-zero",  # non-zero exit / status
    b"nhandled",
    b"o space",  # no space left, No space left
    b"egmentation",
    b"OOM",
    b"nvalid",
    b"ould not",
    b"ouldn't",
    b"an't",
    b"o such",
    b"EPERM",
    b"EACCES",
    b"eadline",
    b"gdr",  # gdrcopy / gdrdrv / gdr_* (their failures say so in their own words)
    b"too short",  # dlopen: file too short
    b"ELF ",  # dlopen: wrong ELF class, invalid ELF header
    # NCCL's communicator lines, also without the host:pid prefix: that NCCL ran, its nNodes
    b"Init COMPLETE",
    b"Out of bounds values",  # nccl-tests' summary: the run completed
    b"nNodes",
)
# The channel lines that say which transport connects a rank to each peer. They are the bulk
# of an NCCL INFO log (one per channel, peer and direction), so ``epdoctor logs`` does not
# look for them (but for the send side of Socket and IB channels, above); the launch gates,
# whose logs are small, add this anchor (``Feeder(anchors=...)``,
# ``LogAnalyzer(transports=True)``). Every P2P, SHM and NET channel line contains it, the ring
# order lines (``Channel 00/24 : 0 1 2 3``) do not.
TRANSPORT_ANCHORS: tuple[bytes, ...] = (b"] via ",)

# --- NCCL INFO facts (NVIDIA/nccl src/init.cc, src/plugin/*.cc, src/misc/param.cc) -------------
NCCL_VERSION = re.compile(
    r"^NCCL version (?P<v>\d+\.\d+\.\d+)(?:[-+.]\w+)*?(?:\+cuda(?P<cuda>[\d.]+))?\b"
)
# init.cc "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d" (2.19+),
# "comm %p rank %d nranks %d cudaDev %d ... - Init COMPLETE" (every release): how many ranks
# and hosts the communicator spans
COMM_RANKS = re.compile(r"\bn[Rr]anks (?P<n>\d+)")
COMM_NODES = re.compile(r"\bnNodes (?P<n>\d+)")
ENV_SET = re.compile(r"^(?P<k>[A-Z][A-Z0-9_]+) set by environment to (?P<v>.*?)\.?$")
USING_NETWORK = re.compile(r"(?:^|NCCL INFO )Using network (?P<net>.+?)\s*$")
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

# the network of a NET channel line, whose name may hold a space ("via NET/AWS Libfabric/0")
CHANNEL_NET = re.compile(r"^Channel \d+(?:/\d+)? : .*? via NET/(?P<net>[^/]+)/\d")


def transport_kind(via: str) -> str:
    """P2P/CUMEM/read -> P2P; SHM/direct/direct -> SHM; NET/Libfabric/0/GDRDMA -> NET/Libfabric."""
    parts = via.split("/")
    if parts[0] == "NET" and len(parts) > 1:
        return f"NET/{parts[1]}"
    return parts[0]


# --- context: what a line says about the run, not trouble (read on every candidate line) -------
# The trouble a line signals is the catalogue's [[log]] rules (knowledge/traps/*.toml, compiled by
# facts/logs/triage.py); these only extract context the checks read: the all2all manager vLLM
# chose, its CUDA-graph mode, torchrun's exit codes, frames that say DeepEP-V2 is in play.
CONTEXT: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (k, re.compile(p))
    for k, p in (
        # vLLM (vllm/distributed/device_communicators/all2all.py, vllm/config)
        ("vllm_manager", r"Using (?P<mgr>\S+) all2all manager\."),
        ("vllm_engine_config", r"enforce_eager=(?P<eager>True|False)"),
        # torchrun's failure summary (torch/distributed/elastic/multiprocessing/errors)
        ("torchrun_exitcode", r"^\s*exitcode\s*:\s*-?\d+"),
        ("deepep_v2_context", r"deep_ep[/.]|ElasticBuffer|deepep_v2|DeepEPV2"),
        # nccl-tests' end of run (NVIDIA/nccl-tests src/common.cu: "# Out of bounds values : %d
        # %s" with OK for 0): every collective of the test completed and checked out
        ("nccl_tests_ok", r"^#\s*Out of bounds values\s*:\s*0\s+OK"),
    )
)
