"""Does a run earlier in a process change what an in-process pair reads? (DESIGN.md §3, "Measure where the noise
cancels"; issue 56 item 3: no interaction between the trainers may inflate or hide a gain.)

In the reference at 2c4859a (``results/reference/compare-small-cpu-next``) each paired entry was timed against
its round's baseline in the process that had just run it, and the baseline side of ``full_amp``'s pairs stepped at
643-743 ms against 446-603 ms in every other pair. This script times the same pair (baseline against ``--entry``,
steps interleaved, construction order alternating by round) in three kinds of process, every round:

* **fresh**: the pair alone in a new process (what an isolated sweep now does: the pair's own process);
* **after a baseline run**: the baseline trained for ``--epochs`` epochs in the process first;
* **after an ``--entry`` run**: the entry trained for ``--epochs`` epochs in the process first (what the sweep
  did before).

With ``--from-sweep DIR`` the runs before the pair are the sweep's own (each round's stored configurations of the
baseline and the entry, from ``DIR/<label>-r<round>-*.json``: to the plateau, with the sweep's cadence and floors)
and the pair is the one the sweep timed (the entry against its round's baseline), so the sweep's sequence is
repeated exactly.

It prints, per kind, each side's mean step and the per-round ratio with its interval; a carry-over shows as a
slower baseline side and an inflated ratio after the entry's run only.

    python scripts/pair_carryover.py --preset small --entry full_amp --rounds 2 --epochs 6 \\
        --out results/reference/pair-carryover-small-cpu.json
    python scripts/pair_carryover.py --entry full_amp --rounds 2 \\
        --from-sweep results/reference/compare-small-cpu-next --out results/reference/pair-carryover-sweep-small-cpu.json

Every child is started through :func:`gnnbench.process.run_child` (a timeout, its own process group).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

from gnnbench import registry
from gnnbench.atomic import write_json_atomic
from gnnbench.env import environment, resolve_device
from gnnbench.graphs import GraphSpec
from gnnbench.measure.run import BUILD_ORDERS, run, time_pair
from gnnbench.measure.stats import paired_ratio
from gnnbench.process import run_json_child
from gnnbench.training import RunConfig
from gnnbench.training.pipeline import graph_of

KINDS = ("fresh", "after a baseline run", "after an entry run")


def _configs(preset: str, entry: str) -> tuple[RunConfig, RunConfig]:
    base = RunConfig(spec=GraphSpec.preset(preset), sync_phases=False)
    return base, registry.config_for(base, [entry])


def _stored_config(sweep: str, label: str, round_: int) -> RunConfig:
    """The configuration a sweep ran as ``label`` in round ``round_`` (its stored result's)."""
    paths = sorted(Path(sweep).glob(f"{label}-r{round_}-*.json"))
    if not paths:
        raise FileNotFoundError(f"no {label}-r{round_}-*.json in {sweep}")
    return RunConfig.from_dict(json.loads(paths[0].read_text())["config"])


def child(args: argparse.Namespace) -> int:
    if args.from_sweep:
        base = _stored_config(args.from_sweep, "baseline", args.round)
        other = _stored_config(args.from_sweep, args.entry, args.round)
        runs = {"after a baseline run": base, "after an entry run": other}
    else:
        base, other = _configs(args.preset, args.entry)
        runs = {
            k: dataclasses.replace(c, epochs=args.epochs, eval_every=6)
            for k, c in (("after a baseline run", base), ("after an entry run", other))
        }
    graph = graph_of(base)[0]
    before = runs.get(args.kind)
    run_seconds = None
    if before is not None:
        t0 = time.perf_counter()
        result = run(before, graph=graph)
        run_seconds = time.perf_counter() - t0
        if not result.ok:
            print(result.error, file=sys.stderr)
            return 1
    base, other = (dataclasses.replace(c, sync_phases=False) for c in (base, other))  # as the sweep's pair
    pair = time_pair(base, other, graph=graph, blocks=args.blocks, built_first=args.built_first)
    write_json_atomic(
        args.out, {"base": pair.base_step, "other": pair.other_step, "run_seconds": run_seconds, "pair": pair.to_dict()}
    )
    return 0


def _run(argv: list[str], timeout: float) -> dict:
    return run_json_child([sys.executable, __file__, *argv], timeout, prefix="gnnbench-carryover-")


def _summary(base: list[float], other: list[float]) -> dict:
    iv = paired_ratio(base, other)
    return {
        "base_ms": 1000 * statistics.fmean(base),
        "other_ms": 1000 * statistics.fmean(other),
        "ratio": iv.ratio,
        "low": iv.low,
        "high": iv.high,
        "per_round": [b / o for b, o in zip(base, other)],
    }


def format_table(data: dict) -> str:
    """The file's table in Markdown: per kind of process, each side's mean step and the ratio."""
    lines = [
        f"| process the pair ran in | baseline side ms | {data['entry']} side ms | base / {data['entry']} per round | "
        "ratio [95%] |",
        "|---|---|---|---|---|",
    ]
    for kind, s in data["table"].items():
        rounds = ", ".join(f"{r:.3f}" for r in s["per_round"])
        lines.append(
            f"| {kind} | {s['base_ms']:.0f} | {s['other_ms']:.0f} | {rounds} | "
            f"{s['ratio']:.3f}x [{s['low']:.3f}, {s['high']:.3f}] |"
        )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="small")
    p.add_argument("--entry", default="full_amp")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--epochs", type=int, default=6, help="epochs of the run before the pair")
    p.add_argument("--blocks", type=int, default=8, help="blocks of four interleaved steps (a pair)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds a child may take")
    p.add_argument("--out", default=None)
    p.add_argument("--condition", default="as found", help="what else the machine ran meanwhile")
    p.add_argument("--from-sweep", default=None, help="repeat this sweep folder's runs and pairs (round r: its r)")
    p.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--kind", choices=KINDS, help=argparse.SUPPRESS)
    p.add_argument("--built-first", choices=BUILD_ORDERS, default="base", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    if args.rounds < 2:
        p.error(f"--rounds must be >= 2 for an interval (got {args.rounds})")
    common = ["--child", "--preset", args.preset, "--entry", args.entry, "--blocks", str(args.blocks)]
    common += ["--epochs", str(args.epochs)] + (["--from-sweep", args.from_sweep] if args.from_sweep else [])
    raw: dict[str, dict[str, list]] = {k: {"base": [], "other": [], "run_seconds": []} for k in KINDS}
    start = time.perf_counter()
    for r in range(args.rounds):
        kinds = KINDS if r % 2 == 0 else KINDS[::-1]  # the order of kinds alternates too
        for kind in kinds:
            got = _run([*common, "--kind", kind, "--built-first", BUILD_ORDERS[r % 2], "--round", str(r)], args.timeout)
            for key in raw[kind]:
                raw[kind][key].append(got[key])
            print(f"round {r + 1}/{args.rounds} {kind}: done ({time.perf_counter() - start:.0f} s)", flush=True)
    data = {
        "command": "python " + " ".join(sys.argv),
        "preset": args.preset,
        "entry": args.entry,
        "condition": args.condition,
        "rounds": args.rounds,
        "epochs_before": None if args.from_sweep else args.epochs,
        "from_sweep": args.from_sweep,
        "measured_steps_per_side": 2 * args.blocks,
        "seconds": time.perf_counter() - start,
        "environment": environment(resolve_device("cpu")),
        "table": {k: _summary(v["base"], v["other"]) for k, v in raw.items()},
        "raw": raw,
    }
    if args.out:
        write_json_atomic(args.out, data)
    print(format_table(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
