"""The entries that set the process (the allocators), timed against their round's baseline in duet
(gnnbench/measure/sweep/duet.py): which entries are, what a duet refuses, how a sweep stores it and how the
comparison reads it. Nothing here depends on the machine's speed: one test runs a real duet on ``tiny`` and
checks its record's shape only."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from gnnbench import registry
from gnnbench.measure.compare import AA_DUET_LABEL, AA_INPROCESS_LABEL
from gnnbench.measure.run import DUET, INTERLEAVED, PairTiming
from gnnbench.measure.sweep import SweepOptions, run_sweep, sweep_entries
from gnnbench.measure.sweep.duet import DuetFailed, duet_pair_refusal, side_config, time_duet
from gnnbench.process.threads import usable_cores
from tests.helpers import QUICK


def _entries(names, **kw):
    return sweep_entries(
        QUICK,
        names,
        repeats=2,
        include_all_recommended=False,
        derive_per_epoch=2,
        target=0.5,
        interleave=True,
        **kw,
    )


def _two_cores(monkeypatch, cores=(0, 1)):
    import gnnbench.measure.gate.duet as gate_duet

    monkeypatch.setattr(gate_duet, "usable_cores", lambda: set(cores))


def test_every_allocator_entry_is_timed_in_duet_and_every_in_process_entry_stays_in_one(monkeypatch):
    """The registry's ``duet`` declaration decides the design: the allocator rows are paired with their round's
    baseline in duet, an entry that shares a process keeps its interleaved pair, and the duet's A/A copy of the
    baseline joins each round with ``aa``."""
    _two_cores(monkeypatch)
    duet_names = [o.name for o in registry.REGISTRY.values() if o.duet]
    assert sorted(duet_names) == ["glibc_tuned", "jemalloc", "jemalloc_pyg", "tcmalloc"]
    entries = _entries(["tcmalloc", "glibc_tuned", "int32"], aa=True)
    for r in (0, 1):
        got = {e.label: e for e in entries if e.round == r}
        base = got["baseline"].config
        for name in ("tcmalloc", "glibc_tuned"):
            assert got[name].pair_design == DUET and got[name].pair_with == base, name
        assert got["int32"].pair_design == INTERLEAVED and got["int32"].pair_with == base
        aa = got[AA_DUET_LABEL]
        assert aa.pair_design == DUET and aa.pair_with == base and aa.derived
        assert aa.config.flags == base.flags, "the duet's A/A is the baseline against itself"
        assert got[AA_INPROCESS_LABEL].pair_design == INTERLEAVED
    plain = dataclasses.replace(entries[0], pair_with=entries[0].config)
    assert plain.key() != dataclasses.replace(plain, pair_design=DUET).key(), "a duet's result is not a pair's"


def test_without_two_cores_or_an_a_a_there_is_no_duet_row(monkeypatch):
    _two_cores(monkeypatch)
    assert not any(e.label == AA_DUET_LABEL for e in _entries(["tcmalloc"])), "no A/A asked for"
    assert not any(e.label == AA_DUET_LABEL for e in _entries(["int32"], aa=True)), "no entry timed in duet"
    cosine = sweep_entries(
        dataclasses.replace(QUICK, lr_schedule="cosine"),
        ["tcmalloc"],
        repeats=1,
        include_all_recommended=False,
        aa=True,
        derive_per_epoch=2,
        target=0.5,
        interleave=True,
    )
    assert not any(e.label == AA_DUET_LABEL for e in cosine), "no short run keeps the trajectory: no derived A/A"
    _two_cores(monkeypatch, cores=(0,))
    entries = _entries(["tcmalloc"], aa=True)
    tcmalloc = [e for e in entries if e.label == "tcmalloc"]
    assert all(e.pair_with is None for e in tcmalloc), "one core: the allocator rows are read across processes"
    assert not any(e.label == AA_DUET_LABEL for e in entries)


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"nproc": 2}, "runs on 2 ranks"),
        ({"device": "cuda"}, "a duet pins each side to a CPU core"),
        ({"source": "/data/graph.pt"}, "loads its graph from '/data/graph.pt'"),
        ({"flags": "thread_placement"}, "thread_placement=split: places the process"),
        ({"flags": "pipeline_depth"}, "a duet cannot carry it: pipeline_depth=2"),
        ({"task": "link"}, "differ in task"),
    ],
)
def test_a_duet_refuses_what_it_cannot_time_and_names_it(monkeypatch, change, expected):
    _two_cores(monkeypatch)
    base = QUICK
    other = registry.config_for(base, ["tcmalloc"])
    if change.get("flags") == "thread_placement":
        other = dataclasses.replace(other, flags=other.flags.replace(thread_placement="split", num_workers=1))
    elif change.get("flags") == "pipeline_depth":
        other = dataclasses.replace(other, flags=other.flags.replace(pipeline_depth=2))
    elif "source" in change:  # a loaded graph: only its location matters to the refusal
        import types

        other = dataclasses.replace(other)
        object.__setattr__(other, "source", types.SimpleNamespace(location=change["source"]))
    else:
        other = dataclasses.replace(other, **change)
    assert expected in (duet_pair_refusal(base, other) or ""), duet_pair_refusal(base, other)


def test_a_duet_needs_two_cores_and_a_base_that_sets_nothing(monkeypatch):
    _two_cores(monkeypatch)
    tcmalloc = registry.config_for(QUICK, ["tcmalloc"])
    assert duet_pair_refusal(QUICK, tcmalloc) is None
    assert duet_pair_refusal(QUICK, QUICK) is None, "the A/A"
    assert "the base cannot share" in duet_pair_refusal(tcmalloc, QUICK)
    assert "a duet needs two" in duet_pair_refusal(QUICK, tcmalloc, cores=[3])


def test_each_part_of_a_duet_runs_half_the_entry_s_epochs():
    from gnnbench.measure.sweep.duet import part_epochs

    assert [part_epochs(e) for e in (None, 1, 2, 3, 4)] == [1, 1, 1, 1, 2]


def test_a_side_trains_a_fixed_number_of_whole_steps_without_a_target():
    cfg = dataclasses.replace(QUICK, stop_at=0.8, max_steps=99, min_steps=10, censor_seconds=5.0, epochs=3)
    side = side_config(cfg, 3)
    assert (side.epochs, side.max_epochs, side.stop_at, side.max_steps, side.min_steps) == (3, 3, None, None, 0)
    assert side.censor_seconds is None and side.sync_phases is False
    assert side.flags == cfg.flags and side.seed == cfg.seed
    assert side_config(dataclasses.replace(cfg, epochs=None), None).epochs == 2


def test_a_duet_record_has_both_sides_steps_and_its_cores():
    p = PairTiming(
        base_seconds=(0.10, 0.11, 0.10, 0.12, 0.10),
        other_seconds=(0.05, 0.05, 0.06, 0.05),
        sequence="",
        setup_seconds=(1.0, 1.5),
        design=DUET,
        cores=(1, 0, 0, 1),
    )
    assert p.speedup == pytest.approx((0.106) / 0.0525)
    assert p.block_sums() == ([pytest.approx(0.43)], [pytest.approx(0.21)]), "four steps a unit, in order"
    assert PairTiming.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    old = {k: v for k, v in p.to_dict().items() if k not in ("design", "cores")}
    assert PairTiming.from_dict(
        {**old, "sequence": "ABBA", "base_seconds": [1, 1], "other_seconds": [1, 1]}
    ).design == (INTERLEAVED), "a pair stored before duets is an interleaved one"
    with pytest.raises(ValueError, match="design must be one of"):
        dataclasses.replace(p, design="both")
    with pytest.raises(ValueError, match="no sequence"):
        dataclasses.replace(p, sequence="ABBA")
    with pytest.raises(ValueError, match="each side's core"):
        dataclasses.replace(p, cores=())
    with pytest.raises(ValueError, match="each side's core"):
        dataclasses.replace(p, cores=(0, 1, 1))
    with pytest.raises(ValueError, match="measured steps on both sides"):
        dataclasses.replace(p, other_seconds=())


def _fake_run_child(monkeypatch):
    import gnnbench.measure.sweep.rounds as sweep
    from gnnbench.atomic import write_json_atomic
    from gnnbench.measure.run import RunResult
    from gnnbench.process.children import ChildOutcome

    started = []

    def fake(argv, *args, **kwargs):
        started.append(argv[2])
        config = json.loads(open(argv[3]).read())
        write_json_atomic(argv[4], RunResult(status="ok", config=config).to_dict())
        return ChildOutcome(tuple(argv), 0, "", "", False, 0.1, 60.0)

    monkeypatch.setattr(sweep.process, "run_child", fake)
    return started


def test_an_isolated_sweep_adds_the_duet_to_its_run_or_says_why_it_has_none(tmp_path, monkeypatch):
    import gnnbench.measure.sweep.rounds as sweep

    _two_cores(monkeypatch)
    entries = [e for e in _entries(["tcmalloc"]) if e.label == "tcmalloc" and e.round == 0]
    started = _fake_run_child(monkeypatch)
    timing = PairTiming((0.1,) * 4, (0.08,) * 4, "", design=DUET, cores=(0, 1))
    calls = []

    def fake_duet(config, pair_base, round_):
        calls.append((config, pair_base, round_))
        return timing

    monkeypatch.setattr(sweep, "time_duet", fake_duet)
    results = run_sweep(entries, tmp_path / "ok", SweepOptions(isolate=True))
    assert started == ["gnnbench.measure.run.single"], "the duet's processes are its own, not the pair's"
    assert calls == [(entries[0].config, entries[0].pair_with, 0)]
    assert results[0].ok and PairTiming.from_dict(results[0].interleaved) == timing
    from gnnbench.measure.run import load_result

    assert load_result(tmp_path / "ok" / entries[0].filename()).interleaved == results[0].interleaved

    def failing(config, pair_base, round_):
        raise DuetFailed("the entry's side crashed (exit 1): MemoryError")

    monkeypatch.setattr(sweep, "time_duet", failing)
    results = run_sweep(entries, tmp_path / "failed", SweepOptions(isolate=True))
    assert results[0].ok and results[0].interleaved is None
    assert results[0].warnings == ["duet pair not measured: the entry's side crashed (exit 1): MemoryError"]

    def no_disk(config, pair_base, round_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sweep, "time_duet", no_disk)
    results = run_sweep(entries, tmp_path / "full", SweepOptions(isolate=True))
    assert results[0].ok and results[0].warnings == [
        "duet pair not measured: OSError: [Errno 28] No space left on device"
    ], "a sweep never stops on a duet: the row is read across processes"


def test_the_comparison_reads_duet_rows_under_their_own_a_a_and_floor():
    """A row timed in duet reads its time per step from its duets and says so; the paired noise is pooled per
    design, so the in-process rows' floor is not the duet's."""
    from gnnbench.measure.compare import ComparisonRow, PairedRatio, aa_spreads, pair_sds
    from gnnbench.measure.compare.interleaved import DUET_NOTE, interleaved_tta, pair_note
    from gnnbench.measure.run import RunResult

    def row(label, logs, design):
        ratio = PairedRatio(math.exp(sum(logs) / len(logs)), 0.9, 1.1, False, len(logs), 0.5, logs)
        return ComparisonRow(
            label=label,
            status="ok",
            step_speedup=ratio,
            interleaved=True,
            pair_design=design,
            derived=True,
            primary_rounds=[0, 1, 2],
        )

    rows = [
        row("inproc", [0.40, 0.41, 0.39], INTERLEAVED),
        row("duet-row", [0.20, 0.26, 0.14], DUET),
        row(AA_DUET_LABEL, [0.0, 0.03, -0.03], DUET),
    ]
    sds = pair_sds(rows, [0, 1, 2])
    assert sds["interleaved"] == pytest.approx(0.01) and sds["duet"] > 0.03
    assert list(aa_spreads(rows)) == ["duet"]
    assert pair_note(DUET) == DUET_NOTE and "one core each" in DUET_NOTE
    duets = [
        RunResult(
            status="ok",
            config={},
            interleaved=PairTiming(
                (0.1,) * 4, (0.08,) * 4, "", setup_seconds=(1.0, 1.0), design=DUET, cores=(r, 1 - r)
            ).to_dict(),
        )
        for r in (0, 1)
    ]
    tta = interleaved_tta(duets, 50.0)
    assert tta.ratio == pytest.approx(6.0 / 5.0) and DUET_NOTE in tta.note
    mixed = [
        duets[0],
        dataclasses.replace(
            duets[1],
            interleaved={
                **duets[1].interleaved,
                "design": INTERLEAVED,
                "sequence": "ABBA",
                "base_seconds": [0.1, 0.1],
                "other_seconds": [0.1, 0.1],
                "cores": [],
            },
        ),
    ]
    assert interleaved_tta(mixed, 50.0) is None, "one design per ratio"


@pytest.mark.skipif(len(usable_cores()) < 2, reason="a duet needs two usable cores")
def test_a_real_duet_on_tiny_gives_both_sides_steps_on_two_cores():
    """Both sides really run (the gate's worker on this tree), each on its own core, in two parts with the cores
    swapped between them; the round decides which part opens on which core."""
    from gnnbench.measure.run.workload import bench_config

    base = bench_config(preset="tiny", epochs=2, warmup_steps=3, device="cpu")
    other = registry.config_for(base, ["glibc_tuned"])  # needs no library
    p = time_duet(other, base, 1)
    first, second = sorted(usable_cores())[:2]
    assert p.design == DUET and p.cores == (second, first, first, second), "round 1 opens with the base on the second"
    assert len(p.base_seconds) == len(p.other_seconds) > 0
    assert all(s > 0 for s in p.base_seconds + p.other_seconds) and all(s > 0 for s in p.setup_seconds)
    with pytest.raises(DuetFailed, match="runs on 2 ranks"):
        time_duet(dataclasses.replace(other, nproc=2), base, 0)


def test_an_in_process_sweep_runs_the_entry_here_and_its_duet_in_two_processes_of_their_own(tmp_path, monkeypatch):
    """``isolate=False`` keeps every run in the sweep's process, but a duet's sides are processes of their own
    whatever the sweep: this process runs the entry, then waits for its duet."""
    import gnnbench.measure.sweep.rounds as sweep
    from gnnbench.measure.run import RunResult

    _two_cores(monkeypatch)
    entries = [e for e in _entries(["tcmalloc"]) if e.label == "tcmalloc" and e.round == 1]
    ran = []

    def fake_run(config, out=None, graph=None, dist_timeout=None):
        ran.append(config)
        result = RunResult(status="ok", config=config.to_dict())
        from gnnbench.atomic import write_json_atomic

        write_json_atomic(out, result.to_dict())
        return result

    timing = PairTiming((0.1,) * 4, (0.08,) * 4, "", design=DUET, cores=(1, 0, 0, 1))
    monkeypatch.setattr(sweep, "run", fake_run)
    monkeypatch.setattr(sweep, "time_duet", lambda config, pair_base, round_: timing)
    results = run_sweep(entries, tmp_path, SweepOptions(isolate=False))
    assert ran == [entries[0].config] and PairTiming.from_dict(results[0].interleaved) == timing
