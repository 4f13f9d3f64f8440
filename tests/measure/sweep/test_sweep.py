"""compare's machinery: interleaved rounds, resume only on matching config / code / environment,
up-front validation, and the run-level comparison (time to accuracy, paired accuracy, noise floor)."""

import dataclasses
import json
import re

import pytest

from gnnbench import registry
from gnnbench.measure.compare import AA_LABEL, compare, compare_rows
from gnnbench.measure.run import Point
from gnnbench.measure.sweep import MANIFEST, SweepOptions, run_sweep, sweep_entries
from tests.helpers import QUICK, result_of, unavailable_here


def test_rounds_pair_seeds_and_interleave_in_a_recorded_order(tmp_path):
    entries = sweep_entries(QUICK, ["int32", "pin_memory"], repeats=3, include_all_recommended=False, aa=True)
    assert [e.label for e in entries[:4]] == ["baseline", AA_LABEL, "int32", "pin_memory"]
    assert [(e.round, e.config.seed) for e in entries if e.label == "baseline"] == [(0, 0), (1, 1), (2, 2)]
    results = run_sweep(entries, tmp_path, SweepOptions(isolate=False, order_seed=7))
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    assert manifest["order_seed"] == 7 and len(manifest["rounds"]) == 3
    assert all(sorted(r) == sorted(["baseline", AA_LABEL, "int32", "pin_memory"]) for r in manifest["rounds"])
    assert len({tuple(r) for r in manifest["rounds"]}) > 1, "each round is shuffled anew"
    # the sweep's identity: code, machine, environment, base configuration
    ok = next(r for r in results if r.status == "ok")
    assert manifest["code_fingerprint"] == ok.environment["code_fingerprint"] and manifest["machine"]
    assert manifest["environment"]["torch"] == ok.environment["torch"]
    assert manifest["base_config"] == entries[0].config.to_dict() and manifest["sweep"] == tmp_path.name
    assert [r.label for r in results] == [e.label for e in entries], "results come back in entry order"
    assert results.measured == 12 and results.kept == 0


def test_resume_keeps_only_matching_results_and_says_so(tmp_path):
    entries = sweep_entries(QUICK, ["int32", "pin_memory"], repeats=2, include_all_recommended=False)
    first = run_sweep(entries, tmp_path, SweepOptions(isolate=False))
    files = sorted(p for p in tmp_path.glob("*.json") if p.name != MANIFEST)
    assert len(files) == 6
    # Interrupted sweep: one result lost, one corrupted (partial write by another tool) ...
    files[0].unlink()
    files[1].write_text("{")
    # ... and one stored by other code (a stale fingerprint): measured again, never reused.
    stale = json.loads(files[2].read_text())
    stale["environment"]["code_fingerprint"] = "0" * 16
    files[2].write_text(json.dumps(stale))
    kept = []

    def progress(done, total, entry, status, seconds=None):
        if status == "kept":
            kept.append((entry.label, seconds))

    second = run_sweep(entries, tmp_path, SweepOptions(isolate=False), progress=progress)
    assert (second.kept, second.measured) == (3, 3), second.summary()
    # each kept run that ran reports its stored duration (a resumed sweep's estimate starts from them)
    stored = {r.label: r for r in first if r.ok}
    assert len(kept) == 3 and all((s is None) == (label not in stored) for label, s in kept)
    assert all(s > 0 for _, s in kept if s is not None)
    assert second.summary().startswith("kept 3 stored results") and "measured 3" in second.summary()
    assert json.loads(files[2].read_text())["environment"]["code_fingerprint"] != "0" * 16
    assert [r.label for r in second] == [r.label for r in first]
    rows = {r.label: r for r in compare_rows(second)}
    assert rows["baseline"].speedup == pytest.approx(1.0)
    if unavailable_here("pin_memory", device=QUICK.device):
        assert rows["pin_memory"].status == "unavailable" and "pinned" in rows["pin_memory"].reason


def test_isolated_sweep_runs_in_a_subprocess(tmp_path):
    entries = sweep_entries(QUICK, [], repeats=1, include_all_recommended=False)
    results = run_sweep(entries, tmp_path, SweepOptions(isolate=True))
    assert results[0].status == "ok" and results[0].environment["argv"][0].endswith("measure/run/single.py")


def test_a_sweep_that_cannot_measure_is_refused_before_running():
    with pytest.raises(ValueError, match="no step would be measured.*--warmup"):
        sweep_entries(dataclasses.replace(QUICK, warmup_steps=6), ["int32"])
    with pytest.raises(ValueError, match="repeats must be an integer >= 1"):
        sweep_entries(QUICK, ["int32"], repeats=0)


def test_all_recommended_combines_available_entries():
    entries = sweep_entries(QUICK, [], repeats=1, include_all_recommended=True)
    rec = entries[-1]
    assert rec.label == "all_recommended"
    assert "sparse_agg" in rec.optimizations and "cached_norm" in rec.optimizations
    if unavailable_here("pin_memory", device=QUICK.device) and unavailable_here("uva", device=QUICK.device):
        assert "pin_memory" not in rec.optimizations and "uva" not in rec.optimizations
    assert not any(registry.get(n).costs_accuracy for n in rec.optimizations)


# ------------------------------------------------------------------- compare() on constructed results
def _result(label, rnd, step, epoch, test, curve, optimizations=()):
    return result_of(
        {
            "label": label,
            "round": rnd,
            "optimizations": list(optimizations),
            "status": "ok",
            "config": {"epochs": 2},
            "step_seconds_all": [step] * 5,
            "step_seconds": {"median": step},
            "epoch_seconds": [epoch, epoch],
            "setup_seconds": 0.5,
            "accuracy": {"test": test},
            "curve": [{"seconds": s, "val": v, "step": i, "epoch": i, "test": test} for i, (s, v) in enumerate(curve)],
            "phases": {"sample": {"median": step / 2}},
            "transfer": {"bytes_h2d_per_batch": 0},
            "graph": {},
        }
    )


def _sweep(noise=(1.0, 1.02, 0.98, 1.01, 0.99)):
    out = []
    for r, n in enumerate(noise):
        out.append(_result("baseline", r, 0.10 * n, 2.0 * n, 0.80 + 0.001 * r, [(2.5 * n, 0.70), (4.5 * n, 0.80)]))
        out.append(
            _result(
                AA_LABEL,
                r,
                0.10 * n * (1.005 if r % 2 else 0.995),
                2.0 * n,
                0.80 + 0.001 * r,
                [(2.5 * n, 0.70), (4.5 * n, 0.80)],
            )
        )
        # twice as fast per epoch, same accuracy: reaches the target at the first point
        out.append(
            _result(
                "sparse_agg",
                r,
                0.05 * n,
                1.0 * n,
                0.80 + 0.001 * r + 0.0002 * (r % 2),
                [(1.5 * n, 0.795), (2.5 * n, 0.80)],
                ["sparse_agg"],
            )
        )
        # different work per step, never reaches the target, costs accuracy
        out.append(
            _result("fanout", r, 0.02 * n, 0.4 * n, 0.70 - 0.01 * (r % 2), [(1.0 * n, 0.6), (1.4 * n, 0.7)], ["fanout"])
        )
    return out


def test_compare_ranks_by_time_to_accuracy_with_run_level_intervals():
    c = compare(_sweep())
    assert c.target == pytest.approx(0.79) and c.target_source.startswith("not calibrated")
    rows = {r.label: r for r in c.rows}
    assert c.rows[0].label == "baseline"
    sp = rows["sparse_agg"]
    assert sp.primary == "time to accuracy" and sp.tta_speedup.ratio == pytest.approx((2.5 + 0.9 * 2.0) / 1.5)
    # (the baseline crosses 0.79 nine tenths of the way from its 0.70 point to its 0.80 point: read between them)
    assert sp.significant and sp.step_speedup.ratio == pytest.approx(2.0)
    assert sp.acc_verdict == "no accuracy cost" and sp.tta_reached == "5/5"
    fo = rows["fanout"]
    assert fo.step_speedup is None and not fo.same_work, "no per-step ratio over different work"
    # never reached: censored at the end of its runs, the row keeps its metric and its ratio is a bound
    assert fo.primary == "time to accuracy" and fo.tta_reached == "0/5" and fo.censored
    assert fo.tta_speedup.bound == "at most" and "reached the target in 0 of 5 rounds" in fo.tta_note
    assert not fo.significant, "an upper bound on a speedup is no evidence of a gain"
    assert fo.acc_verdict == "costs accuracy" and fo.acc_delta_high < 0
    aa = c.aa
    assert aa is not None and not aa.significant and not aa.step_speedup.significant
    assert aa.acc_verdict == "no accuracy cost"
    assert 1.0 < c.floors["step"] < 1.1 and 1.0 < c.floors["time_to_accuracy"] < 1.1
    assert [r.label for r in c.rows][1] == "sparse_agg", "ranked by the primary speedup"


def test_compare_explicit_target_and_missing_baseline():
    c = compare(_sweep(), target_acc=0.9)
    assert c.target_source.startswith("given")
    ok = [r for r in c.rows if r.status == "ok"]
    assert all(r.primary == "time to accuracy" and r.tta_reached == "0/5" for r in ok)
    assert all(r.tta_speedup.bound == "unknown" and not r.significant for r in ok), (
        "baseline and entry both censored: no direction can be claimed"
    )
    with pytest.raises(ValueError, match="no measured baseline run"):
        compare([r for r in _sweep() if r.label != "baseline"])


def test_overlap_entries_are_paired_with_an_end_to_end_baseline():
    from gnnbench.measure.compare import E2E_BASELINE

    runs = _sweep()
    for r in runs:
        r.timing_mode = "sync"
    for rnd, n in enumerate((1.0, 1.02, 0.98, 1.01, 0.99)):
        e2e = _result(E2E_BASELINE, rnd, 0.08 * n, 1.6 * n, 0.80, [(2.0 * n, 0.70), (3.7 * n, 0.80)])
        pin = _result("pin_memory", rnd, 0.04 * n, 0.8 * n, 0.80, [(1.0 * n, 0.70), (1.85 * n, 0.80)], ["pin_memory"])
        for r in (e2e, pin):
            r.timing_mode = "end_to_end"
        runs += [e2e, pin]
    rows = {r.label: r for r in compare(runs).rows}
    assert rows["pin_memory"].timing_mode == "end_to_end"
    assert rows["pin_memory"].epoch_speedup.ratio == pytest.approx(2.0), "against the end-to-end baseline"
    # the end-to-end copy against the baseline (what synchronizing the phases costs), never against itself
    assert rows[E2E_BASELINE].epoch_speedup.ratio == pytest.approx(2.0 / 1.6)
    if all(unavailable_here(name, device=QUICK.device) for name in ("pin_memory", "feature_prefetch")):
        # nothing here can overlap: no end-to-end baseline is scheduled
        entries = sweep_entries(QUICK, ["pin_memory", "feature_prefetch"], repeats=1, include_all_recommended=False)
        assert E2E_BASELINE not in {e.label for e in entries}


def test_a_full_batch_like_result_is_compared_at_convergence():
    """Full batch takes one optimizer step per epoch: at the baseline's last epoch it has barely trained (the old
    equal-epoch reading showed -57 pp). At convergence, its test accuracy equals the baseline's."""
    runs = _sweep()
    for rnd in range(5):
        curve = [(1.0, 0.20), (3.0, 0.50), (6.0, 0.75), (9.0, 0.80), (12.0, 0.799)]
        r = _result("full_batch", rnd, 0.2, 0.2, 0.0, curve, ["full_batch"])
        tests = [0.20, 0.50, 0.75, 0.80 + 0.001 * rnd, 0.79]
        r.curve = [dataclasses.replace(p, test=t) for p, t in zip(r.curve, tests)]
        r.converged = Point(seconds=9.0, step=3, epoch=3, val=0.80, test=0.80 + 0.001 * rnd)
        r.accuracy = dataclasses.replace(r.accuracy, test=0.79)  # the last point: past the best one
        runs.append(r)
    row = {r.label: r for r in compare(runs).rows}["full_batch"]
    assert row.acc_delta == pytest.approx(0.0, abs=1e-9) and row.acc_verdict == "no accuracy cost"
    assert row.acc_point.startswith("at convergence")
    assert row.tta_reached == "5/5" and row.primary == "time to accuracy"


def test_a_censored_round_keeps_the_row_on_time_to_accuracy_and_ranks_it_after_rows_that_reach():
    runs = _sweep()
    for rnd, n in enumerate((1.0, 1.02, 0.98, 1.01, 0.99)):
        # faster per epoch, reaches the target early in 4 rounds, misses it in round 2 by 0.4 pp
        last = 0.786 if rnd == 2 else 0.80
        r = _result("fast_dropout", rnd, 0.07 * n, 1.4 * n, 0.80, [(1.8 * n, 0.70), (3.2 * n, last)], ["fast_dropout"])
        runs.append(r)
        # a significant slowdown that reaches in every round
        runs.append(_result("slow", rnd, 0.2 * n, 4.0 * n, 0.80, [(5.0 * n, 0.70), (9.0 * n, 0.80)], ["compile"]))
    for r in runs:
        r.config["max_seconds"] = 18.0  # every configuration's budget (calibrated)
    c = compare(runs)
    rows = {r.label: r for r in c.rows}
    fd = rows["fast_dropout"]
    assert fd.primary == "time to accuracy" and fd.tta_reached == "4/5" and fd.censored
    assert fd.tta_speedup.bound == "at most" and "censored at their budget" in fd.tta_note
    assert fd.tta_s == pytest.approx((1.8 + 0.9 * 1.4) * 1.005), "the median over the rounds that reached"
    slow = rows["slow"]
    assert slow.significant and slow.speedup_high < 1
    order = [r.label for r in c.rows]
    assert order.index("sparse_agg") < order.index("slow"), "a significant speedup ranks above a slowdown"
    assert order.index("slow") < order.index("fast_dropout"), "a row that misses ranks after rows that reach"


def test_a_plus_b_is_one_configuration_with_both():
    from gnnbench import registry
    from gnnbench.graphs import GraphSpec
    from gnnbench.measure.sweep import sweep_entries
    from gnnbench.training import RunConfig

    base = RunConfig(spec=GraphSpec.preset("tiny"), epochs=2, warmup_steps=1)
    entries = sweep_entries(base, ["csr+sparse_agg", "int32"], repeats=2, include_all_recommended=False)
    combo = [e for e in entries if e.label == "csr+sparse_agg"]
    assert len(combo) == 2 and combo[0].optimizations == ("csr", "sparse_agg")
    assert combo[0].config.flags == registry.flags_for(["csr", "sparse_agg"], base.flags)
    assert combo[0].config.flags.keep_csr and combo[0].config.flags.aggregation == "sparse"
    for bad, message in (("csr+", "joined by '+'"), ("csr+csr", "each entry once"), ("csr+nope", "nope")):
        with pytest.raises(ValueError, match=re.escape(message)):
            registry.combination(bad)
    assert registry.flags_for(["csr+sparse_agg"]) == registry.flags_for(["csr", "sparse_agg"])


def test_an_entry_that_cannot_apply_is_listed_not_measured(tmp_path):
    """A single-hop base: the fanout entry cannot drop a hop. The sweep lists it as unavailable with the
    reason, measures the rest, and never raises."""
    base = dataclasses.replace(QUICK, flags=QUICK.flags.replace(fanout=(5,)))
    entries = sweep_entries(base, ["fanout", "int32"], repeats=1, include_all_recommended=True)
    fanout = next(e for e in entries if e.label == "fanout")
    assert "has only one" in fanout.not_applicable
    results = run_sweep(
        [e for e in entries if e.label in ("baseline", "fanout")], tmp_path, SweepOptions(isolate=False)
    )
    row = next(r for r in results if r.label == "fanout")
    assert row.status == "unavailable" and "has only one" in row.unavailable["not applicable"]
    assert next(r for r in results if r.label == "baseline").status == "ok"
    # the report lists it as not applicable, with the reason, beside the measured baseline
    from gnnbench.report import build_report, load_inputs

    html = build_report(load_inputs(runs=[tmp_path]), tmp_path / "report.html").read_text()
    assert re.search(r"<tr><td>fanout</td>[^\n]*not applicable: [^<]*has only one", html)


def test_the_headline_comes_from_measurement_and_the_static_list_never_headlines():
    from gnnbench.cli.tables import format_compare
    from gnnbench.measure.compare import measured_best, pareto_front, tradeoffs

    runs = _sweep()
    for rnd, n in enumerate((1.0, 1.02, 0.98, 1.01, 0.99)):
        # the registry's static list: slower here (two loader workers against two cores, say)
        runs.append(
            _result(
                "all_recommended",
                rnd,
                0.15 * n,
                3.0 * n,
                0.80 + 0.001 * rnd,
                [(3.5 * n, 0.70), (6.5 * n, 0.80)],
                ["sparse_agg", "workers"],
            )
        )
        # faster in every round, but 3 pp less accurate at convergence: a trade-off, not the headline
        runs.append(
            _result(
                "lossy",
                rnd,
                0.04 * n,
                0.8 * n,
                0.77 + 0.001 * rnd - 0.001 * (rnd % 2),
                [(0.9 * n, 0.795), (1.4 * n, 0.80)],
                ["full_amp"],
            )
        )
    c = compare(runs)
    assert measured_best(c).label == "sparse_agg"
    assert [r.label for r in tradeoffs(c)] == ["lossy"]
    assert set(pareto_front(c.rows)) == {"sparse_agg", "lossy"}, "the baseline is beaten in both by sparse_agg"
    text = format_compare(c)
    assert "measured best single row here: sparse_agg: 2.87x" in text and "trade-off: lossy" in text
    assert "all_recommended (the registry's static list: a guess, not a recommendation) measured 0." in text
    nothing = compare([r for r in runs if r.label in ("baseline", "all_recommended", "fanout")])
    assert measured_best(nothing) is None
    assert "nothing measured pays at no accuracy cost" in format_compare(nothing)


def test_an_entry_unavailable_here_starts_no_process(tmp_path, monkeypatch):
    """An isolated sweep writes an unavailable entry's result itself (the reasons the run's own check gives),
    without seconds of imports in a process that would only say the same; a resumed sweep keeps it."""
    import gnnbench.measure.sweep.rounds as sweep

    name = next(
        (n for n in ("pin_memory", "uva", "feature_prefetch") if unavailable_here(n, device=QUICK.device)), None
    )
    if name is None:
        pytest.skip("every CUDA-only entry runs here")
    entries = [e for e in sweep_entries(QUICK, [name], repeats=1, include_all_recommended=False) if e.label == name]

    real = sweep.process.run_child

    def no_run_process(cmd, *args, **kwargs):
        assert "gnnbench.measure.run.single" not in cmd, f"a process was started for an unavailable entry: {cmd}"
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(sweep.process, "run_child", no_run_process)
    first = run_sweep(entries, tmp_path, SweepOptions(isolate=True))
    assert first[0].status == "unavailable" and first[0].unavailable
    from gnnbench.measure.run import run

    assert first[0].unavailable == run(entries[0].config).unavailable, "the run's own answer, word for word"
    again = run_sweep(entries, tmp_path, SweepOptions(isolate=True))
    assert (again.kept, again.measured) == (1, 0)


def _fake_children(monkeypatch, pair="ok", run_ok=True):
    """``process.run_child`` replaced: the run's child writes an ok result (or fails, ``run_ok=False``), the
    pair's child adds an ``interleaved`` block (``pair``: "ok"; "fails" before storing it; "stores, then fails";
    "interrupted": the sweep is stopped meanwhile); returns the list of module names started, in order."""
    import gnnbench.measure.sweep.rounds as sweep
    from gnnbench.atomic import write_json_atomic
    from gnnbench.measure.run import RunResult, load_result
    from gnnbench.process.children import ChildOutcome

    started = []

    def fake(argv, *args, **kwargs):
        module, out = argv[2], argv[4]
        started.append(module)
        if module == "gnnbench.measure.run.single":
            if not run_ok:
                return ChildOutcome(tuple(argv), 1, "", "MemoryError", False, 0.1, 60.0)
            config = json.loads(open(argv[3]).read())
            write_json_atomic(out, RunResult(status="ok", config=config).to_dict())
            return ChildOutcome(tuple(argv), 0, "", "", False, 0.1, 60.0)
        assert module == "gnnbench.measure.run.paired" and load_result(out).ok, "the pair follows its run's result"
        if pair == "interrupted":
            raise KeyboardInterrupt
        if pair != "fails":
            write_json_atomic(out, {**load_result(out).to_dict(), "interleaved": {"fake": True}})
        if pair == "ok":
            return ChildOutcome(tuple(argv), 0, "", "", False, 0.1, 60.0)
        return ChildOutcome(tuple(argv), 1, "", "Traceback ...\nRuntimeError: boom", False, 0.1, 60.0)

    monkeypatch.setattr(sweep.process, "run_child", fake)
    return started


def _paired_entry():
    entries = sweep_entries(
        QUICK, ["int32"], repeats=1, include_all_recommended=False, derive_per_epoch=2, target=0.5, interleave=True
    )
    return [e for e in entries if e.label == "int32" and e.pair_with is not None]


def test_an_isolated_sweep_times_a_pair_in_a_process_of_its_own(tmp_path, monkeypatch):
    """The run and its pair never share a process: a run earlier in the process changed what the pair read
    (full_amp's baseline side stepped 1.3x slower after a full_amp run). The run's process comes first; the
    pair's process adds its block to the stored result."""
    entries = _paired_entry()
    assert entries, "int32 is timed against its round's baseline in one process"
    started = _fake_children(monkeypatch)
    results = run_sweep(entries, tmp_path, SweepOptions(isolate=True))
    assert started == ["gnnbench.measure.run.single", "gnnbench.measure.run.paired"]
    assert results[0].ok and results[0].interleaved == {"fake": True}
    assert not list(tmp_path.glob(".*.json")), "the children's config files are removed"


def test_a_pair_whose_process_fails_leaves_its_run_with_the_reason(tmp_path, monkeypatch):
    entries = _paired_entry()
    _fake_children(monkeypatch, pair="fails")
    results = run_sweep(entries, tmp_path, SweepOptions(isolate=True))
    assert results[0].ok and results[0].interleaved is None
    assert results[0].warnings == [
        "interleaved pair not measured: its process failed: Traceback ... | RuntimeError: boom"
    ]
    from gnnbench.measure.run import load_result

    assert load_result(tmp_path / entries[0].filename()).warnings == results[0].warnings, "written as returned"


def test_a_pair_stored_before_its_process_failed_is_kept(tmp_path, monkeypatch):
    entries = _paired_entry()
    _fake_children(monkeypatch, pair="stores, then fails")
    results = run_sweep(entries, tmp_path, SweepOptions(isolate=True))
    assert results[0].interleaved == {"fake": True} and results[0].warnings == []


def test_a_failed_run_starts_no_pair_and_an_interrupted_pair_leaves_nothing_to_resume(tmp_path, monkeypatch):
    """A run that failed gets no pair process; a sweep stopped between a run and its pair leaves no result at
    the entry's path, so a resume measures both again rather than keeping a run without its pair."""
    entries = _paired_entry()
    started = _fake_children(monkeypatch, run_ok=False)
    results = run_sweep(entries, tmp_path, SweepOptions(isolate=True))
    assert started == ["gnnbench.measure.run.single"] and results[0].status == "failed"
    assert "MemoryError" in results[0].error
    _fake_children(monkeypatch, pair="interrupted")
    with pytest.raises(KeyboardInterrupt):
        run_sweep(entries, tmp_path / "stopped", SweepOptions(isolate=True))
    left = sorted(q.name for q in (tmp_path / "stopped").iterdir())
    assert left == ["sweep.json"], left
