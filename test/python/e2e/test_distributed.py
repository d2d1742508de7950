"""Compiled models under PyTorch's data-parallel engines: two gloo processes on localhost.

DistributedDataParallel: Dynamo's DDP optimizer splits the graph at DDP's
gradient-bucket boundaries and compiles each piece with fusegrad, so each
bucket's gradients are ready (and its all-reduce starts) while the backward
of earlier layers still runs, as with Inductor. FSDP2 (`fully_shard`): Dynamo
breaks the graph at the sharding hooks (with any backend) and fusegrad
compiles the compute in between. (FSDP1 refuses to run on a CPU-only machine by itself.) Gradients
must equal the eager engine's.
"""
from __future__ import annotations

import copy
import os
import socket
import warnings

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")

WORLD, LAYERS, WIDTH = 2, 4, 512  # one 1 MiB Linear weight per DDP bucket


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS))
        self.head = torch.nn.Linear(WIDTH, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return self.head(x)


def _ddp(model: torch.nn.Module) -> torch.nn.Module:
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, bucket_cap_mb=1)


def _fsdp2(model: Net) -> torch.nn.Module:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (WORLD,))
    # Dynamo breaks the graph at a sharded submodule's call (so not one inside the loop,
    # where a break would leave the whole forward to eager)
    fully_shard(model.head, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def _full(grad: torch.Tensor) -> torch.Tensor:
    """A gradient as a plain tensor (FSDP2's are sharded DTensors)."""
    return grad.full_tensor() if hasattr(grad, "full_tensor") else grad.clone()


def _worker(rank: int, port: int, engine: str, results) -> None:
    import fusegrad

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        model = Net()
        reference = copy.deepcopy(model)
        graphs = []

        def backend(gm, example_inputs):
            graphs.append(gm)
            return fusegrad.fusegrad_backend(gm, example_inputs)
        wrap = {"ddp": _ddp, "fsdp2": _fsdp2}[engine]
        wrapped, wrapped_reference = wrap(model), wrap(reference)
        compiled = torch.compile(wrapped, backend=backend)
        torch.manual_seed(1 + rank)  # each rank its own batch: the all-reduce matters
        x = torch.randn(8, WIDTH)
        grads = []
        with warnings.catch_warnings():
            warnings.simplefilter("error", fusegrad.FusegradFallbackWarning)
            for m, fn in ((wrapped, compiled), (wrapped_reference, wrapped_reference)):
                opt, steps = torch.optim.SGD(m.parameters(), lr=0.1), []
                for _ in range(3):
                    opt.zero_grad()
                    fn(x).pow(2).mean().backward()
                    steps.append([_full(p.grad) for p in m.parameters()])
                    opt.step()
                grads.append(steps)
        error = max((g - e).abs().max().item() for got, want in zip(*grads)
                    for g, e in zip(got, want))
        results.put((rank, len(graphs), error))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(engine: str) -> list[tuple[int, int, float]]:
    """(rank, graphs compiled, largest gradient difference from eager) per rank."""
    results = mp.get_context("spawn").SimpleQueue()
    mp.spawn(_worker, args=(_free_port(), engine, results), nprocs=WORLD, join=True)
    outcomes = sorted(results.get() for _ in range(WORLD))
    assert [rank for rank, _, _ in outcomes] == list(range(WORLD))
    for rank, _, error in outcomes:
        assert error < 1e-6, f"rank {rank}: gradients differ from eager {engine} by {error}"
    return outcomes


def test_ddp_gradients_match_eager_ddp_with_one_graph_per_bucket():
    for rank, graphs, _ in _run("ddp"):
        assert graphs > 1, f"rank {rank}: the graph was not split at bucket boundaries"


def test_fsdp2_gradients_match_eager_fsdp2():
    for rank, graphs, _ in _run("fsdp2"):
        assert graphs >= 1, f"rank {rank}: nothing was compiled"
