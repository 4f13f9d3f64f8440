import dataclasses
import functools
import json

import pytest
import torch

from gnnbench import registry
from gnnbench.flags import Flags
from gnnbench.measure.run import run
from gnnbench.timing import PHASES, summarize
from gnnbench.training import RunConfig
from gnnbench.training.optim import hook_momentum, make_optimizer
from tests.helpers import QUICK, unavailable_here

SPEC = QUICK.spec


def test_run_result_schema_and_phases(tmp_path):
    out = tmp_path / "run.json"
    r = run(QUICK, out=out)
    assert r.status == "ok"
    assert json.loads(out.read_text())["status"] == "ok", "written to disk"
    assert (r.steps.measured, r.steps.warmup, r.steps.total) == (4, 2, 6)
    assert set(r.phases) == set(PHASES)
    for p in PHASES:
        assert r.phases[p].n == 4 and r.phases[p].median >= 0
    assert 0 <= r.accuracy.test <= 1 and 0 <= r.accuracy.val <= 1
    assert r.timing_mode == "sync" and r.environment["torch"] == torch.__version__
    assert r.config["flags"]["fanout"] == [5, 3] and r.config["spec"]["num_nodes"] == 3000
    assert r.instrumentation_overhead_fraction < 0.02
    assert r.device_busy_fraction is None and "NVML" in r.device_busy_reason
    phase_sum = sum(r.phases[p].median for p in PHASES)
    assert phase_sum <= 1.5 * r.step_seconds.max
    json.dumps(r.to_dict())  # serializable


def test_end_to_end_mode_times_steps_only():
    r = run(dataclasses.replace(QUICK, sync_phases=False))
    assert r.timing_mode == "end_to_end" and r.step_seconds.n == 4
    assert r.data_wait_fraction is None


def test_training_learns_on_tiny():
    cfg = dataclasses.replace(QUICK, max_steps_per_epoch=None, epochs=5, hidden=32, lr=0.02)
    r = run(cfg)
    # ~0.42-0.51 over model seeds; features alone (nearest class mean, logistic regression) reach ~0.27, chance 0.1
    assert r.accuracy.test > 0.35


@pytest.mark.parametrize(
    "names,field",
    [(["pin_memory"], "pin_memory"), (["uva"], "feature_placement"), (["degree_negatives"], "negative_mode")],
)
def test_unavailable_flags_report_reasons_not_numbers(names, field):
    cfg = dataclasses.replace(QUICK, flags=registry.flags_for(names, QUICK.flags))
    if not unavailable_here(cfg):
        pytest.skip(f"{field} can run here")
    r = run(cfg)
    assert r.status == "unavailable" and field in r.unavailable
    assert r.phases is None and "phases" not in r.to_dict()


def test_cached_norm_with_sage_is_reported_unavailable():
    r = run(dataclasses.replace(QUICK, model="sage", flags=registry.flags_for(["cached_norm"], QUICK.flags)))
    assert r.status == "unavailable" and "model 'sage' has none" in r.unavailable["cached_norm"]


def test_bad_configurations_are_refused_with_clear_messages():
    with pytest.raises(ValueError, match=r"fanout \[5, 3\] has 2 hops but the model has 3 layers"):
        dataclasses.replace(QUICK, num_layers=3)
    with pytest.raises(ValueError, match="unknown model 'gin'"):
        dataclasses.replace(QUICK, model="gin")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            run(dataclasses.replace(QUICK, device="cuda"))
    with pytest.raises(ValueError, match="Flags.batch_size must be an integer >= 1"):
        Flags(batch_size=0)


@pytest.mark.parametrize(
    "names",
    [
        ["sparse_agg"],
        ["partial_amp"],
        ["cached_norm"],
        ["int32", "csr"],
        ["batch_cache"],
        ["cluster_gcn"],
        ["graphsaint"],
        ["workers"],
    ],
)
def test_every_cpu_flag_runs_through_the_trainer(names, tmp_path):
    cfg = dataclasses.replace(
        QUICK,
        flags=registry.flags_for(names, QUICK.flags),
        cache_dir=str(tmp_path),
        max_steps_per_epoch=4,
        warmup_steps=1,
    )
    if "cluster_gcn" in names or "graphsaint" in names:  # several batches on a 3,000-node graph
        cfg = dataclasses.replace(cfg, flags=cfg.flags.replace(cluster_size=500, clusters_per_batch=1, saint_roots=200))
    r = run(cfg)
    assert r.status == "ok", r.unavailable
    assert r.steps.measured >= 1


def test_bootstrap_free_summary():
    s = summarize([3.0, 1.0, 2.0])
    assert s["median"] == 2.0 and s["min"] == 1.0 and s["max"] == 3.0 and s["n"] == 3


def test_training_clock_and_validation_curve():
    cfg = dataclasses.replace(QUICK, epochs=2, max_steps_per_epoch=5, eval_every=2)
    r = run(cfg)
    steps = [p.step for p in r.curve]
    assert steps == [2, 4, 6, 8, 10], "every 2 steps, and at the end"
    seconds = [p.seconds for p in r.curve]
    assert seconds == sorted(seconds) and seconds[0] >= r.setup_seconds
    # evaluation is off the training clock: the clock is the sum of the epochs
    assert sum(r.epoch_seconds) == pytest.approx(r.train_seconds, rel=1e-6)
    assert r.curve[-1].seconds <= r.setup_seconds + r.train_seconds  # the epoch's close comes after it
    assert r.curve[-1].seconds == pytest.approx(r.setup_seconds + r.train_seconds, rel=0.1)
    assert r.accuracy.test == r.curve[-1].test, "final accuracy is the last validation point"
    per_epoch = run(dataclasses.replace(cfg, eval_every=None))
    assert [p.epoch for p in per_epoch.curve] == [0, 1]


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_compile_reports_compile_time_apart(model):
    cfg = dataclasses.replace(
        QUICK, flags=registry.flags_for(["compile"], QUICK.flags), max_steps_per_epoch=7, model=model
    )
    r = run(cfg)
    assert r.status == "ok"
    c = r.compile
    assert c.first_step_seconds > r.step_seconds.median
    assert c.unique_graphs >= 1 and c.recompilations >= 0
    # the forward compiles whole: GCN's per-batch normalization (graphs.norm.gcn_norm) and SAGE's mean degree
    # (models.aggregation.Aggregator.degree) have static shapes (SAGE built 9 graphs with bincount's 2 breaks)
    assert c.graph_breaks == 0 and c.unique_graphs == 1, c
    base = run(dataclasses.replace(cfg, flags=QUICK.flags))
    assert abs(r.accuracy.test - base.accuracy.test) < 0.05


@functools.lru_cache(maxsize=None)
def _cpu_accuracy(cfg: RunConfig) -> float:
    return run(dataclasses.replace(cfg, device="cpu")).accuracy.test


@pytest.mark.cuda
@pytest.mark.parametrize(
    "names",
    [
        [],
        ["features_on_device"],
        ["hot_cold"],
        ["uva"],
        ["feature_prefetch"],
        ["pin_memory"],
        ["partial_amp"],
        ["full_amp"],
        ["sparse_agg"],
        ["cached_norm", "int32", "csr"],
    ],
)
def test_cuda_runs_every_device_flag(names):
    cfg = dataclasses.replace(
        QUICK,
        device="cuda",
        flags=registry.flags_for(names, QUICK.flags),
        max_steps_per_epoch=None,
        epochs=3,
        lr=0.02,
        hidden=32,
    )
    r = run(cfg)
    assert r.status == "ok", r.unavailable
    assert r.memory.device_peak_bytes > 0 and r.device_phase_ms is not None
    # learned (chance is 1/num_classes) and within 5 pp of the same configuration's CPU baseline
    cpu = _cpu_accuracy(dataclasses.replace(cfg, flags=QUICK.flags))
    assert r.accuracy.test > 2.5 / SPEC.num_classes and r.accuracy.test > cpu - 0.05, (r.accuracy, cpu)
    if names and names[0] in ("features_on_device", "uva"):
        assert r.transfer.device_feature_bytes == (
            SPEC.num_nodes * SPEC.feature_dim * 4 if names[0] == "features_on_device" else 0
        )


def test_trainer_steps_cycle_epochs_one_step_at_a_time():
    from gnnbench.flags import UnavailableError
    from gnnbench.training import Trainer

    trainer = Trainer(QUICK)
    steps = trainer.steps(epochs=float("inf"))  # as asv and pytest-benchmark drive it
    taken = [next(steps) for _ in range(15)]  # 7 batches per epoch: crosses two epoch ends
    losses = [s.loss for s in taken]
    assert taken[-1].epoch == 2 and all(l == l for l in losses)
    assert [s.index for s in taken] == list(range(15)) and [s.measured for s in taken[:3]] == [False, False, True]
    steps.close()
    acc, _ = trainer.evaluate()
    assert acc["metric"] == "accuracy" and 0 <= acc["test"] <= 1
    trainer.close()
    uva = dataclasses.replace(QUICK, flags=registry.flags_for(["uva"], QUICK.flags))
    if unavailable_here(uva):
        with pytest.raises(UnavailableError) as err:
            Trainer(uva)
        assert "feature_placement" in err.value.reasons


def test_optimizer_choice_and_where_sgd_momentum_lives():
    """Adam by default; SGD keeps its momentum, except under top-k compression, where the hook applies it
    (DGC's momentum correction) and the optimizer steps plain SGD."""
    params = [torch.nn.Parameter(torch.zeros(3))]
    adam = make_optimizer(QUICK, params)
    assert isinstance(adam, torch.optim.Adam) and adam.param_groups[0]["lr"] == 0.01
    sgd = dataclasses.replace(QUICK, optimizer="sgd", lr=0.05, momentum=0.8)
    assert hook_momentum(sgd) == 0.0 and make_optimizer(sgd, params).param_groups[0]["momentum"] == 0.8
    topk = dataclasses.replace(sgd, flags=registry.flags_for(["topk_compression"], QUICK.flags))
    assert hook_momentum(topk) == 0.8 and make_optimizer(topk, params).param_groups[0]["momentum"] == 0.0
    assert hook_momentum(dataclasses.replace(topk, optimizer="adam")) == 0.0
    with pytest.raises(ValueError, match="unknown optimizer 'rmsprop'; accepted: 'adam', 'sgd'"):
        dataclasses.replace(QUICK, optimizer="rmsprop")
    with pytest.raises(ValueError, match=r"RunConfig.momentum must be a number in \[0, 1\) \(got 1.0\)"):
        dataclasses.replace(QUICK, momentum=1.0)
    with pytest.raises(ValueError, match="unknown lr_schedule 'step'; accepted: 'constant', 'cosine'"):
        dataclasses.replace(QUICK, lr_schedule="step")
    assert RunConfig.from_dict(topk.to_dict()) == topk


def test_cosine_schedule_sets_each_epochs_learning_rate():
    from gnnbench.training import Trainer

    cfg = dataclasses.replace(QUICK, epochs=4, optimizer="sgd", lr=0.1, lr_schedule="cosine", max_steps_per_epoch=2)
    trainer = Trainer(cfg)
    seen = {}
    for step in trainer.steps(evaluate=False):
        seen[step.epoch] = trainer.pipeline.optimizer.param_groups[0]["lr"]
    trainer.close()
    assert seen == pytest.approx({0: 0.1, 1: 0.1 * (1 + 0.5**0.5) / 2, 2: 0.05, 3: 0.1 * (1 - 0.5**0.5) / 2})


def test_cli_optimizer_options_reach_the_config_and_momentum_needs_sgd():
    from gnnbench.cli.options import config_from_args
    from gnnbench.cli.parser import build_parser

    def config(*argv):
        args = build_parser().parse_args(["run", *argv])
        return config_from_args(args, args.flags or [])

    plain = config()
    assert (plain.optimizer, plain.lr, plain.momentum, plain.lr_schedule) == ("adam", 0.01, 0.9, "constant")
    sgd = config("--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.8", "--lr-schedule", "cosine")
    assert (sgd.optimizer, sgd.lr, sgd.momentum, sgd.lr_schedule) == ("sgd", 0.05, 0.8, "cosine")
    with pytest.raises(ValueError, match=r"--momentum 0.5 applies to --optimizer sgd only \(got optimizer 'adam'\)"):
        config("--momentum", "0.5")
