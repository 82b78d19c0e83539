"""Candidate lines -> per-rank facts and events. Exact upstream wordings only.

Sources of the wordings: NVIDIA/nccl src/init.cc, src/plugin/net.cc, src/gin/gin_host.cc,
src/misc/param.cc; aws/aws-ofi-nccl src/ (nccl_ofi_net.cpp, platform-aws.cpp, rdma/gin/,
nccl_ofi_gdrcopy.cpp); deepseek-ai/DeepEP deep_ep/__init__.py, csrc/kernels/backend/nccl.cu,
csrc/jit/compiler.hpp; vLLM cuda_communicator.py ("Using %s all2all manager."); TensorRT-LLM
fused_moe/communication/nccl_ep.py; PyTorch torch.distributed.elastic. See docs/logs.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from epdoctor.facts.logs.model import MAX_EVIDENCE, Event, LogLine, RankFacts
from epdoctor.facts.logs.prefix import attribute, clean
from epdoctor.facts.logs.scan import ChunkScanner

MAX_TEXT = 2048  # characters of a line kept for parsing and evidence
UNATTRIBUTED = "-"

_VERSION = re.compile(r"NCCL version (?P<v>\d+\.\d+\.\d+)(?:\+cuda(?P<cuda>[\d.]+))?")
_ENV = re.compile(r"\b(?P<name>[A-Z][A-Z0-9_]+) set by environment to (?P<val>.*?)\.?$")
_PLUGIN_ENV = re.compile(r"Plugin name set by env to (?P<val>\S+)")
_PROVIDER = re.compile(
    r"Selected provider is (?P<prov>[^,]+), fabric is (?P<fab>[^\s(]+)(?: \(found (?P<n>\d+) nics\))?"
)
_NETWORK = re.compile(r"\bUsing network (?P<net>\S(?:.*\S)?)\s*$")
_NOT_FOUND = re.compile(r"\bNET/Plugin: Could not find: (?P<lib>\S+)")
_LOADED_NET = re.compile(r"NET/Plugin: Loaded net plugin (?P<name>.+?) \(v(?P<v>\d+)\)")
_INIT_NET = re.compile(r"\bInitialized NET plugin (?P<name>\S(?:.*\S)?)\s*$")
_FAILED_NET = re.compile(r"\bFailed to initialize NET plugin (?P<name>\S(?:.*\S)?)\s*$")
_OFI_VERSION = re.compile(r"NET/OFI Initializing aws-ofi-nccl (?P<v>\S+)")
_LIBFABRIC = re.compile(r"NET/OFI Using Libfabric version (?P<v>\S+)")
_PLATFORM = re.compile(r"NET/OFI Plugin selected platform: (?P<p>\S+)")
_PROTOCOL = re.compile(r"NET/OFI Using transport protocol (?P<p>\S+)")
_GIN_ASSIGNED = re.compile(
    r"(?:Assigned GIN plugin (?P<a>\S+) to comm|GIN/Plugin: Assigned plugin (?P<b>\S+) type (?P<t>\d+) to comm)"
)
_MANAGER = re.compile(r"Using (?P<m>\S+) all2all manager\.")
_QP_CAP = re.compile(r"\[DeepEP\] EFA detected: capping num_allocated_qps (?P<a>\d+) -> (?P<b>\d+)")
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+),? in (?P<fn>\S+)')

# (needle, event kind): a needle found in a line's message raises that event.
_SIMPLE: tuple[tuple[str, str], ...] = (
    ("NET/IB : No device found", "ib_no_device"),
    ("Failed to initialize any NET plugin", "no_net_plugin"),
    ("aws-ofi-nccl initialization failed", "ofi_init_failed"),
    ("NET/OFI Initializing plugin failed", "ofi_init_failed"),
    ("EFA provider requires at least libfabric version", "ofi_init_failed"),
    ("GIN is disabled.", "gin_off"),
    ("GIN not supported.", "gin_off"),
    ("No GIN-capable devices found.", "gin_off"),
    ("GIN requires the OFI NET plugin to be active", "gin_off"),
    ("Failed to initialize any GIN plugin", "gin_off"),
    ("Cannot get backend version for invalid GIN type", "gin_off"),
    ("GIN requires GDRCopy 2.5+", "gin_plugin_error"),
    ("Failed to initialize GDRCopy", "gin_plugin_error"),
    ("GIN only supports RDMA transport protocol", "gin_plugin_error"),
    ("GIN plugin does not support FI_MR_ENDPOINT", "gin_plugin_error"),
    ("cntr_open_ext failed", "gin_plugin_error"),
    ("gin GDAKI: createContext failed", "gin_plugin_error"),
    ("gin GDAKI: createContext on a non-GDA-capable environment", "gin_plugin_error"),
    ("gin GDAKI: not supported on this platform", "gin_plugin_error"),
    ("host_register_iomem failed", "gin_plugin_error"),
    ("gin GDAKI: createContext done", "gdaki_context"),
    ("Next sequence number is in use", "gin_ring_overflow"),
    ("NCCL GIN is unavailable", "deepep_gin_unavailable"),
    ("Duplicate NCCL runtime found", "deepep_duplicate_nccl"),
    ("Invalid NCCL versions:", "deepep_nccl_mismatch"),
    ("Prior to NCCL 2.31, NCCL compile-time and runtime versions must be the same", "deepep_nccl_mismatch"),
    ("NVCC compilation failed", "deepep_jit_error"),
    ("NVCC PTX compilation failed", "deepep_jit_error"),
    ("Arguments mismatch for instruction", "deepep_jit_error"),
    ("CUDA_ERROR_NO_BINARY_FOR_GPU", "deepep_jit_error"),
    ("nccl-ep is not installed.", "trtllm_nccl_ep_missing"),
    ("an illegal memory access was encountered", "cuda_fault"),
    ("unspecified launch failure", "cuda_fault"),
    ("CUDA_ERROR_LAUNCH_FAILED", "cuda_fault"),
    ("CUDA_ERROR_ILLEGAL_ADDRESS", "cuda_fault"),
    ("Segmentation fault", "segfault"),
    ("SIGSEGV", "segfault"),
    ("ChildFailedError", "child_failed"),
)
_GDRCOPY_WORDS = ("GDRCopy", "gdrcopy", "libgdrapi", "gdr_open", "gdr handle")


class LogParser:
    """Feed bytes (or pre-scanned candidate lines); read ranks() and the events returned."""

    def __init__(self) -> None:
        self._ranks: dict[str, RankFacts] = {}
        self._alias: dict[str, str] = {}  # outer label or pid -> NCCL rank key
        self._scanners: dict[str, ChunkScanner] = {}
        self.lines_parsed = 0

    # ---- input -----------------------------------------------------------------
    def feed(self, data: bytes, source: str = "-") -> list[Event]:
        sc = self._scanners.get(source)
        if sc is None:
            sc = self._scanners[source] = ChunkScanner()
        return self.feed_candidates(source, sc.feed(data))

    def flush(self, source: str | None = None) -> list[Event]:
        out: list[Event] = []
        for name in [source] if source else list(self._scanners):
            sc = self._scanners.get(name)
            if sc is not None:
                out += self.feed_candidates(name, sc.flush())
        return out

    def feed_candidates(self, source: str, lines: Iterable[tuple[int, bytes]]) -> list[Event]:
        out: list[Event] = []
        for lineno, raw in lines:
            out += self.parse_line(source, lineno, raw)
        return out

    def ranks(self) -> list[RankFacts]:
        return sorted(self._ranks.values(), key=_rank_sort_key)

    # ---- one line ----------------------------------------------------------------
    def parse_line(self, source: str, lineno: int, raw: bytes) -> list[Event]:
        text = clean(raw, MAX_TEXT)
        if not text:
            return []
        self.lines_parsed += 1
        att = attribute(text)
        rank = self._rank_for(att, source)
        if rank.first_line is None:
            rank.first_line = lineno
            rank.source = source
        rank.last_line = lineno
        line = LogLine(source, lineno, text)
        return self._classify(rank, att.message, line)

    def _rank_for(self, att, source: str) -> RankFacts:
        if att.host is not None:
            key = f"{att.host}:{att.pid}"
            r = self._ranks.get(key)
            if r is None:
                r = self._ranks[key] = RankFacts(key, host=att.host, pid=att.pid)
            for label in att.labels:
                if label not in r.labels:
                    r.labels.append(label)
                self._alias.setdefault(label, key)
            if att.process_pid is not None:
                self._alias.setdefault(f"pid {att.process_pid}", key)
            self._alias.setdefault(f"pid {att.pid}", key)
            if att.dev is not None:
                r.devs.add(att.dev)
            return r
        key = None
        if att.process_pid is not None:
            key = self._alias.get(f"pid {att.process_pid}")
        if key is None and att.labels:
            key = self._alias.get(att.labels[-1])
        if key is None:
            key = " ".join(att.labels) if att.labels else (source if source != "-" else UNATTRIBUTED)
            if att.process_pid is not None:
                key = f"{key} pid={att.process_pid}"
        r = self._ranks.get(key)
        if r is None:
            r = self._ranks[key] = RankFacts(key, labels=list(att.labels), pid=att.process_pid)
            if att.process_pid is not None:
                self._alias.setdefault(f"pid {att.process_pid}", key)
        return r

    def _classify(self, r: RankFacts, msg: str, line: LogLine) -> list[Event]:
        ev: list[Event] = []

        def add(kind: str, **data: object) -> None:
            ev.append(Event(kind, r.rank_key, line, data))

        is_warn = " NCCL WARN " in f" {msg}" or msg.startswith("NCCL WARN")
        if is_warn:
            r.warn_count += 1
            if len(r.warns) < MAX_EVIDENCE:
                r.warns.append(line.cite())
        if "NCCL version " in msg and (m := _VERSION.search(msg)):
            if r.nccl_version is None:
                r.nccl_version, r.cuda = m["v"], m["cuda"]
                r.evidence["nccl_version"] = line
            add("nccl_version", version=m["v"])
        if "set by env" in msg:
            if m := _ENV.search(msg):
                r.env[m["name"]] = m["val"].strip()
                add("env", name=m["name"], value=m["val"].strip())
                if m["name"] == "NCCL_GIN_TYPE" and m["val"].strip().isdigit():
                    r.gin_type = int(m["val"].strip())
            elif m := _PLUGIN_ENV.search(msg):
                r.env["NCCL_NET_PLUGIN"] = m["val"]
        if "lugin" in msg:
            self._plugin_line(r, msg, line, add)
        if "Using network " in msg and (m := _NETWORK.search(msg)):
            r.network = m["net"]
            if m["net"] not in r.networks:
                r.networks.append(m["net"])
            r.evidence["network"] = line
            add("network", network=m["net"])
        if "NET/OFI " in msg:
            self._ofi_line(r, msg, line, add)
        if "all2all manager" in msg and (m := _MANAGER.search(msg)):
            r.all2all_manager = m["m"]
            r.evidence["all2all_manager"] = line
            add("all2all_manager", manager=m["m"])
        if "[DeepEP]" in msg and (m := _QP_CAP.search(msg)):
            add("deepep_qp_cap", before=int(m["a"]), after=int(m["b"]))
        if '", line ' in msg and (m := _FRAME.search(msg)):
            add("frame", file=m["file"], fn=m["fn"])
        if "Too Many Requests" in msg and "429" in msg:
            add("hf_429", hub="huggingface" in msg)
        if "GDAKI-CQE" in msg and re.search(r"status 9\b", msg):
            add("gdaki_cqe_9")
        if any(w in msg for w in _GDRCOPY_WORDS) and len(r.gdrcopy) < MAX_EVIDENCE:
            r.gdrcopy.append(line.cite())
            add("gdrcopy")
        for needle, kind in _SIMPLE:
            if needle in msg:
                add(kind)
        if is_warn and not ev:
            add("nccl_warn")
        return ev

    def _plugin_line(self, r: RankFacts, msg: str, line: LogLine, add) -> None:
        if m := _NOT_FOUND.search(msg):
            lib = m["lib"]
            if "libnccl-net" in lib or not lib.startswith("libnccl-"):
                r.net_plugin_not_found.append(lib)
                add("net_plugin_not_found", lib=lib)
        elif m := _LOADED_NET.search(msg):
            r.net_plugin = m["name"]
            r.evidence["net_plugin"] = line
            add("net_plugin_loaded", name=m["name"])
        elif m := _INIT_NET.search(msg):
            r.net_plugin = r.net_plugin or m["name"]
            add("net_plugin_init", name=m["name"])
        elif m := _FAILED_NET.search(msg):
            r.net_plugin_failed.append(m["name"])
            add("net_plugin_failed", name=m["name"])
        elif "Assigned NET plugin " in msg:
            name = msg.split("Assigned NET plugin ", 1)[1].removesuffix(" to comm").strip()
            add("net_plugin_assigned", name=name)
        if m := _GIN_ASSIGNED.search(msg):
            r.gin_plugin = m["a"] or m["b"]
            if m["t"]:
                r.gin_type = int(m["t"])
            r.evidence["gin_plugin"] = line
            add("gin_assigned", name=r.gin_plugin)

    def _ofi_line(self, r: RankFacts, msg: str, line: LogLine, add) -> None:
        if m := _PROVIDER.search(msg):
            r.ofi_provider = m["prov"].strip()
            r.ofi_fabric = m["fab"]
            r.ofi_nics = int(m["n"]) if m["n"] else None
            r.evidence["ofi_provider"] = line
            add("ofi_provider", provider=r.ofi_provider, fabric=r.ofi_fabric, nics=r.ofi_nics)
        elif m := _OFI_VERSION.search(msg):
            r.ofi_version = m["v"]
        elif m := _LIBFABRIC.search(msg):
            r.libfabric_version = m["v"]
        elif m := _PLATFORM.search(msg):
            r.ofi_platform = m["p"]
        elif m := _PROTOCOL.search(msg):
            r.ofi_protocol = m["p"]


def _rank_sort_key(r: RankFacts) -> tuple:
    return (r.host is None, r.host or "", min(r.devs) if r.devs else 99, r.pid or 0, r.rank_key)
