"""The regression gate's own error rates: false alarms on null commits, detection of known slowdowns.

In a temporary clone of this repository, commits are made on top of BASE (default HEAD):

- **null-comment**: a comment added to the sampler (the code fingerprint changes, the step does not);
- **null-rename**: a private helper of the sampler renamed (``_take_all``), every use with it;
- **slow-<path>-<pct>**: the step made ``pct`` percent slower, all of it in one code path: the sampler
  (``NeighborSampleCore.sample``, phase ``sample``), the feature gather (``HostFeatures.gather``, phase
  ``gather``), the aggregation (``Aggregator.gcn``, phases ``forward``/``backward``) or the optimizer
  (``torch.optim.Adam.step``, phase ``optimizer``). A wrapper busy-waits after each call for ``pct / share`` of
  the call's own time, ``share`` being the path's share of the baseline's step, measured first in this process
  (:func:`path_share`). It spins rather than sleeps: ``time.sleep`` overshoots by tens of microseconds, which
  would make a short call far slower than stated. The gather times its phase inside the method, so it is
  slowed in its timed statement instead (:data:`INSIDE`).

The gate (:func:`gnnbench.measure.regress.gate`) compares BASE against each commit ``--repeats`` times (fresh
processes each time). Null commits run the gate's default set (every entry that runs here, Holm across it:
the family-wise false-alarm rate of one default gate run) with ``--null-bench``; slow commits run ``--bench``
(the baseline: the detection rate per path and size, and how often the phase the gate names is the right
one). Results are written atomically to ``--out`` after every commit, with the machine, the settings and the
wall time; a rerun with the same settings resumes where the last one stopped.

    python scripts/gate_error_rates.py [--repeats 8] [--null-repeats 6] [--sizes 5,10,20]
        [--paths sample,gather,aggregation,optimizer] [--bench baseline] [--null-bench default]
        [--rounds 5] [--steps 20] [--out results/reference/gate-error-rates.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from gnnbench.atomic import write_json_atomic
from gnnbench.env import environment
from gnnbench.measure.gate_rates import format_rates, summarize
from gnnbench.measure.gate_trees import trees_for
from gnnbench.measure.regress import default_benches, gate, gate_config

# path -> (module file, class, method, import line, phases the gate should name)
PATHS = {
    "sample": ("gnnbench/sampling/neighbor.py", "NeighborSampleCore", "sample", "", ("sample",)),
    "gather": ("gnnbench/features/stores.py", "HostFeatures", "gather", "", ("gather",)),
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
    t1 = _gate_time.perf_counter()
    until = t1 + {frac} * (t1 - t0)
    while _gate_time.perf_counter() < until:  # spin: exact to a microsecond, and busy like slower code
        pass
    return out


{cls}.{method} = _gate_slow
'''

# A path whose phase is timed inside the method (the feature gather times ``gather`` around its own
# index_select): a wrapper's spin after the call would land outside that phase, so the slowdown goes into the
# timed statement itself. path -> (the statement as written, its slowed replacement).
INSIDE = {
    "gather": ("rows = self._host.index_select(0, ids)\n            self.stats.record(0, ids.numel())",
               "rows = _gate_slow_rows(self._host, ids)\n            self.stats.record(0, ids.numel())"),
}

SLOW_INSIDE = '''

# --- injected by scripts/gate_error_rates.py: {pct}% slower ---
import time as _gate_time


def _gate_slow_rows(table, ids):
    t0 = _gate_time.perf_counter()
    out = table.index_select(0, ids)
    t1 = _gate_time.perf_counter()
    until = t1 + {frac} * (t1 - t0)
    while _gate_time.perf_counter() < until:
        pass
    return out
'''


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _commit(clone: Path, base: str, name: str, edit) -> str:
    _git(clone, "checkout", "-q", "--detach", base)
    edit(clone)
    _git(clone, "-c", "user.email=gate@local", "-c", "user.name=gate", "commit", "-qam", name)
    return _git(clone, "rev-parse", "HEAD")


def _resolve(cls: str):
    """The class named in :data:`PATHS` (``torch.optim.Adam`` or a gnnbench class of the path's module)."""
    import importlib

    if cls.startswith("torch."):
        module, _, name = cls.rpartition(".")
        return getattr(importlib.import_module(module), name)
    for file, c, *_rest in PATHS.values():
        if c == cls:
            return getattr(importlib.import_module(file[:-3].replace("/", ".")), cls)
    raise KeyError(cls)


def path_share(config, path: str, steps: int = 40) -> float:
    """The share of the training loop's time spent in ``path``'s wrapped call, measured in this process over
    ``steps`` steps of ``config`` (evaluation excluded): a slowdown of ``pct`` percent of the step is the
    path made ``pct / share`` percent slower."""
    from gnnbench.training import Trainer

    _, cls, method, _, _ = PATHS[path]
    target = _resolve(cls)
    orig = getattr(target, method)
    spent = [0.0]

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return orig(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t0

    setattr(target, method, timed)
    try:
        trainer = Trainer(config)
        t0 = time.perf_counter()
        for i, _ in enumerate(trainer.steps(epochs=float("inf"))):
            if i == 2:  # after the first steps' one-off costs
                t0, spent[0] = time.perf_counter(), 0.0
            if i == steps + 2:
                break
        total = time.perf_counter() - t0
    finally:
        setattr(target, method, orig)
    if spent[0] <= 0:
        raise SystemExit(f"the {path} path ({cls}.{method}) is not called by the benchmark's step")
    return spent[0] / total


def _edit_inside(file: str, old: str, new: str, text: str):
    def edit(c: Path) -> None:
        source = (c / file).read_text()
        if old not in source:
            raise SystemExit(f"{file} no longer holds the statement to slow ({old.splitlines()[0]!r}): update INSIDE")
        (c / file).write_text(source.replace(old, new) + text)
    return edit


def _edit_append(file: str, text: str):
    return lambda c: (c / file).write_text((c / file).read_text() + text)


def _edit_rename(file: str, old: str, new: str):
    def edit(c: Path) -> None:
        text = (c / file).read_text()
        if old not in text:
            raise SystemExit(f"null-rename: {old!r} is not in {file}; choose another private name")
        (c / file).write_text(text.replace(old, new))
    return edit


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", default="HEAD")
    p.add_argument("--repeats", type=int, default=8, help="gate runs per slow commit")
    p.add_argument("--null-repeats", type=int, default=6, help="gate runs per null commit")
    p.add_argument("--sizes", default="5,10,20", help="slowdowns in percent")
    p.add_argument("--paths", default=",".join(PATHS))
    p.add_argument("--bench", default="baseline", help="benchmarks of each gate run on a slow commit")
    p.add_argument("--null-bench", default="default",
                   help="benchmarks of each gate run on a null commit ('default': the gate's default set)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--out", default="results/reference/gate-error-rates.json")
    a = p.parse_args()
    t_start = time.perf_counter()
    repo = Path(_git(Path("."), "rev-parse", "--show-toplevel"))
    base_commit = _git(repo, "rev-parse", a.base)
    settings = {k: v for k, v in vars(a).items() if k != "out"}
    out = Path(a.out)
    results: dict[str, dict] = {}
    shares: dict[str, float] = {}  # each path's share of the baseline's step (measured once, kept on resume)
    spent = 0.0
    if out.is_file():  # resume: same base and settings, keep what is done
        try:
            old = json.loads(out.read_text())
        except ValueError:
            old = {}
        if old.get("base") == base_commit and old.get("settings") == settings:
            results, spent = old.get("results", {}), float(old.get("wall_seconds", 0.0))
            shares = old.get("shares", {})
            print(f"resuming: {len(results)} commit(s) already measured in {out}", flush=True)
    config = gate_config("tiny")
    benches = default_benches(config, a.bench.split(","), steps=a.steps)
    null_benches = default_benches(config, None if a.null_bench == "default" else a.null_bench.split(","),
                                   steps=a.steps)
    env = environment("cpu")

    def save(done: bool) -> None:
        write_json_atomic(out, {"machine": env.get("machine"), "threads": env.get("threads"), "base": base_commit,
                                "settings": settings, "complete": done,
                                "benches": {"null": [b.name for b in null_benches],
                                            "slow": [b.name for b in benches]},
                                "shares": shares, "wall_seconds": spent + time.perf_counter() - t_start, "results": results})

    with tempfile.TemporaryDirectory(prefix="gnnbench-gate-rates-") as tmp:
        clone = Path(tmp) / "clone"
        _git(repo, "clone", "-q", "--no-hardlinks", str(repo), str(clone))
        sampler = PATHS["sample"][0]
        edits = {"null-comment": _edit_append(sampler, "\n# a comment\n"),
                 "null-rename": _edit_rename(sampler, "_take_all", "_take_every")}
        for path in a.paths.split(","):
            file, cls, method, imports, _ = PATHS[path]
            if path not in shares:
                shares[path] = statistics.median(path_share(benches[0].config, path) for _ in range(3))
            for pct in (int(s) for s in a.sizes.split(",")):
                # the step pct% slower, all of it in this path: the path slower by pct / its share of the step
                frac = round(pct / 100 / shares[path], 4)
                if path in INSIDE:
                    edits[f"slow-{path}-{pct}"] = _edit_inside(file, *INSIDE[path],
                                                               SLOW_INSIDE.format(pct=pct, frac=frac))
                else:
                    text = SLOW.format(pct=pct, imports=imports, cls=cls, method=method, frac=frac)
                    edits[f"slow-{path}-{pct}"] = _edit_append(file, text)
        for name, edit in edits.items():
            if name in results:
                continue
            commit = _commit(clone, base_commit, name, edit)
            null = name.startswith("null")
            flagged, right_phase, runs = 0, 0, []
            for k in range(a.null_repeats if null else a.repeats):
                with trees_for(base_commit, commit, repo=clone) as trees:
                    r = gate(trees, null_benches if null else benches, rounds=a.rounds, order_seed=k)
                hits = [b.name for b in r.regressed]
                b = r.benches[0]
                if hits:
                    flagged += 1
                    expected = () if null else PATHS[name.split("-")[1]][4]
                    right_phase += b.phase in expected and b.name in hits
                runs.append({"seconds": r.seconds, "flagged": hits, "ratio": b.ratio, "low": b.low, "high": b.high,
                             "p_value": b.p_value, "phase_ratio": b.phase_ratio,
                             "threshold": b.threshold, "phase": b.phase,
                             "measured": sum(v.status == "ok" for v in r.benches),
                             "per_bench": {v.name: [v.ratio, v.low, v.high, v.threshold, v.p_value] for v in r.benches
                                           if v.status == "ok"} if null else None})
            results[name] = {"commit": commit, "runs": len(runs), "flagged": flagged,
                             "rate": flagged / len(runs), "right_phase": right_phase, "detail": runs}
            print(f"{name:<22} flagged {flagged}/{len(runs)}"
                  + (f", right phase {right_phase}/{flagged}" if not null and flagged else "")
                  + f"  (gate run {statistics.median(x['seconds'] for x in runs):.0f} s)", flush=True)
            save(False)
    save(True)
    print(f"wrote {out} ({spent + time.perf_counter() - t_start:.0f} s)")
    print(format_rates(summarize(json.loads(out.read_text()))))


if __name__ == "__main__":
    main()
