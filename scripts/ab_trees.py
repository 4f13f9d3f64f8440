"""Two source trees, one command, alternating processes, paired per round: is there a difference?

Each round runs ``gnnbench run ARGS --seed R --out ...`` once per tree, in an order shuffled per round, with
the tree first on ``PYTHONPATH`` (the package is pure Python, so one environment serves both), and compares
the per-round median step time, median epoch time and setup clock with :func:`gnnbench.measure.stats.intervals.paired_ratio`
(``before / after``: above 1, the after tree is faster).

    python scripts/ab_trees.py BEFORE_DIR AFTER_DIR [--rounds 8] [-- run arguments, default --preset tiny]

Make the trees with ``git worktree add /tmp/before <commit>``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from gnnbench.measure.stats import paired_ratio

METRICS = {
    "step": lambda d: d["step_seconds"]["median"],
    "epoch": lambda d: statistics.median(d["epoch_seconds"]),
    "setup": lambda d: d["setup_seconds"],
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--rounds", type=int, default=8)
    argv = sys.argv[1:]
    run_args = argv[argv.index("--") + 1 :] if "--" in argv else ["--preset", "tiny"]
    a = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    a.run_args = run_args
    if a.rounds < 2:
        p.error(f"--rounds must be at least 2 for an interval (got {a.rounds})")
    trees = {"before": Path(a.before).resolve(), "after": Path(a.after).resolve()}
    for name, tree in trees.items():
        if not (tree / "gnnbench" / "__init__.py").is_file():
            p.error(f"{name} tree {tree} has no gnnbench package")
    results: dict[str, list[dict]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="gnnbench-ab-") as tmp:
        for r in range(a.rounds):
            order = list(trees)
            random.Random(r).shuffle(order)
            for name in order:
                out = Path(tmp) / f"{name}-{r}.json"
                env = {**os.environ, "PYTHONPATH": str(trees[name])}
                subprocess.run(
                    [sys.executable, "-m", "gnnbench.cli", "run", *a.run_args, "--seed", str(r), "--out", str(out)],
                    env=env,
                    cwd=trees[name],
                    check=True,
                    capture_output=True,
                )
                results[name].append(json.loads(out.read_text()))
    for name in trees:
        print(f"{name}: {trees[name]} (code fingerprint {results[name][0]['environment'].get('code_fingerprint')})")
    for metric, read in METRICS.items():
        ri = paired_ratio([read(d) for d in results["before"]], [read(d) for d in results["after"]])
        verdict = "significant" if ri.significant else "no significant difference"
        print(
            f"{metric:<6} before/after {ri.ratio:.3f} [{ri.low:.3f}, {ri.high:.3f}] over {a.rounds} rounds: {verdict}"
        )


if __name__ == "__main__":
    main()
