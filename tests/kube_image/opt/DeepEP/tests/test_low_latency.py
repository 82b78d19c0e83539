"""Stands in for DeepEP's tests/test_low_latency.py in the emulator's test image: the stand-in of
elastic/test_ep.py, whose flags it takes (see tests/kube_image/README.md)."""

import os
import runpy

runpy.run_path(
    os.path.join(os.path.dirname(__file__), "elastic", "test_ep.py"), run_name="__main__"
)
