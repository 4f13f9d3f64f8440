"""The entries that set the process (the allocators), timed against the baseline in duet: the evidence that led
the sweep to time them that way (:mod:`gnnbench.measure.sweep.duet`; DESIGN.md §3, "Measure where the noise
cancels").

An allocator is chosen when a process starts, so such an entry cannot share a process with the baseline, and the
sweep timed it across processes, where a process's speed drifts from one to the next (the reference's
across-process paired sd: `python scripts/verdict_replay.py results/reference/compare-small-cpu --noise`). Here
each round starts the baseline's process and the entry's at once, each pinned to its own core at one thread, cores
swapped every round, a barrier before the measured benchmark (the gate's duet, :mod:`gnnbench.measure.gate.duet`,
and its benchmark process, :mod:`gnnbench.measure.gate.worker`), so a drift of the machine lands on both sides
of the round's ratio. ``baseline`` against itself is the duet's A/A. Entries interleave within a round, in an
order shuffled per round.

The configuration is the published reference's baseline (``results/reference/compare-small-cpu``), run for whole
epochs of at least ``--steps`` measured steps; one thread a side, where the sweep runs the machine's threads, so
a ratio here is the entry's effect at one thread.

    python scripts/duet_entries.py --rounds 6 --steps 20 --out /tmp/duet-entries-small-cpu.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gnnbench import registry  # noqa: E402
from gnnbench.atomic import write_json_atomic  # noqa: E402
from gnnbench.env import environment  # noqa: E402
from gnnbench.measure.compare.paired import ratio_over_rounds  # noqa: E402
from gnnbench.measure.gate import DUET  # noqa: E402
from gnnbench.measure.gate.benches import Bench, fit_steps  # noqa: E402
from gnnbench.measure.gate.duet import duet_refusal  # noqa: E402
from gnnbench.measure.gate.rounds import RoundLog, run_tree  # noqa: E402
from gnnbench.measure.gate.worker import script_in  # noqa: E402
from gnnbench.measure.sweep.duet import ALLOCATOR_KEYS, allocator_env  # noqa: E402
from gnnbench.process.sharing import own_process_reasons  # noqa: E402
from gnnbench.training import RunConfig  # noqa: E402

REFERENCE = ROOT / "results" / "reference" / "compare-small-cpu"
AA = "baseline"


def process_setting_entries(base: RunConfig) -> list[str]:
    """The registry entries whose only reason for a process of their own is the allocator they set, and that
    can run here."""
    from gnnbench.env import resolve_device
    from gnnbench.training import config_unavailable

    out = []
    for name in registry.names():
        parts = registry.combination(name)
        if registry.not_applicable(base, parts) is not None:
            continue
        config = registry.config_for(base, parts)
        reasons = own_process_reasons(config.flags)
        if reasons and all(r.startswith("allocator=") for r in reasons):
            if not config_unavailable(config, resolve_device(config.device)):
                out.append(name)
    return out


def reference_base(steps: int) -> RunConfig:
    """The published reference's baseline configuration, for whole epochs of at least ``steps`` measured steps,
    no target or patience (a fixed number of steps is timed)."""
    from gnnbench.graphs import generate

    stored = json.loads(next(REFERENCE.glob("baseline-r0-*.json")).read_text())["config"]
    config = RunConfig.from_dict(stored)
    untargeted = {  # the reference trains to a target; here a fixed number of epochs is timed
        f.name: f.default
        for f in dataclasses.fields(RunConfig)
        if f.name in ("max_steps", "min_steps", "step_unit", "max_seconds", "censor_seconds", "stop_at")
        or f.name in ("patience_target", "eval_every")
    }
    config = dataclasses.replace(config, **untargeted)
    return fit_steps(config, generate(config.spec), steps)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=6, help="duet rounds per entry (default 6)")
    p.add_argument("--steps", type=int, default=20, help="measured steps a side at least (whole epochs; default 20)")
    p.add_argument("--entries", default="", help="comma-separated entries (default: every allocator entry here)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds a side's process may run (default 1800)")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if a.rounds < 2:
        p.error(f"--rounds must be >= 2 (got {a.rounds})")
    refused = duet_refusal(1)
    if refused:
        print(f"no duet here: {refused}", file=sys.stderr)
        return 2
    inherited = sorted(k for k in ALLOCATOR_KEYS if k in os.environ)
    if inherited:
        print(f"unset {', '.join(inherited)} first: every side's allocator must be its own", file=sys.stderr)
        return 2
    base = reference_base(a.steps)
    entries = [e for e in a.entries.split(",") if e] or process_setting_entries(base)
    configs = {AA: base}
    for name in entries:
        parts = registry.combination(name)  # an unknown name raises, naming the known ones
        configs[name] = dataclasses.replace(registry.config_for(base, parts), epochs=base.epochs)
    logs = {name: RoundLog.empty([Bench(name, base)], DUET) for name in configs}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gnnbench-duet-entries-") as tmp:
        folder = Path(tmp)
        worker = script_in(folder)
        for r in range(a.rounds):
            order = list(configs)
            random.Random(r).shuffle(order)
            for name in order:
                sub = folder / f"{name}-{r}"
                sub.mkdir()

                def run_one(role: str, spec: Path, out: Path, name: str = name) -> dict:
                    config = base if role == "base" else configs[name]
                    data = json.loads(spec.read_text())
                    data["benches"][name] = dataclasses.replace(config, seed=data["seed"]).to_dict()
                    write_json_atomic(spec, data)
                    return run_tree(ROOT, spec, out, 1, worker, a.timeout, env_extra=allocator_env(config))

                logs[name].run_round(run_one, [Bench(name, base)], r, sub, 0, None, a.rounds)
                if logs[name].failure is not None:
                    print(f"{name} round {r + 1}: {logs[name].failure}", file=sys.stderr)
                    return 2
                side = logs[name].data[name]
                bad = [x for x in (side["base"][-1], side["head"][-1]) if x.get("status") != "ok"]
                if bad:
                    print(f"{name} round {r + 1}: {bad[0].get('status')}: {bad[0].get('reason')}", file=sys.stderr)
                    return 2
                ratio = side["base"][-1]["step"] / side["head"][-1]["step"]
                print(f"{time.strftime('%H:%M:%S')} round {r + 1}/{a.rounds} {name}: {ratio:.3f}", file=sys.stderr)
    table = {name: _row(log.data[name]) for name, log in logs.items()}
    doc = {
        "command": "python " + " ".join(["scripts/duet_entries.py", *(argv if argv is not None else sys.argv[1:])]),
        "config": base.to_dict(),
        "rounds": a.rounds,
        "threads": 1,
        "design": "the baseline's process and the entry's at once, each pinned to its own core at one thread, cores "
        "swapped every round, a barrier before the measured benchmark; entries in an order shuffled per round",
        "cores": logs[AA].cores,
        "seconds": time.perf_counter() - started,
        "environment": environment(),
        "table": table,
    }
    write_json_atomic(Path(a.out), doc)
    print(f"{'entry':<14} {'step x (base / entry) [95% CI]':<32} {'sd log ratio':>12}")
    for name, row in table.items():
        ci = f"{row['ratio']:.3f}x [{row['low']:.3f}, {row['high']:.3f}]"
        print(f"{name + (' (A/A)' if name == AA else ''):<14} {ci:<32} {row['sd_log_ratio']:>12.4f}")
    return 0


def _row(sides: dict) -> dict:
    """An entry's rounds: its ratio of median steps (baseline / entry) with the paired interval over rounds, the
    per-round log ratios and their sd, and each side's median step."""
    base = [x["step"] for x in sides["base"]]
    head = [y["step"] for y in sides["head"]]
    paired = ratio_over_rounds(base, head)
    logs = [math.log(b / h) for b, h in zip(base, head)]
    return {
        "rounds": len(logs),
        "ratio": paired.ratio,
        "low": paired.low,
        "high": paired.high,
        "sd_log_ratio": statistics.stdev(logs) if len(logs) > 1 else float("nan"),
        "log_ratios": logs,
        "base_ms": [b * 1e3 for b in base],
        "entry_ms": [h * 1e3 for h in head],
    }


if __name__ == "__main__":
    raise SystemExit(main())
