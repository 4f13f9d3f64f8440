"""The entries declared ``same_trajectory`` leave training unchanged: the same batches, the same updates up to
floating-point reassociation (:attr:`gnnbench.registry.Optimization.same_trajectory`).

The sweep trusts the declaration to skip training those entries to the target (their time to accuracy is derived
from their time per step), so every declared entry is checked here, on every task it applies to and on each
device it runs on: the baseline and the entry train on one seed for a fixed number of steps, and must agree step
by step (:func:`mismatches`). Negative controls prove the check is not vacuous: a different dropout mask
(``fast_dropout``), different neighbour draws of the same seed batches, and fp16-rounded features all fail it.
Beside the training check, the batch sources of the declared entries must yield exactly the baseline's batches
(loader workers, persistent or not, with prefetch; an epoch cut short included).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import pytest
import torch

from gnnbench import registry
from gnnbench.flags import Flags
from gnnbench.sampling.sampler import GnnbenchNeighborSampler
from gnnbench.training import RunConfig, Trainer
from tests.helpers import QUICK, skip_unless_runs, unavailable_here

# 3 epochs of at most 6 steps (of the 7 a node epoch has, so every epoch is cut short as the sweep's capped
# epochs are, and persistent workers are left with prefetched batches to discard): 18 optimizer steps, a
# validation point every 3. lr 0.05 and width 32 make the model learn in those steps (validation accuracy
# 0.12 -> 0.63 on node classification), so a different batch or dropout mask shows in the curve, not only in
# the losses.
BASE = dataclasses.replace(QUICK, epochs=3, max_steps_per_epoch=6, eval_every=3, warmup_steps=0, lr=0.05, hidden=32)

# Per-step training loss, relative to the baseline's. Every declared entry that runs on a CPU measured bit-identical
# losses here (difference 0). Relative noise of 1e-5 (about 100x float32 reassociation error) injected into every
# layer output, every aggregation input and every gradient moved these 18 losses by at most 2.9e-6, and 1e-6 noise
# by 2.4e-7; fp16-rounded features (fp16_features, a rounding, not a reassociation) move them by 2.5e-4, seven times
# past this bound. CUDA's atomic sums make its baseline differ from itself run to run:
# test_cuda_baseline_repeats_within_tolerance checks that this bound holds that noise.
LOSS_RTOL = 2e-5
# Validation and test metric at every validation point. Node classification: at most this many of the split's
# nodes may change prediction (2 of the 300 validation nodes = 0.0067 accuracy); the 1e-5 noise above changed none,
# fast_dropout changes 58. Link prediction (AUC): an absolute difference of at most LINK_AUC_ATOL.
EVAL_NODES_TOL = 2
LINK_AUC_ATOL = 1e-3

# Entries that change the process's allocator are proven in a process started for them, bit for bit
# (tests/process/test_allocators.py); a trainer refuses an allocator its process does not run.
DECLARED = tuple(
    name
    for name, opt in registry.REGISTRY.items()
    if opt.same_trajectory and "allocator" not in opt.changes_for(Flags())
)
DEVICES = ("cpu", "cuda")


def _device_param(*values, device: str, id_: str):
    marks = (pytest.mark.cuda,) if device == "cuda" else ()
    return pytest.param(*values, device, id=f"{id_}-{device}", marks=marks)


def _entry_cases() -> list:
    """(entry, task, device) for every declared entry, each of its tasks, each device; a configuration that cannot
    run on a device skips with the layers' reason (CUDA-only entries on a CPU: their CUDA case is the test)."""
    return [
        _device_param(name, task, device=device, id_=f"{name}-{task}")
        for name in DECLARED
        for task in registry.get(name).tasks
        for device in DEVICES
    ]


@dataclass(frozen=True)
class Trajectory:
    """What one fixed-length training run went through."""

    losses: tuple[float, ...]  # training loss of every step
    curve: tuple[tuple[int, float, float], ...]  # (step, validation metric, test metric) at each point


@dataclass(frozen=True)
class Difference:
    """The largest differences between two trajectories (of equal length)."""

    loss_rtol: float  # per-step |loss - base loss| / |base loss|
    val: float  # |val - base val|
    test: float  # |test - base test|


def train(config: RunConfig, graph) -> Trajectory:
    trainer = Trainer(config, graph)
    try:
        losses = tuple(step.loss for step in trainer.steps(evaluate=True))
        return Trajectory(losses, tuple((p.step, p.val, p.test) for p in trainer.curve))
    finally:
        trainer.close()


def difference(base: Trajectory, other: Trajectory) -> Difference:
    rel = [abs(a - b) / max(abs(b), 1e-12) for a, b in zip(other.losses, base.losses)]
    return Difference(
        max(rel, default=0.0),
        max((abs(a[1] - b[1]) for a, b in zip(other.curve, base.curve)), default=0.0),
        max((abs(a[2] - b[2]) for a, b in zip(other.curve, base.curve)), default=0.0),
    )


def metric_tolerances(task: str, graph) -> tuple[float, float]:
    """(validation, test) absolute tolerances of ``task``'s metric on ``graph``."""
    if task == "node":
        return EVAL_NODES_TOL / int(graph.val_mask.sum()), EVAL_NODES_TOL / int(graph.test_mask.sum())
    return LINK_AUC_ATOL, LINK_AUC_ATOL


def mismatches(base: Trajectory, other: Trajectory, task: str, graph) -> list[str]:
    """How ``other`` leaves ``base``'s trajectory, beyond the stated tolerances (empty: the same trajectory)."""
    out = []
    if len(other.losses) != len(base.losses):
        return [f"{len(other.losses)} steps, the baseline took {len(base.losses)}"]
    if [p[0] for p in other.curve] != [p[0] for p in base.curve]:
        return [
            f"validation points at steps {[p[0] for p in other.curve]}, the baseline's at {[p[0] for p in base.curve]}"
        ]
    d = difference(base, other)
    val_tol, test_tol = metric_tolerances(task, graph)
    if d.loss_rtol > LOSS_RTOL:
        out.append(f"loss differs by up to {d.loss_rtol:.3g} relative (tolerance {LOSS_RTOL:g})")
    if d.val > val_tol:
        out.append(f"validation metric differs by up to {d.val:.4g} (tolerance {val_tol:.4g})")
    if d.test > test_tol:
        out.append(f"test metric differs by up to {d.test:.4g} (tolerance {test_tol:.4g})")
    return out


def base_config(task: str, device: str) -> RunConfig:
    return dataclasses.replace(BASE, task=task, device=device)


@pytest.fixture(scope="module")
def baseline(quick_graph):
    """``baseline(task, device)``: the baseline's trajectory, trained once per task and device."""
    runs: dict[tuple[str, str], Trajectory] = {}

    def get(task: str, device: str) -> Trajectory:
        if (task, device) not in runs:
            runs[task, device] = train(base_config(task, device), quick_graph)
        return runs[task, device]

    return get


def test_every_declared_entry_can_be_checked():
    # An entry no device here or on the GPU check can run could never be proven, so it must not be declared.
    for name in DECLARED:
        opt = registry.get(name)
        assert opt.unavailable("cpu") is None or opt.unavailable("cuda") is None, name
    assert BASE.max_steps_per_epoch * BASE.epochs >= 15  # enough steps for a different batch or mask to show


@pytest.mark.parametrize("name, task, device", _entry_cases())
def test_declared_entry_keeps_the_baseline_trajectory(quick_graph, baseline, name, task, device):
    config = registry.config_for(base_config(task, device), [name])
    skip_unless_runs(config)
    base = baseline(task, device)
    other = train(config, quick_graph)
    d = difference(base, other)
    print(
        f"{name} [{task}, {device}]: {len(other.losses)} steps, max loss rel diff {d.loss_rtol:.3g}, "
        f"max val diff {d.val:.4g}, max test diff {d.test:.4g}"
    )
    assert len(base.losses) == BASE.epochs * BASE.max_steps_per_epoch
    assert not mismatches(base, other, task, quick_graph), (name, mismatches(base, other, task, quick_graph))


@pytest.mark.parametrize(
    "task, device", [_device_param(task, device=device, id_=task) for task in registry.TASK_NAMES for device in DEVICES]
)
def test_declared_entries_combined_keep_the_baseline_trajectory(quick_graph, baseline, task, device):
    """The sweep derives a combination whose entries are all declared (``csr+sparse_agg``) the same way: every
    declared entry of ``task`` that runs on ``device``, switched on together, keeps the trajectory too (feature
    placements exclude one another: the last one applied stands)."""
    names: list[str] = []
    for n in DECLARED:  # those that can run together here (the thread split with workers' 2 needs 3 cores)
        if (
            task in registry.get(n).tasks
            and registry.get(n).unavailable(device) is None
            and not unavailable_here(registry.config_for(base_config(task, device), names + [n]))
        ):
            names.append(n)
    config = registry.config_for(base_config(task, device), names)
    skip_unless_runs(config)
    other = train(config, quick_graph)
    print(f"all of {names} [{task}, {device}]: {difference(baseline(task, device), other)}")
    assert not mismatches(baseline(task, device), other, task, quick_graph)


# --------------------------------------------------------------------------- the check is not vacuous


def _shifted_sampler_epoch(monkeypatch) -> None:
    """Neighbour draws keyed one epoch on: the same seed batches in the same order, other sampled neighbours."""
    set_epoch = GnnbenchNeighborSampler.set_epoch
    monkeypatch.setattr(GnnbenchNeighborSampler, "set_epoch", lambda self, epoch: set_epoch(self, epoch + 1))


@pytest.mark.parametrize(
    "control, device",
    [
        _device_param(control, device=device, id_=control)
        for control in ("fast_dropout", "other_neighbour_draws", "fp16_features")
        for device in DEVICES
    ],
)
def test_a_changed_trajectory_fails_the_check(quick_graph, baseline, monkeypatch, control, device):
    """Different dropout masks (fast_dropout), different neighbour draws of the same batches, and features rounded
    to fp16 all leave the baseline's trajectory, and the check says so (in the losses, not only the curve)."""
    config = base_config("node", device)
    if control == "other_neighbour_draws":
        _shifted_sampler_epoch(monkeypatch)
    else:
        config = registry.config_for(config, [control])
    skip_unless_runs(config)
    base = baseline("node", device)
    other = train(config, quick_graph)
    found = mismatches(base, other, "node", quick_graph)
    d = difference(base, other)
    print(f"control {control} [{device}]: max loss rel diff {d.loss_rtol:.3g}, max val diff {d.val:.4g}")
    assert any(m.startswith("loss") for m in found), (control, d)
    if control in registry.REGISTRY:
        assert not registry.get(control).same_trajectory, f"{control} fails the check, so it cannot be declared"


@pytest.mark.cuda
def test_cuda_baseline_repeats_within_tolerance(quick_graph, baseline):
    """CUDA's atomic sums reorder float additions run to run: the baseline against itself must pass the check,
    else LOSS_RTOL is too tight for CUDA and a failing entry above says nothing about the entry."""
    again = train(base_config("node", "cuda"), quick_graph)
    base = baseline("node", "cuda")
    print(f"CUDA A/A: {difference(base, again)}")
    assert not mismatches(base, again, "node", quick_graph)


# --------------------------------------------------------------------------- the same batches, exactly

BATCH_FIELDS = ("n_id", "edge_index", "e_id", "target", "edge_label_index", "edge_label")


def _batches(config: RunConfig, graph, caps: tuple[int, ...]) -> list[list[dict]]:
    """The batches of epochs ``0 .. len(caps) - 1`` of ``config``'s batch source, epoch ``e`` cut after
    ``caps[e]`` batches (as the trainer's cap cuts it), each as its fields in int64 / float."""
    trainer = Trainer(config, graph)
    try:
        epochs = []
        for epoch, cap in enumerate(caps):
            it = trainer.pipeline.batches.epoch(epoch)
            got = []
            for batch in itertools.islice(it, cap):
                got.append({f: getattr(batch, f).cpu().clone() for f in BATCH_FIELDS if getattr(batch, f) is not None})
            it.close()
            epochs.append(got)
        return epochs
    finally:
        trainer.close()


@pytest.mark.parametrize("name, task, device", [c for c in _entry_cases() if "cpu" in c.id])
def test_declared_entry_draws_the_baseline_batches(quick_graph, name, task, device):
    """Exactly the baseline's batches: ids, edges, targets and labels, whatever process samples them (loader
    workers, persistent ones keeping their sampler across epochs, with prefetched batches discarded when an epoch
    is cut short)."""
    config = registry.config_for(base_config(task, device), [name])
    skip_unless_runs(config)
    caps = (3, 6, 6)  # epoch 0 cut short halfway: persistent workers hold prefetched batches past it
    base = _batches(base_config(task, device), quick_graph, caps)
    other = _batches(config, quick_graph, caps)
    assert [len(e) for e in other] == [len(e) for e in base]
    for epoch, (b_epoch, o_epoch) in enumerate(zip(base, other)):
        for i, (b, o) in enumerate(zip(b_epoch, o_epoch)):
            assert b.keys() == o.keys(), (epoch, i)
            for f in b:
                assert torch.equal(b[f].to(o[f].dtype), o[f]), (name, epoch, i, f)
