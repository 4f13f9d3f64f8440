"""scripts/equivalence_aa.py: the measured A/A rows (baseline seeds, fresh seeds) and the half-lr control are
planned as the issue asks, and each row's verdicts are summarized from the comparison."""

from gnnbench.measure.compare import AA_SEED_OFFSET, CALIBRATION_SEED_OFFSET, EPOCH_TIME, ComparisonRow, PairedRatio
from gnnbench.training import RunConfig
from tests.helpers import load_script


def _script():
    return load_script("equivalence_aa")


def test_the_plan_pairs_own_seed_copies_fresh_seed_copies_and_the_half_lr_control():
    s = _script()
    base = RunConfig(seed=0, lr=0.01)
    entries = s.plan(base, own=2, fresh=2, repeats=3)
    by = {}
    for e in entries:
        by.setdefault(e.label, []).append(e)
    assert set(by) == {"baseline", "A/A own 1", "A/A own 2", "A/A fresh 1", "A/A fresh 2", s.CONTROL}
    for r in range(3):
        base_r = next(e for e in by["baseline"] if e.round == r)
        assert base_r.config.seed == r
        assert all(e.config == base_r.config for e in by["A/A own 1"] + by["A/A own 2"] if e.round == r)
        control = next(e for e in by[s.CONTROL] if e.round == r)
        assert control.config.seed == r and control.config.lr == 0.005
    fresh = {e.config.seed for e in by["A/A fresh 1"] + by["A/A fresh 2"]}
    assert len(fresh) == 6 and min(fresh) >= AA_SEED_OFFSET + 1000
    assert not fresh & (
        {0, 1, 2} | {CALIBRATION_SEED_OFFSET + i for i in range(3)} | {AA_SEED_OFFSET + r for r in range(3)}
    )


def test_a_row_summary_names_its_verdicts():
    s = _script()
    ratio = PairedRatio(1.01, 0.97, 1.05, False, 3, 0.6, [0.0, 0.02, 0.01])
    row = ComparisonRow(
        label="A/A own 1",
        status="ok",
        primary=EPOCH_TIME,
        epoch_speedup=ratio,
        speedup=1.01,
        speedup_low=0.97,
        speedup_high=1.05,
        rounds=3,
    )
    out = s.row_summary(row)
    assert out["label"] == "A/A own 1" and out["significant"] is False and out["steps_equivalent"] is None
