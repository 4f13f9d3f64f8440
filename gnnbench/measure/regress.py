"""The regression gate: two commits (or two source trees) compared the way ``compare`` compares two flags.

``gnnbench regress BASE [HEAD]`` checks both out side by side (``git worktree``; ``HEAD`` defaults to ``.``, the
working tree), refuses trees whose declared dependencies differ in one environment, and runs a benchmark set
(:func:`default_benches`) in alternating processes, one per tree and round, one thread each. Per benchmark,
paired by round: the step ratio ``BASE / HEAD`` with its interval, Holm across the set, the phase that moved
most and the accuracy delta on the same seeds. A regression is a Holm-significant slowdown beyond the larger of
:data:`MIN_THRESHOLD` and the benchmark's noise floor, or an accuracy drop beyond :data:`ACC_BOUND_PP`.
The method, its measured error rates and what it takes to go lower: ``docs/regression-gate.md``.
"""

from __future__ import annotations

import datetime
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from gnnbench import text
from gnnbench.atomic import write_json_atomic
from gnnbench.measure.comparison import mean_interval
from gnnbench.measure.stats import holm, noise_floor, paired_ratio

__all__ = ["Bench", "GateResult", "BenchVerdict", "gate", "trees_for", "dependency_difference", "default_benches",
           "bisect", "gate_config", "MICRO", "MIN_THRESHOLD", "ACC_BOUND_PP", "WORKER"]

MICRO = ("micro:sampler", "micro:gather", "micro:aggregation")  # code paths timed alone (the worker's micro())
MIN_THRESHOLD = 1.03  # a slowdown smaller than 3% is never a regression, however significant
ACC_BOUND_PP = 1.0  # an accuracy drop larger than 1 pp (paired, same seeds, interval below 0) is a regression
FAMILY_ALPHA = 0.05
WORKING_TREE = "."

# The worker runs inside each tree's own gnnbench: the driver writes it to a temporary file, so the tree under
# test needs no file of this version, only the API it calls (RunConfig, measure.run.run, graphs.generate).
WORKER = r'''
import json, sys, time
import torch
torch.set_num_threads(int(sys.argv[3]))
from gnnbench.graphs import GraphSpec, generate
from gnnbench.measure.run import run
from gnnbench.training import RunConfig

spec = json.loads(open(sys.argv[1]).read())
graph = generate(GraphSpec(**spec["graph"]))
out = {}


def micro(name, seed):
    """One code path alone, many calls: the neighbour sampler (a batch of the baseline's source), the feature
    gather (host rows of 16 batches) or the GCN aggregation (one batch, scatter). Median seconds per call."""
    import statistics
    from gnnbench.flags import Flags
    from gnnbench.graphs.prepare import prepare
    from gnnbench.sampling.sources import make_batch_source
    flags = Flags(fanout=(10, 5), batch_size=256)
    source = make_batch_source(prepare(graph, flags), flags, seed=seed)

    def cycle():
        epoch = 0
        while True:
            yield from source.epoch(epoch)
            epoch += 1

    batches = cycle()
    batch = next(batches)
    if name == "micro:sampler":
        fn = lambda: next(batches)
    elif name == "micro:gather":
        from gnnbench.features.placement import place_features
        store = place_features(graph.x, "cpu", "host")
        ids = torch.cat([batch.n_id] + [next(batches).n_id for _ in range(15)])  # 16 batches' rows: ~0.3 ms
        fn = lambda: store.gather(ids)
    elif name == "micro:aggregation":
        from gnnbench.graphs.norm import gcn_norm
        from gnnbench.models.aggregation import Aggregator
        n = int(batch.n_id.numel())
        weights = gcn_norm(batch.edge_index, n)
        h = torch.randn(n, 32, generator=torch.Generator().manual_seed(seed))
        fn = lambda: Aggregator(batch.edge_index, n, gcn_weights=lambda: weights).gcn(h)
    else:
        raise ValueError(f"unknown micro-benchmark {name!r}")
    for _ in range(5):
        fn()
    times = []
    for _ in range(spec.get("micro_calls", 60)):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    source.close()
    return statistics.median(times), len(times)


for name, cfg in spec["benches"].items():
    if name.startswith("micro:"):
        t0 = time.perf_counter()
        try:
            median, calls = micro(name, spec["seed"])
        except Exception as exc:  # an older tree without this API: reported, never a crash
            out[name] = {"status": "unavailable", "reason": f"{type(exc).__name__}: {exc}"}
            continue
        out[name] = {"status": "ok", "step": median, "steps": calls, "phases": {}, "test": None,
                     "seconds": time.perf_counter() - t0}
        continue
    config = RunConfig.from_dict(cfg)
    t0 = time.perf_counter()
    r = run(config, graph=graph)
    if r.status != "ok":
        out[name] = {"status": r.status, "reason": str(r.unavailable or r.error)}
        continue
    if not r.step_seconds.get("n"):
        out[name] = {"status": "no measured steps", "reason": "the run ended within its warm-up"}
        continue
    out[name] = {"status": "ok", "step": r.step_seconds["median"], "steps": r.step_seconds["n"],
                 "phases": {p: v["median"] for p, v in r.phases.items()},
                 "test": float(r.accuracy["test"]), "seconds": time.perf_counter() - t0}
open(sys.argv[2], "w").write(json.dumps(out))
'''


@dataclass(frozen=True)
class Bench:
    """One benchmark of the gate: a configuration trained for a fixed number of steps."""

    name: str
    config: Any  # RunConfig (seed set per round)


@dataclass
class BenchVerdict:
    """One benchmark's figures: ratios are ``BASE / HEAD`` (below 1: HEAD is slower)."""

    name: str
    status: str
    reason: str | None = None
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    p_value: float | None = None
    threshold: float | None = None  # the practical threshold (a factor >= MIN_THRESHOLD)
    significant: bool = False  # after Holm across the set
    regression: bool = False
    improvement: bool = False
    phase: str | None = None  # the phase that moved most
    phase_ratio: dict[str, float] | None = None  # its ratio with interval
    acc_delta_pp: float | None = None
    acc_low_pp: float | None = None
    acc_high_pp: float | None = None
    acc_regression: bool = False
    base_ms: float | None = None
    head_ms: float | None = None


@dataclass
class GateResult:
    """The gate's outcome: per benchmark, and whether anything regressed."""

    base: str
    head: str
    rounds: int
    threads: int
    orders: list[list[str]]
    benches: list[BenchVerdict] = field(default_factory=list)
    seconds: float = 0.0
    family: str = ""
    pythons: dict[str, str] | None = None  # each side's interpreter, when they differ (two environments)
    commits: dict[str, str] | None = None  # each side's full commit ("<sha>+dirty": a working tree), when known
    finished: str = ""  # UTC time the gate ended (orders stored gate runs into a history)

    @property
    def regressed(self) -> list[BenchVerdict]:
        return [b for b in self.benches if b.regression or b.acc_regression]

    def to_dict(self) -> dict[str, Any]:
        return {"base": self.base, "head": self.head, "rounds": self.rounds, "threads": self.threads,
                "pythons": self.pythons,
                "orders": self.orders, "seconds": self.seconds, "family": self.family, "commits": self.commits,
                "finished": self.finished, "regression": bool(self.regressed),
                "benches": [asdict(b) for b in self.benches]}


def gate_config(preset: str = "tiny", *, warmup: int = 3, device: str = "cpu") -> Any:
    """The gate's base configuration: ``preset``'s graph, fanout 10,5, batch 256, hidden 32 (epochs are fitted
    per benchmark by :func:`default_benches`)."""
    from gnnbench.flags import Flags
    from gnnbench.graphs import GraphSpec
    from gnnbench.training import RunConfig

    return RunConfig(spec=GraphSpec.preset(preset), flags=Flags(fanout=(10, 5), batch_size=256), epochs=1,
                     warmup_steps=warmup, hidden=32, device=device)


def default_benches(base_config: Any, names: list[str] | None = None, *, steps: int | None = None) -> list[Bench]:
    """The baseline and every registry entry that runs here on ``base_config`` (or ``names`` among them;
    ``"baseline"`` is the base configuration itself).

    With ``steps``, each benchmark's epochs are fitted so that it measures at least ``steps`` steps after its
    warm-up, whatever its batches per epoch (a neighbour epoch on ``tiny`` is 8 batches, a Cluster-GCN epoch
    2, a full-batch epoch 1); epochs are never cut short, since a cut epoch changes a source's regime (the
    batch cache does not keep it).
    """
    from gnnbench import registry
    from gnnbench.env import resolve_device
    from gnnbench.training import config_unavailable

    device = resolve_device(base_config.device)
    wanted = ["baseline"] + registry.names() + list(MICRO) if names is None else list(names)
    graph = None
    if steps is not None:
        if not isinstance(steps, int) or steps < 2:
            raise ValueError(f"the gate needs at least 2 measured steps per benchmark (got {steps!r})")
        from gnnbench.graphs import generate

        graph = generate(base_config.spec)
    benches = []
    for name in wanted:
        if name in MICRO:  # one code path alone, on the base configuration's graph
            benches.append(Bench(name, base_config))
            continue
        if name == "baseline":
            config = base_config
        else:
            parts = registry.combination(name)
            if registry.not_applicable(base_config, parts):
                continue
            config = registry.config_for(base_config, parts)
            if config.nproc > 1 or config_unavailable(config, device):
                continue
        if steps is not None:
            config = _fit_steps(config, graph, steps)
        benches.append(Bench(name, config))
    if not benches:
        raise ValueError(f"no benchmark of {wanted} runs here")
    return benches


def _fit_steps(config: Any, graph: Any, steps: int) -> Any:
    """``config`` with enough whole epochs for ``steps`` measured steps after ``config.warmup_steps``."""
    import dataclasses
    import math

    from gnnbench.training.pipeline import assemble

    pipe = assemble(dataclasses.replace(config, epochs=1, max_steps_per_epoch=None), graph)
    try:
        per_epoch = pipe.batches.steps_per_epoch()
        if per_epoch is None:  # a source that learns its length by running: count one epoch's batches
            per_epoch = sum(1 for _ in pipe.batches.epoch(0))
        floor = pipe.batches.min_epochs(config.warmup_steps)
    finally:
        pipe.batches.close()
    epochs = max(floor, math.ceil((steps + config.warmup_steps) / max(per_epoch, 1)))
    return dataclasses.replace(config, epochs=epochs, max_steps_per_epoch=None)


# ------------------------------------------------------------------ trees
def _git(args: list[str], cwd: Path | str) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if out.returncode != 0:
        raise ValueError(f"git {' '.join(args)} failed in {cwd}: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout.strip()


@contextmanager
def trees_for(base: str, head: str = WORKING_TREE, *, repo: str | Path = ".") -> Iterator[dict[str, Path]]:
    """``{"base": path, "head": path}``: each commit checked out in a temporary worktree (``"."``: the working
    tree itself, as it is), removed afterwards; the user's checkout is never touched."""
    repo = Path(_git(["rev-parse", "--show-toplevel"], repo))
    tmp = Path(tempfile.mkdtemp(prefix="gnnbench-regress-"))
    made: list[Path] = []
    try:
        trees = {}
        for role, rev in (("base", base), ("head", head)):
            if rev == WORKING_TREE:
                trees[role] = repo
                continue
            commit = _git(["rev-parse", "--verify", f"{rev}^{{commit}}"], repo)
            path = tmp / role
            _git(["worktree", "add", "--detach", str(path), commit], repo)
            made.append(path)
            trees[role] = path
        for role, path in trees.items():
            if not (path / "gnnbench" / "__init__.py").is_file():
                raise ValueError(f"{role} ({base if role == 'base' else head}) has no gnnbench package at its root")
        yield trees
    finally:
        for path in made:
            subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=repo, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def _commit_of(tree: Path) -> str | None:
    """The commit checked out in ``tree``, ``+dirty`` when it has uncommitted changes (``None`` outside git)."""
    try:
        sha = _git(["rev-parse", "HEAD"], tree)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=tree,
                               capture_output=True, text=True).stdout.strip()
    except (OSError, ValueError, RuntimeError):
        return None
    return sha + ("+dirty" if dirty else "")


def _dependencies(tree: Path) -> dict[str, Any]:
    try:
        project = tomllib.loads((tree / "pyproject.toml").read_text()).get("project", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{tree / 'pyproject.toml'} cannot be read: {exc}") from None
    return {"dependencies": sorted(project.get("dependencies", [])),
            "requires-python": project.get("requires-python"),
            **{f"optional {k}": sorted(v) for k, v in sorted(project.get("optional-dependencies", {}).items())}}


def dependency_difference(base: Path, head: Path) -> str | None:
    """What the two trees declare differently in ``pyproject.toml`` (dependencies, optional groups, Python), or
    ``None``: one environment cannot serve two trees that need different packages."""
    a, b = _dependencies(base), _dependencies(head)
    diffs = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            only_a = sorted(set(a.get(key) or []) - set(b.get(key) or [])) if key != "requires-python" else a.get(key)
            only_b = sorted(set(b.get(key) or []) - set(a.get(key) or [])) if key != "requires-python" else b.get(key)
            diffs.append(f"{key}: base {only_a}, head {only_b}")
    return "; ".join(diffs) or None


# ------------------------------------------------------------------ the gate
def _spec_file(benches: list[Bench], seed: int, folder: Path) -> Path:
    import dataclasses

    graph = benches[0].config.spec
    spec = {"graph": dataclasses.asdict(graph), "seed": seed,
            "benches": {b.name: dataclasses.replace(b.config, seed=seed).to_dict() for b in benches}}
    path = folder / f"spec-{seed}.json"
    write_json_atomic(path, spec)
    return path


def _run_tree(tree: Path, spec: Path, out: Path, threads: int, worker: Path, timeout: float,
              python: str = sys.executable) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    proc = subprocess.run([python, str(worker), str(spec), str(out), str(threads)], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"the benchmark process of {tree} failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(out.read_text())


def gate(trees: dict[str, Path], benches: list[Bench], *, rounds: int = 5, threads: int = 1, order_seed: int = 0,
         timeout: float = 1800.0, labels: tuple[str, str] = ("base", "head"),
         pythons: dict[str, str] | None = None,
         progress: Callable[[int, int, str], None] | None = None) -> GateResult:
    """Run ``benches`` in both trees, ``rounds`` alternating processes each (order shuffled per round), and
    judge every benchmark (see the module docstring).

    ``pythons`` (``{"base": exe, "head": exe}``) runs each side with its own interpreter: two environments (two
    torch or PyG versions) on one commit or two, the check that catches a library upgrade's slowdown. Trees
    that declare different dependencies are compared only that way.

    Raises:
        ValueError: for fewer than 2 rounds, or trees that declare different dependencies in one environment.
    """
    if not isinstance(rounds, int) or rounds < 2:
        raise ValueError(f"the gate needs at least 2 rounds for an interval (got {rounds!r})")
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an integer >= 1 (got {threads!r})")
    pythons = pythons or {"base": sys.executable, "head": sys.executable}
    problem = dependency_difference(trees["base"], trees["head"])
    if problem and pythons["base"] == pythons["head"]:
        raise ValueError(f"the two trees need different dependencies ({problem}): one environment cannot run "
                         "both; compare them with two environments instead")
    if any(b.config.spec is None for b in benches):
        raise ValueError("the gate runs on a generated graph (a GraphSpec), not a loaded one")
    t0 = time.perf_counter()
    data: dict[str, list[dict]] = {"base": [], "head": []}
    orders = []
    with tempfile.TemporaryDirectory(prefix="gnnbench-gate-") as tmp:
        folder = Path(tmp)
        worker = folder / "gate_worker.py"
        worker.write_text(WORKER)
        for r in range(rounds):
            spec = _spec_file(benches, r, folder)
            order = ["base", "head"]
            random.Random(order_seed * 1_000_003 + r).shuffle(order)
            orders.append(order)
            for role in order:
                if progress:
                    progress(r, rounds, role)
                data[role].append(_run_tree(trees[role], spec, folder / f"{role}-{r}.json", threads, worker,
                                            timeout, pythons[role]))
    result = GateResult(labels[0], labels[1], rounds, threads, orders,
                        pythons=pythons if pythons["base"] != pythons["head"] else None)
    result.benches = [_verdict(b.name, [d.get(b.name, {}) for d in data["base"]],
                               [d.get(b.name, {}) for d in data["head"]]) for b in benches]
    measured = [v for v in result.benches if v.status == "ok" and v.p_value is not None]
    keep = holm([v.p_value for v in measured], FAMILY_ALPHA)
    for v, k in zip(measured, keep):
        v.significant = bool(k)
        slower, faster = v.ratio < 1 / v.threshold, v.ratio > v.threshold
        v.regression = v.significant and slower and v.high < 1
        v.improvement = v.significant and faster and v.low > 1
    result.family = (f"Holm over {len(measured)} benchmarks: the chance that any is flagged by noise is at most "
                     f"{FAMILY_ALPHA:.0%}")
    result.seconds = time.perf_counter() - t0
    result.finished = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    result.commits = {role: _commit_of(tree) for role, tree in trees.items()}
    return result


def _verdict(name: str, base: list[dict], head: list[dict]) -> BenchVerdict:
    bad = next((d for d in base + head if d.get("status") != "ok"), None)
    if bad is not None:
        return BenchVerdict(name, bad.get("status", "missing"), bad.get("reason", "no result"))
    ri = paired_ratio([d["step"] for d in base], [d["step"] for d in head])
    floor = noise_floor([d["step"] for d in base])
    threshold = max(MIN_THRESHOLD, floor if floor == floor else MIN_THRESHOLD)
    v = BenchVerdict(name, "ok", ratio=ri.ratio, low=ri.low, high=ri.high, p_value=ri.p_value, threshold=threshold,
                     base_ms=1e3 * statistics.median(d["step"] for d in base),
                     head_ms=1e3 * statistics.median(d["step"] for d in head))
    moved = []
    for phase in base[0]["phases"]:
        b = [d["phases"].get(phase, 0.0) for d in base]
        h = [d["phases"].get(phase, 0.0) for d in head]
        if min(b + h) <= 0:
            continue
        pr = paired_ratio(b, h)
        share = statistics.median(h) / (1e-3 * v.head_ms) if v.head_ms else 0.0
        # the phase whose change explains most of the step's change: its share times its log ratio
        moved.append((abs(share * (1 / pr.ratio - 1)), phase, pr))
    if moved:
        _, phase, pr = max(moved)
        v.phase, v.phase_ratio = phase, {"ratio": pr.ratio, "low": pr.low, "high": pr.high,
                                         "significant": pr.significant}
    if all(d.get("test") is not None for d in base + head):  # micro-benchmarks train nothing
        v.acc_delta_pp, v.acc_low_pp, v.acc_high_pp = mean_interval([100 * (h["test"] - b["test"])
                                                                     for b, h in zip(base, head)])
        v.acc_regression = v.acc_delta_pp < -ACC_BOUND_PP and v.acc_high_pp < 0
    return v


def bisect(good: str, bad: str, is_bad: Callable[[str], bool], *, repo: str | Path = ".",
           log: Callable[[str], None] = lambda line: None) -> tuple[str, int]:
    """The first bad commit between ``good`` (known good) and ``bad`` (known bad) on ``bad``'s first-parent
    line, by binary search with ``is_bad(commit)`` (the gate against the good end, for ``regress --bisect``);
    returns ``(commit, tests run)``.

    Raises:
        ValueError: when ``good`` is not an ancestor of ``bad``.
    """
    repo = Path(_git(["rev-parse", "--show-toplevel"], repo))
    good_c = _git(["rev-parse", "--verify", f"{good}^{{commit}}"], repo)
    bad_c = _git(["rev-parse", "--verify", f"{bad}^{{commit}}"], repo)
    if subprocess.run(["git", "merge-base", "--is-ancestor", good_c, bad_c], cwd=repo).returncode != 0:
        raise ValueError(f"{good} is not an ancestor of {bad}: nothing to bisect")
    line = _git(["rev-list", "--first-parent", "--reverse", f"{good_c}..{bad_c}"], repo).split()
    lo, hi, tests = 0, len(line) - 1, 0  # line[hi] is bad; everything before lo is good
    while lo < hi:
        mid = (lo + hi) // 2
        tests += 1
        verdict = is_bad(line[mid])
        log(f"{line[mid][:10]}: {'bad' if verdict else 'good'}")
        if verdict:
            hi = mid
        else:
            lo = mid + 1
    return line[hi], tests


def format_gate(r: GateResult) -> str:
    """The gate's table, its rule and its verdict."""
    envs = (f"; environments: base {r.pythons['base']}, head {r.pythons['head']}" if r.pythons else "")
    lines = [f"regression gate: {r.base} (base) against {r.head} (head), {r.rounds} rounds of alternating "
             f"processes ({r.threads} thread each), {r.seconds:.0f} s{envs}",
             f"ratio = base / head step time (below 1: head is slower); {r.family}; a regression is a Holm-"
             f"significant slowdown beyond max({MIN_THRESHOLD:g}x, the benchmark's noise floor), or an accuracy "
             f"drop beyond {ACC_BOUND_PP:g} pp on the same seeds", ""]
    head = f"{'benchmark':<22}{'base ms':>9}{'head ms':>9}  {'ratio [95% CI]':<24}{'threshold':>10}  {'phase that moved':<30}{'acc pp':>8}  verdict"
    lines += [head, "-" * len(head)]
    for b in r.benches:
        if b.status != "ok":
            lines.append(f"{b.name:<22}{'-':>9}{'-':>9}  {'-':<24}{'-':>10}  {'-':<30}{'-':>8}  {b.status}: {b.reason}")
            continue
        ratio = text.ratio(b.ratio, b.low, b.high, digits=3)
        phase = f"{b.phase} {text.ratio_of(b.phase_ratio, digits=2)}" if b.phase else "-"
        verdict = ("REGRESSION" if b.regression else "improvement" if b.improvement else
                   "significant, within the threshold" if b.significant else "no significant difference")
        if b.acc_regression:
            verdict += "; ACCURACY REGRESSION"
        acc = "-" if b.acc_delta_pp is None else f"{b.acc_delta_pp:+.2f}"
        lines.append(f"{b.name:<22}{b.base_ms:>9.2f}{b.head_ms:>9.2f}  {ratio:<24}{b.threshold:>9.3f}x  {phase:<30}"
                     f"{acc:>8}  {verdict}")
    bad = r.regressed
    lines += ["", f"REGRESSION in {len(bad)} benchmark(s): {', '.join(b.name for b in bad)}" if bad
              else "no regression"]
    return "\n".join(lines)
