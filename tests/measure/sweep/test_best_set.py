"""The measured best set (docs/best-set.md): chosen from the single-entry rows that pay, conflicts resolved in
rank order, measured in rounds of its own on seeds of its own, and reported first (or said not to pay)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from gnnbench.measure.compare import AA_SEED_OFFSET, CALIBRATION_SEED_OFFSET, ComparisonRow
from gnnbench.measure.sweep import (
    BEST_SET_DIR,
    BEST_SET_SEED_OFFSET,
    BestSetChoice,
    BestSetOutcome,
    SweepOptions,
    choose,
    outcome_line,
    set_base,
    sweep_entries,
)
from gnnbench.measure.sweep import full as ms
from gnnbench.training import RunConfig
from tests.measure.sweep.test_sweep import _result, _sweep


def _row(
    label, speedup=1.5, *, low=None, significant=True, acc="no accuracy cost", censored=False, opts=None, alone=None
):
    return ComparisonRow(
        label=label,
        optimizations=list(opts or label.split("+")),
        status="ok",
        speedup=speedup,
        speedup_low=low if low is not None else speedup * 0.9,
        speedup_high=speedup * 1.1,
        significant=significant,
        censored=censored,
        acc_verdict=acc,
        significant_per_row=significant if alone is None else alone,
    )


@pytest.fixture
def runs_anywhere(monkeypatch):
    """Every combination runs on this device (the device's own refusals are tested apart)."""
    from gnnbench.measure.sweep import best_set

    monkeypatch.setattr(best_set, "config_unavailable", lambda config, device=None: {})


def _comparison(rows):
    return SimpleNamespace(rows=[ComparisonRow(label="baseline")] + rows)


def test_candidates_are_the_rows_that_pay_at_no_cost_and_conflicts_are_resolved_in_rank_order(runs_anywhere):
    base = RunConfig()
    rows = [
        _row("sparse_agg", 1.6),
        _row("full_amp", 1.3),
        _row("prefetch", 1.2),
        _row("partial_amp", 1.15),  # sets precision, as full_amp (ranked above it) does
        _row("workers", 1.1, low=1.02),  # sets num_workers, as prefetch does
        _row("csr+sparse_agg", 1.05, low=1.01),  # its part sparse_agg is taken
        _row("compile", 1.4, significant=False),  # not family-wise significant: not a candidate
        _row("fast_dropout", 1.3, acc="costs accuracy"),  # a trade-off, never in the set
        _row("cluster_gcn", 1.8, censored=True),  # missed the target in some round
        _row("all_recommended", 1.7, opts=["sparse_agg", "csr"]),
    ]  # the static list: never a candidate
    choice = choose(_comparison(rows), base)
    assert choice.candidates == ["sparse_agg", "full_amp", "prefetch", "partial_amp", "workers", "csr+sparse_agg"]
    assert choice.names == ["sparse_agg", "full_amp", "prefetch"] and choice.label == "sparse_agg+full_amp+prefetch"
    assert choice.left_out["partial_amp"] == "conflicts with full_amp on field precision"
    assert choice.left_out["workers"] == "conflicts with prefetch on field num_workers"
    assert choice.left_out["csr+sparse_agg"].startswith("already in the set (sparse_agg)")
    assert choice.measurable
    assert BestSetChoice.from_dict(json.loads(json.dumps(choice.to_dict()))) == choice


def test_rows_significant_alone_are_candidates_after_the_family_wise_ones(runs_anywhere):
    """The set is judged on rounds of its own, so a row that pays on its own test but not after Holm is a
    hypothesis worth those rounds: taken after every family-wise candidate, and named as such."""
    rows = [
        _row("tcmalloc", 1.4),
        _row("full_amp", 1.35, significant=False, alone=True),
        _row("sparse_agg", 1.34, significant=False, alone=True),
        _row("fast_dropout", 1.3, significant=False, alone=True, acc="inconclusive"),  # accuracy unknown
        _row("compile", 1.2, significant=False, alone=False),  # not even alone
        _row("prefetch", 0.8, low=0.7, significant=False, alone=True),
    ]  # significant, but slower
    choice = choose(_comparison(rows), RunConfig())
    assert choice.candidates == ["tcmalloc", "full_amp", "sparse_agg"]
    assert choice.per_row == ["full_amp", "sparse_agg"]
    assert choice.names == ["tcmalloc", "full_amp", "sparse_agg"]
    assert BestSetChoice.from_dict(json.loads(json.dumps(choice.to_dict()))) == choice
    line = outcome_line(BestSetOutcome(choice, reason="not measured yet"), lambda r: "-")
    assert "chosen on their own test, not family-wise: full_amp, sparse_agg" in line
    # family-wise rows rank first whatever their ratio
    rows = [_row("full_amp", 1.9, significant=False, alone=True), _row("tcmalloc", 1.2)]
    assert choose(_comparison(rows), RunConfig()).candidates == ["tcmalloc", "full_amp"]


def test_an_entry_that_cannot_run_with_the_set_on_this_device_is_left_out_with_the_reason(monkeypatch):
    from gnnbench.measure.sweep import best_set

    def cannot(config, device=None):  # a constructed device refusal of the pair
        if config.flags.aggregation == "sparse" and config.flags.precision == "full":
            return {"precision": "no low-precision sparse product on this device"}
        return {}

    monkeypatch.setattr(best_set, "config_unavailable", cannot)
    choice = choose(
        _comparison([_row("full_amp", 1.5), _row("sparse_agg", 1.4), _row("fast_dropout", 1.2)]), RunConfig()
    )
    assert choice.names == ["full_amp", "fast_dropout"]
    assert choice.left_out == {
        "sparse_agg": "cannot run with full_amp on here (precision: no low-precision sparse product on this device)"
    }


def test_the_device_refusal_is_the_real_one():
    """full_amp + sparse_agg is refused where the device has no bfloat16 sparse product (this CPU build of
    torch) and taken where it has one: choose asks the same availability check a run does."""
    from gnnbench import registry
    from gnnbench.training import config_unavailable

    refused = config_unavailable(registry.config_for(RunConfig(), ["full_amp", "sparse_agg"]))
    choice = choose(_comparison([_row("full_amp", 1.5), _row("sparse_agg", 1.4)]), RunConfig())
    if refused:
        assert choice.names == ["full_amp"] and "cannot run with full_amp on here" in choice.left_out["sparse_agg"]
    else:
        assert choice.names == ["full_amp", "sparse_agg"]


def test_an_entry_not_applicable_once_the_set_is_on_is_left_out_with_the_reason(monkeypatch, runs_anywhere):
    from gnnbench import registry

    real = registry.not_applicable

    def not_applicable(base, names):  # compile refuses the sparse aggregation here (a constructed conflict)
        if base.flags.aggregation == "sparse" and "compile" in names:
            return "compile does not apply here: no graph capture of the sparse product"
        return real(base, names)

    monkeypatch.setattr(registry, "not_applicable", not_applicable)
    choice = choose(_comparison([_row("sparse_agg", 2.0), _row("compile", 1.5), _row("csr", 1.2)]), RunConfig())
    assert choice.names == ["sparse_agg", "csr"]
    assert choice.left_out == {
        "compile": "not applicable with sparse_agg on: compile does not apply here: no "
        "graph capture of the sparse product"
    }


def test_one_candidate_is_no_set_and_the_best_single_row_is_the_answer(runs_anywhere):
    choice = choose(_comparison([_row("sparse_agg", 1.6), _row("compile", 1.2, significant=False)]), RunConfig())
    assert choice.names == ["sparse_agg"] and not choice.measurable
    line = outcome_line(BestSetOutcome(choice), lambda r: "-")
    assert line.startswith("best set: none measured (fewer than two entries pay") and "best single row" in line


def test_the_set_rounds_train_on_seeds_no_other_round_uses():
    base = RunConfig(seed=0)
    choice = BestSetChoice(candidates=["sparse_agg", "csr"], names=["sparse_agg", "csr"])
    entries = sweep_entries(set_base(base, choice), [choice.label], repeats=5, include_all_recommended=False)
    set_seeds = {e.config.seed for e in entries}
    assert set_seeds == {BEST_SET_SEED_OFFSET + r for r in range(5)}
    others = (
        {r for r in range(5)}
        | {CALIBRATION_SEED_OFFSET + i for i in range(10)}
        | {AA_SEED_OFFSET + r for r in range(5)}
    )
    assert not set_seeds & others
    assert {e.label for e in entries} == {"baseline", "sparse_agg+csr"}, "the set is paired with its own baseline"


def _set_runs(label, factor, acc_shift=0.0):
    runs = []
    for r, n in enumerate((1.0, 1.02, 0.98, 1.01, 0.99)):
        runs.append(_result("baseline", r, 0.10 * n, 2.0 * n, 0.80 + 0.001 * r, [(2.5 * n, 0.70), (4.5 * n, 0.80)]))
        runs.append(
            _result(
                label,
                r,
                0.10 * n / factor,
                2.0 * n / factor,
                0.80 + 0.001 * r + acc_shift + 0.0002 * (r % 2),
                [(2.5 * n / factor, 0.70), (4.5 * n / factor, 0.80)],
                label.split("+"),
            )
        )
    return runs


@pytest.mark.parametrize("factor, pays", [(1.8, True), (1.0, False)])
def test_sweep_and_compare_chooses_records_and_measures_the_set_in_its_own_folder(tmp_path, monkeypatch, factor, pays):
    single = _sweep()
    for r, n in enumerate((1.0, 1.02, 0.98, 1.01, 0.99)):  # a second entry that pays: csr, 1.25x per epoch
        single.append(
            _result(
                "csr",
                r,
                0.08 * n,
                1.6 * n,
                0.80 + 0.001 * r + 0.0002 * (r % 2),
                [(2.0 * n, 0.70), (3.6 * n, 0.80)],
                ["csr"],
            )
        )
    calls = []

    def fake_run_sweep(entries, out_dir, options, **kwargs):
        calls.append((entries, out_dir))
        if len(calls) == 1:  # the single-entry rounds' manifest, as run_sweep writes it
            (tmp_path / "sweep.json").write_text(json.dumps({"sweep": "main"}))
            return list(single)
        labels = {e.label for e in entries}
        assert labels == {"baseline", "sparse_agg+csr"}
        assert all(e.config.seed >= BEST_SET_SEED_OFFSET for e in entries)
        return _set_runs("sparse_agg+csr", factor)

    monkeypatch.setattr(ms, "run_sweep", fake_run_sweep)
    monkeypatch.setattr(
        ms,
        "sweep_entries",
        lambda base, names, **kw: [
            SimpleNamespace(label=n, config=base) for n in ["baseline", *(names or ["sparse_agg", "csr", "fanout"])]
        ],
    )
    measured = ms.sweep_and_compare(
        RunConfig(),
        ["sparse_agg", "csr", "fanout"],
        tmp_path,
        SweepOptions(
            calibration_runs=0,
            target_acc=0.79,
            include_all_recommended=False,
            equivalence_margin=None,
            best_set=True,
            record_outcome=True,
        ),
    )
    assert len(calls) == 2 and calls[1][1] == tmp_path / BEST_SET_DIR
    best = measured.best_set
    assert best.choice.names == ["sparse_agg", "csr"] and best.row.label == "sparse_agg+csr"
    assert best.pays is pays
    manifest = json.loads((tmp_path / "sweep.json").read_text())
    assert manifest["best_set"]["names"] == ["sparse_agg", "csr"]
    assert manifest["outcome"]["best_set"]["pays"] is pays
    from gnnbench.cli.tables import format_compare

    text = format_compare(measured.comparison, best_set=best)
    if pays:
        assert "measured best set here: sparse_agg+csr: 1.8" in text
        assert text.index("measured best set here") < text.index("measured best single row here")
    else:
        assert "best set sparse_agg+csr does not pay here" in text and "the best single row stands" in text


def test_no_set_is_measured_without_a_target_fixed_before_the_rounds(tmp_path, monkeypatch):
    single = _sweep()
    for r, n in enumerate((1.0, 1.02, 0.98, 1.01, 0.99)):
        single.append(
            _result(
                "csr",
                r,
                0.08 * n,
                1.6 * n,
                0.80 + 0.001 * r + 0.0002 * (r % 2),
                [(2.0 * n, 0.70), (3.6 * n, 0.80)],
                ["csr"],
            )
        )
    calls = []
    monkeypatch.setattr(ms, "run_sweep", lambda entries, out_dir, options, **kw: calls.append(1) or list(single))
    monkeypatch.setattr(ms, "sweep_entries", lambda base, names, **kw: [SimpleNamespace(label="baseline", config=base)])
    measured = ms.sweep_and_compare(
        RunConfig(),
        ["sparse_agg", "csr"],
        tmp_path,
        SweepOptions(calibration_runs=0, include_all_recommended=False, equivalence_margin=None, best_set=True),
    )
    assert len(calls) == 1, "no rounds for a set that could not be judged on the sweep's target"
    assert measured.best_set.row is None and "no target fixed" in measured.best_set.reason
