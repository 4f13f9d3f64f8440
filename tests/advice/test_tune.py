"""``gnnbench tune``: the greedy path on ``tiny`` (in-process runs, few repeats), its stopping rules and its
refusals."""

import dataclasses

import pytest

from gnnbench import registry
from gnnbench.advice.diagnose import Diagnosis
from gnnbench.advice.rules import Finding
from gnnbench.advice.tune import candidates_for, format_tune, tune
from gnnbench.graphs import GraphSpec
from gnnbench.training import RunConfig
from tests.helpers import QUICK

BASE = dataclasses.replace(
    QUICK,
    spec=GraphSpec.preset("tiny"),
    flags=QUICK.flags.replace(batch_size=64),
    epochs=2,
    max_steps_per_epoch=4,
    warmup_steps=1,
)


def _diagnosis(shares):
    return Diagnosis(
        config={},
        device="cpu",
        steps=1,
        step_ms={},
        phase_ms={},
        shares=shares,
        data_wait_share=0.0,
        finding=Finding("kernels", shares["kernels"], None, None, 0.9, "compute phases", ""),
        expected="",
    )


def test_candidates_are_the_entries_targeting_a_bottleneck_worth_optimizing():
    kernels = candidates_for(_diagnosis({"sampling": 0.02, "negatives": 0.0, "features": 0.0, "kernels": 0.98}), BASE)
    assert "fast_dropout" in kernels and "sparse_agg" in kernels
    assert "workers" not in kernels and "batch_cache" not in kernels  # sampling is 2% of the step
    assert "uva" not in kernels and "degree_negatives" not in kernels  # CUDA-only; link task only
    sampling = candidates_for(_diagnosis({"sampling": 0.6, "negatives": 0.0, "features": 0.0, "kernels": 0.4}), BASE)
    assert {"workers", "batch_cache"} <= set(sampling)


def test_an_entry_that_cannot_apply_is_set_aside_with_its_reason():
    """A single-hop base: the fanout entry cannot drop a hop. It is no candidate, its reason is kept (tune
    prints it), and the other candidates stay."""
    base = dataclasses.replace(BASE, flags=BASE.flags.replace(fanout=(5,)))
    reasons = {}
    names = candidates_for(
        _diagnosis({"sampling": 0.6, "negatives": 0.0, "features": 0.0, "kernels": 0.4}), base, not_applicable=reasons
    )
    assert "fanout" not in names and "has only one" in reasons["fanout"]
    assert {"workers", "batch_cache"} <= set(names)


def test_greedy_path_and_final_measurement(tmp_path):
    lines = []
    r = tune(
        BASE,
        budget_s=900,
        out_dir=tmp_path,
        repeats=2,
        candidates=["partial_amp", "full_amp"],
        isolate=False,
        log=lines.append,
    )
    assert r.rounds and r.stop_reason
    assert set(r.chosen) <= {"partial_amp", "full_amp"}
    assert not {"partial_amp", "full_amp"} <= set(r.chosen), "both set precision: the second would undo the first"
    for rnd in r.rounds:
        assert {m["label"] for m in rnd.measured} <= {"partial_amp", "full_amp"}
        if rnd.added:
            added = next(m for m in rnd.measured if m["label"] == rnd.added)
            assert added["significant"] and added["speedup"] > 1 and added["acc_delta_pp"] >= -0.5
    text = format_tune(r)
    assert "round 1" in text and "stopped:" in text
    if r.chosen:
        assert r.final is not None and r.final.label == "+".join(r.chosen)
        assert (tmp_path / "final").is_dir()
    else:
        assert "the baseline (no entry paid here)" in text


def test_tune_refuses_bad_settings(tmp_path):
    with pytest.raises(ValueError, match="budget must be positive"):
        tune(BASE, budget_s=0, out_dir=tmp_path)
    with pytest.raises(ValueError, match="at least 2 repeats"):
        tune(BASE, budget_s=60, out_dir=tmp_path, repeats=1)
    with pytest.raises(ValueError, match="max_acc_loss_pp"):
        tune(BASE, budget_s=60, out_dir=tmp_path, max_acc_loss_pp=-1)
    with pytest.raises(ValueError, match="unknown optimization"):
        tune(BASE, budget_s=60, out_dir=tmp_path, candidates=["warp_drive"])


def test_entries_already_on_are_not_candidates():
    on = RunConfig(spec=BASE.spec, flags=registry.flags_for(["fast_dropout"], BASE.flags), hidden=16)
    names = candidates_for(_diagnosis({"sampling": 0.0, "negatives": 0.0, "features": 0.0, "kernels": 1.0}), on)
    assert "fast_dropout" not in names


def test_swap_moves_undo_a_lock_out():
    # on the CPU, sparse_agg cannot run with full_amp (no bf16 CSR product): chosen first, full_amp locks it out
    from gnnbench.advice.tune import swap_moves
    from gnnbench.training import config_unavailable

    locked = RunConfig(spec=BASE.spec, flags=registry.flags_for(["full_amp", "sparse_agg"], BASE.flags))
    assert config_unavailable(locked), "the lock-out this test relies on"
    moves = swap_moves(["full_amp", "fast_dropout"], ["sparse_agg", "fast_dropout"], BASE)
    assert moves == [("full_amp", "sparse_agg", ["sparse_agg", "fast_dropout"])]
    # two entries setting one field (precision) are a swap, not an addition
    assert ("full_amp", "partial_amp", ["partial_amp"]) in swap_moves(["full_amp"], ["partial_amp"], BASE)
    # an entry that can simply be added is not a swap; a tried swap is not offered again
    assert swap_moves(["fast_dropout"], ["sparse_agg"], BASE) == []
    assert swap_moves(["full_amp"], ["sparse_agg"], BASE, tried={("full_amp", "sparse_agg")}) == []


def test_tune_measures_swaps_against_the_current_set(tmp_path):
    lines = []
    r = tune(
        BASE,
        budget_s=900,
        out_dir=tmp_path,
        repeats=2,
        candidates=["full_amp", "sparse_agg"],
        isolate=False,
        log=lines.append,
    )
    swaps = [m for rnd in r.rounds for m in rnd.measured if m["label"].startswith("swap:")]
    first = {m["label"]: m for m in r.rounds[0].measured}
    if (
        r.chosen[:1] == ["full_amp"]
        and first["sparse_agg"]["significant"]
        and first["sparse_agg"]["speedup"] > 1
        and first["sparse_agg"]["acc_delta_pp"] >= -0.5
    ):
        assert any(m["label"] == "swap:full_amp->sparse_agg" for m in swaps), lines
    for m in swaps:
        out, new_in = m["label"][len("swap:") :].split("->")
        assert {out, new_in} == {"full_amp", "sparse_agg"}
    assert not {"full_amp", "sparse_agg"} <= set(r.chosen)
