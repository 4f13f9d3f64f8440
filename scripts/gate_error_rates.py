"""The regression gate's own error rates, as users run it: false alarms on null commits, detection of known
slowdowns, every gate run on the gate's default benchmark set with its default rounds and budget.

In a temporary clone of this repository, commits are made on top of BASE (default HEAD):

- **null-comment**: a comment added to the sampler (the code fingerprint changes, the step does not);
- **null-rename**: a private helper of the sampler renamed (``_take_all``), every use with it;
- **slow-<path>-<pct>**: the step made ``pct`` percent slower, all of it in one code path: the sampler
  (``NeighborSampleCore.sample``, phase ``sample``), the feature gather (``HostFeatures.gather``, phase
  ``gather``), the aggregation (``Aggregator.gcn``, phases ``forward``/``backward``) or the optimizer
  (``torch.optim.Adam.step``, phase ``optimizer``) or the node task's loss (``NodeClassification.loss``, phase
  ``forward``; like the optimizer, no micro-benchmark times it: only the end-to-end step shows it). A wrapper busy-waits after each call for ``frac`` times the
  call's own time, ``frac`` starting at ``pct / share`` (``share``: the path's share of the baseline's step,
  measured first in this process at the gate's one thread, :func:`path_share`). It spins rather than sleeps:
  ``time.sleep`` overshoots by tens of microseconds. The gather times its phase inside the method, so it is
  slowed in its timed statement instead (:data:`INSIDE`).

  With ``--injection work`` the slowdown is work instead of a timed wait: after each call the path's own work
  is done again ``frac`` times on average (a running debt: once more whenever it reaches 1), its result
  discarded and its side effects undone (:data:`AGAIN`: the sampler's generator state restored, the aggregation
  and the loss under ``no_grad``, the feature gather's ``index_select`` repeated; the optimizer, whose step cannot be
  repeated, does one elementwise product per parameter's gradient). Work is what a real regression adds, and
  it is what counted instructions (``--counts N``) see at its own size: a timed busy-wait runs as long as the
  instrumented call, so under callgrind its counted size is several times its wall-clock size.

**Delivered, not nominal.** Before its gate runs, each slow commit's slowdown of the baseline step is measured
by a pilot gate on the baseline alone (``--pilot-rounds`` alternating processes against BASE); while it lies
more than one point from ``pct`` and its 95% interval excludes ``pct``, ``frac`` is scaled by ``pct /
delivered`` and the commit made again (at most ``--calibrations`` times). The pilots and the slowdown the runs themselves measured on the baseline are kept.

Every gate run compares BASE with the commit on ``--bench`` (default: the gate's default set, every benchmark
that runs here), ``--rounds`` rounds and ``--budget`` seconds, as ``gnnbench regress`` does by default. A null
run that fails the gate is a false alarm (of the whole run: the family-wise rate); a slow run that fails it is
a detection (a hit in any benchmark counts), and its phase is right when the baseline was flagged naming the
path's phase or the path's own micro-benchmark was flagged. Results are written atomically to ``--out`` after
every commit, with the machine, the settings and the wall time; a rerun with the same settings resumes.

    python scripts/gate_error_rates.py [--null-repeats 6] [--repeats 2] [--sizes 5,10]
        [--paths sample,gather,aggregation,optimizer,loss] [--bench default] [--rounds 8] [--budget 600]
        [--injection spin|sleep|work] [--design duet|alternating] [--counts 0] [--condition TEXT] [--out results/reference/gate-error-rates.json]

With ``--counts N`` every gate run also counts the primary tier's instructions (N processes per tree,
``gnnbench regress --counts``); a count regression fails the run as a wall-time one does, and each run records
both (``flagged`` holds the wall-time names, ``count_flagged`` the counted ones).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from gnnbench.atomic import write_json_atomic
from gnnbench.env import environment
from gnnbench.measure.gate import (
    CARRIERS,
    DEFAULT_BUDGET_SECONDS,
    DEFAULT_ROUNDS,
    DESIGNS,
    DUET,
    GateOptions,
    default_benches,
    gate,
    gate_config,
    summarize,
)
from gnnbench.measure.gate.rates import format_rates
from gnnbench.measure.gate.trees import trees_for

# path -> (module file, class, method, import line, phases the gate should name)
PATHS = {
    "sample": ("gnnbench/sampling/neighbor.py", "NeighborSampleCore", "sample", "", ("sample",)),
    "gather": ("gnnbench/features/stores.py", "HostFeatures", "gather", "", ("gather",)),
    "aggregation": ("gnnbench/models/aggregation.py", "Aggregator", "gcn", "", ("forward", "backward")),
    "optimizer": ("gnnbench/training/optim.py", "torch.optim.Adam", "step", "import torch\n", ("optimizer",)),
    "loss": ("gnnbench/models/tasks.py", "NodeClassification", "loss", "", ("forward",)),
}

SLOW = """

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
    {wait}
    return out


{cls}.{method} = _gate_slow
"""

# the non-work injections' wait after the call: a busy spin (exact to a microsecond, and busy like slower code) or
# a sleep (the core idle: waiting, as a lock or I/O waits; time.sleep overshoots by tens of microseconds)
WAITS = {
    "spin": "while _gate_time.perf_counter() < until:\n        pass",
    "sleep": "_gate_time.sleep(max(0.0, until - _gate_time.perf_counter()))",
}

# --injection work: the path's own work once more, side effects undone (``{args}``: the wrapper's arguments).
AGAIN = {
    "sample": (
        "_gate_gen = args[0].generator\n        _gate_state = _gate_gen.get_state()\n"
        "        _gate_orig(*args, **kwargs)\n        _gate_gen.set_state(_gate_state)"
    ),
    "aggregation": "with _gate_torch.no_grad():\n            _gate_orig(*args, **kwargs)",
    "loss": "with _gate_torch.no_grad():\n            _gate_orig(*args, **kwargs)",
    "optimizer": (
        "with _gate_torch.no_grad():\n            for _gate_group in args[0].param_groups:\n"
        '                for _gate_p in _gate_group["params"]:\n'
        "                    if _gate_p.grad is not None:\n"
        "                        _gate_torch.addcmul(_gate_p.grad, _gate_p.grad, _gate_p.grad)"
    ),
}

SLOW_WORK = """

# --- injected by scripts/gate_error_rates.py: {pct}% slower, as work ---
{imports}import functools as _gate_ft

import torch as _gate_torch

_gate_orig = {cls}.{method}
_gate_debt = [0.0]


@_gate_ft.wraps(_gate_orig)
def _gate_slow(*args, **kwargs):
    out = _gate_orig(*args, **kwargs)
    _gate_debt[0] += {frac}
    while _gate_debt[0] >= 1.0:  # the same work again, deterministic: counted instructions see it at its size
        _gate_debt[0] -= 1.0
        {again}
    return out


{cls}.{method} = _gate_slow
"""

SLOW_INSIDE_WORK = """

# --- injected by scripts/gate_error_rates.py: {pct}% slower, as work ---
_gate_debt = [0.0]


def _gate_slow_rows(table, ids):
    out = table.index_select(0, ids)
    _gate_debt[0] += {frac}
    while _gate_debt[0] >= 1.0:
        _gate_debt[0] -= 1.0
        table.index_select(0, ids)
    return out
"""

# A path whose phase is timed inside the method (the feature gather times ``gather`` around its own
# index_select): a wrapper's spin after the call would land outside that phase, so the slowdown goes into the
# timed statement itself. path -> (the statement as written, its slowed replacement).
INSIDE = {
    "gather": (
        "rows = self._host.index_select(0, ids)\n            self.stats.record(0, ids.numel())",
        "rows = _gate_slow_rows(self._host, ids)\n            self.stats.record(0, ids.numel())",
    ),
}

SLOW_INSIDE = """

# --- injected by scripts/gate_error_rates.py: {pct}% slower ---
import time as _gate_time


def _gate_slow_rows(table, ids):
    t0 = _gate_time.perf_counter()
    out = table.index_select(0, ids)
    t1 = _gate_time.perf_counter()
    until = t1 + {frac} * (t1 - t0)
    {wait}
    return out
"""


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


INJECTIONS = ("spin", "sleep", "work")  # two that are not work (a timed wait, busy or idle), and work


def slow_source(path: str, pct: int, frac: float, injection: str = "spin") -> str:
    """The code appended to ``path``'s module to make the step ``pct`` percent slower (``frac``: the path's
    own share of extra time or work per call)."""
    _, cls, method, imports, _ = PATHS[path]
    if injection not in INJECTIONS:
        raise SystemExit(f"--injection must be one of {', '.join(INJECTIONS)}, got {injection!r}")
    if path in INSIDE:
        if injection == "work":
            return SLOW_INSIDE_WORK.format(pct=pct, frac=frac)
        return SLOW_INSIDE.format(pct=pct, frac=frac, wait=WAITS[injection])
    if injection in WAITS:
        return SLOW.format(pct=pct, imports=imports, cls=cls, method=method, frac=frac, wait=WAITS[injection])
    return SLOW_WORK.format(pct=pct, imports=imports, cls=cls, method=method, frac=frac, again=AGAIN[path])


def _slow_edit(path: str, pct: int, frac: float, injection: str = "spin"):
    file = PATHS[path][0]
    text = slow_source(path, pct, frac, injection)
    if path in INSIDE:
        return _edit_inside(file, *INSIDE[path], text)
    return _edit_append(file, text)


def _slowdown(v) -> dict:
    """A verdict's step ratio (base / head) read as the head's slowdown, with its interval."""
    return {"slowdown": 1 / v.ratio - 1, "low": 1 / v.high - 1, "high": 1 / v.low - 1, "rounds": v.rounds}


def delivered_as_asked(got: dict, pct: int) -> bool:
    """Whether a pilot shows the slowdown asked for: within one point of ``pct``, or its 95% interval holds
    ``pct`` (a noisy pilot that cannot tell the size from ``pct`` is not a reason to re-scale: re-scaling by a
    noisy estimate chases the noise)."""
    want = pct / 100
    return abs(got["slowdown"] - want) <= 0.01 or got["low"] <= want <= got["high"]


def _run_record(r, path: str | None) -> dict:
    hits = [b.name for b in r.regressed]
    by = {b.name: b for b in r.benches}
    base = by.get("baseline")
    right = None
    if path is not None and hits:
        right = bool(
            (base is not None and "baseline" in hits and base.phase in PATHS[path][4]) or CARRIERS.get(path) in hits
        )
    counted = [c.name for c in r.count_regressions]
    if path is not None and counted and not right:
        right = "baseline" in counted or CARRIERS.get(path) in counted
    return {
        "seconds": r.seconds,
        "rounds": r.rounds,
        "exit_status": r.exit_status,
        "flagged": hits + [f"{n} (counts)" for n in counted],
        "count_flagged": counted,
        "counts": {c.name: c.ratio for c in r.counts if c.status == "ok"},
        "right_phase": right,
        "inconclusive": [b.name for b in r.inconclusive],
        "blind": [b.name for b in r.blind],
        "time_blind": [b.name for b in r.time_blind],
        "ratio": base.ratio if base else None,
        "low": base.low if base else None,
        "high": base.high if base else None,
        "p_value": base.p_value if base else None,
        "threshold": base.threshold if base else None,
        "phase": base.phase if base else None,
        "phase_ratio": base.phase_ratio if base else None,
        "measured": sum(v.status == "ok" for v in r.benches),
        "per_bench": {
            v.name: [v.ratio, v.low, v.high, v.threshold, v.p_value, v.alpha] for v in r.benches if v.status == "ok"
        },
    }


def main() -> None:
    import torch

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", default="HEAD")
    p.add_argument("--repeats", type=int, default=2, help="gate runs per slow commit (one path and size)")
    p.add_argument("--null-repeats", type=int, default=6, help="gate runs per null commit")
    p.add_argument("--sizes", default="5,10", help="slowdowns in percent")
    p.add_argument("--paths", default=",".join(PATHS))
    p.add_argument(
        "--bench", default="default", help="benchmarks of every gate run ('default': the gate's default set)"
    )
    p.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    p.add_argument(
        "--budget",
        type=float,
        default=DEFAULT_BUDGET_SECONDS,
        help="each gate run's budget in seconds (extra rounds), as the CLI's default",
    )
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--pilot-rounds", type=int, default=12, help="rounds of the baseline-only pilot of a slow commit")
    p.add_argument("--calibrations", type=int, default=2, help="re-made commits at most, to deliver the size")
    p.add_argument(
        "--injection",
        choices=INJECTIONS,
        default="spin",
        help="how a slow commit is slower: a timed busy-wait (spin), a timed sleep (sleep: not work, the core "
        "idle) or the path's own work again (work)",
    )
    p.add_argument(
        "--design",
        choices=DESIGNS,
        default=DUET,
        help="how every gate run times its two trees (as regress --design; default duet)",
    )
    p.add_argument("--counts", type=int, default=0, help="callgrind processes per tree in every gate run (0: none)")
    p.add_argument(
        "--condition",
        default="",
        help="what else the machine did meanwhile, in words (e.g. 'the other core busy'); recorded, and "
        "not part of the settings a rerun resumes on",
    )
    p.add_argument("--out", default="results/reference/gate-error-rates.json")
    a = p.parse_args()
    cores = sorted(os.sched_getaffinity(0))  # as launched: the in-process trainer below may narrow it
    torch.set_num_threads(1)  # the gate's processes compute with one thread: shares are measured alike
    t_start = time.perf_counter()
    repo = Path(_git(Path("."), "rev-parse", "--show-toplevel"))
    base_commit = _git(repo, "rev-parse", a.base)
    settings = {k: v for k, v in vars(a).items() if k not in ("out", "condition")}
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
    skipped: dict[str, str] = {}
    benches = default_benches(
        config, None if a.bench == "default" else a.bench.split(","), steps=a.steps, skipped=skipped
    )
    pilot = default_benches(config, ["baseline"], steps=a.steps)
    env = environment("cpu")

    def save(done: bool) -> None:
        write_json_atomic(
            out,
            {
                "machine": env.get("machine"),
                "threads": 1,
                "base": base_commit,
                "condition": a.condition,
                "cores": cores,
                "settings": settings,
                "complete": done,
                "benches": {"null": [b.name for b in benches], "slow": [b.name for b in benches]},
                "skipped": skipped,
                "shares": shares,
                "wall_seconds": spent + time.perf_counter() - t_start,
                "results": results,
            },
        )

    def runs_of(commit: str, repeats: int, path: str | None) -> list[dict]:
        records = []
        for k in range(repeats):
            with trees_for(base_commit, commit, repo=clone) as trees:
                r = gate(
                    trees,
                    benches,
                    GateOptions(
                        rounds=a.rounds, order_seed=k, budget_seconds=a.budget, counts=a.counts, design=a.design
                    ),
                    skipped=skipped,
                )
            records.append(_run_record(r, path))
        return records

    with tempfile.TemporaryDirectory(prefix="gnnbench-gate-rates-") as tmp:
        clone = Path(tmp) / "clone"
        _git(repo, "clone", "-q", "--no-hardlinks", str(repo), str(clone))
        sampler = PATHS["sample"][0]
        nulls = {
            "null-comment": _edit_append(sampler, "\n# a comment\n"),
            "null-rename": _edit_rename(sampler, "_take_all", "_take_every"),
        }
        for path in a.paths.split(","):
            if path not in shares:
                shares[path] = statistics.median(path_share(pilot[0].config, path) for _ in range(3))
            for pct in (int(s) for s in a.sizes.split(",")):
                name = f"slow-{path}-{pct}"
                if name in results:
                    continue
                # the step pct% slower, all of it in this path: the path slower by pct / its share, then checked
                frac, pilots = round(pct / 100 / shares[path], 4), []
                for attempt in range(a.calibrations + 1):
                    commit = _commit(clone, base_commit, f"{name} (x{frac})", _slow_edit(path, pct, frac, a.injection))
                    with trees_for(base_commit, commit, repo=clone) as trees:
                        got = _slowdown(
                            gate(
                                trees,
                                pilot,
                                GateOptions(rounds=a.pilot_rounds, order_seed=1000 + attempt, design=a.design),
                            ).benches[0]
                        )
                    pilots.append({"frac": frac, **got})
                    print(
                        f"{name:<22} pilot {attempt + 1}: x{frac} delivers {100 * got['slowdown']:+.1f}% "
                        f"[{100 * got['low']:+.1f}, {100 * got['high']:+.1f}]",
                        flush=True,
                    )
                    if delivered_as_asked(got, pct) or got["slowdown"] <= 0 or attempt == a.calibrations:
                        break
                    frac = round(frac * (pct / 100) / got["slowdown"], 4)
                records = runs_of(commit, a.repeats, path)
                flagged = sum(bool(x["flagged"]) for x in records)
                right = sum(bool(x["right_phase"]) for x in records)
                results[name] = {
                    "commit": commit,
                    "frac": frac,
                    "pilots": pilots,
                    "delivered": pilots[-1],
                    "runs": len(records),
                    "flagged": flagged,
                    "rate": flagged / len(records),
                    "right_phase": right,
                    "detail": records,
                }
                print(
                    f"{name:<22} flagged {flagged}/{len(records)}"
                    + (f", right phase {right}/{flagged}" if flagged else "")
                    + f"  (gate run {statistics.median(x['seconds'] for x in records):.0f} s)",
                    flush=True,
                )
                save(False)
        # the null commits after the slow ones: a measurement cut short still holds the detection rates
        for name, edit in nulls.items():
            if name in results:
                continue
            commit = _commit(clone, base_commit, name, edit)
            records = runs_of(commit, a.null_repeats, None)
            flagged = sum(bool(x["flagged"]) for x in records)
            results[name] = {
                "commit": commit,
                "runs": len(records),
                "flagged": flagged,
                "rate": flagged / len(records),
                "right_phase": 0,
                "detail": records,
            }
            print(
                f"{name:<22} flagged {flagged}/{len(records)}  (gate run "
                f"{statistics.median(x['seconds'] for x in records):.0f} s)",
                flush=True,
            )
            save(False)
    save(True)
    print(f"wrote {out} ({spent + time.perf_counter() - t_start:.0f} s)")
    print(format_rates(summarize(json.loads(out.read_text()))))


if __name__ == "__main__":
    main()
