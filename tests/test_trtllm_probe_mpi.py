"""The TensorRT-LLM probe's MPI communicator over torch.distributed: NcclEP's bootstrap
(`mpi_comm().Split(pp_rank, moe_ep_rank)`, then `.bcast(unique_id, root=0)`) gets the EP group
of the torchrun world, not a one-rank MPI world per process.

Real torch.distributed (gloo, four processes under torch.distributed.run); TensorRT-LLM itself
cannot run here, so a stand-in package imports `mpi_comm` by name the way its modules do.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

from launch_helpers import TORCH_PY, free_port, needs_torch

PROBE_DIR = Path(__file__).resolve().parent.parent / "probes"

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    sys.path[:0] = [sys.argv[1], sys.argv[2]]
    import torch.distributed as dist
    from tensorrt_llm._torch import nccl_ep  # binds mpi_comm by name, before the shim
    import trtllm_nccl_ep_probe as probe

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    probe.install_mpi_comm(dist)
    # two pipeline stages of two EP ranks each; the EP rank (the key) reverses the world order
    got = nccl_ep.bootstrap(pp_rank=rank // 2, moe_ep_rank=1 - rank % 2)
    with open(os.path.join(sys.argv[3], "result-%d.json" % rank), "w") as fh:
        json.dump({"rank": rank, **got}, fh)
    dist.destroy_process_group()
    """
)

UTILS = "def mpi_comm():\n    raise RuntimeError('the one-rank MPI world of a torchrun process')\n"
NCCL_EP = textwrap.dedent(
    """
    from tensorrt_llm._utils import mpi_comm

    def bootstrap(pp_rank, moe_ep_rank):
        comm = mpi_comm().Split(pp_rank, moe_ep_rank)
        uid = "uid-of-world-rank-%s" % os.environ["RANK"] if comm.Get_rank() == 0 else None
        uid = comm.bcast(uid, root=0)
        sizes = comm.allgather(comm.Get_rank())
        comm.Barrier()
        return {"ep_rank": comm.Get_rank(), "ep_size": comm.Get_size(), "uid": uid, "all": sizes}
    """
)


@needs_torch
def test_ncclep_bootstrap_gets_the_torchrun_ep_group(tmp_path):
    pkg = tmp_path / "fake" / "tensorrt_llm"
    (pkg / "_torch").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_utils.py").write_text(UTILS)
    (pkg / "_torch" / "__init__.py").write_text("")
    (pkg / "_torch" / "nccl_ep.py").write_text("import os\n" + NCCL_EP)
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    p = subprocess.run(
        [TORCH_PY, "-m", "torch.distributed.run", "--nproc-per-node", "4",
         "--master-port", str(free_port()), str(script), str(tmp_path / "fake"), str(PROBE_DIR),
         str(tmp_path)],
        capture_output=True, text=True, timeout=180,
        # a clean environment: no RANK / MASTER_* left by another test of this process
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)},
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    got = {
        d["rank"]: d for d in (json.loads(f.read_text()) for f in tmp_path.glob("result-*.json"))
    }
    assert sorted(got) == [0, 1, 2, 3], (p.stdout[-2000:], p.stderr[-2000:])
    for rank, d in got.items():
        assert d["ep_size"] == 2  # its pipeline stage's EP group, not a one-rank world
        assert d["ep_rank"] == 1 - rank % 2  # ordered by the key, as MPI_Comm_split orders
        # the unique id comes from the group's rank 0: world rank 1 in stage 0, 3 in stage 1
        assert d["uid"] == f"uid-of-world-rank-{2 * (rank // 2) + 1}"
        assert d["all"] == [0, 1]
