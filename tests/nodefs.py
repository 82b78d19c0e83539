"""Build fake node file trees for the real node probe (`--root DIR`).

The probe reads a node's files under --root, so tests lay out the files an EFA node has
(/sys/module/*/version, /sys/class/infiniband/*, /opt/amazon/efa_installed_packages, plugin
and NCCL shared libraries, site-packages) and run the real probe over them. The shared libraries
are real ELF files compiled here with gcc, exporting the symbols and carrying the strings the
real ones do, so the probe's ELF reader and binary scan run for real.

Values follow shared/reference: efa-node-samples.md (installer manifest shape, device names
rdmap85s0.., hw_counters names) and upstream-facts.md (plugin exports per aws-ofi-nccl version,
NCCL version strings, the `GDRCopy support not available at compile time` string). Where no real
sample exists (a full p5en tree) the tree is composed from those facts.

nvidia-smi and fi_info cannot run here: tests put small stand-in scripts on PATH that print the
real H200 CSV row (tests/fixtures/h200-node/01_nvidia_smi.txt) and a real `fi_info --version`
shape; that is the one mocked part.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROBE = REPO / "probes" / "node_probe.py"
_LIB_CACHE = Path(tempfile.gettempdir()) / "epdoctor-test-elf"

GIN_V121 = [
    "ncclNetPlugin_v6",
    "ncclNetPlugin_v12",
    "ncclGinPlugin_v11",
    "ncclGinPlugin_v13",
    "ncclGinPlugin_v14",
    "ncclTunerPlugin_v3",
]
GIN_V120 = ["ncclNetPlugin_v6", "ncclNetPlugin_v12", "ncclGinPlugin_v11", "ncclGinPlugin_v13"]
NO_GIN = ["ncclNetPlugin_v6", "ncclNetPlugin_v10"]


def have_gcc() -> bool:
    return shutil.which("gcc") is not None


def elf_lib(symbols: list[str], strings: list[str] = ()) -> Path:
    """A real shared library exporting `symbols` and containing `strings` (cached by content)."""
    key = hashlib.sha1(json.dumps([sorted(symbols), list(strings)]).encode()).hexdigest()[:16]
    out = _LIB_CACHE / f"lib{key}.so"
    if out.exists():
        return out
    _LIB_CACHE.mkdir(parents=True, exist_ok=True)
    src = ["#include <stddef.h>"]
    src += [f"void {s}(void) {{}}" for s in symbols]
    for i, text in enumerate(strings):
        lit = json.dumps(text)
        src.append(f"__attribute__((used)) const char epd_str_{i}[] = {lit};")
    c = out.with_suffix(".c")
    c.write_text("\n".join(src) + "\n")
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    subprocess.run(["gcc", "-shared", "-fPIC", "-O0", "-o", str(tmp), str(c)], check=True)
    tmp.replace(out)
    return out


def nccl_lib(version: str, lsa: bool = True, cuda: str = "13.0") -> Path:
    syms = ["ncclCommInitRank", "ncclGetVersion", "ncclDevCommCreate", "ncclAllReduce"]
    if lsa:
        syms.append("ncclGetLsaDevicePointer")
    return elf_lib(syms, [f"NCCL version {version}+cuda{cuda}"])


def plugin_lib(symbols: list[str], gdrcopy: bool = True) -> Path:
    strings = ["NET/OFI Selected provider is %s, fabric is %s (found %d nics)"]
    if not gdrcopy:
        strings.append("GDRCopy support not available at compile time")
    return elf_lib(symbols, strings)


class FakeNode:
    """A node's file tree under `root`, plus the PATH/env the probe runs with."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)  # an empty node is still a folder
        self.bin = self.root.parent / (self.root.name + "-bin")
        self.bin.mkdir(parents=True, exist_ok=True)
        self.env: dict[str, str] = {"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": "/root"}

    # -- files --------------------------------------------------------------
    def write(self, path: str, text: str) -> Path:
        p = self.root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p

    def copy(self, path: str, src: Path) -> Path:
        p = self.root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, p)
        return p

    def symlink(self, path: str, target: str) -> None:
        p = self.root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.is_symlink() or p.exists():
            p.unlink()
        p.symlink_to(target)

    def tool(self, name: str, stdout: str, rc: int = 0) -> None:
        script = self.bin / name
        script.write_text(f"#!/bin/sh\ncat <<'EPD_EOF'\n{stdout}\nEPD_EOF\nexit {rc}\n")
        script.chmod(0o755)

    # -- node pieces --------------------------------------------------------
    def instance(self, itype: str) -> FakeNode:
        self.write("/sys/class/dmi/id/product_name", itype + "\n")
        self.write("/sys/class/dmi/id/sys_vendor", "Amazon EC2\n")
        return self

    def gpus(self, n: int = 8, name: str = "NVIDIA H200", driver: str = "580.95.05") -> FakeNode:
        rows = [
            f"{i}, {name}, {driver}, 9.0, 00000000:{0x59 + i:02X}:00.0, 143771 MiB"
            for i in range(n)
        ]
        self.tool("nvidia-smi", "\n".join(rows))
        self.write(
            "/proc/driver/nvidia/version",
            f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {driver}  Release Build  (dvs-builder@U22)\n"
            "GCC version:  gcc version 12.3.0\n",
        )
        self.module("nvidia", driver)
        return self

    def registry_dwords(self, value: str) -> FakeNode:
        self.write(
            "/proc/driver/nvidia/params",
            f'ResmanDebugLevel: 4294967295\nRegistryDwords: "{value}"\n',
        )
        return self

    def modprobe(self, name: str, text: str) -> FakeNode:
        self.write(f"/etc/modprobe.d/{name}", text)
        return self

    def module(self, name: str, version: str | None) -> FakeNode:
        d = self.root / "sys/module" / name
        d.mkdir(parents=True, exist_ok=True)
        if version is not None:
            (d / "version").write_text(version + "\n")
        return self

    def gdrdrv(self, version: str = "2.5", dev: bool = True) -> FakeNode:
        self.module("gdrdrv", version)
        if dev:
            self.write("/dev/gdrdrv", "")
        return self

    def efa(
        self, count: int = 16, driver: str = "3.3.0g", hw_counters: bool = True, rdma: bool = True
    ) -> FakeNode:
        self.module("efa", driver)
        self.module("ib_core", None)
        names = [f"rdmap{85 + i}s0" for i in range(count)]
        for n in names:
            base = f"/sys/class/infiniband/{n}"
            drv = self.root / "sys/bus/pci/drivers/efa"
            drv.mkdir(parents=True, exist_ok=True)
            (drv / "module").mkdir(exist_ok=True)
            (drv / "module" / "version").write_text(driver + "\n")
            dev = self.root / base.lstrip("/") / "device"
            dev.mkdir(parents=True, exist_ok=True)
            self.symlink(f"{base}/device/driver", str(drv))
            self.write(f"{base}/ports/1/state", "4: ACTIVE\n")
            self.write(f"{base}/ports/1/rate", "200 Gb/sec (4X HDR)\n")
            if hw_counters:
                counters = [
                    "tx_bytes",
                    "tx_pkts",
                    "rx_bytes",
                    "rx_pkts",
                    "rx_drops",
                    "send_bytes",
                    "recv_bytes",
                ]
                if rdma:
                    counters += ["rdma_read_bytes", "rdma_write_bytes", "rdma_write_recv_bytes"]
                for c in counters:
                    self.write(f"{base}/ports/1/hw_counters/{c}", "0\n")
        return self

    def installer(
        self, version: str = "1.50.0", libfabric: str = "2.6.0amzn1.0", plugin: str = "1.21.1-1"
    ) -> FakeNode:
        pkgs = [
            f"libfabric1-aws_{libfabric}_amd64",
            f"libfabric-aws-bin_{libfabric}_amd64",
            f"libnccl-ofi_{plugin}_amd64",
            "rdma-core_64.0-1_amd64",
            "efa_3.3.0-1_amd64",
        ]
        self.write(
            "/opt/amazon/efa_installed_packages",
            f"# EFA installer version: {version}\n# Debug packages installed: no\n# Packages installed:\n"
            + " ".join(pkgs)
            + "\n",
        )
        return self

    def plugin(
        self,
        symbols: list[str] = GIN_V121,
        gdrcopy: bool = True,
        dir: str = "/opt/amazon/ofi-nccl/lib",
    ) -> FakeNode:
        lib = self.copy(f"{dir}/libnccl-net-ofi.so", plugin_lib(symbols, gdrcopy))
        self.symlink(f"{dir}/libnccl-net.so", lib.name)
        return self

    def nccl(self, path: str, version: str, lsa: bool = True) -> FakeNode:
        self.copy(path, nccl_lib(version, lsa))
        return self

    def gdrapi(self, version: str = "2.5") -> FakeNode:
        self.copy(
            f"/usr/lib/x86_64-linux-gnu/libgdrapi.so.{version}",
            elf_lib(["gdr_open", "gdr_pin_buffer_v2"]),
        )
        self.symlink("/usr/lib/x86_64-linux-gnu/libgdrapi.so.2", f"libgdrapi.so.{version}")
        return self

    def python_env(
        self,
        prefix: str,
        dists: dict[str, str],
        nccl: tuple[str, bool] | None = None,
        py: str = "3.12",
    ) -> Path:
        sp = f"{prefix}/lib/python{py}/site-packages"
        self.write(f"{prefix}/bin/python3", "")
        for name, ver in dists.items():
            dist = name.replace("-", "_")
            self.write(
                f"{sp}/{dist}-{ver}.dist-info/METADATA",
                f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n",
            )
        if nccl:
            self.copy(f"{sp}/nvidia/nccl/lib/libnccl.so.2", nccl_lib(nccl[0], nccl[1]))
        return self.root / sp.lstrip("/")

    def trtllm(
        self,
        prefix: str,
        version: str = "1.3.0rc24",
        backend: bool = True,
        nccl_ep: str | None = "0.1.0+cuda13.3",
        nccl: str = "2.30.4",
    ) -> Path:
        """A TensorRT-LLM env: the NcclEP module (or not) and nccl4py's libnccl_ep (or not)."""
        dists = {
            "tensorrt-llm": version,
            "torch": "2.11.0",
            "nvidia-nccl-cu13": nccl,
            "nccl4py": "0.3.1",
        }
        sp = self.python_env(prefix, dists, nccl=(nccl, True))
        fm = sp / "tensorrt_llm/_torch/modules/fused_moe"
        (fm / "communication").mkdir(parents=True, exist_ok=True)
        (fm / "communication" / "deep_ep.py").write_text("")
        if backend:
            (fm / "communication" / "nccl_ep.py").write_text("")
            (fm / "nccl_ep_utils.py").write_text('_MIN_NCCL_RUNTIME_VERSION = "2.30.4"\n')
        (sp / "nccl").mkdir(exist_ok=True)
        if nccl_ep:
            lib = sp / "nccl/ep/lib/libnccl_ep.so"
            lib.parent.mkdir(parents=True, exist_ok=True)
            lib.write_bytes(
                elf_lib(["ncclEpCreateGroup"], [f"NCCL EP version {nccl_ep}"]).read_bytes()
            )
        return sp

    def nccl_conf(self, text: str) -> FakeNode:
        self.write("/etc/nccl.conf", text)
        return self

    # -- run ----------------------------------------------------------------
    def probe(
        self, *args: str, extra_env: dict[str, str] | None = None, use_root: bool = True
    ) -> str:
        env = dict(self.env)
        env.update(extra_env or {})
        root = ["--root", str(self.root)] if use_root else []
        proc = subprocess.run(
            [sys.executable, str(PROBE), *root, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        )
        return proc.stdout


def p5en_node(root: Path, **kw: object) -> FakeNode:
    """A healthy p5en.48xlarge on the CPU-proxy recipe of the seeds (installer 1.50.0)."""
    n = FakeNode(root)
    n.instance("p5en.48xlarge").gpus().registry_dwords(
        "PeerMappingOverride=1;"
    ).efa().gdrdrv().gdrapi()
    n.installer().plugin()
    n.nccl("/usr/lib/x86_64-linux-gnu/libnccl.so.2.30.4", "2.30.4")
    n.symlink("/usr/lib/x86_64-linux-gnu/libnccl.so.2", "libnccl.so.2.30.4")
    n.python_env(
        "/opt/vllm/venv",
        {
            "torch": "2.11.0",
            "nvidia-nccl-cu13": "2.30.4",
            "nvidia-nvshmem-cu13": "3.6.5",
            "vllm": "0.26.1rc1.dev1000+g14617c2b6",
            "deep-ep": "2.0.0",
        },
        nccl=("2.30.4", True),
    )
    n.env.update(
        {
            "NCCL_GIN_TYPE": "2",
            "NCCL_GIN_ENABLE": "1",
            "EP_REUSE_NCCL_COMM": "0",
            "NCCL_SOCKET_IFNAME": "^docker,lo,veth",
            "FI_PROVIDER": "efa",
            "NCCL_NET_PLUGIN": "/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so",
            "NCCL_GIN_PLUGIN": "/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so",
        }
    )
    return n
