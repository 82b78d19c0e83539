"""The environment a workload sees: its env plus NCCL's own config files.

NCCL reads /etc/nccl.conf and ~/.nccl.conf (or NCCL_CONF_FILE) at init and
exports each NAME=VALUE it finds unless the variable is already set, so a
knob set there counts like one in the environment; the environment wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EffectiveEnv:
    values: dict[str, str]
    sources: dict[str, str] = field(default_factory=dict)  # name -> "env" or a conf path
    origin: str = "probe"  # "probe" (the probe's own env) or "pid N"

    def get(self, name: str) -> str | None:
        return self.values.get(name)

    def where(self, name: str) -> str:
        src = self.sources.get(name, "env")
        return "environment" if src == "env" else src


def parse_nccl_conf(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, _, v = line.partition("=")
        k = k.strip()
        if k and " " not in k:
            out[k] = v.strip().strip('"').strip("'")
    return out


def effective_env(
    env: dict[str, str], confs: dict[str, str], origin: str = "probe"
) -> EffectiveEnv:
    values = dict(env)
    sources = {k: "env" for k in env}
    # Files earlier in this order are read first by NCCL; the first to set a name wins.
    for path in sorted(confs, key=lambda p: (not p.startswith(("~", "/root", "/home")), p)):
        for k, v in parse_nccl_conf(confs[path]).items():
            if k not in values:
                values[k] = v
                sources[k] = path
    return EffectiveEnv(values, sources, origin)
