"""Shared test set-up: tests/ helper modules importable, and fixtures several modules use.

- ``ssh_lab`` (tests/sshd_fixture.py): real OpenSSH servers on loopback, one lab per module.
- ``kube_api``: the Kubernetes API emulator (tests/kube_emulator.py), one per module, with a
  kubeconfig for it; a module's own fixture puts its objects in it.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sshd_fixture import ssh_lab  # noqa: F401  (a fixture: every module may use it)

# tests/kube_image/ is a stand-in image's filesystem (DeepEP's test_*.py among it), not tests
collect_ignore_glob = ["kube_image/*"]


@pytest.fixture(scope="module")
def kube_api(tmp_path_factory):
    pytest.importorskip("kmock")
    from kube_emulator import running

    with running(tmp_path_factory.mktemp("kube")) as emu:
        yield emu
