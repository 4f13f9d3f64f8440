"""The power of a sweep's comparisons at the spread its own baseline processes showed.

Reads a sweep folder (default: the committed reference), estimates the process-to-process spread of the
baseline's run summaries (median step time and time to accuracy, sd of their logs), and simulates with
``gnnbench.measure.stats.intervals_sim.simulate_calibration`` the A/A false-positive rate and the power to detect a given
true speedup at that spread, per row (95%) and at Holm's most stringent step for the sweep's number of rows
(level 1 - 0.05 / rows: the worst case a row meets under family-wise control).

    python scripts/power_at_spread.py [SWEEP_DIR] [--ratio 1.25] [--trials 2000]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

from gnnbench.measure.compare import compare, time_to
from gnnbench.measure.stats import DEFAULT_REPEATS, simulate_calibration
from gnnbench.report.inputs import load_inputs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sweep", nargs="?", default="results/reference/compare-tiny-cpu")
    p.add_argument("--ratio", type=float, default=1.25)
    p.add_argument("--trials", type=int, default=2000)
    a = p.parse_args()
    runs = load_inputs(runs=[Path(a.sweep)]).runs
    c = compare(runs)
    base = [r for r in runs if r.label == "baseline" and r.ok]
    rows = sum(
        1 for r in c.rows if r.status == "ok" and r.label not in ("baseline", "baseline (A/A)", "baseline (end-to-end)")
    )
    rounds = len(base)
    out = {"sweep": a.sweep, "rounds": rounds, "rows": rows}
    series = {
        "step": [r.step_seconds.median for r in base],
        "time_to_accuracy": [t for t in (time_to(r, c.target) for r in base) if t is not None],
    }
    for name, values in series.items():
        if len(values) < 2:
            continue
        sd = statistics.stdev(math.log(v) for v in values)
        per_row = {
            "aa": simulate_calibration(rounds=DEFAULT_REPEATS, trials=a.trials, process_sd=(sd, sd)),
            "power": simulate_calibration(
                rounds=DEFAULT_REPEATS, true_ratio=a.ratio, trials=a.trials, process_sd=(sd, sd)
            ),
        }
        holm_worst = simulate_calibration(
            rounds=DEFAULT_REPEATS,
            true_ratio=a.ratio,
            trials=a.trials,
            process_sd=(sd, sd),
            level=1 - 0.05 / max(1, rows),
        )
        out[name] = {
            "process_sd": sd,
            "aa_per_row": per_row["aa"],
            "power_per_row": per_row["power"],
            "power_holm_worst_step": holm_worst,
        }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
