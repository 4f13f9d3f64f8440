"""Counted instructions in the gate: how repeatable they are here, and what they show of known changes.

    python scripts/gate_counts.py [--out results/reference/gate-counts.json] [--cases NAMES] [--pcts 5,10]

Each case counts the gate's primary tier (the baseline's step and the micro-benchmarks on ``tiny``;
``gnnbench.measure.gate.counts.count_gate``) in this working tree (BASE) and in a copy of it with one change (HEAD),
one callgrind process per tree, two for the same-tree cases:

- ``same``: the same tree twice, the other core idle; ``same-busy``: the same, with the other core spinning.
- ``tuning``: the sampler's sorted Floyd variant for every fanout (``FLOYD_LOOP_MAX_FANOUT = 0``): the same
  samples through more work per row.
- ``slow-<path>-<pct>``: the slowdowns of ``scripts/gate_error_rates.py``: the step ``pct`` percent slower in one
  code path, a spin after the path's call sized by the path's measured share of the step. The spin runs for a
  time, not a number of instructions: under callgrind its instructions scale with the instrumented call's time,
  so what it shows in counts says how a real slowdown of that size would show only roughly.

The result (every count, ratio and verdict, the machine and the seconds each case took) is written atomically
to ``--out``; the table is printed. docs/regression-gate.md quotes it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from gate_error_rates import PATHS, _slow_edit, path_share  # noqa: E402

from gnnbench.atomic import write_json_atomic  # noqa: E402
from gnnbench.env import environment  # noqa: E402
from gnnbench.measure.gate import COUNT_BENCHES, count_gate, default_benches, gate_config  # noqa: E402
from gnnbench.measure.gate import counts as cn  # noqa: E402
from gnnbench.measure.gate.worker import script_in  # noqa: E402


def _copy(dst: Path) -> Path:
    """This working tree's package and project file in ``dst`` (a tree the gate's worker can import)."""
    shutil.copytree(ROOT / "gnnbench", dst / "gnnbench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dst / "pyproject.toml")
    return dst


def _floyd_everywhere(tree: Path) -> None:
    path = tree / "gnnbench/sampling/neighbor.py"
    text = path.read_text()
    if "FLOYD_LOOP_MAX_FANOUT = 24" not in text:
        raise SystemExit("gnnbench/sampling/neighbor.py no longer sets FLOYD_LOOP_MAX_FANOUT = 24: update the case")
    path.write_text(text.replace("FLOYD_LOOP_MAX_FANOUT = 24", "FLOYD_LOOP_MAX_FANOUT = 0"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / "results/reference/gate-counts.json"))
    p.add_argument("--cases", default=None, help="comma-separated case names (default: all)")
    p.add_argument("--pcts", default="5,10", help="the slowdowns in percent (default 5,10)")
    args = p.parse_args(argv)
    cases: dict[str, tuple] = {
        "same": (None, False, 2),
        "same-busy": (None, True, 2),
        "tuning": (_floyd_everywhere, False, 1),
    }
    shares = {}
    for path in PATHS:
        for pct in (int(x) for x in args.pcts.split(",")):
            cases[f"slow-{path}-{pct}"] = (path, pct)
    wanted = args.cases.split(",") if args.cases else list(cases)
    unknown = [c for c in wanted if c not in cases]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; known: {', '.join(cases)}")
    why = cn.unavailable()
    if why:
        print(f"counts unavailable here: {why}", file=sys.stderr)
        return 2
    config = gate_config("tiny")
    benches = default_benches(config, list(COUNT_BENCHES))
    doc = {"machine": environment(), "tolerance": cn.TOLERANCE, "cases": {}}
    out = Path(args.out)
    if out.exists():  # resume: keep the cases already measured
        doc["cases"] = json.loads(out.read_text()).get("cases", {})
    for name in wanted:
        spec = cases[name]
        if name.startswith("slow-"):
            path, pct = spec
            if path not in shares:
                shares[path] = path_share(config, path)
            frac = pct / 100 / shares[path]
            edit, busy, repeats = _slow_edit(path, pct, frac), False, 1
        else:
            edit, busy, repeats = spec
        with tempfile.TemporaryDirectory(prefix="gnnbench-counts-") as tmp:
            head = _copy(Path(tmp) / "head")
            if edit is not None:
                edit(head)
            spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
            t0 = time.perf_counter()
            try:
                verdicts, why = count_gate(
                    {"base": ROOT, "head": head},
                    benches,
                    repeats=repeats,
                    folder=Path(tmp),
                    worker=script_in(Path(tmp)),
                    pythons={"base": sys.executable, "head": sys.executable},
                    timeout=1800,
                )
            finally:
                if spinner is not None:
                    spinner.kill()
                    spinner.wait()
            if why:
                raise SystemExit(f"{name}: {why}")
        doc["cases"][name] = {
            "seconds": time.perf_counter() - t0,
            "repeats": repeats,
            "share": shares.get(name.split("-")[1]) if name.startswith("slow-") else None,
            "benches": {v.name: v.to_dict() for v in verdicts},
        }
        write_json_atomic(out, doc)
        print(f"{name} ({time.perf_counter() - t0:.0f} s):")
        for v in verdicts:
            print(
                f"  {v.name:<20} {v.status:<6} ratio {v.ratio if v.ratio is None else f'{v.ratio:.5f}'}"
                f"  spread {v.spread if v.spread is None else f'{v.spread:.5f}'}"
                f"  {'REGRESSION' if v.regression else 'improvement' if v.improvement else '-'}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
