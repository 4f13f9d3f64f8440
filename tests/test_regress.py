"""The regression gate across commits: trees side by side without touching the checkout, the refusal of trees that
need different dependencies, alternating paired processes, Holm across the set, the phase that moved, the
accuracy gate, and the CLI's smoke run (HEAD against the working tree: no regression)."""

import subprocess
import sys
from pathlib import Path

import pytest

from gnnbench.measure.regress import (ACC_BOUND_PP, MIN_THRESHOLD, Bench, _verdict, dependency_difference, gate,
                                      trees_for)
from tests.conftest import QUICK

ROOT = Path(__file__).resolve().parent.parent


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
        gate({"base": a, "head": b}, [Bench("baseline", QUICK)], rounds=2)
    with pytest.raises(ValueError, match="at least 2 rounds"):
        gate({"base": a, "head": a}, [Bench("baseline", QUICK)], rounds=1)


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
    base = _runs(base_steps, [{"sample": 0.05 * s / 0.1, "forward": 0.05 * s / 0.1} for s in base_steps],
                 [0.80, 0.81, 0.79, 0.80, 0.80])
    # head: sampling 30% slower in every round, the rest unchanged; accuracy 2 pp lower on the same seeds
    head_steps = [0.05 * s / 0.1 * 1.3 + 0.05 * s / 0.1 for s in base_steps]
    head = _runs(head_steps, [{"sample": 0.05 * s / 0.1 * 1.3, "forward": 0.05 * s / 0.1} for s in base_steps],
                 [0.78, 0.79, 0.77, 0.781, 0.78])
    v = _verdict("baseline", base, head)
    assert v.ratio == pytest.approx(1 / 1.15, rel=1e-6) and v.high < 1 and v.threshold >= MIN_THRESHOLD
    assert v.phase == "sample" and v.phase_ratio["ratio"] == pytest.approx(1 / 1.3, rel=1e-6)
    assert v.acc_delta_pp < -ACC_BOUND_PP and v.acc_regression
    same = _verdict("baseline", base, base)
    assert same.ratio == pytest.approx(1.0) and not same.acc_regression and same.acc_delta_pp == 0.0
    missing = _verdict("x", base, [{"status": "unavailable", "reason": "needs CUDA"}] * 5)
    assert missing.status == "unavailable" and missing.reason == "needs CUDA"


def test_the_gate_alternates_paired_processes_and_finds_no_regression_against_itself():
    with trees_for("HEAD", ".", repo=ROOT) as trees:
        result = gate(trees, [Bench("baseline", QUICK)], rounds=2, order_seed=3)
    assert [sorted(o) for o in result.orders] == [["base", "head"]] * 2
    (b,) = result.benches
    assert b.status == "ok" and b.low <= b.ratio <= b.high and b.phase is not None
    assert b.acc_delta_pp == 0.0, "the same code on the same seeds trains the same model"
    assert not result.regressed and result.to_dict()["regression"] is False


def test_cli_smoke_head_against_the_working_tree_says_no_regression():
    out = subprocess.run([sys.executable, "-m", "gnnbench.cli", "regress", "HEAD", "--bench", "baseline",
                          "--rounds", "2", "--steps", "3", "--warmup", "1"], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "no regression" in out.stdout and "Holm over 1 benchmarks" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "gnnbench.cli", "regress", "no-such-rev"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "no-such-rev" in bad.stderr


def test_bisect_names_the_first_bad_commit_of_a_constructed_history(tmp_path):
    from gnnbench.measure.regress import bisect

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


def test_two_environments_on_one_commit_and_different_dependencies_allowed_across_them(tmp_path):
    """--base-python / --head-python: each side runs with its own interpreter (here the same one twice, named
    apart), so HEAD against itself compares environments; trees with different declared dependencies are
    refused in one environment only."""
    a = _tree(tmp_path / "a", ["torch>=2.4"])
    b = _tree(tmp_path / "b", ["torch>=2.5"])
    with pytest.raises(ValueError, match="different dependencies"):
        gate({"base": a, "head": b}, [Bench("baseline", QUICK)], rounds=2)
    with trees_for("HEAD", ".", repo=ROOT) as trees:
        exe = Path(sys.executable)
        other = f"{exe.parent}/./{exe.name}"  # the same environment, named apart
        result = gate(trees, [Bench("baseline", QUICK)], rounds=2, pythons={"base": sys.executable, "head": other})
    assert result.pythons == {"base": sys.executable, "head": other}
    assert result.benches[0].status == "ok" and not result.regressed
    bad = subprocess.run([sys.executable, "-m", "gnnbench.cli", "regress", "HEAD", "--head-python", "/no/python"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "/no/python" in bad.stderr


def test_every_default_benchmark_measures_the_steps_asked_for():
    """A Cluster-GCN epoch on tiny is 2 batches and a full-batch epoch 1: a fixed one-epoch run measured none of
    their steps after the warm-up (their median was nan and the default gate crashed). Epochs are fitted per
    benchmark, never cut short."""
    import dataclasses

    from gnnbench.graphs import generate
    from gnnbench.measure.regress import default_benches, gate_config
    from gnnbench.measure.run import run

    base = gate_config("tiny")
    benches = {b.name: b for b in default_benches(base, ["baseline", "cluster_gcn", "full_batch", "batch_cache"],
                                                  steps=6)}
    assert all(b.config.max_steps_per_epoch is None for b in benches.values())
    graph = generate(base.spec)
    for name in ("cluster_gcn", "baseline"):
        r = run(dataclasses.replace(benches[name].config, seed=0), graph=graph)
        assert r.status == "ok" and r.step_seconds["n"] >= 6, (name, r.step_seconds)
    assert benches["full_batch"].config.epochs >= base.warmup_steps + 6
    with pytest.raises(ValueError, match="at least 2 measured steps"):
        default_benches(base, ["baseline"], steps=1)


def test_a_benchmark_without_measured_steps_is_reported_not_summarized():
    v = _verdict("x", [{"status": "ok", "step": 0.01, "phases": {}, "test": 0.5}],
                 [{"status": "no measured steps", "reason": "the run ended within its warm-up"}])
    assert v.status == "no measured steps" and "warm-up" in v.reason


def test_micro_benchmarks_time_one_code_path_and_a_failing_one_is_reported(tmp_path):
    """The sampler, gather and aggregation paths timed alone, in both trees, with no accuracy to gate; a
    micro-benchmark whose code fails in a tree (an older tree without the API) is reported unavailable with the
    error instead of failing the gate."""
    import json

    from gnnbench.cli.options import parse_benches
    from gnnbench.measure.regress import MICRO, WORKER, _run_tree, _spec_file, default_benches, gate_config

    benches = default_benches(gate_config("tiny"), list(MICRO) + ["baseline"], steps=3)
    assert [b.name for b in benches] == list(MICRO) + ["baseline"]
    with trees_for("HEAD", ".", repo=ROOT) as trees:
        r = gate(trees, benches[:3], rounds=2)
    for v in r.benches:
        assert v.status == "ok" and v.base_ms > 0 and v.acc_delta_pp is None and not v.acc_regression, v
    # a stored run says which commits it compared and when it ended (the report's gate history orders by it)
    assert len(r.commits["base"]) == 40 and r.commits["head"].split("+")[0] and r.finished.endswith("Z")
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    spec = _spec_file([Bench("micro:missing", benches[0].config)], 0, tmp_path)
    out = _run_tree(ROOT, spec, tmp_path / "out.json", 1, worker, 120)
    assert out["micro:missing"]["status"] == "unavailable" and "micro:missing" in out["micro:missing"]["reason"]
    assert json.loads((tmp_path / "out.json").read_text()) == out
    with pytest.raises(Exception, match="unknown micro-benchmark 'micro:nope'"):
        parse_benches("micro:nope")
