"""A measured A/A sweep under the stopping rule: K copies of the baseline as K rows against the baseline.

Every copy trains the baseline configuration on a seed stream of its own (copy k, round r: seed
``base.seed + 20000 + 1000 k + r``), so each row is a true null whose verdict must be "no significant
difference". The sweep runs as ``compare`` runs one (a calibration on seeds no round uses, interleaved rounds
in shuffled order, each run in its own process, the rounds that stop when decided), and the summary counts the
rows the rule called significant (false positives), the rows it called "no effect beyond the margin" (with
``--margin``; true here), the rounds each row received and the rounds saved.

With ``--interleave`` every copy is timed as ``compare`` times an in-process row: a short run of the round's
baseline configuration, then both trainers in one process, steps interleaved (``Entry.pair_with``), its time to
accuracy derived from the baseline's steps; the rule then reads the in-process spread (DESIGN.md §3).

    python scripts/sequential_aa.py --preset tiny --copies 8 --repeats 5 \
        --out-dir results/reference/sequential-aa-tiny-cpu
    python scripts/sequential_aa.py --preset small --copies 12 --repeats 5 --interleave --margin 0.1 \
        --out-dir results/reference/sequential-aa-inprocess-small-cpu

Resumable like any sweep (the same ``--out-dir``); the summary is written to ``<out-dir>/aa-summary.json``.
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
from gnnbench.measure.compare import AA_SEED_OFFSET, BASELINE, compare, short_config
from gnnbench.measure.stats import StoppingRule
from gnnbench.measure.sweep import Entry, SweepOptions, run_calibration, run_sweep


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="tiny")
    p.add_argument("--copies", type=int, default=8, help="A/A rows (default 8)")
    p.add_argument("--repeats", type=int, default=5, help="rounds at most (default 5)")
    p.add_argument("--calibration-runs", type=int, default=3)
    p.add_argument("--interleave", action="store_true", help="each copy timed against its baseline in one process")
    p.add_argument("--margin", type=float, default=None, help="equivalence margin declared before the rounds")
    p.add_argument("--out-dir", required=True)
    args = p.parse_args(argv)
    if args.copies < 1 or args.repeats < 2:
        p.error(f"--copies must be >= 1 and --repeats >= 2 (got {args.copies}, {args.repeats})")
    base = config_from_args(build_parser().parse_args(["compare", "--preset", args.preset]), [])
    out = Path(args.out_dir)
    started = time.perf_counter()
    options = SweepOptions(
        calibration_runs=args.calibration_runs, equivalence_margin=args.margin, interleave=args.interleave
    )
    cal, cal_runs = run_calibration(base, out, options)
    base = cal.apply(base)
    entries = []
    for r in range(args.repeats):
        b = dataclasses.replace(base, seed=base.seed + r)
        entries.append(Entry(BASELINE, b, (), r))
        for k in range(args.copies):
            if args.interleave:  # the round's baseline again, short, then timed against it in one process
                copy = short_config(b, cal.steps_per_epoch)
                entries.append(Entry(f"A/A {k + 1}", copy, (), r, derived=True, pair_with=b))
                continue
            seed = base.seed + AA_SEED_OFFSET + 1000 * (k + 1) + r
            entries.append(Entry(f"A/A {k + 1}", dataclasses.replace(base, seed=seed), (), r))
    rule = StoppingRule.for_repeats(args.repeats)

    def after_round(done: list[dict]) -> tuple[set[str], bool]:
        c = compare(list(cal_runs) + done, rule=rule, equivalence_margin=args.margin)
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
        options,
        calibration=cal,
        rule=rule,
        after_round=after_round,
        progress=progress,
    )
    c = compare(list(cal_runs) + list(results), rule=rule, equivalence_margin=args.margin)
    rows = [r for r in c.rows if r.label.startswith("A/A ")]
    summary = {
        "preset": args.preset,
        "copies": args.copies,
        "interleave": args.interleave,
        "margin": args.margin,
        "max_rounds": args.repeats,
        "rule": c.rule,
        "target": c.target,
        "floors": c.floors,
        "false_positives": sum(bool(r.significant) for r in rows),
        "no_effect": sum(bool(r.no_effect and r.no_effect.get("equivalent")) for r in rows),
        "rows": [
            {
                "label": r.label,
                "rounds": r.rounds,
                "interleaved": r.interleaved,
                "significant": bool(r.significant),
                "no_effect": bool(r.no_effect and r.no_effect.get("equivalent")),
                "speedup": r.speedup,
                "low": r.speedup_low,
                "high": r.speedup_high,
                "stop": r.stop.to_dict() if r.stop is not None else None,
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
        f"{summary['false_positives']} of {len(rows)} A/A rows called significant, {summary['no_effect']} no effect "
        f"beyond the margin; {len(results)} of "
        f"{len(entries)} runs ran ({summary['wall_seconds'] / 60:.1f} min); rule: {c.family}"
    )
    for r in summary["rows"]:
        stop = r["stop"] or {}
        print(
            f"  {r['label']}: {r['rounds']} rounds, {r['speedup']:.3f}x [{r['low']:.3f}, {r['high']:.3f}], "
            f"{'SIGNIFICANT' if r['significant'] else 'no effect' if r['no_effect'] else 'not resolved'}; "
            f"stopped after round {stop.get('look')}: {stop.get('reason')}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
