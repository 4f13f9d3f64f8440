"""The A/A check of docs/tracking.md's pytest-benchmark before/after recipe: run the suite twice with no change in
between and report how far each benchmark moved, and whether that recipe's documented gate would have failed.

    .venv/bin/python scripts/perf_aa.py [--threshold 10] [--out FILE] [-- extra pytest args, e.g. -k "int32 or csr"]

The recipe gates two sets apart (docs/regression-gate.md): the steady-work benchmarks at 10%
(``-- -k "not (full_batch or cluster_gcn or graphsaint or workers or prefetch)"``) and the others at 25%.

It runs exactly the recipe (``--benchmark-save``, then ``--benchmark-compare ... --benchmark-compare-fail
=median:<threshold>%``) in a temporary storage folder, then prints the per-benchmark change of ``min`` and
``median`` and the largest absolute change: the A/A spread the documented threshold is derived from.
Exit status 0 when the gate passes (no false alarm), 1 when it fails.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_THRESHOLD = 25  # percent, on median: docs/tracking.md's gate for the variable-work set (10% for the steady set)


def _pytest(args: list[str]) -> int:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/perf/test_optimizations_perf.py",
        "--benchmark-enable",
        *args,
    ]
    print("$", " ".join(cmd[1:]), flush=True)
    return subprocess.run(cmd, cwd=ROOT).returncode


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, help="gate on median, percent (default 25)")
    p.add_argument("--out", default=None, help="also write the per-benchmark changes here (JSON, atomically)")
    p.add_argument("extra", nargs="*", help="extra pytest arguments (after --)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        storage = f"file://{tmp}"
        a, b = Path(tmp, "a.json"), Path(tmp, "b.json")
        if _pytest([f"--benchmark-storage={storage}", "--benchmark-save=aa", f"--benchmark-json={a}", *args.extra]):
            return 2
        gate = _pytest(
            [
                f"--benchmark-storage={storage}",
                "--benchmark-compare=0001",
                f"--benchmark-compare-fail=median:{args.threshold:g}%",
                f"--benchmark-json={b}",
                *args.extra,
            ]
        )
        first = {x["fullname"]: x["stats"] for x in json.loads(a.read_text())["benchmarks"]}
        second = {x["fullname"]: x["stats"] for x in json.loads(b.read_text())["benchmarks"]}
    rows = []
    for name in sorted(first.keys() & second.keys()):
        rows.append(
            (
                name.split("::")[-1],
                100 * (second[name]["min"] / first[name]["min"] - 1),
                100 * (second[name]["median"] / first[name]["median"] - 1),
            )
        )
    print(f"\n{'benchmark':<60}{'min %':>9}{'median %':>10}")
    for name, dmin, dmed in rows:
        print(f"{name:<60}{dmin:>+9.1f}{dmed:>+10.1f}")
    worst_min = max((abs(r[1]) for r in rows), default=float("nan"))
    worst_med = max((abs(r[2]) for r in rows), default=float("nan"))
    print(
        f"\nA/A over {len(rows)} benchmarks: largest |change| of min {worst_min:.1f}%, of median {worst_med:.1f}%; "
        f"gate median:{args.threshold:g}% {'passed (no false alarm)' if gate == 0 else 'FAILED (false alarm)'}"
    )
    if args.out:
        from gnnbench.atomic import write_json_atomic
        from gnnbench.env import environment

        write_json_atomic(
            args.out,
            {
                "machine": environment("cpu").get("machine"),
                "threshold_pct": args.threshold,
                "gate_passed": gate == 0,
                "benchmarks": [{"name": n, "min_change_pct": a, "median_change_pct": b} for n, a, b in rows],
            },
        )
    return 0 if gate == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
