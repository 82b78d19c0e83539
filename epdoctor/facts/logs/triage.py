"""Open-world triage: every line that signals trouble is judged, known or not.

``classify(parsed)`` looks at one attributed line (``prefix.Parsed``) and says whether it signals
trouble, and if so which subsystem wrote it, how bad it is, and which mechanism it shows:

- a *known* mechanism (a rule of ``RULES``) carries its trap code and a role: ``cause`` (the line
  names why: an errno text, a missing library or symbol, a limit, a provider error) or ``symptom``
  (what the cause led to: "Failed to initialize any NET plugin", an NCCL error code, a
  torchrun failure summary);
- a line of no known mechanism still counts when it is trouble by its shape: an NCCL ``WARN``, a
  libfabric ``<warn>``/``<error>``, a UCX ``ERROR``, the last line of a Python traceback, an
  ``ERROR``-level engine line. It gets the subsystem's "unrecognised" code, so nothing a human
  would read as an error is lost;
- ``BENIGN_PATTERNS`` are what healthy runs print (CollNet symbol probes, ``dlvsym failed on
  mlx5dv_*``, the IPv6 ``localhost`` store warning...): counted, never a failure.

Rules match the mechanism's upstream wording, several variants each (NCCL 2.4-2.30, aws-ofi-nccl
1.x-1.22, libfabric, torch, the engines), never a particular log's incidental text. Everything
here is pure: no I/O, no state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from epdoctor.facts.logs.prefix import Parsed

# roles
CAUSE = "cause"
SYMPTOM = "symptom"
TRAIL = "trail"  # NCCL's "file.cc:N -> 3" return trail, torch's "Last error:" header: context only
GENERIC = "generic"  # trouble of no known mechanism
BENIGN = "benign"

ERROR = "error"
WARNING = "warn"


@dataclass(frozen=True)
class Verdict:
    """What one line says. ``code`` is None for benign lines and most trail lines."""

    role: str
    level: str  # "error" | "warn"
    subsystem: (
        str  # nccl, ofi, libfabric, cuda, torch, python, engine, deepep, nvshmem, ucx, kernel
    )
    code: str | None = None
    what: str = ""  # the mechanism in a few words: the finding's title starts with it

    @property
    def is_trouble(self) -> bool:
        return self.role not in (BENIGN, TRAIL)


@dataclass(frozen=True)
class Rule:
    code: str
    role: str
    level: str
    subsystem: str
    what: str
    rx: re.Pattern[str]


def _rule(code: str, role: str, sub: str, what: str, pattern: str, level: str = ERROR) -> Rule:
    return Rule(code, role, level, sub, what, re.compile(pattern))


# --- what healthy runs print --------------------------------------------------------------------
BENIGN_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p)
    for p in (
        # NCCL probes every plugin ABI and CollNet; a miss is normal (src/plugin/net.cc)
        r"CollNet|ncclCollNetPlugin",
        r"Failed to find ncclNetPlugin_v\d+ symbol",  # one probe of several: the next ABI loads
        r"dlvsym failed on mlx5dv_",
        r"Could not get speed",
        r"128B",  # aws-ofi-nccl / NCCL: LL128 / 128-byte in-order notices
        r"(?i)tuner(?:/| )plugin|libnccl-tuner|ncclTunerPlugin",
        r"Failed to open libibverbs\.so|NET/IB : No device found|No IB devices found|"
        r"Failed to initialize NET plugin IB\b",  # NCCL's IB transport on a host without IB
        r"Failed to open libnvidia-ml|NVLS multicast support is not available",
        r"Failed to get RDMA connection speed",  # DeepEP's ibstat probe on EFA (D403, info)
        # torch: the store client tries localhost over IPv6 first; harmless when v4 works
        r"errno: 99 - Cannot assign requested address",
        r"(?i)\bno error\b|\berror_file: *<N/A>|\b0 errors?\b|errors?=0\b",
        r"NCCL_[A-Z0-9_]+ set by environment to",
        r"(?i)deprecat",
        r"(?i)\bwarnings?\.warn\(|UserWarning|FutureWarning|DeprecationWarning",
        r"fi_getinfo\(\) call failed: No data available.*(?:tcp|sockets|shm|verbs)",
        # libfabric's own GDRCopy use for small host<->GPU copies; it falls back to cudaMemcpy
        r"libfabric:[^<]*(?:gdrcopy|hmem)[^<]*<warn> (?:gdr_open failed|gdrcopy initialization)",
        r"(?i)\bretrying\b(?!.*(?:giving up|exhausted|final))",
        # torchrun stopping the other workers after one failed: that failure is the finding
        r"Sending process \d+ closing signal SIG[A-Z]+",
        # torch's advice printed under every CUDA error; the error line itself says what broke
        r"Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions|"
        r"CUDA kernel errors might be asynchronously reported|"
        r"For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    )
)

# --- known mechanisms, most specific first -------------------------------------------------------
# Each pattern is searched in the NCCL message (NCCL lines) or the whole line (others).
RULES: tuple[Rule, ...] = (
    # ---- host limits (the cause behind many registration and socket failures)
    _rule("H802", CAUSE, "host", "Open-files limit reached", r"Too many open files|EMFILE"),
    _rule(
        "H801",
        CAUSE,
        "host",
        "Locked-memory limit too low to register or pin memory",
        r"(?i)RLIMIT_MEMLOCK|\bmemlock\b|ulimit -l|locked memory|max locked|mlock\w*\(?\)?"
        r"[^\n]{0,40}(?:fail|error|Cannot)",
    ),
    _rule(
        "H803",
        CAUSE,
        "host",
        "/dev/shm too small or not usable",
        r"(?i)shared memory segment|/dev/shm[^\n]{0,120}(?:No space|failed|error|cannot|"
        r"too small)|(?:No space left on device|unable to allocate shared memory)[^\n]{0,80}shm|"
        r"unable to write to file </torch_|shm_open|shm(?:Open|Alloc)[^\n]{0,60}failed",
    ),
    _rule(
        "H805",
        CAUSE,
        "kernel",
        "The kernel's OOM killer killed a process (host or cgroup memory)",
        r"Out of memory: Kill(?:ed)? process|oom-kill:|oom_reaper|Memory cgroup out of memory|"
        r"invoked oom-killer|OOMKilled",
    ),
    _rule(
        "H804",
        CAUSE,
        "cuda",
        "Fabric Manager / NVLink SHARP (NVLS) not usable",
        r"(?i)system not yet initialized|cudaErrorSystemNotReady|CUDA_ERROR_SYSTEM_NOT_READY|"
        r"fabric ?manager|nvidia-fabricmanager|cuMulticast\w*[^\n]{0,80}(?:fail|error)|"
        r"\bnvls\w*(?:\.cc:\d+)?[^\n]{0,80}(?:fail|error)|(?:fail|error)[^\n]{0,80}\bNVLS\b",
    ),
    # ---- libfabric / aws-ofi-nccl
    _rule(
        "N304",
        CAUSE,
        "libfabric",
        "libfabric too old or of the wrong symbol version",
        r"requires at least libfabric version|version [`'‘]FABRIC_[\d.]+['’] not found|"
        r"libfabric\.so[.\d]*: version|(?i:libfabric version[^\n]{0,60}(?:too old|not supported|"
        r"older than))",
    ),
    _rule(
        "N301",
        CAUSE,
        "ofi",
        "No EFA libfabric provider for this process (EFA devices not visible)",
        r"(?:Could not|Couldn'?t|Unable to|Failed to) find (?:any|a) (?:\w+ )?(?:usable )?provider|"
        r"No eligible providers|"
        r"fi_getinfo(?:\(\))?(?: call)? failed|fi_getinfo[^\n]{0,60}(?:-61|No data available)|"
        r"No EFA devices? (?:found|available)|efa_device_list_initialize|"
        r"Unable to find a (?:libfabric )?provider|No (?:usable|matching) (?:libfabric )?providers?|"
        r"Could not find any (?:libfabric )?provider|Failed to find (?:a |any )?(?:usable )?"
        r"provider|/dev/infiniband[^\n]{0,60}(?:No such|not found|missing)",
    ),
    _rule(
        "N305",
        CAUSE,
        "ofi",
        "Memory registration failed",
        r"(?i)fi_mr_reg(?:attr)?\b[^\n]{0,80}(?:fail|error)|unable to register (?:memory|mr)|"
        r"(?:failed to|couldn'?t|could not) register (?:the )?(?:memory|mr|buffer)|"
        r"ibv_reg_(?:dmabuf_)?mr[^\n]{0,40}(?:fail|error)|register_mr[^\n]{0,40}(?:fail|error)|"
        r"mr_reg[^\n]{0,40}failed|dmabuf[^\n]{0,80}(?:fail|error|not supported)",
    ),
    _rule(
        "T801",
        CAUSE,
        "ofi",
        "EFA completion or address error: a peer cannot be reached",
        r"(?i)completed with error|completion error|fi_av_insert|address vector|"
        r"(?-i:(?:open|insert|create)\w*[^\n]{0,12}\bAV\b)|"  # aws-ofi-nccl "Couldn't open AV"
        r"unable to insert (?:remote )?address|unreachable remote|remote unreachable|"
        r"destination unreachable|peer[^\n]{0,40}unreachable|\bRNR\b|receiver not ready|"
        r"fi_cq_readerr|cq_readerr|retr(?:y|ies) exceeded|handshake[^\n]{0,40}(?:fail|timed out)",
    ),
    # ---- NCCL network plugin loading
    _rule(
        "N101",
        CAUSE,
        "nccl",
        "The network plugin was not found",
        r"No plugin found \(|Plugin: Could not find: |"
        r"(?:libnccl-(?:net|gin)[\w.-]*\.so)[^:\n]*: cannot open shared object file: No such file",
    ),
    _rule(
        "N303",
        CAUSE,
        "nccl",
        "Network plugin loaded but not usable by this NCCL (wrong ABI or unsupported)",
        r"External network plugin \S+ is unsupported|"
        r"(?:NET|GIN)/Plugin ?: ?Failed to find \w*(?:Net|Gin)Plugin\w* symbol\b(?!.*v\d+ symbol)|"
        r"plugin[^\n]{0,60}(?:version mismatch|incompatible|unsupported (?:version|API))",
    ),
    _rule(
        "N302",
        CAUSE,
        "nccl",
        "Network plugin found but could not be loaded",
        r"(?i)(?:plugin|libnccl-net|ofi|dlerror)[^\n]{0,200}(?:cannot open shared object file|"
        r"undefined symbol|file too short|wrong ELF class|invalid ELF header|"
        r"version [`'‘][\w.]+['’] not found)|"
        r"Plugin load (?:\([^)]*\) )?returned|dlopen[^\n]{0,80}(?:fail|error)",
    ),
    _rule(
        "L101",
        CAUSE,
        "python",
        "The NCCL loaded is below the GIN floor: a symbol DeepEP / NcclEP needs is missing",
        r"undefined symbol: \w*nccl(?:GetLsaDevicePointer|Gin|DevComm|Window)\w*",
    ),
    _rule(
        "L801",
        CAUSE,
        "python",
        "A library could not be loaded (missing dependency, or built against another ABI)",
        r"cannot open shared object file|undefined symbol|file too short|wrong ELF class|"
        r"invalid ELF header|version [`'‘][\w.]+['’] not found|GLIBC_[\d.]+['’]? not found",
    ),
    # ---- sockets and interfaces
    _rule(
        "T802",
        CAUSE,
        "nccl",
        "No usable network interface for NCCL's sockets (NCCL_SOCKET_IFNAME)",
        r"(?i)no socket interface found|no usable listening interface|no interface found|"
        r"Bootstrap ?: ?no socket interface|NCCL_SOCKET_IFNAME[^\n]{0,80}(?:no |not |match)|"
        r"bootstrap[^\n]{0,40}no (?:usable )?interface|is neither AF_INET|"
        r"(?:unknown|invalid|bad|unsupported) (?:address )?family|socket family|"
        # EADDRNOTAVAIL on bind: the address (NCCL_COMM_ID, a pinned IP) is not on this host
        r"bind failed: Cannot assign requested address",
    ),
    # a peer that went away (its process died, or its host): what a crash elsewhere looks like
    # from here, so a symptom; a crash on any rank is the finding to fix first
    _rule(
        "T803",
        SYMPTOM,
        "nccl",
        "A peer closed its connection (its process or host went away)",
        r"Connection reset by peer|closed by remote peer|Broken pipe|remote process exited|"
        r"ncclRemoteError|remote process exiting prematurely",
    ),
    _rule(
        "T803",
        CAUSE,
        "nccl",
        "A peer could not be reached (refused, timed out, unreachable or not resolvable)",
        r"Connection refused|Connection timed out|No route to host|"
        r"Network is unreachable|Software caused connection abort|"
        r"socketStartConnect|socketFinalizeAccept|socketPoll(?:Connect)?\b|"
        r"(?i:connect(?:ion)? to [^\n]{0,80}failed)|"
        r"Temporary failure in name resolution|Name or service not known|"
        r"(?i:could not resolve (?:host|address))|getaddrinfo[^\n]{0,40}fail",
    ),
    # ---- topology
    _rule(
        "C801",
        CAUSE,
        "nccl",
        "NCCL topology file could not be read",
        # graph/xml.cc parses only files a user or host supplied (NCCL_TOPO_FILE, NCCL_GRAPH_FILE,
        # the hypervisor's virtual topology): its "XML Parse" errors are always about one of them
        r"(?i:\bXML Parse ?:|^graph/xml\.(?:cc|h):\d+ (?!-> )|"
        r"(?:topology|topo) (?:file|xml)[^\n]{0,80}(?:could not|cannot|fail|error|"
        r"No such|invalid|open)|(?:could not|cannot|failed to) (?:open|read|load|parse) (?:the )?"
        r"(?:XML )?topology|XML Import[^\n]{0,80}(?:error|fail|not found|invalid)|"
        r"xml(?:Load|Get|Find)\w*[^\n]{0,60}(?:fail|error))",
    ),
    # ---- GPU / CUDA
    _rule(
        "E801",
        CAUSE,
        "cuda",
        "GPU not visible or not usable by this process",
        r"(?i)no CUDA-capable device|CUDA_ERROR_NO_DEVICE|cudaErrorNoDevice|"
        r"No CUDA GPUs are available|invalid device ordinal|Duplicate GPU detected|"
        r"Driver/library version mismatch|CUDA driver version is insufficient|"
        r"NVIDIA driver on your system is too old|Failed to initialize NVML|"
        r"CUDA initialization: |cudaErrorInsufficientDriver|CUDA_ERROR_NOT_INITIALIZED|"
        r"Found no NVIDIA driver|all CUDA-capable devices are busy|"
        r"CUDA-capable device\(s\) is/are busy or unavailable|cudaErrorDevicesUnavailable|"
        r"CUDA_ERROR_DEVICE_UNAVAILABLE",
    ),
    _rule(
        "E803",
        CAUSE,
        "cuda",
        "CUDA out of memory",
        r"CUDA out of memory|OutOfMemoryError|(?i:cuda failure (?:\d+ )?'?out of memory)|"
        r"cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|CUBLAS_STATUS_ALLOC_FAILED|"
        r"out of memory[^\n]{0,40}(?:cuda|gpu|device)|(?:cuda|gpu|device)[^\n]{0,40}out of memory",
    ),
    _rule(
        "E802",
        CAUSE,
        "cuda",
        "CUDA device-side assert",
        r"device-side assert|cudaErrorAssert|CUDA_ERROR_ASSERT|"
        r"\.cu(?:h)?:\d+: [^\n]{0,80}Assertion [^\n]+ failed",
    ),
    _rule(
        "E202",
        CAUSE,
        "cuda",
        "CUDA illegal memory access or launch failure",
        r"illegal memory access|CUDA_ERROR_ILLEGAL_ADDRESS|cudaErrorIllegalAddress|"
        r"unspecified launch failure|CUDA_ERROR_LAUNCH_FAILED|illegal instruction was encountered|"
        r"misaligned address",
    ),
    # ---- DeepEP / NVSHMEM
    _rule(
        "D802",
        CAUSE,
        "deepep",
        "DeepEP / all-to-all timed out",
        r"(?i)DeepEP[^\n]{0,80}time ?out|timeout check failed|(?:dispatch|combine)[^\n]{0,40}"
        r"(?:CPU )?time ?out|VLLM_DEEPEP_TIMEOUT",
    ),
    _rule(
        "D801",
        CAUSE,
        "nvshmem",
        "NVSHMEM bootstrap or transport failed",
        r"(?i)nvshmem[^\n]{0,160}(?:fail|error|abort|not supported|unable|cannot)|"
        r"(?:fail|error)[^\n]{0,80}nvshmem|nvidia[_-]peermem|nv_peer_mem|IBGDA[^\n]{0,80}"
        r"(?:fail|error|not)|peer ?mem(?:ory)?[^\n]{0,40}(?:not loaded|missing|fail)",
    ),
    # ---- torch.distributed
    # a rank that waited too long: for a peer that died, hung or never came (a symptom)
    _rule(
        "E806",
        SYMPTOM,
        "torch",
        "A collective timed out (ProcessGroupNCCL watchdog)",
        r"Watchdog caught collective operation timeout|watchdog got stuck|"
        r"Some NCCL operations have failed or timed out|ran for \d+ milliseconds before timing out|"
        r"(?i:collective operation timeout)",
    ),
    _rule(
        "E805",
        CAUSE,
        "torch",
        "Rendezvous or store failed (timeout, port in use, unreachable master)",
        r"DistStoreError|waiting for clients|RendezvousTimeoutError|RendezvousConnectionError|"
        r"RendezvousClosedError|(?i:client socket has (?:timed out|failed to connect))|"
        r"TCPStore[^\n]{0,80}(?:time|fail|error)|store[^\n]{0,30}timed? ?out|"
        r"EADDRINUSE|address already in use|DistNetworkError|server socket has failed",
    ),
    # ---- NCCL error codes: symptoms; the cause is an earlier line
    _rule(
        "N204",
        SYMPTOM,
        "nccl",
        "NCCL returned an error",
        r"nccl(?:System|Internal|UnhandledCuda|Remote|InvalidUsage|InvalidArgument)Error|"
        r"NCCL error in:|NCCL error:|unhandled (?:system|cuda) error|internal error - please report|"
        r"(?i:NCCL communicator[^\n]{0,40}(?:abort|error))|ncclCommInitRank[^\n]{0,40}failed",
    ),
    # ---- engines
    _rule(
        "E804",
        SYMPTOM,
        "engine",
        "The engine failed to start",
        r"Engine core initialization failed|EngineCore failed to start|"
        r"Failed core proc|Scheduler hit an exception|scheduler is dead|"
        r"Received sigquit from a child|(?i:engine (?:process )?(?:died|failed to start))|"
        r"Worker[^\n]{0,40}(?:died|failed)|Executor[^\n]{0,40}(?:failed|error)",
    ),
    # ---- crashes
    _rule(
        "E203",
        SYMPTOM,
        "process",
        "A process died of a segmentation fault",
        r"Segmentation fault|SIGSEGV|Signal 11\b|exitcode\s*:?\s*-11\b|exit(?:ed with)? code 139\b|"
        r"\bsegfault at [0-9a-f]+ ip ",  # the kernel's own line (arch/x86/mm/fault.c)
    ),
    # SIGTERM is not here: it is how torchrun, the kubelet or Slurm stop a process (a stop, not
    # a crash), and torchrun sends it to the other workers once one has failed
    _rule(
        "E807",
        SYMPTOM,
        "process",
        "A process died of a signal",
        r"SIG(?:ABRT|KILL|BUS|ILL|FPE)\b|Signal (?:6|9|7|4|8)\b|"
        r"exitcode\s*:?\s*-(?:6|9|7|4|8)\b|Aborted \(core dumped\)|Bus error|"
        r"terminate called after throwing(?! an instance of 'c10::)|Fatal Python error|\bKilled\s*$|core dumped|"
        # a shell's job report: "line 1:  4169 Killed    python3 train.py"
        r"^(?:[\w/.-]+: )?(?:line \d+: )?\s*\d+ (?:Killed|Aborted|Bus error)\s{2,}\S|"
        r"exit(?:ed with)? code 13[47]\b",
    ),
)

# generic shapes: lines that are trouble whatever they say
_PY_EXC = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*(?P<exc>[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Timeout))"
    r"(?::\s?(?P<msg>.*))?$"
)
_PY_EXC_TRAIL = re.compile(
    r"^Traceback \(most recent call last\)|^During handling of the above exception|"
    r"^The above exception was the direct cause"
)
_NCCL_TRAIL = re.compile(r"^[\w./-]+\.(?:cc|cpp|cu|h):\d+ -> \d+")
_TORCH_LAST = re.compile(r"^Last error:\s*$")
_LIBFABRIC = re.compile(
    r"libfabric:\d+:\d+:(?P<prov>[\w;]*):(?P<sub>\w*):[^<]{0,200}<(?P<level>warn|error|info|debug|trace)>"
)
_UCX = re.compile(r"\bUCX\s+(?P<level>ERROR|WARN|FATAL)\b")
_LEVEL = re.compile(
    r"^(?:\[[^\]]{0,40}\]\s?)?(?P<level>ERROR|CRITICAL|FATAL|E)(?:\s|:|\d{4}\s|\]|$)|"
    r"\[(?P<tl>E|TRT-LLM\] \[E)\]|\b(?P<lv>ERROR|CRITICAL|FATAL)\b(?:\s|:|\]|\))"
)
_ERRORISH = re.compile(
    r"(?i)\b(?:error|errors|failed|failure|fatal|cannot|can't|unable to|denied|refused|"
    r"timed out|timeout|abort(?:ed|ing)?|unsupported|not supported|not found|no such file|"
    r"exception|traceback|segmentation|killed)\b"
)
_DEEPEP = re.compile(r"\[DeepEP\]|deep_ep|DeepEP")
_NVSHMEM = re.compile(r"(?i)nvshmem")
_OFI = re.compile(r"NET/OFI|aws-ofi-nccl|ofi-nccl|OFI ")


def classify(p: Parsed) -> Verdict | None:
    """The verdict on one line, or None when it is not trouble (most lines)."""
    hay = (f"{p.loc} {p.msg}" if p.loc else p.msg) if p.nccl else p.text
    if not hay:
        return None
    stripped = hay.strip()
    if _NCCL_TRAIL.match(stripped):
        # NCCL passing an error code up (N204), context for the line that caused it
        return Verdict(TRAIL, ERROR, "nccl", "N204", "NCCL returned an error")
    if _TORCH_LAST.match(stripped) or _PY_EXC_TRAIL.match(stripped):
        return Verdict(TRAIL, ERROR, "nccl" if p.nccl else "python")
    for rx in BENIGN_PATTERNS:
        if rx.search(hay):
            return Verdict(BENIGN, WARNING, _subsystem(p, hay))
    lf = _LIBFABRIC.search(hay)
    if lf is not None and lf["level"] not in ("warn", "error"):
        return None  # libfabric's info/debug lines
    for r in RULES:
        if r.rx.search(hay):
            level = r.level
            if p.nccl and p.level == "WARN" and r.role == CAUSE:
                level = ERROR
            return Verdict(r.role, level, r.subsystem, r.code, r.what)
    return _generic(p, hay, stripped, lf)


def _generic(p: Parsed, hay: str, stripped: str, lf: re.Match[str] | None) -> Verdict | None:
    if lf is not None:
        level = ERROR if lf["level"] == "error" else WARNING
        return Verdict(GENERIC, level, "libfabric", "N306", "libfabric reported a problem")
    if p.nccl:
        if p.level != "WARN" and not _ERRORISH.search(hay):
            return None
        if p.level != "WARN" and not re.search(r"(?i)\b(?:error|failed|failure)\b", hay):
            return None  # an INFO line that mentions a timeout knob etc.
        if _OFI.search(hay):
            return Verdict(GENERIC, WARNING, "ofi", "N306", "aws-ofi-nccl reported a problem")
        return Verdict(GENERIC, WARNING, "nccl", "N203", "NCCL warned")
    if m := _UCX.search(hay):
        level = WARNING if m["level"] == "WARN" else ERROR
        return Verdict(GENERIC, level, "ucx", "T809", "UCX reported a problem")
    if m := _PY_EXC.match(stripped):
        exc = m["exc"]
        if exc in ("KeyboardInterrupt", "SystemExit"):
            return Verdict(GENERIC, WARNING, "python", "E808", "The process was interrupted")
        if _NVSHMEM.search(hay) or _DEEPEP.search(hay):
            return Verdict(GENERIC, ERROR, "deepep", "D809", "DeepEP / NVSHMEM raised an error")
        return Verdict(GENERIC, ERROR, "python", "E808", f"Unrecognised Python {exc}")
    lv = _LEVEL.search(hay)
    if lv is not None:
        sub = "deepep" if (_DEEPEP.search(hay) or _NVSHMEM.search(hay)) else "engine"
        code = "D809" if sub == "deepep" else "E809"
        return Verdict(GENERIC, WARNING, sub, code, "An error-level log line")
    if (_NVSHMEM.search(hay) or "[DeepEP]" in hay) and _ERRORISH.search(hay):
        return Verdict(GENERIC, ERROR, "deepep", "D809", "DeepEP / NVSHMEM reported an error")
    return None


def _subsystem(p: Parsed, hay: str) -> str:
    if p.nccl:
        return "ofi" if _OFI.search(hay) else "nccl"
    if _LIBFABRIC.search(hay):
        return "libfabric"
    return "other"
