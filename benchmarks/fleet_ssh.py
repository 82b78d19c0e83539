#!/usr/bin/env python3
"""Fleet diagnosis over SSH against baselines measured in the same run.

    sudo .venv/bin/python benchmarks/fleet_ssh.py [--sizes 1,8,32,64] [--ansible PATH]

Starts N real sshd hosts on loopback (tests/sshd_fixture.py: ed25519 keys, a /bin/sh user)
and times, for each N, the same node probe (probes/node_probe.py) collected by:

* epdoctor: the diagnose pipeline in this process (flags -> SshTargets -> ``diagnose_many`` ->
  fleet drift: connect, host-key check, one exec, parse, every node check), and the whole
  ``epdoctor diagnose --json`` command (interpreter start, imports and the report included);
* sequential: one OpenSSH ``ssh host python3 - < probe`` after another;
* bare fan-out: paramiko in a thread pool: connect, one exec, read; nothing else;
* ansible: ``ansible all -m raw`` (default forks, and -f 64) running the same probe
  (when ansible is found: --ansible, or `ansible` on PATH).

Prints seconds (median of --runs) and ratios against bare fan-out and ansible -f 64, and the
round trips per host epdoctor used (channels opened; goal 1). Needs root (it creates the test
user and starts sshd) and Debian openssh-server.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

import paramiko  # noqa: E402
from sshd_fixture import USER, SshLab, sshd_available  # noqa: E402

from epdoctor.checks.base import Context  # noqa: E402
from epdoctor.checks.drift import drift_findings  # noqa: E402
from epdoctor.cli import build_parser  # noqa: E402
from epdoctor.diagnose import diagnose_many  # noqa: E402
from epdoctor.options import to_target_spec  # noqa: E402
from epdoctor.targets import ssh_cli  # noqa: E402
from epdoctor.targets.base import ProbeOptions  # noqa: E402
from epdoctor.targets.probe_script import node_probe_source  # noqa: E402

PROBE_ARGS = ["--deadline", "60"]


def run_epdoctor(lab: SshLab, specs: list[str]) -> tuple[float, float]:
    """The diagnose pipeline in this process: flags -> targets -> fan-out -> checks -> drift."""
    args = build_parser().parse_args(["diagnose", *lab.cli_args(*specs)])
    t0 = time.perf_counter()
    targets = ssh_cli.from_spec(to_target_spec(args))
    diags = diagnose_many(targets, Context(), ProbeOptions(timeout_s=60), parallel=len(specs))
    drift_findings(diags) if len(diags) > 1 else None
    elapsed = time.perf_counter() - t0
    errors = [d.result.error for d in diags if d.result.error]
    if errors:
        raise SystemExit(f"epdoctor run failed: {errors[:3]}")
    return elapsed, statistics.mean(t.execs for t in targets)


def run_cli(lab: SshLab, specs: list[str]) -> float:
    cmd = [sys.executable, "-m", "epdoctor", "diagnose", "--json", "--parallel", str(len(specs))]
    cmd += lab.cli_args(*specs)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, cwd=REPO, check=False)
    elapsed = time.perf_counter() - t0
    if r.returncode not in (0, 1):
        raise SystemExit(f"epdoctor diagnose exited {r.returncode}: {r.stderr[-500:]!r}")
    return elapsed


def run_bare(lab: SshLab, ports: list[int]) -> float:
    key = paramiko.PKey.from_path(str(lab.key))
    src = node_probe_source()
    cmd = shlex.join(["python3", "-", *PROBE_ARGS])

    def one(port: int) -> int:
        c = paramiko.SSHClient()
        c.load_host_keys(str(lab.known_hosts))
        c.connect("127.0.0.1", port, USER, pkey=key, allow_agent=False, look_for_keys=False)
        stdin, stdout, _ = c.exec_command(cmd)
        stdin.write(src)
        stdin.channel.shutdown_write()
        n = len(stdout.read())
        c.close()
        return n

    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(len(ports)) as pool:
        sizes = list(pool.map(one, ports))
    elapsed = time.perf_counter() - t0
    assert all(s > 1000 for s in sizes), sizes
    return elapsed


def ssh_opts(lab: SshLab) -> list[str]:
    return [
        "-i",
        str(lab.key),
        "-o",
        f"UserKnownHostsFile={lab.known_hosts}",
        "-o",
        "BatchMode=yes",
    ]


def run_sequential(lab: SshLab, ports: list[int]) -> float:
    src = node_probe_source()
    t0 = time.perf_counter()
    for port in ports:
        r = subprocess.run(
            [
                "ssh",
                *ssh_opts(lab),
                "-p",
                str(port),
                f"{USER}@127.0.0.1",
                "python3",
                "-",
                *PROBE_ARGS,
            ],
            input=src,
            capture_output=True,
            check=True,
        )
        assert len(r.stdout) > 1000
    return time.perf_counter() - t0


def run_ansible(ansible: str, lab: SshLab, ports: list[int], forks: int | None) -> float:
    inv = lab.root / "inventory.ini"
    inv.write_text(
        "[fleet]\n"
        + "".join(f"h{p} ansible_host=127.0.0.1 ansible_port={p}\n" for p in ports)
        + f"[fleet:vars]\nansible_user={USER}\nansible_ssh_private_key_file={lab.key}\n"
        + f"ansible_ssh_common_args='-o UserKnownHostsFile={lab.known_hosts}'\n"
    )
    probe_file = lab.root / "probe.py"
    probe_file.write_bytes(node_probe_source())
    # raw has no stdin: the same probe goes in the command line, base64 so no quoting bites
    b64 = subprocess.run(["base64", "-w0", str(probe_file)], capture_output=True, check=True).stdout
    remote = f"echo {b64.decode()} | base64 -d | python3 - {' '.join(PROBE_ARGS)}"
    cmd = [ansible, "all", "-i", str(inv), "-m", "raw", "-a", remote, "-o"]
    if forks:
        cmd += ["-f", str(forks)]
    env = dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="True", ANSIBLE_STDOUT_CALLBACK="oneline")
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, env=env, check=False)
    elapsed = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"ansible failed: {r.stdout[-400:]!r} {r.stderr[-400:]!r}")
    return elapsed


def median(fn, runs: int) -> float:
    return statistics.median(fn() for _ in range(runs))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,8,32,64")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ansible", default=shutil.which("ansible"))
    ap.add_argument("--no-sequential-above", type=int, default=64)
    args = ap.parse_args()
    why = sshd_available()
    if why:
        print(f"cannot run: {why}", file=sys.stderr)
        return 2
    sizes = [int(x) for x in args.sizes.split(",")]
    lab = SshLab(Path(tempfile.mkdtemp(prefix="epd-fleetbench-")))
    rows = []
    try:
        for name in range(max(sizes)):
            lab.start_host(f"h{name:03d}")
        probe_kb = len(node_probe_source()) / 1024
        print(
            f"{os.cpu_count()} CPUs, loopback, probe {probe_kb:.0f} KB, {args.runs} runs (median)"
        )
        for n in sizes:
            hosts = lab.hosts[:n]
            specs = [h.spec for h in hosts]
            ports = [h.port for h in hosts]
            trips: list[float] = []

            def epd(specs=specs, trips=trips) -> float:
                t, rt = run_epdoctor(lab, specs)
                trips.append(rt)
                return t

            row = {"N": n, "epdoctor": median(epd, args.runs)}
            row["epdoctor_cli"] = median(lambda specs=specs: run_cli(lab, specs), args.runs)
            row["bare"] = median(lambda ports=ports: run_bare(lab, ports), args.runs)
            if n <= args.no_sequential_above:
                row["sequential"] = median(lambda ports=ports: run_sequential(lab, ports), 1)
            if args.ansible:
                row["ansible"] = median(lambda p=ports: run_ansible(args.ansible, lab, p, None), 1)
                row["ansible_f64"] = median(
                    lambda p=ports: run_ansible(args.ansible, lab, p, 64), 1
                )
            row["round_trips"] = max(trips)
            rows.append(row)
            print(_line(row), flush=True)
    finally:
        lab.stop()
    return 0


def _line(r: dict) -> str:
    parts = [f"N={r['N']:>3}", f"epdoctor {r['epdoctor']:.2f}s", f"(cli {r['epdoctor_cli']:.2f}s)"]
    parts.append(f"bare fan-out {r['bare']:.2f}s")
    if "sequential" in r:
        parts.append(f"sequential ssh {r['sequential']:.2f}s")
    if "ansible" in r:
        parts.append(f"ansible {r['ansible']:.2f}s, -f 64 {r['ansible_f64']:.2f}s")
    parts.append(f"| epdoctor/bare {r['epdoctor'] / r['bare']:.2f}x")
    parts.append(f"cli/bare {r['epdoctor_cli'] / r['bare']:.2f}x")
    if "sequential" in r:
        parts.append(f"epdoctor/sequential {r['epdoctor'] / r['sequential']:.2f}x")
    if "ansible" in r:
        parts.append(f"epdoctor/ansible-f64 {r['epdoctor'] / r['ansible_f64']:.2f}x")
    parts.append(f"round trips/host {r['round_trips']:g}")
    return "  ".join(parts)


if __name__ == "__main__":
    raise SystemExit(main())
