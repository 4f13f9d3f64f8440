"""The regression gate's own error rates: false alarms on null commits, detection of known slowdowns.

In a temporary clone of this repository, commits are made on top of BASE (default HEAD):

- **null**: a comment added to the sampler (the code fingerprint changes, the step does not);
- **slow-<path>-<pct>**: one code path made ``pct`` percent slower by a wrapper that sleeps for that share of
  the wrapped call's own time: the sampler (``NeighborSampleCore.sample``, phase ``sample``), the feature
  gather (``HostFeatures.gather``, phase ``gather``), the aggregation (``Aggregator.gcn``, phases
  ``forward``/``backward``) or the optimizer (``torch.optim.Adam.step``, phase ``optimizer``).

The gate (:func:`gnnbench.measure.regress.gate`) then compares BASE against each commit ``--repeats`` times
(fresh processes each time), and the script reports the false-alarm rate on null commits and, per path and
size, the detection rate and how often the phase it names is the right one. Results are written atomically to
``--out`` with the machine, the settings and the wall time.

    python scripts/gate_error_rates.py [--repeats 10] [--sizes 5,10,20] [--paths sample,gather,aggregation,optimizer]
        [--bench baseline] [--rounds 5] [--steps 20] [--out results/reference/gate-error-rates.json]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from gnnbench.atomic import write_json_atomic
from gnnbench.env import environment
from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec
from gnnbench.measure.regress import default_benches, gate, trees_for
from gnnbench.training import RunConfig

# path -> (module file, class, method, import line, phases the gate should name)
PATHS = {
    "sample": ("gnnbench/sampling/neighbor.py", "NeighborSampleCore", "sample", "", ("sample",)),
    "gather": ("gnnbench/features/placement.py", "HostFeatures", "gather", "", ("gather",)),
    "aggregation": ("gnnbench/models/aggregation.py", "Aggregator", "gcn", "", ("forward", "backward")),
    "optimizer": ("gnnbench/training/optim.py", "torch.optim.Adam", "step", "import torch\n", ("optimizer",)),
}

SLOW = '''

# --- injected by scripts/gate_error_rates.py: {pct}% slower ---
{imports}import functools as _gate_ft
import time as _gate_time

_gate_orig = {cls}.{method}


@_gate_ft.wraps(_gate_orig)
def _gate_slow(*args, **kwargs):
    t0 = _gate_time.perf_counter()
    out = _gate_orig(*args, **kwargs)
    _gate_time.sleep({frac} * (_gate_time.perf_counter() - t0))
    return out


{cls}.{method} = _gate_slow
'''


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _commit(clone: Path, base: str, name: str, edit) -> str:
    _git(clone, "checkout", "-q", "--detach", base)
    edit(clone)
    _git(clone, "-c", "user.email=gate@local", "-c", "user.name=gate", "commit", "-qam", name)
    return _git(clone, "rev-parse", "HEAD")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", default="HEAD")
    p.add_argument("--repeats", type=int, default=10, help="gate runs per commit")
    p.add_argument("--sizes", default="5,10,20", help="slowdowns in percent")
    p.add_argument("--paths", default=",".join(PATHS))
    p.add_argument("--bench", default="baseline", help="benchmarks of each gate run")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--out", default="results/reference/gate-error-rates.json")
    a = p.parse_args()
    t_start = time.perf_counter()
    repo = Path(_git(Path("."), "rev-parse", "--show-toplevel"))
    base_commit = _git(repo, "rev-parse", a.base)
    config = RunConfig(spec=GraphSpec.preset("tiny"), flags=Flags(fanout=(10, 5), batch_size=256), epochs=1,
                       max_steps_per_epoch=a.steps + 3, warmup_steps=3, hidden=32)
    benches = default_benches(config, a.bench.split(","))
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="gnnbench-gate-rates-") as tmp:
        clone = Path(tmp) / "clone"
        _git(repo, "clone", "-q", "--no-hardlinks", str(repo), str(clone))
        commits = {"null": _commit(clone, base_commit, "null: a comment", lambda c: (
            c / PATHS["sample"][0]).write_text((c / PATHS["sample"][0]).read_text() + "\n# a comment\n"))}
        for path in a.paths.split(","):
            file, cls, method, imports, _ = PATHS[path]
            for pct in (int(s) for s in a.sizes.split(",")):
                text = SLOW.format(pct=pct, imports=imports, cls=cls, method=method, frac=pct / 100)
                commits[f"slow-{path}-{pct}"] = _commit(clone, base_commit, f"{path} {pct}% slower", lambda c, f=file,
                                                        t=text: (c / f).write_text((c / f).read_text() + t))
        for name, commit in commits.items():
            flagged, right_phase, ratios = 0, 0, []
            for k in range(a.repeats):
                with trees_for(base_commit, commit, repo=clone) as trees:
                    r = gate(trees, benches, rounds=a.rounds, order_seed=k)
                b = r.benches[0]
                ratios.append(b.ratio)
                if r.regressed:
                    flagged += 1
                    expected = PATHS[name.split("-")[1]][4] if name != "null" else ()
                    right_phase += b.phase in expected
            results[name] = {"commit": commit, "runs": a.repeats, "flagged": flagged,
                             "rate": flagged / a.repeats, "right_phase": right_phase, "ratios": ratios}
            print(f"{name:<22} flagged {flagged}/{a.repeats}"
                  + (f", right phase {right_phase}/{flagged}" if name != "null" and flagged else ""), flush=True)
    env = environment("cpu")
    write_json_atomic(a.out, {"machine": env.get("machine"), "threads": env.get("threads"), "base": base_commit,
                              "settings": vars(a), "wall_seconds": time.perf_counter() - t_start,
                              "results": results})
    print(f"wrote {a.out} ({time.perf_counter() - t_start:.0f} s)")


if __name__ == "__main__":
    main()
