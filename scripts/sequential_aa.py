"""A measured A/A sweep under the stopping rule: K copies of the baseline as K rows against the baseline.

Every copy trains the baseline configuration on a seed stream of its own (copy k, round r: seed
``base.seed + 20000 + 1000 k + r``), so each row is a true null whose verdict must be "no significant
difference". The sweep runs as ``compare`` runs one (a calibration on seeds no round uses, interleaved rounds
in shuffled order, each run in its own process, the rounds that stop when decided), and the summary counts the
rows the rule called significant (false positives), the rounds each row received and the rounds saved.

    python scripts/sequential_aa.py --preset tiny --copies 8 --repeats 5 \
        --out-dir results/reference/sequential-aa-tiny-cpu

Resumable like any sweep (the same ``--out-dir``); the summary is written to ``<out-dir>/aa-summary.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from gnnbench.cli.options import config_from_args
from gnnbench.cli.parser import build_parser
from gnnbench.measure.compare.calibration import AA_SEED_OFFSET
from gnnbench.measure.compare.comparison import BASELINE, compare
from gnnbench.measure.run.results import write_json_atomic
from gnnbench.measure.stats.sequential import StoppingRule
from gnnbench.measure.sweep.options import SweepOptions
from gnnbench.measure.sweep.plan import Entry
from gnnbench.measure.sweep.rounds import run_calibration, run_sweep


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="tiny")
    p.add_argument("--copies", type=int, default=8, help="A/A rows (default 8)")
    p.add_argument("--repeats", type=int, default=5, help="rounds at most (default 5)")
    p.add_argument("--calibration-runs", type=int, default=3)
    p.add_argument("--out-dir", required=True)
    args = p.parse_args(argv)
    if args.copies < 1 or args.repeats < 2:
        p.error(f"--copies must be >= 1 and --repeats >= 2 (got {args.copies}, {args.repeats})")
    base = config_from_args(build_parser().parse_args(["compare", "--preset", args.preset]), [])
    out = Path(args.out_dir)
    started = time.perf_counter()
    cal, cal_runs = run_calibration(
        base, out, SweepOptions(calibration_runs=args.calibration_runs, equivalence_margin=None)
    )
    base = cal.apply(base)
    entries = []
    for r in range(args.repeats):
        entries.append(Entry(BASELINE, dataclasses.replace(base, seed=base.seed + r), (), r))
        for k in range(args.copies):
            seed = base.seed + AA_SEED_OFFSET + 1000 * (k + 1) + r
            entries.append(Entry(f"A/A {k + 1}", dataclasses.replace(base, seed=seed), (), r))
    rule = StoppingRule.for_repeats(args.repeats)

    def after_round(done: list[dict]) -> tuple[set[str], bool]:
        c = compare(list(cal_runs) + done, rule=rule)
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
        SweepOptions(equivalence_margin=None),
        calibration=cal,
        rule=rule,
        after_round=after_round,
        progress=progress,
    )
    c = compare(list(cal_runs) + list(results), rule=rule)
    rows = [r for r in c.rows if r["label"].startswith("A/A ")]
    summary = {
        "preset": args.preset,
        "copies": args.copies,
        "max_rounds": args.repeats,
        "rule": c.rule,
        "target": c.target,
        "floors": c.floors,
        "false_positives": sum(bool(r.get("significant")) for r in rows),
        "rows": [
            {
                "label": r["label"],
                "rounds": r.get("rounds"),
                "significant": bool(r.get("significant")),
                "speedup": r.get("speedup"),
                "low": r.get("speedup_low"),
                "high": r.get("speedup_high"),
                "stop": r.get("stop"),
            }
            for r in rows
        ],
        "runs": len(results),
        "runs_at_most": len(entries),
        "wall_seconds": time.perf_counter() - started,
        "family": c.family,
    }
    write_json_atomic(out / "aa-summary.json", summary)
    print(
        f"{summary['false_positives']} of {len(rows)} A/A rows called significant; {len(results)} of "
        f"{len(entries)} runs ran ({summary['wall_seconds'] / 60:.1f} min); rule: {c.family}"
    )
    for r in summary["rows"]:
        stop = r["stop"] or {}
        print(
            f"  {r['label']}: {r['rounds']} rounds, {r['speedup']:.3f}x [{r['low']:.3f}, {r['high']:.3f}], "
            f"{'SIGNIFICANT' if r['significant'] else 'no significant difference'}; "
            f"stopped after round {stop.get('look')}: {stop.get('reason')}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
