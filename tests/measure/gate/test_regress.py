"""The regression gate across commits: trees side by side without touching the checkout, the refusal of trees that
need different dependencies, alternating paired processes, Holm across the set, the phase that moved, the
accuracy gate, and the CLI's smoke run (HEAD against the working tree: no regression)."""

import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gnnbench.measure.gate import Bench, GateOptions, gate
from gnnbench.measure.gate.trees import dependency_difference, trees_for
from gnnbench.measure.gate.verdicts import ACC_BOUND_PP, MIN_THRESHOLD, _verdict
from gnnbench.measure.run import RunResult
from tests.helpers import QUICK, ROOT, result_of


def _git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _tree(path: Path, deps: list[str]) -> Path:
    (path / "gnnbench").mkdir(parents=True)
    (path / "gnnbench" / "__init__.py").write_text("")
    (path / "pyproject.toml").write_text(f"[project]\nname = 'x'\ndependencies = {deps!r}\n")
    return path


def test_trees_that_need_different_dependencies_are_refused_with_the_difference(tmp_path):
    a = _tree(tmp_path / "a", ["torch>=2.4", "torch-geometric>=2.6"])
    b = _tree(tmp_path / "b", ["torch>=2.4", "torch-geometric>=2.7"])
    diff = dependency_difference(a, b)
    assert "torch-geometric>=2.6" in diff and "torch-geometric>=2.7" in diff
    assert dependency_difference(a, a) is None
    with pytest.raises(ValueError, match="different dependencies.*two environments"):
        gate({"base": a, "head": b}, [Bench("baseline", QUICK)], GateOptions(rounds=2))
    with pytest.raises(ValueError, match="at least 2 rounds"):
        gate({"base": a, "head": a}, [Bench("baseline", QUICK)], GateOptions(rounds=1))


def test_commits_are_checked_out_beside_the_checkout_and_removed_after(tmp_path):
    repo = _tree(tmp_path / "repo", ["torch"])
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one", "--allow-empty")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "two")
    (repo / "gnnbench" / "__init__.py").write_text("# uncommitted\n")
    with pytest.raises(ValueError, match="has no gnnbench package"):  # the first commit is empty
        with trees_for("HEAD~1", ".", repo=repo):
            pass
    with trees_for("HEAD", ".", repo=repo) as trees:
        assert trees["head"] == repo.resolve() and trees["base"] != repo.resolve()
        assert (trees["base"] / "gnnbench" / "__init__.py").read_text() == ""
        made = trees["base"]
    assert not made.exists(), "the temporary worktree is removed"
    assert (repo / "gnnbench" / "__init__.py").read_text() == "# uncommitted\n", "the checkout is untouched"
    assert len(_git(repo, "worktree", "list").splitlines()) == 1, "no worktree left registered"
    with pytest.raises(ValueError, match="no-such-rev"):
        with trees_for("no-such-rev", ".", repo=repo):
            pass


def _runs(steps, phases, tests):
    return [{"status": "ok", "step": s, "phases": p, "test": t} for s, p, t in zip(steps, phases, tests)]


def test_a_slower_phase_is_named_and_an_accuracy_drop_is_gated():
    base_steps = [0.100, 0.102, 0.098, 0.101, 0.099]
    base = _runs(
        base_steps,
        [{"sample": 0.05 * s / 0.1, "forward": 0.05 * s / 0.1} for s in base_steps],
        [0.80, 0.81, 0.79, 0.80, 0.80],
    )
    # head: sampling 30% slower in every round, the rest unchanged; accuracy 2 pp lower on the same seeds
    head_steps = [0.05 * s / 0.1 * 1.3 + 0.05 * s / 0.1 for s in base_steps]
    head = _runs(
        head_steps,
        [{"sample": 0.05 * s / 0.1 * 1.3, "forward": 0.05 * s / 0.1} for s in base_steps],
        [0.78, 0.79, 0.77, 0.781, 0.78],
    )
    v = _verdict("baseline", base, head)
    assert v.ratio == pytest.approx(1 / 1.15, rel=1e-6) and v.high < 1 and v.threshold >= MIN_THRESHOLD
    assert v.phase == "sample" and v.phase_ratio["ratio"] == pytest.approx(1 / 1.3, rel=1e-6)
    assert v.acc_delta_pp < -ACC_BOUND_PP and v.acc_regression
    same = _verdict("baseline", base, base)
    assert same.ratio == pytest.approx(1.0) and not same.acc_regression and same.acc_delta_pp == 0.0
    lost = _verdict("x", base, [{"status": "unavailable", "reason": "needs CUDA"}] * 5)
    assert lost.status == "unavailable" and lost.lost and "fine in base" in lost.reason and "needs CUDA" in lost.reason
    both = _verdict(
        "x",
        [{"status": "unavailable", "reason": "needs CUDA"}] * 5,
        [{"status": "unavailable", "reason": "needs CUDA"}] * 5,
    )
    assert both.status == "unavailable" and not both.lost and "base: needs CUDA" in both.reason
    new = _verdict("x", [{"status": "failed", "reason": "old API"}] * 5, base)
    assert new.status == "failed" and not new.lost, "a benchmark BASE could not run is reported, never a failure"


@pytest.mark.slow
def test_the_gate_alternates_paired_processes_and_finds_no_regression_against_itself():
    with trees_for("HEAD", ".", repo=ROOT) as trees:
        result = gate(trees, [Bench("baseline", QUICK)], GateOptions(rounds=2, order_seed=3))
    assert [sorted(o) for o in result.orders] == [["base", "head"]] * 2
    (b,) = result.benches
    assert b.status == "ok" and b.low <= b.ratio <= b.high and b.phase is not None
    assert b.acc_delta_pp == 0.0, "the same code on the same seeds trains the same model"
    assert not result.regressed and result.to_dict()["regression"] is False


@pytest.mark.slow
def test_cli_smoke_run_is_inconclusive_not_a_pass():
    """The in-suite smoke run (2 rounds of 3 steps, no extra rounds) proves the command runs end to end; it
    cannot see a 0.1% slowdown (with 2 rounds its t quantile alone is 12.7), so it says so and exits 3, never
    'no regression'."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gnnbench.cli",
            "regress",
            "HEAD",
            "--bench",
            "baseline",
            "--rounds",
            "2",
            "--steps",
            "3",
            "--warmup",
            "1",
            "--budget",
            "0",
            "--sensitivity",
            "0.001",
            "--counts",
            "0",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 3, (out.stdout, out.stderr)
    assert "inconclusive here" in out.stdout and "Holm over 1 benchmarks" in out.stdout
    assert "no regression (" not in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "gnnbench.cli", "regress", "no-such-rev"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "no-such-rev" in bad.stderr


def test_bisect_names_the_first_bad_commit_of_a_constructed_history(tmp_path):
    from gnnbench.measure.gate.trees import bisect

    repo = tmp_path / "history"
    repo.mkdir()
    _git(repo, "init", "-q")
    commits = []
    for i in range(9):  # commit 5 makes the step slow, and it stays slow
        (repo / "speed.txt").write_text("slow" if i >= 5 else f"fast {i}")
        _git(repo, "add", "-A")
        _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", f"c{i}", "--allow-empty")
        commits.append(_git(repo, "rev-parse", "HEAD"))

    def is_bad(commit):
        return _git(repo, "show", f"{commit}:speed.txt") == "slow"

    first, tests = bisect(commits[0], commits[-1], is_bad, repo=repo)
    assert first == commits[5] and tests <= 3, "log2(8) tests"
    assert bisect(commits[4], commits[5], is_bad, repo=repo) == (commits[5], 0)
    with pytest.raises(ValueError, match="not an ancestor"):
        bisect(commits[-1], commits[0], is_bad, repo=repo)


@pytest.mark.slow
def test_two_environments_on_one_commit_and_different_dependencies_allowed_across_them(tmp_path):
    """--base-python / --head-python: each side runs with its own interpreter (here the same one twice, named
    apart), so HEAD against itself compares environments; trees with different declared dependencies are
    refused in one environment only."""
    a = _tree(tmp_path / "a", ["torch>=2.4"])
    b = _tree(tmp_path / "b", ["torch>=2.5"])
    with pytest.raises(ValueError, match="different dependencies"):
        gate({"base": a, "head": b}, [Bench("baseline", QUICK)], GateOptions(rounds=2))
    with trees_for("HEAD", ".", repo=ROOT) as trees:
        exe = Path(sys.executable)
        other = f"{exe.parent}/./{exe.name}"  # the same environment, named apart
        result = gate(trees, [Bench("baseline", QUICK)], GateOptions(rounds=2, pythons=(sys.executable, other)))
    assert result.pythons == {"base": sys.executable, "head": other}
    assert result.benches[0].status == "ok" and not result.regressed
    bad = subprocess.run(
        [sys.executable, "-m", "gnnbench.cli", "regress", "HEAD", "--head-python", "/no/python"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "/no/python" in bad.stderr


def test_every_default_benchmark_measures_the_steps_asked_for():
    """A Cluster-GCN epoch on tiny is 2 batches and a full-batch epoch 1: a fixed one-epoch run measured none of
    their steps after the warm-up (their median was nan and the default gate crashed). Epochs are fitted per
    benchmark, never cut short."""
    import dataclasses

    from gnnbench.graphs import generate
    from gnnbench.measure.gate import default_benches, gate_config
    from gnnbench.measure.run import run

    base = gate_config("tiny")
    benches = {
        b.name: b for b in default_benches(base, ["baseline", "cluster_gcn", "full_batch", "batch_cache"], steps=6)
    }
    assert all(b.config.max_steps_per_epoch is None for b in benches.values())
    graph = generate(base.spec)
    for name in ("cluster_gcn", "baseline"):
        r = run(dataclasses.replace(benches[name].config, seed=0), graph=graph)
        assert r.status == "ok" and r.step_seconds.n >= 6, (name, r.step_seconds)
    assert benches["full_batch"].config.epochs >= base.warmup_steps + 6
    with pytest.raises(ValueError, match="at least 2 measured steps"):
        default_benches(base, ["baseline"], steps=1)


def test_a_benchmark_without_measured_steps_is_reported_not_summarized():
    v = _verdict(
        "x",
        [{"status": "ok", "step": 0.01, "phases": {}, "test": 0.5}],
        [{"status": "no measured steps", "reason": "the run ended within its warm-up"}],
    )
    assert v.status == "no measured steps" and "warm-up" in v.reason


@pytest.mark.slow
def test_micro_benchmarks_time_one_code_path_and_a_failing_one_is_reported(tmp_path):
    """The sampler, gather and aggregation paths timed alone, in both trees, with no accuracy to gate; a
    micro-benchmark whose code fails in a tree (an older tree without the API) is reported unavailable with the
    error instead of failing the gate."""
    import json

    from gnnbench.cli.options import parse_benches
    from gnnbench.measure.gate import MICRO, default_benches, gate_config
    from gnnbench.measure.gate.rounds import run_tree, spec_file
    from gnnbench.measure.gate.worker import script_in

    benches = default_benches(gate_config("tiny"), list(MICRO) + ["baseline"], steps=3)
    assert [b.name for b in benches] == list(MICRO) + ["baseline"]
    with trees_for("HEAD", ".", repo=ROOT) as trees:
        r = gate(trees, benches[:3], GateOptions(rounds=2))
    for v in r.benches:
        assert v.status == "ok" and v.base_ms > 0 and v.acc_delta_pp is None and not v.acc_regression, v
    # a stored run says which commits it compared and when it ended (the report's gate history orders by it)
    assert len(r.commits["base"]) == 40 and r.commits["head"].split("+")[0] and r.finished.endswith("Z")
    worker = script_in(tmp_path)
    spec = spec_file([Bench("micro:missing", benches[0].config)], 0, tmp_path)
    out = run_tree(ROOT, spec, tmp_path / "out.json", 1, worker, 120)
    assert out["micro:missing"]["status"] == "unavailable" and "micro:missing" in out["micro:missing"]["reason"]
    assert json.loads((tmp_path / "out.json").read_text()) == out
    with pytest.raises(Exception, match="unknown micro-benchmark 'micro:nope'"):
        parse_benches("micro:nope")


def test_the_worker_is_a_module_of_the_package_with_the_gates_micro_table(tmp_path):
    """The benchmark process runs gnnbench/measure/gate/worker.py, copied whole and run by path in each tree: it
    imports neither torch nor gnnbench at import time (each tree's own gnnbench is imported in the process), its
    table is the gate's micro-benchmark set, and a run's result becomes the gate's record (no process here)."""
    import ast
    from types import SimpleNamespace

    from gnnbench.measure.gate import MICRO
    from gnnbench.measure.gate import worker as gate_worker

    assert MICRO == tuple(gate_worker.MICRO_BENCHES) == ("micro:sampler", "micro:gather", "micro:aggregation")
    assert all(callable(f) for f in gate_worker.MICRO_BENCHES.values())
    source = Path(gate_worker.__file__).read_text()
    top = [n for n in ast.parse(source).body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = [a.name for n in top for a in n.names] + [n.module or "" for n in top if isinstance(n, ast.ImportFrom)]
    assert not [x for x in names if x.split(".")[0] in ("torch", "gnnbench")], names
    assert gate_worker.script_in(tmp_path).read_text() == source
    stored = {
        "status": "ok",
        "config": {},
        "step_seconds": {"median": 0.01, "n": 6},
        "step_seconds_all": [0.01] * 6,
        "epoch_seconds": [0.5, 0.1, 0.12],
        "graph": {"prepare_seconds": 0.2},
        "phases": {"sample": {"median": 0.004}},
        "accuracy": {"test": 0.8},
        "setup_seconds": 0.5,
        "steps_per_epoch": 8,
    }
    # this tree's typed result, and an older tree's, whose blocks were dicts: the worker reads both as JSON
    older = SimpleNamespace(to_dict=lambda: stored)
    for r in (result_of(stored), older):
        res = gate_worker.bench("baseline", {}, None, {"seed": 0}, lambda cfg, r=r: r)
        assert (res["status"], res["step"], res["steps"], res["phases"], res["test"]) == (
            "ok",
            0.01,
            6,
            {"sample": 0.004},
            0.8,
        )
        assert res["setup"] == 0.5 and res["setup_phases"] == {"prepare": 0.2, "assemble": pytest.approx(0.3)}
        assert res["epoch"] == pytest.approx(0.11) and res["epoch_phases"]["steps"] == pytest.approx(0.08)
    refused = RunResult(status="unavailable", config={}, unavailable={"device": "needs CUDA"})
    assert gate_worker.bench("x", {}, None, {"seed": 0}, lambda cfg: refused) == {
        "status": "unavailable",
        "reason": "{'device': 'needs CUDA'}",
    }


# ------------------------------------------------------------ failures, sensitivity, setup and epoch time
def _copy_tree(tmp_path: Path, name: str) -> Path:
    """A copy of this project's package beside the checkout (a HEAD to break on purpose)."""
    import shutil

    tree = tmp_path / name
    shutil.copytree(ROOT / "gnnbench", tree / "gnnbench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def _head_first_seed() -> int:
    """An order seed whose first round runs head before base (a crash there stops the gate at once)."""
    import random

    return next(
        s for s in range(100) if (o := ["base", "head"], random.Random(s * 1_000_003).shuffle(o), o)[2][0] == "head"
    )


@pytest.mark.slow
def test_a_head_whose_sparse_kernel_raises_loses_the_benchmark_and_fails_the_gate(tmp_path):
    """The issue's case: HEAD's sparse-aggregation kernel raises. The benchmark is lost (fine in BASE), the gate
    fails (exit 1) and names it with the error; the baseline beside it is still judged."""
    from gnnbench import registry
    from gnnbench.measure.gate import format_gate

    head = _copy_tree(tmp_path, "head")
    agg = head / "gnnbench" / "models" / "aggregation.py"
    src = agg.read_text()
    marker = "    def _spmm(self, values: Tensor, h: Tensor) -> Tensor:\n"
    assert marker in src
    # broken on training batches only: evaluation runs the CSR product for every run, the baseline's too
    agg.write_text(
        src.replace(
            marker,
            marker + "        if self.target_start is None:\n            raise RuntimeError('broken sparse kernel')\n",
        )
    )
    benches = [Bench("baseline", QUICK), Bench("sparse_agg", registry.config_for(QUICK, ["sparse_agg"]))]
    result = gate({"base": ROOT, "head": head}, benches, GateOptions(rounds=2))
    base_v, sparse_v = result.benches
    assert base_v.status == "ok" and not base_v.lost
    assert sparse_v.lost and sparse_v.status == "failed" and "broken sparse kernel" in sparse_v.reason
    assert result.regressed == [sparse_v] and result.exit_status == 1 and result.failure is None
    text = format_gate(result)
    assert "LOST in head: sparse_agg" in text and "broken sparse kernel" in text


def test_a_benchmark_process_that_crashes_gives_exit_2_with_its_side_and_output(tmp_path):
    from gnnbench.measure.gate import format_gate

    head = _copy_tree(tmp_path, "head")
    init = head / "gnnbench" / "__init__.py"
    init.write_text(
        "import os, sys\nsys.stderr.write('segfault in a kernel\\n'); sys.stderr.flush(); os._exit(139)\n"
        + init.read_text()
    )
    result = gate(
        {"base": ROOT, "head": head}, [Bench("baseline", QUICK)], GateOptions(rounds=2, order_seed=_head_first_seed())
    )
    f = result.failure
    assert f is not None and (f.side, f.kind, f.round, f.returncode) == ("head", "crashed", 0, 139)
    assert "segfault in a kernel" in f.stderr_tail
    assert result.exit_status == 2 and result.benches[0].status == "not judged"
    doc = result.to_dict()
    assert doc["failure"]["side"] == "head" and doc["exit_status"] == 2
    text = format_gate(result)
    assert "GATE FAILED: head's benchmark process crashed in round 1 (exit 139)" in text and "segfault" in text


def test_a_benchmark_process_that_hangs_is_killed_and_gives_exit_2(tmp_path):
    """A head that never finishes (here an interpreter that hangs) is killed at the timeout, with what it
    started, and the gate reports it instead of waiting or raising."""
    from gnnbench.measure.gate import format_gate

    hang = tmp_path / "hang-python"
    pid_file = tmp_path / "child.pid"
    hang.write_text(f"#!/bin/sh\necho 'stuck in a kernel' >&2\nsleep 120 &\necho $! > {pid_file}\nwait\n")
    hang.chmod(0o755)
    result = gate(
        {"base": ROOT, "head": ROOT},
        [Bench("baseline", QUICK)],
        GateOptions(
            rounds=2,
            order_seed=_head_first_seed(),
            pythons=(sys.executable, str(hang)),
            timeout=3,
            design="alternating",
        ),
    )
    f = result.failure
    assert f is not None and (f.side, f.kind, f.returncode) == ("head", "timed out", None)
    assert "stuck in a kernel" in f.stderr_tail and result.exit_status == 2
    child = int(pid_file.read_text())
    try:  # its child was killed with it: gone, or a zombie awaiting its reaper
        assert "State:\tZ" in Path(f"/proc/{child}/status").read_text()
    except FileNotFoundError:
        pass
    assert "timed out in round 1" in format_gate(result)


def test_in_a_duet_the_side_that_hangs_is_named_not_the_peer_waiting_for_it(tmp_path):
    """Both sides of a duet round start at once; BASE reaches its first barrier and waits there for a HEAD
    that hangs, both are killed at the timeout, and the failure names HEAD (behind at the barriers)."""
    hang = tmp_path / "hang-python"
    hang.write_text("#!/bin/sh\necho 'stuck in a kernel' >&2\nsleep 120 &\nwait\n")
    hang.chmod(0o755)
    result = gate(
        {"base": ROOT, "head": ROOT},
        [Bench("baseline", QUICK)],
        GateOptions(rounds=2, pythons=(sys.executable, str(hang)), timeout=15, cores=[0, 1]),
    )
    assert result.design == "duet" and result.cores == [{"base": 0, "head": 1}]
    f = result.failure
    assert f is not None and (f.side, f.kind) == ("head", "timed out") and result.exit_status == 2


def _fake_runner(
    step_noise: dict[str, float],
    *,
    slow: dict[str, float] | None = None,
    setup_slow: float = 1.0,
    calls: list | None = None,
):
    """A benchmark process without processes: per side, each benchmark's median step is 10 ms times a
    round effect of ``step_noise[role]`` (a fixed pattern, so the spread is known), ``slow[name]`` slower on the head side; setup 0.5 s
    (its preparation ``setup_slow`` slower on head) and an epoch of 8 steps."""
    import json
    import random

    def runner(role, spec, out):
        doc = json.loads(Path(spec).read_text())
        if calls is not None:
            calls.append((role, doc["seed"], sorted(doc["benches"])))
        res = {}
        for name in doc["benches"]:
            rng = random.Random(f"{role}-{name}-{doc['seed']}")
            # a fixed spread: round effects of +-1 and +-2 times the noise, in turn
            step = 0.010 * math.exp(step_noise[role] * (1, -2, 2, -1)[(doc["seed"] + (role == "head")) % 4])
            if role == "head":
                step *= (slow or {}).get(name, 1.0)
            prepare = 0.3 * math.exp(rng.gauss(0, 0.01)) * (setup_slow if role == "head" else 1.0)
            assemble = 0.2 * math.exp(rng.gauss(0, 0.01))
            res[name] = {
                "status": "ok",
                "step": step,
                "steps": 20,
                "phases": {"sample": step / 2, "forward": step / 2},
                "test": 0.8,
                "seconds": 0.01,
                "setup": prepare + assemble,
                "setup_phases": {"prepare": prepare, "assemble": assemble},
                "epoch": 8 * step,
                "epoch_phases": {"steps": 8 * step, "per-epoch cost": 1e-4},
            }
        return res

    return runner


def _bench_pair(tmp_path):
    tree = _tree(tmp_path / "t", ["torch"])
    return {"base": tree, "head": tree}, [Bench("baseline", QUICK), Bench("other", QUICK)]


def test_a_noisy_side_is_inconclusive_not_no_regression_and_extra_rounds_go_only_where_needed(tmp_path):
    from gnnbench.measure.gate import DEFAULT_SENSITIVITY, format_gate

    trees, benches = _bench_pair(tmp_path)
    quiet = gate(trees, benches, GateOptions(rounds=5), runner=_fake_runner({"base": 0.005, "head": 0.005}))
    assert all(
        b.status == "ok" and not b.inconclusive and b.detectable <= 1 + DEFAULT_SENSITIVITY for b in quiet.benches
    ), [(b.name, b.detectable) for b in quiet.benches]
    assert quiet.exit_status == 0 and "no regression (every benchmark could see a 10% slowdown)" in format_gate(quiet)
    noisy = gate(trees, benches, GateOptions(rounds=5), runner=_fake_runner({"base": 0.005, "head": 0.25}))
    assert all(b.inconclusive and b.detectable > 1.10 and not b.regression for b in noisy.benches)
    assert noisy.exit_status == 3 and not noisy.regressed
    text = format_gate(noisy)
    assert "inconclusive here" in text and "no regression (" not in text
    # with a budget, rounds are added to the inconclusive benchmark only (one whose spread resolves 10% by
    # max_rounds), until it resolves it or max_rounds
    calls: list = []
    mixed = gate(trees, benches, GateOptions(rounds=5, budget_seconds=600, max_rounds=9), runner=_mixed_runner(calls))
    by = {b.name: b for b in mixed.benches}
    added = mixed.extra_rounds.get("other", 0)
    assert 1 <= added <= 4 and set(mixed.extra_rounds) == {"other"} and mixed.rounds == 5 + added
    assert [names for role, seed, names in calls if seed >= 5] == [["other"]] * (2 * added)
    assert by["baseline"].rounds == 5 and by["other"].rounds == 5 + added
    # a budget that holds no further round adds none; the inconclusive entry does not make the run inconclusive
    # (the baseline, which every configuration's code runs through, could see 10%)
    none = gate(trees, benches, GateOptions(rounds=5, budget_seconds=0), runner=_mixed_runner([]))
    assert (
        none.rounds == 5
        and none.extra_rounds == {}
        and none.inconclusive == [b for b in none.benches if b.name == "other"]
    )
    assert none.blind == [] and none.exit_status == 0
    # a spread no round within max_rounds could narrow to 10% gets no round at all
    hopeless = gate(
        trees, benches, GateOptions(rounds=5, budget_seconds=600, max_rounds=9), runner=_mixed_runner([], 0.3)
    )
    assert hopeless.extra_rounds == {} and [b.name for b in hopeless.inconclusive] == ["other"]


def _mixed_runner(calls, head_noise: float = 0.028):
    quiet = _fake_runner({"base": 0.005, "head": 0.005})
    noisy = _fake_runner({"base": 0.005, "head": head_noise}, calls=calls)

    def runner(role, spec, out):
        res = quiet(role, spec, out)
        res.update({k: v for k, v in noisy(role, spec, out).items() if k == "other"})
        return res

    return runner


def test_a_real_slowdown_on_a_quiet_machine_is_a_regression_and_its_rounds_extend_nothing(tmp_path):
    trees, benches = _bench_pair(tmp_path)
    r = gate(
        trees,
        benches,
        GateOptions(rounds=5, budget_seconds=600),
        runner=_fake_runner({"base": 0.005, "head": 0.005}, slow={"other": 1.12}),
    )
    by = {b.name: b for b in r.benches}
    assert by["other"].regression and by["other"].phase in ("sample", "forward")
    assert not by["baseline"].regression and r.extra_rounds == {} and r.exit_status == 1


def test_setup_time_is_gated_beside_the_step_with_the_part_that_moved(tmp_path):
    from gnnbench.measure.gate import format_gate

    trees, benches = _bench_pair(tmp_path)
    r = gate(trees, benches, GateOptions(rounds=5), runner=_fake_runner({"base": 0.005, "head": 0.005}, setup_slow=3.0))
    for b in r.benches:
        assert not b.regression, "the step did not move"
        assert b.setup.regression and b.setup.phase == "prepare" and b.setup.ratio < 0.5
        assert b.epoch is not None and not b.epoch.regression
    assert r.exit_status == 1 and {b.name for b in r.regressed} == {"baseline", "other"}
    assert "  setup" in format_gate(r)


def test_entries_the_gate_cannot_run_here_are_listed_with_the_reason():
    import torch

    from gnnbench.measure.gate import default_benches, gate_config

    skipped: dict[str, str] = {}
    names = [b.name for b in default_benches(gate_config("tiny"), skipped=skipped)]
    assert "baseline" in names and "data_parallel" not in names
    assert "multi-rank" in skipped["data_parallel"] and "multi-rank" in skipped["partition_metis"]
    if not torch.cuda.is_available():
        assert "pin_memory" in skipped and "CUDA" in skipped["pin_memory"]
    assert not set(skipped) & set(names)


def test_a_crash_mid_process_names_the_benchmark_it_was_running_and_keeps_the_earlier_rounds(tmp_path):
    """HEAD's process dies in round 3 while running 'other' (its marker says so), before 'third': 'other' is
    lost, 'third' was never reached that round and keeps its verdict from the rounds before, and so does the
    baseline measured before the crash."""
    import json

    from gnnbench.measure.gate import format_gate
    from gnnbench.measure.gate.rounds import WorkerFailed

    trees, benches = _bench_pair(tmp_path)
    benches = benches + [Bench("third", QUICK)]
    fine = _fake_runner({"base": 0.005, "head": 0.005})

    def runner(role, spec, out):
        res = fine(role, spec, out)
        if role == "head" and json.loads(Path(spec).read_text())["seed"] == 2:
            raise WorkerFailed(
                "crashed", -11, "Segmentation fault", {"baseline": res["baseline"], "other": {"status": "running"}}
            )
        return res

    r = gate(trees, benches, GateOptions(rounds=4, order_seed=0), runner=runner)
    by = {b.name: b for b in r.benches}
    assert r.failure.side == "head" and r.failure.round == 2 and r.exit_status == 2
    assert by["other"].lost and by["other"].status == "crashed" and "while running it" in by["other"].reason
    assert by["third"].status == "ok" and by["third"].rounds == 2 and not by["third"].lost
    assert by["baseline"].status == "ok" and by["baseline"].rounds in (2, 3)
    text = format_gate(r)
    assert "LOST in head: other" in text and "third" not in text.split("LOST in head:")[1]


def test_a_gate_that_judged_nothing_is_not_a_pass(tmp_path):
    from gnnbench.measure.gate import format_gate

    trees, benches = _bench_pair(tmp_path)

    def old_api(role, spec, out):
        return {b.name: {"status": "failed", "reason": "ImportError: no such API"} for b in benches}

    r = gate(trees, benches, GateOptions(rounds=2), runner=old_api)
    assert not r.judged and not r.regressed and r.exit_status == 3
    assert "nothing was judged" in format_gate(r)


def test_extra_rounds_go_by_spread_and_pair_base_and_head_on_one_seed(tmp_path):
    """The rounds added go to the benchmark whose spread cannot see 10% yet (whatever its ratio: here 3% faster,
    within the threshold); every added round runs both sides on the same seed."""
    import json

    trees, benches = _bench_pair(tmp_path)
    seen: list = []
    noisy_slow = _fake_runner({"base": 0.005, "head": 0.028}, slow={"other": 0.97})  # 3% faster head, noisy

    def runner(role, spec, out):
        seen.append((json.loads(Path(spec).read_text())["seed"], role))
        res = _fake_runner({"base": 0.005, "head": 0.005})(role, spec, out)
        res["other"] = noisy_slow(role, spec, out)["other"]
        return res

    r = gate(trees, benches, GateOptions(rounds=5, budget_seconds=600, max_rounds=9), runner=runner)
    added = r.extra_rounds.get("other", 0)
    assert set(r.extra_rounds) == {"other"} and 1 <= added <= 4
    seeds = {}
    for seed, role in seen:
        seeds.setdefault(seed, []).append(role)
    assert all(sorted(v) == ["base", "head"] for v in seeds.values()) and sorted(seeds) == list(range(5 + added))


def test_the_detectable_slowdown_has_the_power_it_claims():
    """The noncentral t's power at the reported shift is 80% (checked against scipy and by simulation), and the
    threshold binds when it is the larger requirement."""
    import numpy as np
    from scipy import stats

    from gnnbench.measure.gate.verdicts import POWER, _detectable
    from gnnbench.measure.stats import detectable_shift, t_test_power

    for df, alpha in ((4, 0.05), (7, 0.002), (19, 0.05 / 20)):
        lam = detectable_shift(df, alpha, POWER)
        c = stats.t.ppf(1 - alpha / 2, df)
        assert stats.nct.sf(c, df, lam) + stats.nct.cdf(-c, df, lam) == pytest.approx(POWER, abs=2e-3)
        assert t_test_power(0.0, df, alpha) == pytest.approx(alpha, rel=0.02)
    rng = np.random.default_rng(0)
    lam = detectable_shift(4, 0.04 / 20, POWER)  # 5 rounds, 20 benchmarks: where the central-t sum said 71%
    t = (rng.standard_normal(400_000) + lam) / np.sqrt(rng.chisquare(4, 400_000) / 4)
    assert (np.abs(t) > stats.t.ppf(1 - 0.001, 4)).mean() == pytest.approx(POWER, abs=0.005)
    assert _detectable(5, 1e-6, 0.002, 1.2) == pytest.approx(1.2, rel=1e-3), "a tiny spread: the threshold binds"
    assert math.isinf(_detectable(1, 0.01, 0.05, 1.03))


# --- tiers: the baseline and the micro-benchmarks first ---------------------------------------------------


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12), st.floats(0.001, 0.2))
def test_weighted_holm_with_equal_weights_is_holm(ps, alpha):
    from gnnbench.measure.gate.verdicts import weighted_holm
    from gnnbench.measure.stats import holm

    assert weighted_holm(ps, [1.0] * len(ps), alpha) == holm(ps, alpha)


def test_weighted_holm_keeps_the_family_wise_rate_under_any_weights():
    import numpy as np

    from gnnbench.measure.gate.verdicts import tier_weights, weighted_holm

    names = ["baseline", "micro:sampler", "micro:gather", "micro:aggregation"] + [f"e{i}" for i in range(19)]
    w = tier_weights(names)
    assert sum(w.values()) == pytest.approx(1.0) and w["baseline"] == pytest.approx(0.75 / 4)
    assert w["e0"] == pytest.approx(0.25 / 19) and tier_weights(["e0", "e1"]) == {"e0": 0.5, "e1": 0.5}
    rng = np.random.default_rng(0)
    weights = [w[n] for n in names]
    rate = np.mean([any(weighted_holm(list(rng.uniform(size=len(names))), weights, 0.04)) for _ in range(20000)])
    assert rate <= 0.04 + 3 * math.sqrt(0.04 * 0.96 / 20000)
    with pytest.raises(ValueError, match="positive weight"):
        weighted_holm([0.1, 0.2], [1.0, 0.0], 0.05)


def _many(n_entries: int = 20):
    return [Bench("baseline", QUICK)] + [Bench(f"entry{i}", QUICK) for i in range(n_entries)]


def test_a_slowdown_of_a_shared_path_is_caught_on_the_baseline_among_many_entries(tmp_path):
    """A 6% slowdown on the baseline only, among 20 quiet entries: its p-value clears the baseline's tier level
    (0.04 x 0.75 with no micro-benchmark beside it) although not a flat Holm's 0.04 / 21."""
    trees = {"base": _tree(tmp_path / "t", ["torch"]), "head": tmp_path / "t"}
    r = gate(
        trees,
        _many(),
        GateOptions(rounds=5),
        runner=_fake_runner({"base": 0.004, "head": 0.006}, slow={"baseline": 1.06}),
    )
    by = {b.name: b for b in r.benches}
    assert 0.04 / 21 < by["baseline"].p_value <= by["baseline"].alpha == pytest.approx(0.03)
    assert by["baseline"].regression and r.exit_status == 1
    assert all(by[f"entry{i}"].alpha == pytest.approx(0.01 / 20) for i in range(20))


def test_the_threshold_is_the_practical_minimum_not_the_base_sides_noise():
    base = _runs([0.10, 0.13, 0.08, 0.11, 0.09], [{"forward": 0.1}] * 5, [0.8] * 5)  # a base side spread 18%
    head = _runs([0.11, 0.143, 0.088, 0.121, 0.099], [{"forward": 0.11}] * 5, [0.8] * 5)  # 10% slower each round
    v = _verdict("baseline", base, head)
    assert v.threshold == MIN_THRESHOLD and v.ratio == pytest.approx(1 / 1.1, rel=1e-3)


def test_an_inconclusive_baseline_makes_the_run_inconclusive_an_inconclusive_entry_alone_does_not(tmp_path):
    from gnnbench.measure.gate import format_gate

    trees, benches = _bench_pair(tmp_path)

    def runner(noisy: str):
        quiet, loud = _fake_runner({"base": 0.005, "head": 0.005}), _fake_runner({"base": 0.005, "head": 0.3})

        def run(role, spec, out):
            res = quiet(role, spec, out)
            res[noisy] = loud(role, spec, out)[noisy]
            return res

        return run

    entry = gate(trees, benches, GateOptions(rounds=5), runner=runner("other"))
    assert [b.name for b in entry.inconclusive] == ["other"] and entry.blind == [] and entry.exit_status == 0
    assert "inconclusive here: other" in format_gate(entry) and "no regression (every" not in format_gate(entry)
    base = gate(trees, benches, GateOptions(rounds=5), runner=runner("baseline"))
    assert [b.name for b in base.blind] == ["baseline"] and base.exit_status == 3
    assert "exit 3" in format_gate(base)
