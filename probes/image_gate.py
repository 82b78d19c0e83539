#!/usr/bin/env python3
"""epdoctor image gate: is this image the one the plan pins? Read-only.

Self-contained on purpose: python3 standard library only (3.6+), nothing of epdoctor, so
the plan's Dockerfile can run it as its last layer and a pod of the image can run it
again after the in-pod DeepEP build:

    python3 image_gate.py --expect image-gate.json [--stage build|pod] [--json]

It writes one check per line (or one JSON document) and exits 0 when every check passed,
1 when one failed or could not be decided (an unknown is never a pass), 2 when it could
not run. Each check carries the epdoctor trap code that explains it (`epdoctor explain`).

What it looks at: the libnccl.so.2 a process of the engine maps once it has imported torch
(the engine's own first import), its version string and its GIN/LSA exports; the GIN
plugin's export table and whether it was built with GDRCopy; the staged DeepEP fork's
commit and ElasticBuffer (and, in a pod after the build, `import deep_ep`); TensorRT-LLM's
NcclEP factory and nccl4py's libnccl_ep; the nvshmem host library; the engine, Dynamo and
torch versions; the files the kernel test runs.
"""

import json
import mmap
import os
import re
import struct
import subprocess
import sys

GATE_VERSION = 1
PASS, FAIL, WARN, UNKNOWN, INFO, SKIP = "pass", "fail", "warn", "unknown", "info", "skip"
NCCL_VERSION_RX = re.compile(rb"NCCL version (\d+\.\d+\.\d+)")
GDR_MISSING = re.compile(rb"GDRCopy support not available at compile time")
# ncclGetLsaDevicePointer: first in NCCL v2.29.2-1 (DeepEP-V2 calls it); ncclDevCommCreate:
# the device-communicator API the GIN kernels of DeepEP-V2 and NcclEP are built on.
NCCL_GIN_SYMBOLS = ("ncclGetLsaDevicePointer", "ncclDevCommCreate")
SHA = re.compile(r"^[0-9a-f]{40}$")

# The loaded libnccl.so.2 as the engine's process maps it: the engine imports torch first,
# and torch's libtorch_cuda.so needs libnccl.so.2, so the loader's choice (LD_PRELOAD,
# LD_LIBRARY_PATH, torch's runpath, the ldconfig cache) is made by the time it returns.
MAPS_SNIPPET = (
    "import json\n"
    "err = ''\n"
    "try:\n"
    "    import torch\n"
    "    tv = torch.__version__\n"
    "except Exception as e:\n"
    "    tv = None; err = '%s: %s' % (type(e).__name__, e)\n"
    "libs = []\n"
    "for line in open('/proc/self/maps'):\n"
    "    p = line.split()[-1] if len(line.split()) >= 6 else ''\n"
    "    if '/libnccl.so' in p and p not in libs:\n"
    "        libs.append(p)\n"
    "print(json.dumps({'torch': tv, 'error': err, 'libs': libs}))\n"
)


def check(code, status, title, *evidence):
    return {"code": code, "status": status, "title": title, "evidence": [e for e in evidence if e]}


def run_py(python, code, timeout=180):
    """Run a snippet in the engine's python; (rc, stdout, stderr) with rc None on a timeout."""
    try:
        p = subprocess.run(
            [python, "-c", code],
            capture_output=True,
            timeout=timeout,
            env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
        )
    except subprocess.TimeoutExpired:
        return None, "", "timed out after %ds" % timeout
    except OSError as exc:
        return 127, "", str(exc)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def last_line(text):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def elf_dynsyms(path):
    """Defined global/weak dynamic symbols of an ELF file (no binutils needed)."""
    with open(path, "rb") as f:
        ident = f.read(16)
        if ident[:4] != b"\x7fELF" or ident[4] != 2:
            raise ValueError("not a 64-bit ELF file")
        end = "<" if ident[5] == 1 else ">"
        hdr = struct.unpack(end + "HHIQQQIHHHHHH", f.read(48))
        shoff, shentsize, shnum = hdr[5], hdr[10], hdr[11]
        secs = []
        for i in range(shnum):
            f.seek(shoff + i * shentsize)
            s = struct.unpack(end + "IIQQQQIIQQ", f.read(shentsize)[:64])
            secs.append((s[1], s[4], s[5], s[6], s[9]))
        names = set()
        for stype, off, size, link, entsize in secs:
            if stype != 11 or not entsize:  # SHT_DYNSYM
                continue
            f.seek(secs[link][1])
            strtab = f.read(secs[link][2])
            f.seek(off)
            data = f.read(size)
            for j in range(0, size - entsize + 1, entsize):
                name_off, info, _, shndx = struct.unpack(end + "IBBH", data[j : j + 8])
                if shndx == 0 or (info >> 4) not in (1, 2):
                    continue
                names.add(strtab[name_off : strtab.find(b"\0", name_off)].decode("ascii", "replace"))
        return names


def scan(path, rx):
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            m = rx.search(mm)
            return m.group(m.lastindex or 0).decode("ascii", "replace") if m else None
        finally:
            mm.close()


def dist_version(python, name):
    rc, out, err = run_py(
        python,
        "import importlib.metadata as m, json\n"
        "try:\n    print(json.dumps(m.version(%r)))\n"
        "except m.PackageNotFoundError:\n    print('null')\n" % name,
        timeout=60,
    )
    if rc != 0:
        return None, last_line(err) or "python exited %s" % rc
    return json.loads(out.strip().splitlines()[-1]), ""


def dist_file(python, dist, rel):
    """Where a file of an installed distribution is, without importing the package."""
    rc, out, _ = run_py(
        python,
        "import importlib.metadata as m\n"
        "try:\n    print(m.distribution(%r).locate_file(%r))\n"
        "except m.PackageNotFoundError:\n    print('')\n" % (dist, rel),
        timeout=60,
    )
    path = out.strip().splitlines()[-1] if rc == 0 and out.strip() else ""
    return path if path and os.path.exists(path) else ""


# ------------------------------------------------------------------ checks ---


def nccl_checks(x, python):
    want = x.get("nccl") or ""
    code = x.get("nccl_code") or "L101"
    rc, out, err = run_py(python, MAPS_SNIPPET)
    if rc != 0 or not out.strip():
        return [check(code, UNKNOWN, "could not see which libnccl.so.2 the engine's python loads",
                      "%s -c 'import torch' exited %s: %s" % (python, rc, last_line(err)))]
    doc = json.loads(out.strip().splitlines()[-1])
    libs = [p for p in doc["libs"] if os.path.exists(p)]
    if doc["torch"] is None:
        return [check(code, UNKNOWN, "torch does not import, so the NCCL it loads is unknown",
                      doc["error"])]
    if not libs:
        return [check(code, FAIL, "importing torch mapped no libnccl.so.2",
                      "torch %s" % doc["torch"])]
    out_checks = []
    real = sorted({os.path.realpath(p) for p in libs})
    if len(real) > 1:
        out_checks.append(check("L104", FAIL, "the engine's process maps several libnccl.so.2",
                                *real))
    lib = libs[0]
    try:
        version = scan(lib, NCCL_VERSION_RX)
        syms = elf_dynsyms(lib)
    except (OSError, ValueError, struct.error) as exc:
        return [*out_checks, check(code, UNKNOWN, "cannot read %s" % lib, str(exc))]
    missing = [s for s in NCCL_GIN_SYMBOLS if s not in syms]
    ev = "loaded: %s (NCCL %s)" % (lib, version or "version string not found")
    if version is None:
        out_checks.append(check(code, UNKNOWN, "the loaded libnccl.so.2 names no version", ev))
    elif want and version != want:
        out_checks.append(check(code, FAIL, "the engine loads NCCL %s, the plan pins %s"
                                % (version, want), ev))
    else:
        out_checks.append(check(code, PASS, "the engine loads NCCL %s" % version, ev))
    if missing:
        out_checks.append(check("L101", FAIL, "the loaded libnccl.so.2 lacks the GIN/LSA exports",
                                ev, "missing: " + ", ".join(missing)))
    else:
        out_checks.append(check("L101", PASS, "GIN/LSA exports present", ev))
    return out_checks


def plugin_checks(x):
    path, symbol = x.get("plugin") or "", x.get("plugin_symbol") or ""
    if not path:
        return []
    if not os.path.exists(path):
        return [check("N101", FAIL, "the GIN plugin the plan names is not in the image", path)]
    out = []
    try:
        syms = elf_dynsyms(path)
        gin = sorted(s for s in syms if s.startswith("ncclGinPlugin_v"))
        out.append(check("N102", PASS if symbol in syms else FAIL,
                         ("the plugin exports %s" if symbol in syms
                          else "the plugin does not export %s") % symbol,
                         path, "GIN tables: " + (", ".join(gin) or "none")))
    except (OSError, ValueError, struct.error, IndexError) as exc:
        out.append(check("N102", UNKNOWN, "cannot read the plugin's symbols", path, str(exc)))
    try:
        no_gdr = scan(path, GDR_MISSING)
    except (OSError, ValueError) as exc:
        return [*out, check("N103", UNKNOWN, "cannot read %s" % path, str(exc))]
    out.append(check("N103", FAIL if no_gdr else PASS,
                     "the plugin was built without GDRCopy" if no_gdr
                     else "the plugin was built with GDRCopy", path))
    return out


def git_head(root):
    """The checked-out commit of a git work tree, read from .git without running git."""
    gitdir = os.path.join(root, ".git")
    if os.path.isfile(gitdir):  # a worktree or submodule: "gitdir: PATH"
        with open(gitdir) as f:
            gitdir = os.path.join(root, f.read().split(":", 1)[1].strip())
    with open(os.path.join(gitdir, "HEAD")) as f:
        head = f.read().strip()
    if not head.startswith("ref:"):
        return head
    ref = head.split(None, 1)[1]
    p = os.path.join(gitdir, ref)
    if os.path.exists(p):
        with open(p) as f:
            return f.read().strip()
    with open(os.path.join(gitdir, "packed-refs")) as f:
        for line in f:
            if line.strip().endswith(" " + ref):
                return line.split()[0]
    raise ValueError("cannot resolve " + ref)


def deepep_checks(x, python, stage):
    d = x.get("deepep")
    if not d:
        return []
    root, want = d["root"], d["commit"]
    if not os.path.isdir(root):
        return [check("D406", FAIL, "no DeepEP source at %s" % root)]
    out = []
    try:
        head = git_head(root)
    except (OSError, ValueError, IndexError) as exc:
        head = ""
        out.append(check("D406", UNKNOWN, "cannot read the staged DeepEP commit", str(exc)))
    if head:
        ok = head == want
        out.append(check("D406", PASS if ok else FAIL,
                         "DeepEP is the pinned fork commit" if ok
                         else "the staged DeepEP is not the pinned fork commit",
                         "%s at %s, pinned %s" % (root, head, want)))
    elastic = os.path.join(root, "deep_ep", "buffers", "elastic.py")
    has = os.path.exists(elastic) and "class ElasticBuffer" in open(elastic).read()
    out.append(check("E201", PASS if has else FAIL,
                     "the staged DeepEP has ElasticBuffer" if has
                     else "the staged DeepEP has no ElasticBuffer (not the V2 source)", elastic))
    build = d.get("build_script") or ""
    if build:
        ok = os.access(build, os.X_OK)
        out.append(check("B410", PASS if ok else FAIL,
                         "the in-pod DeepEP build script is in the image" if ok
                         else "the in-pod DeepEP build script is missing", build))
    if stage == "pod":
        rc, o, err = run_py(python, "import deep_ep; assert hasattr(deep_ep, 'ElasticBuffer'), "
                            "'ElasticBuffer missing'; print(deep_ep.__file__)")
        out.append(check("E201", PASS if rc == 0 else FAIL,
                         "import deep_ep works with ElasticBuffer" if rc == 0
                         else "import deep_ep fails (run the in-pod DeepEP build first)",
                         last_line(o) if rc == 0 else last_line(err)))
    else:
        out.append(check("B410", SKIP, "import deep_ep is checked in the pod, after the in-pod build"))
    return out


def trtllm_checks(x, python, stage):
    t = x.get("trtllm")
    if not t:
        return []
    out = []
    factory = dist_file(python, "tensorrt_llm", t["factory_file"])
    out.append(check("E101", PASS if factory else FAIL,
                     "TensorRT-LLM ships the NcclEP factory" if factory
                     else "this TensorRT-LLM has no NcclEP factory", factory or t["factory_file"]))
    lib = dist_file(python, "nccl4py", t["nccl_ep_lib"])
    out.append(check("E102", PASS if lib else FAIL,
                     "nccl4py ships libnccl_ep" if lib else "nccl4py without libnccl_ep",
                     lib or t["nccl_ep_lib"]))
    if stage == "pod":
        rc, _o, err = run_py(python, "import nccl.ep\nimport %s\nprint('ok')" % t["factory_module"])
        out.append(check("E101", PASS if rc == 0 else FAIL,
                         "the NcclEP factory and nccl.ep import" if rc == 0
                         else "the NcclEP factory or nccl.ep does not import", last_line(err)))
    else:
        out.append(check("E101", SKIP, "the factory import is checked in a pod (it needs MPI and a GPU)"))
    return out


def version_checks(x, python):
    out = []
    for dist, want, code, how in x.get("versions", []):
        got, err = dist_version(python, dist)
        if err:
            out.append(check(code, UNKNOWN, "cannot read the %s version" % dist, err))
        elif got is None:
            out.append(check(code, FAIL, "%s is not installed" % dist))
        elif how == "equals" and "+" in want and "+" not in got and got == want.split("+")[0]:
            out.append(local_label_check(python, dist, got, want, code))
        else:
            ok = (want in got) if how == "contains" else (got == want)
            out.append(check(code, PASS if ok else FAIL,
                             "%s %s" % (dist, got) if ok
                             else "%s is %s, the plan pins %s" % (dist, got, want)))
    return out


VERSION_PY = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.M)


def local_label_check(python, dist, got, want, code):
    """A pin with a local label (torch 2.11.0+cu130) against metadata without one: a wheel from
    PyPI cannot carry the label in its metadata, so the package's own version.py (torch's
    `__version__ = '2.11.0+cu130'`) decides, read as text; unreadable is unknown, never a pass."""
    path = dist_file(python, dist, "%s/version.py" % dist.replace("-", "_"))
    text = ""
    if path:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read(65536)
        except OSError:
            text = ""
    m = VERSION_PY.search(text)
    if m is None:
        return check(code, UNKNOWN, "%s is %s: its build (+%s) cannot be read" % (
            dist, got, want.split("+", 1)[1]), path or "no %s/version.py" % dist)
    full = m.group(1)
    if full == want:
        return check(code, PASS, "%s %s" % (dist, full), "%s (the metadata says %s)" % (path, got))
    return check(code, FAIL, "%s is %s, the plan pins %s" % (dist, full, want), path)


def file_checks(x):
    out = []
    for path, code, what in x.get("files", []):
        ok = os.path.isfile(path)
        out.append(check(code, PASS if ok else FAIL,
                         "%s is in the image" % what if ok else "%s is not in the image" % what, path))
    return out


def run_gate(x, stage, python):
    checks = []
    checks += nccl_checks(x, python)
    checks += plugin_checks(x)
    checks += deepep_checks(x, python, stage)
    checks += trtllm_checks(x, python, stage)
    checks += version_checks(x, python)
    checks += file_checks(x)
    return checks


def parse_args(argv):
    args = {"expect": None, "stage": "build", "json": False, "python": "python3"}
    it = iter(argv)
    for a in it:
        if a in ("--expect", "--stage", "--python"):
            args[a[2:]] = next(it, None)
        elif a == "--json":
            args["json"] = True
        elif a in ("-h", "--help"):
            sys.stdout.write(__doc__)
            sys.exit(0)
        else:
            raise ValueError("unknown argument %r" % a)
    if not args["expect"]:
        raise ValueError("--expect FILE is required")
    if args["stage"] not in ("build", "pod"):
        raise ValueError("--stage is build or pod")
    return args


def main(argv):
    try:
        args = parse_args(argv)
        with open(args["expect"]) as f:
            expect = json.load(f)
        if not isinstance(expect, dict) or expect.get("gate") != GATE_VERSION:
            raise ValueError("%s is not an image-gate expectation file" % args["expect"])
    except (OSError, ValueError) as exc:
        sys.stderr.write("image_gate: %s\n" % exc)
        return 2
    checks = run_gate(expect, args["stage"], args["python"])
    bad = [c for c in checks if c["status"] in (FAIL, UNKNOWN)]
    if args["json"]:
        doc = {"gate": "epdoctor-image-gate", "gate_version": GATE_VERSION, "stage": args["stage"],
               "engine": expect.get("engine"), "transport": expect.get("transport"),
               "checks": checks}
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    else:
        for c in checks:
            sys.stdout.write("%-7s %s  %s\n" % (c["status"].upper(), c["code"], c["title"]))
            for e in c["evidence"]:
                sys.stdout.write("             %s\n" % e)
        sys.stdout.write("IMAGE GATE %s (%d of %d checks failed or undecided)\n"
                         % ("FAILED" if bad else "PASSED", len(bad), len(checks)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
