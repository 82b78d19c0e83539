"""knowledge/stack/: the one place for instances and version floors, read by the plan, the node
checks and the log analyzer alike."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from epdoctor.knowledge import stack

PKG = Path(__file__).resolve().parent.parent / "epdoctor"


def _version_literals(folder: Path, base: Path = PKG.parent) -> list[str]:
    """Version("...") / parse_version("...") calls on a literal: a floor written in the code."""
    out = []
    for py in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(py.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            arg = node.args[0]
            if name in ("Version", "parse_version") and isinstance(arg, ast.Constant):
                out.append(f"{py.relative_to(base)}:{node.lineno}: {name}({arg.value!r})")
    return out


@pytest.mark.parametrize("folder", ["checks", "plan"])
def test_no_version_floor_is_written_in_checks_or_plan(folder):
    text = "\n".join(p.read_text(encoding="utf-8") for p in (PKG / folder).rglob("*.py"))
    assert 'Version("2.' not in text
    found = _version_literals(PKG / folder)
    assert not found, "read the floor from knowledge.stack:\n" + "\n".join(found)


def test_the_finder_sees_a_version_literal(tmp_path):
    (tmp_path / "x.py").write_text(
        "from packaging.version import Version\n"
        'F = Version("2.30.4")\n'
        "G = Version(stack.floor('gdrcopy'))\n"
        'H = v.parse_version("1.50.0")\n'
    )
    assert _version_literals(tmp_path, tmp_path) == [
        "x.py:2: Version('2.30.4')",
        "x.py:4: parse_version('1.50.0')",
    ]


def test_checks_and_plan_read_the_same_floors():
    from epdoctor.checks import efa, engines, env, host, nccl, plugin

    gda = stack.transport("efa-gda")
    assert str(nccl.GDA_FLOOR) == gda.nccl_min == stack.gin_type_since()["5"]
    assert str(nccl.PROXY_FLOOR) == str(stack.floor("nccl_deepep_v2"))
    assert str(engines.TRTLLM_NCCL_FLOOR) == stack.engine("tensorrt-llm").nccl_floor
    assert str(plugin.LIBFABRIC_GDA) == gda.libfabric_min
    assert str(efa.EFA_GDA_DRIVER) == gda.efa_driver_min
    assert stack.floor("efa_installer") == efa.INSTALLER_FLOOR
    assert stack.floor("gdrcopy") == host.GDRCOPY_FLOOR
    assert stack.gin_type_since() == env.GIN_TYPE_SINCE
    for t in stack.transports().values():
        if t.gin:  # a transport's NCCL floor is the first NCCL with its GIN type
            assert t.nccl_min == stack.gin_type_since()[str(t.gin_type)], t.key


def test_the_plans_pins_state_the_floors_the_checks_use():
    """pins.toml is the plan's prose; the numbers in it are the floors the checks compare."""
    pins = {(p["component"], p["kind"], p["code"]): str(p["value"]) for p in stack.pins()}
    gda = stack.transport("efa-gda")
    assert pins[("EFA installer", "floor", "H124")] == str(stack.floor("efa_installer"))
    assert pins[("libfabric", "floor", "N104")].startswith(f">= {gda.libfabric_min} ")
    assert pins[("efa.ko (host)", "floor", "H122")] == f">= {gda.efa_driver_min}"
    assert pins[("gdrcopy / gdrdrv (host)", "floor", "H111")].startswith(
        f">= {stack.floor('gdrcopy')} "
    )
    assert pins[("nvidia-nvshmem-cu13", "pin", "L103")] == str(stack.floor("nvshmem"))
    libfabric_pin = pins[("libfabric", "pin", "N104")]
    assert re.search(rf"needs >= {re.escape(str(stack.floor('libfabric')))}\)", libfabric_pin)


@pytest.mark.parametrize(
    ("itype", "efa", "counters"),
    [
        ("p5.48xlarge", 32, False),
        ("ml.p5en.48xlarge", 16, True),
        ("p6-b300.48xlarge", 16, True),
        ("p6-b200.48xlarge", 8, True),
    ],
)
def test_one_instance_table_for_the_checks_and_the_plan(itype, efa, counters):
    spec = stack.instance_spec(itype)
    assert spec is not None and (spec.efa, spec.efa_comp_counters) == (efa, counters)
    assert stack.resolve_instance(spec.type) is spec


def test_an_instance_the_table_lacks_is_unknown_not_guessed():
    assert stack.instance_spec("g5.48xlarge") is None
    assert stack.instance_spec("") is None and stack.instance_spec(None) is None
    assert stack.instance_spec("p5en") is None  # a family without a size is no instance type
