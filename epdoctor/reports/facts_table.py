"""A node's facts as text: the key facts as (label, value) rows for the text and Markdown
reports, and one fact's value as a line (the TUI's tour and targets screens)."""

from __future__ import annotations

from typing import Any

# How the reports, the fleet table, the tour and the targets screen name a fact (one word
# for one thing everywhere: a kernel module that is absent is "not loaded", in every view).
LABELS = {
    "instance_type": "instance type", "gpus": "GPUs", "driver": "NVIDIA driver",
    "efa_ko": "efa.ko", "efa_devices": "EFA devices", "hw_counters": "EFA hw counters",
    "efa_installer": "EFA installer", "gdrdrv": "gdrdrv", "dev_gdrdrv": "/dev/gdrdrv",
    "libfabric": "libfabric", "libfabric_files": "libfabric files", "plugins": "aws-ofi-nccl",
    "nccl": "NCCL", "ldconfig_libnccl": "ldconfig libnccl.so.2", "python": "python",
    "in_container": "in a container",
}  # fmt: skip
NOT_LOADED = frozenset({"efa_ko", "gdrdrv"})  # kernel modules: None is "not loaded"


def label(key: str) -> str:
    return LABELS.get(key, key.replace("_", " "))


def absent(key: str) -> str:
    """What every view says for a fact the node reported as absent (None)."""
    return "not loaded" if key in NOT_LOADED else "none"


def fact_text(value: Any, key: str = "") -> str:
    """A fact value as one line (the summary is JSON-ready: dicts, lists, scalars); an absent
    value reads as the reports say it ("not loaded" for a kernel module, else "none")."""
    if value is None:
        return absent(key)
    if isinstance(value, dict) and set(value) == {"unknown"}:
        return f"unknown ({value['unknown']})"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return "; ".join(fact_text(v) for v in value) or "none"
    if isinstance(value, dict):
        return ", ".join(f"{k} {fact_text(v)}" for k, v in value.items())
    return str(value)


def _v(value: Any, key: str = "") -> str:
    if isinstance(value, dict) and "unknown" in value:
        return f"unknown ({value['unknown']})"
    if value is None:
        return absent(key)
    if isinstance(value, list):
        return ", ".join(str(x) for x in value) or "none"
    return str(value)


def fact_rows(facts: dict[str, Any]) -> list[tuple[str, str]]:
    if not facts or "hostname" not in facts:
        # The probe did not run (e.g. a Pending pod): no node facts to show.
        return [(k, _v(v)) for k, v in _side_rows(facts)]
    rows = [
        (
            "host",
            f"{facts.get('hostname')} ({facts.get('os')}, kernel {facts.get('kernel')})"
            + (", in a container" if facts.get("in_container") else ""),
        ),
        ("instance type", _v(facts.get("instance_type"))),
        ("GPUs", _v(facts.get("gpus"))),
        ("NVIDIA driver", _v(facts.get("driver"))),
        ("efa.ko", _v(facts.get("efa_ko"), "efa_ko")),
        (
            "EFA devices",
            f"{facts.get('efa_devices')}"
            + (
                ""
                if facts.get("hw_counters") is None
                else f" (hw_counters: {'yes' if facts.get('hw_counters') else 'no'})"
            ),
        ),
        (
            "gdrdrv",
            _v(facts.get("gdrdrv"), "gdrdrv")
            + (
                ""
                if facts.get("dev_gdrdrv") is None
                else f" (/dev/gdrdrv {'present' if facts.get('dev_gdrdrv') else 'absent'})"
            ),
        ),
        ("EFA installer", _v(facts.get("efa_installer"))),
        (
            "libfabric",
            _v(facts.get("libfabric"))
            + (
                f" (files: {', '.join(facts['libfabric_files'])})"
                if facts.get("libfabric_files")
                else ""
            ),
        ),
    ]
    plugins = facts.get("plugins") or []
    rows.append(
        (
            "aws-ofi-nccl",
            "; ".join(f"{p['path']} (GIN {', '.join(p['gin']) or 'none'})" for p in plugins)
            or "none",
        )
    )
    nccl = facts.get("nccl") or []
    rows.append(("NCCL", "; ".join(f"{n['version']} at {n['path']}" for n in nccl) or "none found"))
    if facts.get("ldconfig_libnccl"):
        rows.append(("ldconfig libnccl.so.2", str(facts["ldconfig_libnccl"])))
    for env in facts.get("python") or []:
        pkgs = {k: v for k, v in env.items() if k != "site_packages"}
        rows.append(
            (
                f"python {env['site_packages']}",
                ", ".join(f"{k} {v}" for k, v in pkgs.items()) or "none",
            )
        )
    return rows


def _side_rows(facts: dict[str, Any]) -> list[tuple[str, Any]]:
    """One line per domain a target reported besides the probe (e.g. a pod's state)."""
    rows = []
    for domain, value in sorted((facts or {}).items()):
        if isinstance(value, dict):
            brief = {
                k: v for k, v in value.items() if isinstance(v, (str, int, float, bool)) and v != ""
            }
            rows.append((domain, ", ".join(f"{k}={v}" for k, v in list(brief.items())[:8]) or "-"))
    return rows
