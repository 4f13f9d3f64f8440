"""The regression gate's two round designs, A/A: the same tree on both sides, timed alternating and in duet.

Per round, the gate's benchmark process runs once per side (:mod:`gnnbench.measure.gate.rounds`). Alternating:
one after the other (order shuffled per round). Duet: both at once, each pinned to its own core at one thread,
cores swapped every round, a barrier before each benchmark (:mod:`gnnbench.measure.gate.duet`). Both sides are
this working tree, so every true ratio is 1 and the sd of the per-round log ratio ``log(BASE step / HEAD step)``
is the design's noise. The designs' rounds interleave (duet, alternating, alternating, duet, ...), so a drift of
the machine over the run lands on both.

    python scripts/duet_aa.py --rounds 10 --steps 150 --out results/reference/gate-duet-aa-tiny-cpu.json
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gnnbench.atomic import write_json_atomic  # noqa: E402
from gnnbench.env import environment  # noqa: E402
from gnnbench.measure.gate import ALTERNATING, DUET, default_benches, gate_config  # noqa: E402
from gnnbench.measure.gate.rounds import RoundLog, run_tree  # noqa: E402
from gnnbench.measure.gate.worker import script_in  # noqa: E402

BENCHES = ["baseline", "micro:sampler", "micro:gather", "micro:aggregation"]


def _sd(xs: list[float]) -> float:
    return statistics.stdev(xs) if len(xs) > 1 else float("nan")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=10, help="rounds per design (default 10)")
    p.add_argument("--steps", type=int, default=150, help="measured steps per benchmark process (default 150)")
    p.add_argument("--preset", default="tiny")
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set in every benchmark process's environment (e.g. PYTHONHASHSEED=0: is the spread per process?)",
    )
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if a.rounds < 2:
        p.error(f"--rounds must be >= 2 (got {a.rounds})")
    bad = [e for e in a.env if "=" not in e]
    if bad:
        p.error(f"--env takes KEY=VALUE (got {bad[0]!r})")
    env = dict(e.split("=", 1) for e in a.env)
    benches = default_benches(gate_config(a.preset), BENCHES, steps=a.steps)
    logs = {d: RoundLog.empty(benches, d) for d in (DUET, ALTERNATING)}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gnnbench-duet-aa-") as tmp:
        folder = Path(tmp)
        worker = script_in(folder)

        def run_one(role: str, spec: Path, out: Path) -> dict:
            return run_tree(ROOT, spec, out, 1, worker, 1800.0, env_extra=env)

        for r in range(a.rounds):
            for design in (DUET, ALTERNATING) if r % 2 == 0 else (ALTERNATING, DUET):
                sub = folder / f"{design}-{r}"
                sub.mkdir()
                logs[design].run_round(run_one, benches, r, sub, 0, None, a.rounds)
                if logs[design].failure is not None:
                    print(f"{design} round {r}: {logs[design].failure}", file=sys.stderr)
                    return 2
                print(f"{time.strftime('%H:%M:%S')} round {r + 1}/{a.rounds} {design}: ok", file=sys.stderr)
    table: dict[str, dict] = {}
    for b in benches:
        table[b.name] = {}
        for design, log in logs.items():
            sides = log.data[b.name]
            ratios = [
                math.log(x["step"] / y["step"])
                for x, y in zip(sides["base"], sides["head"])
                if x.get("status") == "ok" and y.get("status") == "ok"
            ]
            table[b.name][design] = {
                "rounds": len(ratios),
                "sd_log_ratio": _sd(ratios),
                "mean_log_ratio": statistics.fmean(ratios) if ratios else float("nan"),
                "log_ratios": ratios,
                "base_ms": [x.get("step", float("nan")) * 1e3 for x in sides["base"]],
                "head_ms": [y.get("step", float("nan")) * 1e3 for y in sides["head"]],
            }
    doc = {
        "command": "python " + " ".join(["scripts/duet_aa.py", *(argv if argv is not None else sys.argv[1:])]),
        "preset": a.preset,
        "rounds": a.rounds,
        "steps": a.steps,
        "threads": 1,
        "env": env,
        "designs": {
            DUET: "both trees at once, each pinned to its own core at one thread, cores swapped every round, a "
            "barrier before each benchmark",
            ALTERNATING: "one tree after the other (order shuffled per round), one thread",
        },
        "cores": logs[DUET].cores,
        "seconds": time.perf_counter() - started,
        "environment": environment(),
        "table": table,
    }
    write_json_atomic(Path(a.out), doc)
    print(f"{'benchmark':<20} {'duet sd':>9} {'alternating sd':>15}")
    for name, row in table.items():
        print(f"{name:<20} {row[DUET]['sd_log_ratio']:>9.4f} {row[ALTERNATING]['sd_log_ratio']:>15.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
