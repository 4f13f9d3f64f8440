"""Counted instructions in the regression gate (``gnnbench/measure/gate/counts.py``, ``regress.count_gate``): the dumps
read back per region, the verdict against the tolerance and the run's own spread, the gate's exit status and
text with counts beside the wall clock, and a real count under callgrind (marked slow: minutes)."""

import json
import shutil
from pathlib import Path

import pytest

from gnnbench.measure.gate import (
    COUNT_CALLS,
    NOT_WORK,
    Bench,
    GateOptions,
    count_gate,
    format_gate,
    gate,
    per_unit,
)
from gnnbench.measure.gate import counts as cn
from tests.helpers import QUICK, ROOT
from tests.measure.gate.test_regress import _fake_runner, _tree


def _dump(path: Path, name: str | None, ir: int, *, events: str = "Ir", extra: str = "") -> None:
    trigger = f"desc: Trigger: Client Request: {name}\n" if name else "desc: Trigger: Program termination\n"
    path.write_text(
        f"version: 1\ncreator: callgrind-3.19.0\npid: 7\ncmd: python w.py\npart: 1\n\n"
        f"desc: I1 cache: \n{trigger}\npositions: line\nevents: {events}\n{extra}"
        f"fl=(1) x.c\nfn=(1) f\n0 {ir}\n\nsummary: 0\ntotals: {ir}\n"
    )  # as callgrind 3.19 writes a dump after a zeroing


def test_the_dumps_are_read_per_region_and_a_truncated_or_repeated_one_is_refused(tmp_path):
    _dump(tmp_path / "callgrind.7.1", "micro:sampler", 4_000_000)
    _dump(tmp_path / "callgrind.7.2", "baseline@1", 9_000_000)
    _dump(tmp_path / "callgrind.7", None, 0)  # the dump at exit: nothing instrumented, not a region
    assert cn.parse_dumps(tmp_path) == {"micro:sampler": {"Ir": 4_000_000}, "baseline@1": {"Ir": 9_000_000}}
    (tmp_path / "callgrind.7.3").write_text("desc: Trigger: Client Request: baseline@2\nevents: Ir\n")
    with pytest.raises(ValueError, match="baseline@2.*truncated"):
        cn.parse_dumps(tmp_path)
    _dump(tmp_path / "callgrind.7.3", "micro:sampler", 1)
    with pytest.raises(ValueError, match="dumped twice"):
        cn.parse_dumps(tmp_path)


def test_instructions_per_unit_of_a_call_and_of_a_step():
    regions = {"micro:gather": {"Ir": 8_000}, "baseline@1": {"Ir": 1_000_000}, "baseline@2": {"Ir": 1_800_000}}
    micro = {"status": "ok", "counted": {"regions": ["micro:gather"], "unit": "call", "units": 40}}
    step = {"status": "ok", "counted": {"regions": ["baseline@1", "baseline@2"], "unit": "step", "units": 8}}
    assert per_unit(micro, regions) == 200.0
    assert per_unit(step, regions) == 100_000.0  # one epoch's 8 steps: the difference of the two regions
    assert per_unit({"status": "failed", "reason": "x"}, regions) is None
    assert per_unit({**step, "counted": {**step["counted"], "regions": ["baseline@1", "baseline@9"]}}, regions) is None


def test_a_count_is_a_regression_beyond_the_tolerance_and_beyond_three_times_the_runs_own_spread():
    assert cn.TOLERANCE == 0.01
    assert cn.judge_counts("micro:sampler", "call", [100.0], [101.5]).regression  # +1.5% > 1%
    quiet = cn.judge_counts("micro:sampler", "call", [100.0, 100.1], [100.5, 100.6])
    assert not quiet.regression and quiet.ratio == pytest.approx(1.005, rel=1e-3)
    noisy = cn.judge_counts("x", "call", [100.0, 102.0], [104.0, 104.0])  # a 2% spread of one tree: 6% needed
    assert noisy.threshold == pytest.approx(0.06) and not noisy.regression
    assert cn.judge_counts("x", "call", [100.0], [90.0]).improvement
    missing = cn.judge_counts("x", "call", [100.0], [])
    assert missing.status == "not counted" and "HEAD" in missing.reason


def test_the_tolerance_is_the_smallest_rung_three_times_the_largest_null_change():
    assert cn.tolerance_from([0.0001, 0.003]) == 0.01  # 3 x 0.3% = 0.9%
    assert cn.tolerance_from([0.004]) == 0.02
    assert cn.tolerance_from([0.0]) == cn.TOLERANCE_LADDER[0]
    with pytest.raises(ValueError, match="no null changes"):
        cn.tolerance_from([])
    with pytest.raises(ValueError, match="nan"):
        cn.tolerance_from([0.001, float("nan")])
    with pytest.raises(ValueError, match=r"2\.000%.*cannot gate"):
        cn.tolerance_from([0.02])


def test_null_changes_read_same_tree_cases_and_null_commits_and_refuse_other_documents():
    counts_doc = {
        "cases": {
            "same": {"benches": {"b": {"status": "ok", "base": [100.0, 100.2], "head": [100.1, 100.3]}}},
            "tuning": {"benches": {"b": {"status": "ok", "base": [100.0], "head": [110.0]}}},
        }
    }
    [(case, name, change)] = cn.null_changes(counts_doc)
    assert (case, name) == ("same", "b") and change == pytest.approx(0.003)
    rates_doc = {
        "results": {
            "null-comment": {"detail": [{"counts": {"b": 0.999}}, {"counts": None}]},
            "slow-loss-5": {"detail": [{"counts": {"b": 1.05}}]},
        }
    }
    [(case, name, change)] = cn.null_changes(rates_doc)
    assert (case, name) == ("null-comment#1", "b") and change == pytest.approx(0.001)
    with pytest.raises(ValueError, match="not a counts document"):
        cn.null_changes({"rows": []})


def test_the_tolerance_is_the_one_the_committed_null_measurements_support():
    """A new null measurement that moves counts more must raise the tolerance (or show why not) in the same commit."""
    files = [
        ROOT / "results/reference/gate-counts.json",
        *sorted((ROOT / "results/reference").glob("gate-error-rates*.json")),
    ]
    found = [(f.name, c) for f in files for _, _, c in cn.null_changes(json.loads(f.read_text()))]
    assert len(found) >= 8
    assert cn.tolerance_from([c for _, c in found]) == cn.TOLERANCE
    # the docs quote the two largest changes, of one tree's processes and of the null commits
    same = max(c for name, c in found if name == "gate-counts.json")
    commits = max(c for name, c in found if name != "gate-counts.json")
    docs = (ROOT / "docs/regression-gate.md").read_text()
    assert f"spread by at most {same:.2%}" in docs and f"of the error-rate files, at most {commits:.2%}" in docs


def _count_runner(per_role: dict[str, float], calls: list | None = None, fail: str | None = None):
    """A counting process without valgrind: each benchmark's regions with ``per_role[role]`` instructions per
    unit (the step's two regions one epoch of 8 steps apart)."""

    def runner(role, spec, folder):
        doc = json.loads(Path(spec).read_text())
        if calls is not None:
            calls.append(role)
        results, regions = {}, {}
        for name in doc["benches"]:
            if name == fail:
                results[name] = {"status": "failed", "reason": "RuntimeError: boom"}
                continue
            k = per_role[role] * (1.5 if name == "micro:gather" else 1.0)
            if name.startswith("micro:"):
                results[name] = {
                    "status": "ok",
                    "counted": {"regions": [name], "unit": "call", "units": doc["counts"]["calls"]},
                }
                regions[name] = {"Ir": int(k * doc["counts"]["calls"])}
            else:
                results[name] = {
                    "status": "ok",
                    "counted": {"regions": [f"{name}@1", f"{name}@2"], "unit": "step", "units": 8},
                }
                regions[f"{name}@1"] = {"Ir": int(5e6 + 8 * k)}
                regions[f"{name}@2"] = {"Ir": int(5e6 + 16 * k)}
        return results, regions

    return runner


def test_the_gate_counts_the_primary_tier_in_both_trees_and_fails_on_more_instructions(tmp_path):
    tree = _tree(tmp_path / "t", ["torch"])
    trees = {"base": tree, "head": tree}
    benches = [Bench("baseline", QUICK), Bench("micro:gather", QUICK), Bench("other", QUICK)]
    calls: list = []
    noisy = _fake_runner({"base": 0.005, "head": 0.25})  # a clock that cannot see 10% on any benchmark
    same = gate(
        trees,
        benches,
        GateOptions(rounds=5, counts=2),
        runner=noisy,
        count_runner=_count_runner({"base": 1e6, "head": 1e6}, calls),
    )
    assert calls == ["base", "head", "head", "base"]  # ABBA: neither tree always first
    assert [c.name for c in same.counts] == ["baseline", "micro:gather"]  # the primary tier only
    assert all(c.status == "ok" and c.ratio == pytest.approx(1.0) and not c.regression for c in same.counts)
    # the counted benchmarks are not blind to work; the entry the counts do not cover stays inconclusive
    assert {b.name for b in same.inconclusive} >= {"baseline", "other"} and same.blind == []
    # but their wall clock could not see 10%, so a slowdown that is not work could have passed: exit 3, naming it
    assert "baseline" in {b.name for b in same.time_blind} and "other" not in {b.name for b in same.time_blind}
    assert same.exit_status == 3 and same.to_dict()["time_blind"] == [b.name for b in same.time_blind]
    text = format_gate(same)
    assert "inconclusive here (exit 3) for a slowdown that is not work: the counted instructions of baseline" in text
    assert f"and counts cannot see {NOT_WORK}" in text
    assert "count instructions (--counts)" not in text, "counting again would not see it"
    assert "inconclusive here: other, whose spread could not show 10%" in text, "the entries' own paths, named too"
    assert "counted instructions (callgrind, 2 process(es) per tree" in text and "cannot see memory stalls" in text
    assert "micro:gather" in text and "no change beyond the threshold" in text
    more = gate(
        trees,
        benches,
        GateOptions(rounds=5, counts=1),
        runner=noisy,
        count_runner=_count_runner({"base": 1e6, "head": 1.05e6}),
    )
    assert [c.name for c in more.count_regressions] == ["baseline", "micro:gather"] and more.exit_status == 1
    text = format_gate(more)
    assert "REGRESSION in counted instructions: baseline 1.050x the instructions per step" in text
    assert "the counted instructions did (exit 1)" in text
    assert more.to_dict()["count_regressions"] == ["baseline", "micro:gather"]
    # a benchmark that failed in the counting process is reported not counted, with its reason
    failed = gate(
        trees,
        benches,
        GateOptions(rounds=5, counts=1),
        runner=noisy,
        count_runner=_count_runner({"base": 1e6, "head": 1e6}, fail="micro:gather"),
    )
    by = {c.name: c for c in failed.counts}
    assert by["micro:gather"].status == "not counted" and "boom" in by["micro:gather"].reason
    assert [b.name for b in failed.blind] == ["micro:gather"] and failed.exit_status == 3
    with pytest.raises(ValueError, match="counts must be"):
        gate(trees, benches, GateOptions(rounds=5, counts=-1), runner=noisy)


def test_the_counts_run_before_any_extra_round_and_the_budget_holds_their_time(tmp_path, monkeypatch):
    """The counting processes come after the planned rounds and before the extra ones, so the extra rounds get
    only what the counts leave of the budget (a run whose rounds spent it would otherwise pass it by their time)."""
    import time

    from tests.measure.gate.test_regress import _bench_pair, _mixed_runner

    trees, benches = _bench_pair(tmp_path)  # "other" is noisy: a 600 s budget buys it extra rounds
    events: list = []
    rounds = _mixed_runner([])

    def runner(role, spec, out):
        events.append(("round", json.loads(Path(spec).read_text())["seed"]))
        return rounds(role, spec, out)

    counting = _count_runner({"base": 1e6, "head": 1e6})
    spent = {"seconds": 0.0}  # what each counting process costs on a clock the gate reads

    def counted(role, spec, folder):
        events.append(("counts", role))
        spent["now"] = spent.get("now", 0.0) + spent["seconds"]
        return counting(role, spec, folder)

    real = time.perf_counter
    monkeypatch.setattr(time, "perf_counter", lambda: real() + spent.get("now", 0.0))
    free = gate(
        trees,
        benches,
        GateOptions(rounds=5, budget_seconds=600, max_rounds=9, counts=1),
        runner=runner,
        count_runner=counted,
    )
    assert free.extra_rounds.get("other", 0) >= 1
    first_count = events.index(("counts", "base"))
    seeds = [(i, e[1]) for i, e in enumerate(events) if e[0] == "round"]
    assert all(seed < 5 for i, seed in seeds if i < first_count)  # the planned rounds (seeds 0-4) before
    assert all(seed >= 5 for i, seed in seeds if i > first_count) and any(i > first_count for i, _ in seeds)
    events.clear()
    spent.update(seconds=400.0, now=0.0)  # two counting processes take 800 s of the 600 s budget
    held = gate(
        trees,
        benches,
        GateOptions(rounds=5, budget_seconds=600, max_rounds=9, counts=1),
        runner=runner,
        count_runner=counted,
    )
    assert held.extra_rounds == {} and held.rounds == 5 and held.counts_seconds >= 800


def test_a_blind_run_says_what_it_resolves_and_the_budget_that_would_see_the_sensitivity(tmp_path):
    tree = _tree(tmp_path / "t", ["torch"])
    r = gate(
        {"base": tree, "head": tree},
        [Bench("baseline", QUICK)],
        GateOptions(rounds=5),
        runner=_fake_runner({"base": 0.005, "head": 0.06}),
    )
    assert r.exit_status == 3
    line = [ln for ln in format_gate(r).splitlines() if ln.startswith("this machine resolves")][0]
    assert "on baseline in 5 rounds" in line and "rounds would see 10%: run with --max-rounds" in line
    assert "--budget" in line and "--counts" in line


def test_where_counts_cannot_be_taken_the_reason_is_given_and_the_clock_judges(tmp_path, monkeypatch):
    monkeypatch.setattr(
        cn, "unavailable", lambda: "valgrind is not installed (Debian/Ubuntu: apt-get install valgrind)"
    )
    tree = _tree(tmp_path / "t", ["torch"])
    r = gate(
        {"base": tree, "head": tree},
        [Bench("baseline", QUICK)],
        GateOptions(rounds=5, counts=1),
        runner=_fake_runner({"base": 0.005, "head": 0.005}),
    )
    assert r.counts == [] and "valgrind is not installed" in r.counts_unavailable and r.exit_status == 0
    assert "counted instructions: not taken here (valgrind is not installed" in format_gate(r)


def test_the_marker_is_built_once_into_the_cache_and_a_missing_compiler_is_named(tmp_path, monkeypatch):
    if not shutil.which("cc") and not shutil.which("gcc"):
        pytest.skip("no C compiler here")
    if not Path("/usr/include/valgrind/callgrind.h").exists():
        pytest.skip("valgrind's headers are not installed here")
    path = cn.marker_library(tmp_path)
    assert path.exists() and path.parent == tmp_path and cn.marker_library(tmp_path) == path
    import ctypes

    lib = ctypes.CDLL(str(path))
    assert lib.gnnbench_count_running() == 0  # outside valgrind the requests do nothing
    lib.gnnbench_count_start()
    lib.gnnbench_count_stop(b"x")
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("CC")
    with pytest.raises(cn.CountsUnavailable, match="no C compiler"):
        cn.marker_library(tmp_path / "fresh")


@pytest.mark.slow
def test_a_real_count_of_the_micro_benchmarks_repeats_within_the_tolerance(tmp_path):
    """Two counting processes of this tree under callgrind (tiny graph): every micro-benchmark counted, the
    step too, and the two processes within the tolerance of each other (the property the verdict rests on)."""
    if cn.unavailable():
        pytest.skip(cn.unavailable())
    import sys

    from gnnbench.measure.gate import default_benches, gate_config
    from gnnbench.measure.gate.worker import script_in

    benches = default_benches(gate_config("tiny"), ["baseline", "micro:sampler", "micro:aggregation"])
    verdicts, why = count_gate(
        {"base": ROOT, "head": ROOT},
        benches,
        repeats=1,
        folder=tmp_path,
        worker=script_in(tmp_path),
        pythons={"base": sys.executable, "head": sys.executable},
        timeout=900,
    )
    assert why is None
    by = {v.name: v for v in verdicts}
    assert set(by) == {"baseline", "micro:sampler", "micro:aggregation"}
    for v in verdicts:
        assert v.status == "ok" and v.base[0] > 1e4 and abs(v.ratio - 1) < cn.TOLERANCE, v
    assert COUNT_CALLS >= 20


def test_the_published_count_cases_still_apply_to_this_tree(tmp_path):
    """scripts/gate_counts.py's changes (the sorted Floyd sampler everywhere, the error-rate script's injected
    slowdowns) edit a copy of this tree into code that still compiles: the published figures can be remade."""
    import importlib.util
    import py_compile

    spec = importlib.util.spec_from_file_location("gate_counts", ROOT / "scripts" / "gate_counts.py")
    gc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gc)
    tree = gc._copy(tmp_path / "head")
    gc._floyd_everywhere(tree)
    assert "FLOYD_LOOP_MAX_FANOUT = 0" in (tree / "gnnbench/sampling/neighbor.py").read_text()
    for path in gc.PATHS:
        gc._slow_edit(path, 5, 0.25)(tree)
        py_compile.compile(str(tree / gc.PATHS[path][0]), doraise=True)
    with pytest.raises(SystemExit, match="unknown case"):
        gc.main(["--cases", "no-such-case", "--out", str(tmp_path / "x.json")])
