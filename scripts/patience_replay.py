"""Replay the plateau rule over a sweep's stored accuracy runs: how long they would have trained, and where their
accuracy would have been read, had they waited less.

A run's validation curve up to a stop is the prefix the shorter rule would have seen (the same seed gives the same
curve), so replaying :class:`gnnbench.training.stopping.Plateau` over the stored curves is exact for any rule
that stops earlier than the one that ran. Prints, per rule, the minutes of training and evaluation the accuracy
runs take and each row's mean paired test delta against the baseline (pp, over the rounds both trained to the
plateau).

    python scripts/patience_replay.py results/reference/compare-small-cpu-0671164 --factors 1,0.5
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gnnbench.measure.compare import CALIBRATION  # noqa: E402
from gnnbench.measure.run import RunResult, load_result  # noqa: E402
from gnnbench.training.stopping import MIN_PATIENCE_STEPS, Plateau  # noqa: E402


class ScaledPlateau(Plateau):
    """The rule of :class:`Plateau` with the wait after the target scaled by ``factor`` (1: the rule itself)."""

    factor: float = 1.0

    def wait(self, steps_per_epoch: int) -> int:
        if self.target_step is None:
            return super().wait(steps_per_epoch)
        cap = math.ceil(self.patience * steps_per_epoch)
        return max(MIN_PATIENCE_STEPS, min(cap, math.ceil(self.factor * self.target_step)))


def granularity(run: RunResult) -> float:
    """One validation node of a node-classification run's accuracy (the generator's split: ``num_nodes x
    val_frac`` nodes, checked against the curve: every value a whole number of nodes); 0 otherwise."""
    cfg = run.config
    spec = cfg.get("spec") or {}
    if cfg.get("task") != "node" or not spec:
        return 0.0
    n = round(spec["num_nodes"] * spec["val_frac"])
    if not all(abs(p.val * n - round(p.val * n)) < 1e-3 for p in run.curve):
        raise SystemExit(
            f"{run.label} round {run.round}: its validation values are not whole numbers of "
            f"{n} nodes; this replay cannot tell the split's size"
        )
    return 1.0 / n


def replay(run: RunResult, target: float | None, factor: float) -> tuple[int, float]:
    """(steps at which the rule stops, test metric at the best validation point up to there)."""
    cfg = run.config
    rule = ScaledPlateau(
        cfg["patience"],
        cfg["min_delta"],
        granularity=granularity(run),
        min_steps=cfg.get("min_steps", 0),
        target=target,
    )
    rule.factor = factor
    seen = []
    for point in run.curve:
        seen.append(point)
        rule.update(point.val, point.step)
        if rule.reached(point.step, run.steps_per_epoch):
            break
    best = max(range(len(seen)), key=lambda i: (seen[i].val, -i))
    return seen[-1].step, seen[best].test


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep", type=Path, help="a sweep's folder (its sweep.json gives the target)")
    ap.add_argument("--factors", default="1", help="waits after the target, as multiples of the steps to it")
    args = ap.parse_args(argv)
    manifest = json.loads((args.sweep / "sweep.json").read_text())
    target = (manifest.get("calibration") or {}).get("target")
    if target is None:
        raise SystemExit(f"{args.sweep}: its sweep.json records no calibrated target")
    runs = {}
    for f in sorted(args.sweep.glob("*-r*.json")):
        r = load_result(f)
        if r is None:
            raise SystemExit(f"{f}: not a readable result")
        if r.ok and r.stop_reason == "plateau" and r.label != CALIBRATION:
            runs[(r.label, r.round)] = r
    rules = [("patience epochs only", None, 1.0)] + [
        (f"wait <= {x:g} x steps to the target", target, x) for x in map(float, args.factors.split(","))
    ]
    for name, tgt, factor in rules:
        minutes, deltas = 0.0, {}
        for (label, rnd), r in sorted(runs.items()):
            steps, test = replay(r, tgt, factor)
            minutes += steps * (r.train_seconds + (r.eval_seconds or 0.0)) / r.steps.total / 60
            base = runs.get(("baseline", rnd))
            if base is not None and label != "baseline":
                deltas.setdefault(label, []).append(100 * (test - replay(base, tgt, factor)[1]))
        print(f"{name}: accuracy runs {minutes:.1f} min of training and evaluation")
        for label, d in sorted(deltas.items()):
            print(f"  {label:24s} {statistics.mean(d):+.2f} pp over {len(d)} round(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
