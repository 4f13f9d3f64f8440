"""Data-parallel training: the model wrapped in ``DistributedDataParallel`` with a timed communication hook.

``parallel="data"``: every rank holds the whole graph and features; the batch source
(:mod:`gnnbench.sampling.sources`) gives each rank its disjoint share of every global batch;
DDP all-reduces the gradients during backward, through the hook ``Flags.grad_compression``
selects (:mod:`gnnbench.parallel.compression`), timed and counted per step.

:func:`wrap_model` is the parallel layer's factory for this: the trainer calls it and never reads
the flag. :func:`unavailable` answers for ``parallel`` (a mode for the ranks, a GPU per rank) and
``grad_compression``; :func:`gnnbench.parallel.partition_parallel.unavailable` for ``parallel="partition"``
and ``partitioner``.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from gnnbench.flags import Flags, RunContext, Unavailable, UnavailableError
from gnnbench.parallel.compression import CommRecorder, make_hook

__all__ = ["wrap_model", "moves_momentum_into_hook", "unavailable", "world_size_for", "NoComm", "NO_COMM"]


class NoComm:
    """The communication recorder of a single-process run: nothing to record."""

    seconds: list[float] = []
    bytes: list[int] = []
    dense_bytes: list[int] = []
    formula = None
    world_size = 1

    def end_step(self, measured: bool) -> None:
        pass


NO_COMM = NoComm()


def wrap_model(
    model: nn.Module, flags: Flags, ctx: RunContext, momentum: float = 0.0
) -> tuple[nn.Module, CommRecorder | NoComm]:
    """``(module to call, communication recorder)``.

    With ``parallel="data"``: ``DistributedDataParallel(model)`` over the initialized default
    process group (parameters broadcast from rank 0; buffers are not broadcast per forward, so the
    only collective per step is the gradient all-reduce the hook times), with the hook of
    ``flags.grad_compression`` registered. Otherwise ``model`` itself and a recorder that records nothing.

    Raises:
        UnavailableError: ``parallel="data"`` without an initialized process group of
            ``ctx.world_size`` ranks (run it through :mod:`gnnbench.measure.run.launch`).
    """
    if flags.parallel != "data":
        return model, NO_COMM
    if not dist.is_available() or not dist.is_initialized():
        raise UnavailableError(
            [
                Unavailable(
                    "parallel",
                    "data parallel runs on ranks started by gnnbench.measure.run.launch (torchrun); no process group here",
                )
            ]
        )
    world = dist.get_world_size()
    if world != ctx.world_size:
        raise UnavailableError(
            [
                Unavailable(
                    "parallel",
                    f"the process group has {world} ranks but the run was configured for nproc={ctx.world_size}",
                )
            ]
        )
    device = ctx.device
    ddp = nn.parallel.DistributedDataParallel(
        model,
        device_ids=[device.index] if device.type == "cuda" and device.index is not None else None,
        broadcast_buffers=False,
    )
    state, hook, recorder = make_hook(flags, world, momentum)
    ddp.register_comm_hook(state, hook)
    return ddp, recorder


def moves_momentum_into_hook(flags: Flags) -> bool:
    """Whether the gradient hook :func:`wrap_model` registers applies SGD's momentum itself (DGC's momentum
    correction): top-k's error feedback is exact in sum only for a linear update, so under top-k compression
    the momentum moves into the hook and the optimizer steps plain SGD."""
    return flags.parallel == "data" and flags.grad_compression == "topk"


def unavailable(flags: Flags, ctx: RunContext) -> list[Unavailable]:
    """What the multi-process fields cannot run in ``ctx`` (the world size is ``ctx.world_size``): a parallel mode
    for the ranks, one GPU per NCCL rank, and gradient compression (a DDP hook). Partition-parallel's own rules:
    :func:`gnnbench.parallel.partition_parallel.unavailable`."""
    out = []
    if flags.parallel == "none" and ctx.world_size > 1:
        out.append(
            Unavailable(
                "parallel",
                f"--nproc {ctx.world_size} needs a parallel mode: parallel='data' "
                "(the data_parallel entry) splits each batch across the ranks",
            )
        )
    if flags.parallel == "data":
        if ctx.world_size < 2:
            out.append(Unavailable("parallel", f"data_parallel needs --nproc >= 2 (got {ctx.world_size})"))
    if flags.parallel != "none" and ctx.world_size > 1 and torch.device(ctx.device).type == "cuda":
        gpus = torch.cuda.device_count()
        if ctx.world_size > gpus:
            out.append(
                Unavailable(
                    "parallel",
                    f"NCCL ranks need one GPU each: --nproc {ctx.world_size} but this "
                    f"machine has {gpus} CUDA device(s); use --nproc <= {gpus} or --device cpu "
                    "(gloo ranks)",
                )
            )
    if flags.grad_compression != "none" and flags.parallel != "data":
        out.append(
            Unavailable(
                "grad_compression",
                f"grad compression needs parallel='data' "
                f"(got parallel={flags.parallel!r}): it is a DDP communication hook",
            )
        )
    return out


def world_size_for(flags: Flags, nproc: int) -> int:
    """The ranks a configuration runs on: ``nproc`` in a parallel mode, else one process (the single-process
    baseline of a ``--nproc N`` sweep is one process on the same global batch)."""
    return nproc if flags.parallel != "none" else 1
