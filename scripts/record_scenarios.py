"""Record each scenario's measured phase shares for ``tests/advice/test_diagnose.py``.

Runs ``gnnbench diagnose --scenario NAME --steps STEPS --json`` for every scenario (one process each, on a
quiet machine) and writes ``tests/data/scenario_shares.json`` atomically: per scenario the shares, the
device busy fraction (CUDA), the finding, the top operators, the configuration and the environment.

    .venv/bin/python scripts/record_scenarios.py [--steps 100]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from gnnbench.advice.scenarios import SCENARIOS
from gnnbench.atomic import write_json_atomic
from gnnbench.env import environment

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "scenario_shares.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    recorded = {}
    for name in SCENARIOS:
        cmd = [
            sys.executable,
            "-m",
            "gnnbench.cli",
            "diagnose",
            "--scenario",
            name,
            "--steps",
            str(args.steps),
            "--json",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        d = json.loads(proc.stdout)["diagnosis"]
        f = d["finding"]
        recorded[name] = {
            "shares": d["shares"],
            "busy_fraction": f["compute_share"] if f["compute_source"] == "NVML" else None,
            "finding": f,
            "step_ms": d["step_ms"],
            "top_ops": d["top_ops"],
            "config": d["config"],
            "environment": environment(d["device"]),
            "command": " ".join(cmd[1:]),
        }
        print(
            f"{name}: {f['bottleneck']} ({', '.join(f'{g} {s:.0%}' for g, s in d['shares'].items())}), "
            f"step {d['step_ms']['median']:.1f} ms",
            flush=True,
        )
    write_json_atomic(args.out, recorded)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
