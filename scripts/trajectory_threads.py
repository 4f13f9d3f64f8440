"""Does a run to the target follow the same trajectory at one thread, two runs at a time (one per core), as at the
machine's threads, one run at a time? The evidence for running a sweep's untimed accuracy runs two at a time.

A sweep's runs to the target take most of its wall time (`python -m gnnbench.report.sweep_time
results/reference/compare-small-cpu`: 92 of 161 minutes), and for the rows read by their factors (steps to the
target from the run, time per step from a pair) the run's own clock is not read. Two such runs could then share
the machine, each pinned to its own core at one thread, if that leaves their steps to the target and accuracy as
they are. This script reruns the reference's baseline rounds that way and compares each run's validation curve,
steps and test accuracy with the stored run of the same configuration (two threads, one run at a time), and, as
the control, reruns the first of them at two threads alone (the same code must give the stored curve exactly).

    python scripts/trajectory_threads.py --rounds 0,1 --out results/reference/trajectory-threads-small-cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gnnbench.atomic import write_json_atomic  # noqa: E402
from gnnbench.env import environment  # noqa: E402
from gnnbench.process.threads import usable_cores  # noqa: E402

REFERENCE = ROOT / "results" / "reference" / "compare-small-cpu"


def _start(config: Path, out: Path, threads: int, cpu: int | None) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)}
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    argv = [sys.executable, "-m", "gnnbench.measure.run.single", str(config), str(out)]
    return subprocess.Popen(argv, env=env, preexec_fn=pin, stderr=subprocess.DEVNULL)


def _compare(run: dict, stored: dict) -> dict:
    """A rerun against the stored run: steps, evaluations, the largest validation difference at the same step,
    the first evaluation that differs, test accuracy and the median step."""
    a = {p["step"]: p["val"] for p in run["curve"]}
    b = {p["step"]: p["val"] for p in stored["curve"]}
    shared = sorted(set(a) & set(b))
    diffs = [abs(a[s] - b[s]) for s in shared]
    return {
        "steps": run["steps"]["total"],
        "stored_steps": stored["steps"]["total"],
        "evaluations": len(a),
        "stored_evaluations": len(b),
        "max_val_difference": max(diffs) if diffs else None,
        "first_differing_step": next((s for s, d in zip(shared, diffs) if d > 0), None),
        "test": run["accuracy"]["test"],
        "stored_test": stored["accuracy"]["test"],
        "step_ms": 1e3 * run["step_seconds"]["median"],
        "threads": run["environment"].get("threads"),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", default="0,1", help="two of the reference's baseline rounds (default 0,1)")
    p.add_argument(
        "--reference",
        type=Path,
        default=REFERENCE,
        help=f"the reference sweep folder whose baseline rounds are rerun (default {REFERENCE.relative_to(ROOT)})",
    )
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    reference = a.reference.resolve()
    rounds = [int(r) for r in a.rounds.split(",") if r]
    cores = sorted(usable_cores())
    if len(rounds) != 2 or len(cores) < 2:
        print(f"needs two rounds (got {rounds}) and two usable cores (got {cores})", file=sys.stderr)
        return 2
    found = {r: sorted(reference.glob(f"baseline-r{r}-*.json")) for r in rounds}
    if not all(found.values()):
        print(f"{reference}: no stored baseline run for rounds {[r for r in rounds if not found[r]]}", file=sys.stderr)
        return 2
    stored = {r: json.loads(found[r][0].read_text()) for r in rounds}
    with tempfile.TemporaryDirectory(prefix="gnnbench-threads-") as tmp:
        folder = Path(tmp)
        for r in rounds:
            (folder / f"cfg{r}.json").write_text(json.dumps(stored[r]["config"]))
        started = time.perf_counter()
        procs = [_start(folder / f"cfg{r}.json", folder / f"r{r}-1t.json", 1, cpu) for r, cpu in zip(rounds, cores)]
        if any(proc.wait() for proc in procs):
            print("a run at one thread failed", file=sys.stderr)
            return 1
        concurrent = time.perf_counter() - started
        started = time.perf_counter()
        if _start(folder / f"cfg{rounds[0]}.json", folder / "control.json", len(cores), None).wait():
            print("the control run failed", file=sys.stderr)
            return 1
        alone = time.perf_counter() - started
        runs = {r: json.loads((folder / f"r{r}-1t.json").read_text()) for r in rounds}
        control = json.loads((folder / "control.json").read_text())
    doc = {
        "command": "python "
        + " ".join(["scripts/trajectory_threads.py", *(argv if argv is not None else sys.argv[1:])]),
        "reference": str(reference.relative_to(ROOT)) if reference.is_relative_to(ROOT) else str(reference),
        "design": "each stored baseline round's configuration rerun at one thread, pinned to its own core, both at "
        "once; the first rerun alone at the machine's threads as the control",
        "two_at_once_seconds": concurrent,
        "control_alone_seconds": alone,
        "one_thread": {str(r): _compare(runs[r], stored[r]) for r in rounds},
        "control": _compare(control, stored[rounds[0]]),
        "environment": environment(),
    }
    write_json_atomic(Path(a.out), doc)
    for name, row in [
        *((f"round {r}, one thread", doc["one_thread"][str(r)]) for r in rounds),
        ("control", doc["control"]),
    ]:
        print(
            f"{name}: {row['steps']} steps (stored {row['stored_steps']}), largest validation difference "
            f"{row['max_val_difference']}, test {row['test']:.4f} (stored {row['stored_test']:.4f}), "
            f"{row['step_ms']:.0f} ms a step"
        )
    print(f"two at once {concurrent:.0f} s; the control alone {alone:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
