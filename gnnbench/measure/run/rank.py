"""One rank of a multi-rank run, as torchrun starts it.

``python -m gnnbench.measure.run.rank CONFIG.json OUT.json [--timeout S] [--error-dir DIR]``
(started by :func:`gnnbench.measure.run.launch.launch`).

Each rank joins the process group (gloo on CPU, NCCL on CUDA), runs the ordinary training loop
through :func:`gnnbench.measure.run.single.run` and contributes its figures (:func:`rank_figures`: step,
compute and all-reduce medians, payload bytes per step); global rank 0 gathers them into the
result's ``distributed`` block (:func:`combine`) and writes the one result atomically. A failing
rank writes one line to ``DIR/rank<R>.error`` and exits non-zero; a rank stopped by SIGTERM (the launcher's
wall timeout) first writes every thread's stack to ``DIR/rank<R>.stack``.

The ``distributed`` block field by field, and how the all-reduce time is measured:
``docs/distributed.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import faulthandler
import json
import os
import signal
import statistics
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from gnnbench.measure.run.launch import DEFAULT_TIMEOUT
from gnnbench.measure.run.results import RunResult

__all__ = ["main", "rank_figures", "combine"]


def rank_figures(rank: int, result: RunResult, recorder: Any, part: dict[str, Any] | None = None) -> dict[str, Any]:
    """This rank's figures: medians over its measured steps (seconds), payload bytes per step (and, with
    partition parallelism, ``part``: the partition's quality and this rank's owned and halo rows)."""
    steps = result.step_seconds_all
    comm = list(recorder.seconds)
    n = min(len(steps), len(comm))
    step_median = statistics.median(steps) if steps else None
    allreduce = statistics.median(comm) if comm else None
    return {
        "rank": rank,
        "step_median": step_median,
        "compute_median": statistics.median([s - c for s, c in zip(steps[-n:], comm[-n:])]) if n else None,
        "allreduce_median": allreduce,
        "comm_share": allreduce / step_median if allreduce is not None and step_median else None,
        "bytes_per_step": statistics.median(recorder.bytes) if recorder.bytes else None,
        "dense_bytes_per_step": statistics.median(recorder.dense_bytes) if recorder.dense_bytes else None,
        "steps_measured": len(steps),
        "train_seconds": result.train_seconds,
        # partition parallel: halo and gradient seconds / bytes apart, halo rows, and this rank's part
        **(recorder.figures() if hasattr(recorder, "figures") else {}),
        **({"part": part} if part else {}),
    }


def combine(
    per_rank: list[dict[str, Any]],
    *,
    world_size: int,
    backend: str,
    flags: dict[str, Any],
    timeout: float,
    formula: str | None,
) -> dict[str, Any]:
    """The run's ``distributed`` block from every rank's figures (shares and bytes: mean over ranks)."""

    def mean(key: str) -> float | None:
        vals = [r[key] for r in per_rank if r.get(key) is not None]
        return sum(vals) / len(vals) if vals else None

    sent, dense = mean("bytes_per_step"), mean("dense_bytes_per_step")
    part = next((r["part"] for r in per_rank if r.get("part")), None)
    partition = None
    if part:  # the partition's figures (the same on every rank) and the halo per rank
        partition = {
            k: part[k]
            for k in (
                "method",
                "parts",
                "seconds",
                "edge_cut_fraction",
                "node_balance",
                "edge_balance",
                "mean_halo_nodes",
            )
        }
        partition.update(
            halo_rows_per_step=mean("halo_rows_per_step"),
            halo_bytes_per_step=mean("halo_bytes_per_step"),
            halo_seconds=mean("halo_seconds_median"),
            grad_bytes_per_step=mean("grad_bytes_per_step"),
            grad_seconds=mean("grad_seconds_median"),
        )
    return {
        "world_size": world_size,
        "backend": backend,
        "parallel": flags.get("parallel"),
        "grad_compression": flags.get("grad_compression"),
        "timeout_seconds": timeout,
        "payload_formula": formula,
        "per_rank": per_rank,
        "comm_share": mean("comm_share"),
        "step_median": max((r["step_median"] for r in per_rank if r.get("step_median") is not None), default=None),
        "bytes_per_step": sent,
        "dense_bytes_per_step": dense,
        "compression_ratio": sent / dense if sent is not None and dense else None,
        "partition": partition,
    }


def _one_line(exc: BaseException) -> str:
    """``Type: message`` on one line, without the future-callback wrappers and stack lines torch adds."""
    text = " ".join(str(exc).split())
    wrapper = "Got the following error when running the callback: "
    while text.startswith(wrapper):
        text = text[len(wrapper) :]
        head, _, rest = text.partition(": ")
        text = rest if head.isidentifier() and rest else text
    text = text.split(" At: ")[0]
    return f"{type(exc).__name__}: {text[:400]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gnnbench.measure.run.rank")
    parser.add_argument("config")
    parser.add_argument("out")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="process-group timeout (s)")
    parser.add_argument("--error-dir", default=None, help="where a failing rank writes its one-line error")
    args = parser.parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    if args.error_dir:  # stopped by SIGTERM (a wall timeout, a failed peer): every thread's stack, then the exit
        stack = open(Path(args.error_dir, f"rank{rank}.stack"), "w")  # noqa: SIM115 - open until the exit
        faulthandler.register(signal.SIGTERM, file=stack, all_threads=True, chain=True)
    try:
        return _run(args, rank)
    except BaseException as exc:  # noqa: BLE001 - one line for the launcher, then a non-zero exit
        line = f"rank {rank}: {_one_line(exc)}"
        if args.error_dir:
            Path(args.error_dir, f"rank{rank}.error").write_text(line + "\n")
        print(line, file=sys.stderr)
        return 1
    finally:
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


def _run(args: argparse.Namespace, rank: int) -> int:
    from gnnbench.atomic import write_json_atomic
    from gnnbench.measure.run.single import run
    from gnnbench.training import RunConfig

    config = RunConfig.from_dict(json.loads(Path(args.config).read_text()))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world != config.nproc:
        raise RuntimeError(f"torchrun started {world} ranks but the config says nproc={config.nproc}")
    cuda = config.device.startswith("cuda") or (config.device == "auto" and torch.cuda.is_available())
    backend = "nccl" if cuda else "gloo"
    if cuda:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        config = dataclasses.replace(config, device=f"cuda:{local}")
    dist.init_process_group(backend, timeout=timedelta(seconds=args.timeout))
    holder: dict[str, Any] = {}

    def keep(trainer: Any) -> None:
        pipe = trainer.pipeline
        holder["comm"] = pipe.comm
        holder["part"] = pipe.partition.summary() if pipe.partition is not None else None

    result = run(config, after=keep)
    recorder = holder.get("comm")
    mine = rank_figures(rank, result, recorder, holder.get("part")) if recorder is not None else {"rank": rank}
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, mine)
    if rank == 0:
        if result.ok:
            result.distributed = combine(
                gathered,
                world_size=world,
                backend=backend,
                flags=config.flags.to_dict(),
                timeout=args.timeout,
                formula=getattr(recorder, "formula", None),
            )
        write_json_atomic(args.out, result.to_dict())
    dist.barrier()  # rank 0 has written before anyone leaves: a clean exit always has its result
    if args.error_dir:  # past the last collective: a hang from here on is in the teardown (the launcher says so)
        Path(args.error_dir, f"rank{rank}.done").touch()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
