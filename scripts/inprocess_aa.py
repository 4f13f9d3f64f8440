"""The spread of a per-round ratio of step times, timed two ways (DESIGN.md §3, "Measure where the noise cancels").

* **one process**: each round is one process that builds the baseline and the other configuration on one graph
  and times their steps interleaved (:func:`gnnbench.measure.run.interleaved.time_pair`, construction order
  alternating from round to round); the round's ratio is the ratio of their mean steps.
* **separate processes**: each round runs the baseline alone in one process and the other configuration alone
  in the next (order alternating from round to round), the same warm-up and measured steps each; the round's
  ratio is the ratio of the two processes' mean steps (today's sweep design).

For the A/A rows the "other configuration" is the baseline itself, so every ratio should be 1 and the sd of the
per-round log ratio is the design's noise. For entries with large effects the two designs' ratios should agree
within their intervals (no interaction between the two trainers of one process inflates or hides a gain). For
an entry with loader workers or the pipelined loader's thread (suspended, or held, while the baseline steps in
one process), both designs measure whole epochs a side (:func:`gnnbench.measure.run.interleaved.whole_epoch_blocks`),
so the two ratios agreeing shows that pausing them leaves its time per step as it is alone; for a held thread the
file also counts the drains that found an item in progress and what they waited (``held_thread_drains``).

    python scripts/inprocess_aa.py --preset small --rounds 8 --entries full_amp,sparse_agg \\
        --out results/reference/inprocess-aa-small-cpu.json

Every child is started through :func:`gnnbench.process.run_child` (a timeout, its own process group); the
rounds of every row are interleaved, round by round, so a drift of the machine over the run hits each row alike.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time

from gnnbench import registry
from gnnbench.atomic import write_json_atomic
from gnnbench.env import environment, resolve_device
from gnnbench.graphs import GraphSpec
from gnnbench.measure.run import BUILD_ORDERS, time_pair
from gnnbench.measure.run.interleaved import trainer_steps_per_epoch, whole_epoch_blocks
from gnnbench.measure.stats import paired_ratio
from gnnbench.process import run_json_child
from gnnbench.process.sharing import paused_producers
from gnnbench.report.noise_md import noise_markdown
from gnnbench.training import RunConfig, Trainer

AA = "baseline"


def _config(preset: str, name: str) -> RunConfig:
    base = RunConfig(spec=GraphSpec.preset(preset), sync_phases=False)
    return base if name == AA else registry.config_for(base, [name])


def _alone(config: RunConfig, warmup: int, blocks: int, whole_epochs: bool) -> list[float]:
    """The measured steps of ``config`` alone in this process, after ``warmup``, timed as a pair times them (the
    wall time around each step): ``2 x blocks`` of them, raised to whole epochs as a pair with paused loader
    workers raises them when ``whole_epochs``."""
    trainer = Trainer(config)
    loop = trainer.steps(epochs=float("inf"))
    steps = 2 * blocks
    if whole_epochs:
        per_epoch = trainer_steps_per_epoch(trainer)
        steps = whole_epoch_blocks(blocks, (per_epoch, per_epoch))[1]
    try:
        for _ in range(warmup):
            next(loop)
        out = []
        for _ in range(steps):
            t0 = time.perf_counter()
            next(loop)
            out.append(time.perf_counter() - t0)
        return out
    finally:
        loop.close()
        trainer.close()


def _watch_drains() -> dict:
    """Counts, over this process, each drain of a held side (:meth:`BackgroundWork.drain`): how many found an item
    in progress, and the seconds they waited. A drain that waits runs the rest of an item with no step beside it,
    faster than in training, where it would share the cores with the next step: waits near 0 show the hold
    changes nothing of the entry's time per step."""
    from gnnbench.background import BackgroundWork

    seen = {"drains": 0, "items_in_progress": 0, "wait_seconds": 0.0}
    drain = BackgroundWork.drain

    def watched(self, timeout=None):
        seen["drains"] += 1
        seen["items_in_progress"] += bool(self._busy)
        t0 = time.perf_counter()
        try:
            return drain(self, timeout)
        finally:
            seen["wait_seconds"] += time.perf_counter() - t0

    BackgroundWork.drain = watched
    return seen


def child(args: argparse.Namespace) -> int:
    base, other = _config(args.preset, AA), _config(args.preset, args.entry)
    if args.mode == "pair":
        drains = _watch_drains()
        pair = time_pair(base, other, blocks=args.blocks, warmup=args.warmup, built_first=args.built_first)
        data = {
            "base": pair.base_step,
            "other": pair.other_step,
            "steps": len(pair.other_seconds),
            "pair": pair.to_dict(),
            "drains": drains,
        }
    else:
        whole = bool(paused_producers(other.flags))
        steps = _alone(other if args.side == "other" else base, args.warmup, args.blocks, whole)
        data = {"mean": statistics.fmean(steps), "steps": steps}
    write_json_atomic(args.out, data)
    return 0


def _run(argv: list[str], timeout: float) -> dict:
    return run_json_child([sys.executable, __file__, *argv], timeout, prefix="gnnbench-aa-")


def _summary(base: list[float], other: list[float]) -> dict:
    logs = [math.log(b / o) for b, o in zip(base, other)]
    iv = paired_ratio(base, other)
    return {
        "ratio": iv.ratio,
        "low": iv.low,
        "high": iv.high,
        "rounds": iv.rounds,
        "sd_log_ratio": statistics.stdev(logs) if len(logs) > 1 else float("nan"),
        "mean_log_ratio": statistics.fmean(logs),
        "log_ratios": logs,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="small")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--blocks", type=int, default=8, help="blocks of four interleaved steps (a pair)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--entries", default="full_amp,sparse_agg", help="A/B rows besides the A/A")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds a child may take")
    p.add_argument("--out", default=None)
    p.add_argument(
        "--condition",
        default="as found",
        help="what else the machine ran meanwhile, recorded in the file (e.g. 'idle', 'the other core busy')",
    )
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--mode", choices=("pair", "alone"), help=argparse.SUPPRESS)
    p.add_argument("--entry", default=AA, help=argparse.SUPPRESS)
    p.add_argument("--side", choices=("base", "other"), help=argparse.SUPPRESS)
    p.add_argument("--built-first", choices=BUILD_ORDERS, default="base", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    entries = [AA] + [e for e in args.entries.split(",") if e]
    common = ["--child", "--preset", args.preset, "--blocks", str(args.blocks), "--warmup", str(args.warmup)]
    data: dict[str, dict[str, dict[str, list]]] = {
        e: {"one process": {"base": [], "other": []}, "separate processes": {"base": [], "other": []}} for e in entries
    }
    steps_by_entry: dict[str, int] = {}  # measured steps a side: 2 x blocks, or whole epochs with paused workers
    drains: dict[str, dict] = {}  # per entry with a held producer thread, over its pairs (_watch_drains)
    start = time.perf_counter()
    for r in range(args.rounds):
        for e in entries:
            first = BUILD_ORDERS[r % 2]
            got = _run([*common, "--mode", "pair", "--entry", e, "--built-first", first], args.timeout)
            steps_by_entry[e] = got["steps"]
            if got.get("drains", {}).get("drains"):
                total = drains.setdefault(e, {"drains": 0, "items_in_progress": 0, "wait_seconds": 0.0})
                for k in total:
                    total[k] += got["drains"][k]
            data[e]["one process"]["base"].append(got["base"])
            data[e]["one process"]["other"].append(got["other"])
            sides = ("base", "other") if r % 2 == 0 else ("other", "base")
            for side in sides:
                got = _run([*common, "--mode", "alone", "--entry", e, "--side", side], args.timeout)
                data[e]["separate processes"][side].append(got["mean"])
            print(f"round {r + 1}/{args.rounds} {e}: done ({time.perf_counter() - start:.0f} s)", flush=True)
    table = {e: {design: _summary(v["base"], v["other"]) for design, v in d.items()} for e, d in data.items()}
    result = {
        "command": "python " + " ".join(sys.argv),
        "preset": args.preset,
        "condition": args.condition,
        "rounds": args.rounds,
        "measured_steps_per_side": 2 * args.blocks,
        "measured_steps_per_side_by_entry": steps_by_entry,
        "warmup_steps": args.warmup,
        "seconds": time.perf_counter() - start,
        "environment": environment(resolve_device("cpu")),
        "designs": {
            "one process": "both trainers in one process on one graph, steps interleaved in ABBA/BAAB blocks, "
            "construction order alternating by round",
            "separate processes": "each configuration alone in a process of its own, the two processes one after "
            "the other, order alternating by round",
        },
        "table": table,
        "held_thread_drains": drains,
        "raw": data,
    }
    if args.out:
        write_json_atomic(args.out, result)
        print(noise_markdown(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
