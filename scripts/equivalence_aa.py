"""The verdicts' error rates, measured: A/A rows on the baseline's own seeds and on fresh seeds, and a control known
to change convergence (half the learning rate), all judged as ``compare`` judges a row (the stopping rule, Holm,
the equivalence test on steps to the target with the margin declared before the rounds).

* ``A/A own k``: the baseline configuration on the baseline's own seeds (round r: ``base.seed + r``): the same
  trajectory, so its steps to the target are the baseline's and it is judged by its time per step; what it
  measures is the clock's noise alone. Its verdict must be "no significant difference".
* ``A/A fresh k``: the baseline configuration on a seed stream of its own (``base.seed + 20000 + 1000 k + r``):
  trajectory noise and clock noise together. Its verdict must be "no significant difference"; its steps may or
  may not be shown equivalent (that is the test's power, not its error).
* ``half lr``: the baseline at half the learning rate, on the baseline's seeds: it needs more steps to the target,
  so its steps must not be shown equivalent (a false "equivalent" would judge it by its time per step alone).

    python scripts/equivalence_aa.py --preset tiny --out-dir results/reference/equivalence-aa-tiny-cpu

Each run in its own process, interleaved in shuffled rounds after a calibration on seeds no round uses; resumable
(the same ``--out-dir``); the summary goes to ``<out-dir>/equivalence-summary.json`` and is printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from gnnbench.atomic import write_json_atomic
from gnnbench.cli.options import config_from_args
from gnnbench.cli.parser import build_parser
from gnnbench.measure.compare import AA_SEED_OFFSET, BASELINE, DEFAULT_EQUIVALENCE_MARGIN, compare
from gnnbench.measure.stats import StoppingRule
from gnnbench.measure.sweep import Entry, SweepOptions, run_calibration, run_sweep

CONTROL = "half lr"


def plan(base, *, own: int, fresh: int, repeats: int) -> list[Entry]:
    """The baseline, ``own`` A/A copies on its seeds, ``fresh`` on seed streams of their own and the half-lr
    control on its seeds, for each of ``repeats`` rounds."""
    entries = []
    for r in range(repeats):
        seeded = dataclasses.replace(base, seed=base.seed + r)
        entries.append(Entry(BASELINE, seeded, (), r))
        entries += [Entry(f"A/A own {k + 1}", seeded, (), r) for k in range(own)]
        entries += [
            Entry(
                f"A/A fresh {k + 1}",
                dataclasses.replace(base, seed=base.seed + AA_SEED_OFFSET + 1000 * (k + 1) + r),
                (),
                r,
            )
            for k in range(fresh)
        ]
        entries.append(Entry(CONTROL, dataclasses.replace(seeded, lr=base.lr / 2), (), r))
    return entries


def row_summary(r) -> dict:
    """What a row's verdicts were: significance (family-wise), how it was judged, its steps' equivalence."""
    f = r.factors
    eq = (f.equivalence or {}) if f is not None else {}
    return {
        "label": r.label,
        "rounds": r.rounds,
        "significant": bool(r.significant),
        "speedup": r.speedup,
        "low": r.speedup_low,
        "high": r.speedup_high,
        "primary": r.primary,
        "judged_by": f.judged_by if f is not None else None,
        "steps_ratio": f.steps.ratio if f is not None and f.steps is not None else None,
        "steps_equivalent": eq.get("equivalent"),
        "equivalence": eq or None,
        "stop": r.stop.to_dict() if getattr(r, "stop", None) is not None and hasattr(r.stop, "to_dict") else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="tiny")
    p.add_argument("--own", type=int, default=2, help="A/A rows on the baseline's own seeds (default 2)")
    p.add_argument("--fresh", type=int, default=2, help="A/A rows on fresh seed streams (default 2)")
    p.add_argument("--repeats", type=int, default=5, help="rounds at most (default 5)")
    p.add_argument(
        "--margin",
        type=float,
        default=DEFAULT_EQUIVALENCE_MARGIN,
        help=f"the equivalence margin declared before the rounds (default {DEFAULT_EQUIVALENCE_MARGIN:g})",
    )
    p.add_argument("--calibration-runs", type=int, default=3)
    p.add_argument("--out-dir", required=True)
    args = p.parse_args(argv)
    if min(args.own, args.fresh) < 0 or args.own + args.fresh < 1 or args.repeats < 3:
        p.error(
            f"--own and --fresh must be >= 0 with at least one row, --repeats >= 3 (got {args.own}, "
            f"{args.fresh}, {args.repeats})"
        )
    base = config_from_args(build_parser().parse_args(["compare", "--preset", args.preset]), [])
    out = Path(args.out_dir)
    started = time.perf_counter()
    cal, cal_runs = run_calibration(base, out, SweepOptions(calibration_runs=args.calibration_runs))
    if cal is None or cal.target is None:
        print("the calibration did not reach a target: nothing to judge time to accuracy by", file=sys.stderr)
        return 1
    base = cal.apply(base)
    entries = plan(base, own=args.own, fresh=args.fresh, repeats=args.repeats)
    rule = StoppingRule.for_repeats(args.repeats)

    def judge(done):
        return compare(list(cal_runs) + list(done), rule=rule, equivalence_margin=args.margin)

    def after_round(done: list[dict]) -> tuple[set[str], bool]:
        c = judge(done)
        stopped = {label for label, stop in c.stops.items() if stop is not None}
        return stopped, bool(c.stops) and len(stopped) == len(c.stops)

    def progress(done, total, entry, status):
        if status != "running":
            print(
                f"{time.strftime('%H:%M:%S')} {done}/{total} round {entry.round} {entry.label}: {status}",
                file=sys.stderr,
                flush=True,
            )

    results = run_sweep(
        entries,
        out,
        SweepOptions(equivalence_margin=args.margin),
        calibration=cal,
        rule=rule,
        after_round=after_round,
        progress=progress,
    )
    c = judge(results)
    rows = [row_summary(r) for r in c.rows if r.label != BASELINE and r.status == "ok"]
    aa = [r for r in rows if r["label"].startswith("A/A ")]
    control = next((r for r in rows if r["label"] == CONTROL), None)
    summary = {
        "preset": args.preset,
        "margin": args.margin,
        "max_rounds": args.repeats,
        "target": c.target,
        "family": c.family,
        "floors": c.floors,
        "aa_false_positives": sum(r["significant"] for r in aa),
        "aa_rows": len(aa),
        "control_passed_as_equivalent": bool(control and control["steps_equivalent"]),
        "rows": rows,
        "runs": len(results),
        "runs_at_most": len(entries),
        "wall_seconds": time.perf_counter() - started,
    }
    write_json_atomic(out / "equivalence-summary.json", summary)
    print(
        f"{summary['aa_false_positives']} of {len(aa)} A/A rows called significant; the half-lr control's steps "
        f"{'PASSED as equivalent (a false equivalence)' if summary['control_passed_as_equivalent'] else 'not shown equivalent'}; "
        f"{len(results)} of {len(entries)} runs ({summary['wall_seconds'] / 60:.1f} min)"
    )
    for r in rows:
        steps = f"{r['steps_ratio']:.3f}" if r["steps_ratio"] is not None else "-"
        print(
            f"  {r['label']}: {r['rounds']} rounds, {r['speedup']:.3f}x [{r['low']:.3f}, {r['high']:.3f}] by "
            f"{r['primary']} ({r['judged_by']}), {'SIGNIFICANT' if r['significant'] else 'no significant difference'}; "
            f"steps ratio {steps}, equivalent within +-{args.margin:g}: {r['steps_equivalent']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
