"""Command-line pieces of multi-rank runs: ``--nproc`` and ``--dist-timeout`` for ``run`` and ``compare``,
and ``run``'s path for ``--nproc > 1`` (launched through torchrun, the result's ``distributed`` block shown).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from gnnbench.measure.run import DEFAULT_TIMEOUT
from gnnbench.report.distributed_text import advice_lines, detail_lines, share_text, wire_text
from gnnbench.text import milliseconds, percent

__all__ = ["add_distributed_args", "with_nproc", "run_distributed", "format_ranks"]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--nproc must be an integer >= 1 (got {text!r})") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--nproc must be an integer >= 1 (got {text!r})")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--dist-timeout must be a number of seconds > 0 (got {text!r})") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"--dist-timeout must be a number of seconds > 0 (got {text!r})")
    return value


def add_distributed_args(parser: argparse.ArgumentParser) -> None:
    """``--nproc N`` and ``--dist-timeout S`` (the ``distributed`` option group)."""
    g = parser.add_argument_group("distributed")
    g.add_argument(
        "--nproc",
        type=_positive_int,
        default=1,
        help="ranks on this machine (torchrun; gloo on CPU, NCCL on CUDA), for parallel entries such as "
        "data_parallel; compare runs the baseline and other entries in one process (default 1)",
    )
    g.add_argument(
        "--dist-timeout",
        type=_seconds,
        default=DEFAULT_TIMEOUT,
        metavar="S",
        help=f"seconds a collective may wait for a dead or stalled rank before the run fails "
        f"(default {DEFAULT_TIMEOUT:g})",
    )


def with_nproc(config: Any, args: argparse.Namespace) -> Any:
    """``config`` with the ``--nproc`` of ``args`` (unchanged when the option is absent)."""
    nproc = getattr(args, "nproc", None)
    return config if nproc is None else dataclasses.replace(config, nproc=nproc)


def format_ranks(d: dict[str, Any]) -> str:
    """The ``distributed`` block of a run result: ranks and mode, each rank's step, then the figures of
    :mod:`gnnbench.report.distributed_text` (bytes on the wire with the payload's formula, communication share)."""
    lines = [
        f"ranks: {d['world_size']} ({d['backend']}), parallel={d.get('parallel')}, "
        f"grad_compression={d.get('grad_compression')}"
    ]
    for r in d.get("per_rank", []):
        if r.get("step_median") is None:
            lines.append(f"  rank {r['rank']}: no measured steps")
            continue
        lines.append(
            f"  rank {r['rank']}: step {milliseconds(r['step_median'])}, compute "
            f"{milliseconds(r['compute_median'])}, all-reduce {milliseconds(r['allreduce_median'])} "
            f"({percent(r['comm_share'], digits=0)} of the step)"
        )
    if d.get("bytes_per_step") is not None:
        formula = d.get("payload_formula")
        lines.append(f"  bytes on the wire per step and rank: {wire_text(d)}" + (f"; {formula}" if formula else ""))
    if d.get("comm_share") is not None:
        lines.append(f"  communication share of the step (mean over ranks): {share_text(d)}")
    return "\n".join(lines)


def run_distributed(config: Any, args: argparse.Namespace) -> int:
    """``gnnbench run --nproc N`` (N > 1): launch, then print the result with its distributed figures.
    Exit 1 with the one-line error when the run failed; a configuration that cannot run says why."""
    from gnnbench.cli.tables import format_run
    from gnnbench.measure.compare import distributed_summary
    from gnnbench.measure.run import RunResult, run

    timeout = getattr(args, "dist_timeout", DEFAULT_TIMEOUT)
    with tempfile.TemporaryDirectory(prefix="gnnbench-run-") as tmp:
        out = Path(args.out) if getattr(args, "out", None) else Path(tmp) / "result.json"
        result = run(config, out=out, dist_timeout=timeout)  # launches through torchrun; refuses first if it cannot
        if result.status == "failed":
            print(f"error: {result.error}", file=sys.stderr)
            return 1
        data = json.loads(out.read_text())
    if getattr(args, "json", False):
        print(json.dumps(data, indent=1, default=str))
    else:
        stored = RunResult.from_dict(data)
        print(format_run(stored))
        if stored.distributed:
            print(format_ranks(stored.distributed))
            summary = distributed_summary([stored], None)
            for line in detail_lines(summary):
                print(f"  {line}")
            for line in advice_lines(summary):
                print(f"  -> {line}")
    return 0
