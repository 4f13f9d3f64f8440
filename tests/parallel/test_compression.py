"""Gradient compression hooks (gnnbench.parallel.compression): top-k with error feedback, fp16, PowerSGD.

The multi-rank checks run 2 gloo ranks on 127.0.0.1 (spawned, process-group timeout 10 s) through
DistributedDataParallel on a small MLP, once for all hooks (a module fixture), and compare with one
process on the union batch.
"""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from gnnbench.flags import Flags
from gnnbench.measure.run import run_local, survivors
from gnnbench.parallel.compression import CommRecorder, TopKState, timed_hook, topk_compress, topk_count, topk_hook

STEPS = 4
IN, HID, OUT, ROWS = 32, 64, 8, 16
TOPK_FULL = {"parallel": "data", "grad_compression": "topk", "topk_ratio": 1.0}
# name -> (flags, momentum the hook applies (DGC's momentum correction), the optimizer's momentum)
HOOK_FLAGS = {
    "none": ({"parallel": "data"}, 0.0, 0.0),
    "topk_full": (TOPK_FULL, 0.0, 0.0),
    "topk": ({"parallel": "data", "grad_compression": "topk", "topk_ratio": 0.01}, 0.0, 0.0),
    "fp16": ({"parallel": "data", "grad_compression": "fp16"}, 0.0, 0.0),
    "powersgd": ({"parallel": "data", "grad_compression": "powersgd", "powersgd_rank": 2}, 0.0, 0.0),
    "none_momentum": ({"parallel": "data"}, 0.0, 0.9),  # dense momentum SGD
    "topk_full_corrected": (TOPK_FULL, 0.9, 0.0),  # masking resets every sent velocity: plain SGD at ratio 1
    "topk_full_unmasked": (TOPK_FULL, 0.9, 0.0),  # (no masking, state built here): momentum SGD at ratio 1
    "topk_corrected": ({"parallel": "data", "grad_compression": "topk", "topk_ratio": 0.01}, 0.9, 0.0),
}


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(IN, HID), nn.ReLU(), nn.Linear(HID, OUT))


def _batch(step: int, rank: int) -> torch.Tensor:
    return torch.randn(ROWS, IN, generator=torch.Generator().manual_seed(1000 * step + rank))


def _flat(model: nn.Module) -> list[float]:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).tolist()


def _train_on_ranks(rank: int, world: int) -> dict:
    """Every hook in turn: STEPS SGD steps of DDP on this rank's batches; parameters and recorded figures."""
    from gnnbench.flags import RunContext
    from gnnbench.parallel.data_parallel import wrap_model

    torch.set_num_threads(1)
    out = {}
    for name, (changes, hook_momentum, opt_momentum) in HOOK_FLAGS.items():
        model = _model()
        ddp, recorder = wrap_model(model, Flags(**changes), RunContext(world_size=world), hook_momentum)
        if name == "topk_full_unmasked":
            ddp = nn.parallel.DistributedDataParallel(model)
            recorder = CommRecorder(world, "")
            ddp.register_comm_hook(
                TopKState(1.0, momentum=0.9, mask_momentum=False),
                timed_hook(topk_hook, lambda state, bucket: 0, recorder),
            )
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=opt_momentum)
        for step in range(STEPS):
            ddp(_batch(step, rank)).pow(2).mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            recorder.end_step(measured=True)
        out[name] = {
            "params": _flat(model),
            "bytes": recorder.bytes,
            "dense": recorder.dense_bytes,
            "seconds": recorder.seconds,
        }
    return out


@pytest.fixture(scope="module")
def ranks():
    results = run_local(_train_on_ranks, 2, timeout=10.0, wall_timeout=120.0)
    assert not survivors("gnnbench-ranks-"), "spawned ranks left behind"
    return results


def _union_reference() -> list[float]:
    """One process on the union of both ranks' batches (equal halves: the mean of the halves' means)."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(STEPS):
        model(torch.cat([_batch(step, 0), _batch(step, 1)])).pow(2).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return _flat(model)


DENSE_BYTES = 4 * (IN * HID + HID + HID * OUT + OUT)


def test_dense_ddp_matches_one_process_on_the_union_batch(ranks):
    ref = torch.tensor(_union_reference())
    for r in ranks:
        assert torch.allclose(torch.tensor(r["none"]["params"]), ref, atol=1e-6, rtol=1e-5)
    assert ranks[0]["none"]["params"] == ranks[1]["none"]["params"], "replicas diverged"
    assert ranks[0]["none"]["bytes"] == [DENSE_BYTES] * STEPS == ranks[0]["none"]["dense"]
    assert all(s > 0 for s in ranks[0]["none"]["seconds"])


def test_topk_with_ratio_one_equals_dense_all_reduce_exactly(ranks):
    for r in ranks:
        assert r["topk_full"]["params"] == r["none"]["params"]
        assert r["topk_full"]["bytes"] == [DENSE_BYTES // 4 * 8] * STEPS  # every entry: value + int32 index


def test_topk_one_percent_bytes_and_replicas_agree(ranks):
    k = sum(math.ceil(0.01 * n) for n in (IN * HID, HID, HID * OUT, OUT))  # per parameter (DGC's per layer)
    assert ranks[0]["topk"]["bytes"] == [k * 8] * STEPS
    assert k * 8 / DENSE_BYTES <= 0.03
    assert ranks[0]["topk"]["params"] == ranks[1]["topk"]["params"], "replicas diverged"
    assert ranks[0]["topk"]["params"] != ranks[0]["none"]["params"]


def test_momentum_correction_at_full_ratio_in_ddp(ranks):
    """DGC's momentum correction in the hook, plain SGD after it: without masking it is dense momentum SGD
    (the velocity is linear in the gradients, so the mean of the ranks' velocities is the dense buffer); with
    masking every sent velocity resets, which at ratio 1 is plain SGD."""
    for r in ranks:
        assert torch.allclose(
            torch.tensor(r["topk_full_unmasked"]["params"]), torch.tensor(r["none_momentum"]["params"]), atol=1e-6
        )
        assert torch.allclose(
            torch.tensor(r["topk_full_corrected"]["params"]), torch.tensor(r["none"]["params"]), atol=1e-6
        )
    assert ranks[0]["none_momentum"]["params"] != ranks[0]["none"]["params"]
    assert ranks[0]["topk_corrected"]["params"] == ranks[1]["topk_corrected"]["params"], "replicas diverged"
    assert ranks[0]["topk_corrected"]["params"] != ranks[0]["topk"]["params"]


def test_fp16_and_powersgd_run_and_count_bytes(ranks):
    assert ranks[0]["fp16"]["bytes"] == [DENSE_BYTES // 2] * STEPS
    fp16 = torch.tensor(ranks[0]["fp16"]["params"])
    assert torch.allclose(fp16, torch.tensor(ranks[0]["none"]["params"]), atol=1e-3)
    # PowerSGD rank 2: 64x32 -> (64+32)*2, 8x64 -> (8+64)*2 compressed; biases (n x 1) dense; dense before step 2
    compressed = 4 * ((HID + IN) * 2 + HID + (OUT + HID) * 2 + OUT)
    assert ranks[0]["powersgd"]["bytes"] == [DENSE_BYTES, DENSE_BYTES, compressed, compressed]
    assert ranks[0]["powersgd"]["params"] == ranks[1]["powersgd"]["params"], "replicas diverged"
    assert all(math.isfinite(v) for v in ranks[0]["powersgd"]["params"])


# ------------------------------------------------------------------ top-k, one process
@given(n=st.integers(1, 300), ratio=st.floats(0.001, 1.0), seed=st.integers(0, 2**16))
def test_topk_keeps_the_largest_entries_and_partitions_the_input(n, ratio, seed):
    acc = torch.randn(n, generator=torch.Generator().manual_seed(seed))
    idx, values, residual = topk_compress(acc, ratio)
    k = topk_count(n, ratio)
    assert idx.dtype == torch.int32 and idx.numel() == values.numel() == k == max(1, min(n, math.ceil(ratio * n)))
    rebuilt = residual.clone()
    rebuilt[idx.long()] += values
    assert torch.equal(rebuilt, acc)
    assert torch.equal(residual[idx.long()], torch.zeros(k))
    if k < n:
        assert values.abs().min() >= residual.abs().max()


@given(
    sizes=st.lists(st.integers(1, 80), min_size=1, max_size=5), ratio=st.floats(0.001, 1.0), seed=st.integers(0, 2**16)
)
def test_topk_per_parameter_keeps_each_tensors_largest_entries(sizes, ratio, seed):
    """Each tensor of a bucket keeps its own k_p entries, however small its gradients are beside the others'."""
    gen = torch.Generator().manual_seed(seed)
    segs = [torch.randn(n, generator=gen) * 10.0 ** (-i) for i, n in enumerate(sizes)]  # scales far apart
    acc = torch.cat(segs)
    idx, values, residual = topk_compress(acc, ratio, sizes)
    rebuilt = residual.clone()
    rebuilt[idx.long()] += values
    assert torch.equal(rebuilt, acc)
    offset = 0
    for n, seg in zip(sizes, segs):
        mine = idx.long()[(idx.long() >= offset) & (idx.long() < offset + n)] - offset
        assert mine.numel() == topk_count(n, ratio)
        rest = torch.ones(n, dtype=torch.bool)
        rest[mine] = False
        if rest.any():
            assert seg[mine].abs().min() >= seg[rest].abs().max()
        offset += n
    with pytest.raises(ValueError, match="sizes add up to 3 but acc has 4 entries"):
        topk_compress(torch.zeros(4), 0.5, [1, 2])


@given(steps=st.integers(1, 8), ratio=st.floats(0.01, 0.5), seed=st.integers(0, 2**16))
def test_error_feedback_sent_plus_residual_is_the_sum_of_gradients(steps, ratio, seed):
    gen = torch.Generator().manual_seed(seed)
    params = [torch.zeros(5, 4), torch.zeros(7)]
    state = TopKState(ratio)
    sent = torch.zeros(27)
    true = torch.zeros(27)
    for _ in range(steps):
        grads = [torch.randn(p.shape, generator=gen) for p in params]
        true += torch.cat([g.reshape(-1) for g in grads])
        acc = state.accumulate(params, grads)
        idx, values, residual = topk_compress(acc, ratio)
        state.keep(params, grads, residual)
        sent[idx.long()] += values
    residual = torch.cat([state.residuals[id(p)] for p in params])
    assert torch.allclose(sent + residual, true, atol=1e-5)


def _velocities(grads: list[list[torch.Tensor]], momentum: float) -> list[torch.Tensor]:
    """u_t = momentum u_(t-1) + g_t, flattened per step (the local velocity without masking)."""
    u, out = None, []
    for step in grads:
        g = torch.cat([t.reshape(-1) for t in step])
        u = g.clone() if u is None else momentum * u + g
        out.append(u.clone())
    return out


@given(steps=st.integers(1, 8), ratio=st.floats(0.01, 0.5), momentum=st.floats(0.0, 0.95), seed=st.integers(0, 2**16))
def test_momentum_correction_sends_the_velocities_sum(steps, ratio, momentum, seed):
    """DGC's momentum correction without masking: sent plus residual is the sum of the local velocities."""
    gen = torch.Generator().manual_seed(seed)
    params = [torch.zeros(5, 4), torch.zeros(7)]
    state = TopKState(ratio, momentum=momentum, mask_momentum=False)
    grads = [[torch.randn(p.shape, generator=gen) for p in params] for _ in range(steps)]
    sent = torch.zeros(27)
    for step in grads:
        idx, values = state.step(params, step)
        sent[idx.long()] += values
    residual = torch.cat([state.residuals[id(p)] for p in params])
    assert torch.allclose(sent + residual, sum(_velocities(grads, momentum)), atol=1e-4)


def test_momentum_correction_at_full_ratio_is_momentum_sgd_and_masking_resets_sent_entries():
    gen = torch.Generator().manual_seed(3)
    params = [torch.zeros(3, 4), torch.zeros(3)]
    grads = [[torch.randn(p.shape, generator=gen) for p in params] for _ in range(5)]
    # ratio 1, no masking: every step sends the whole velocity, i.e. SGD momentum's buffer
    state = TopKState(1.0, momentum=0.9, mask_momentum=False)
    for step, u in zip(grads, _velocities(grads, 0.9)):
        idx, values = state.step(params, step)
        dense = torch.zeros(15)
        dense[idx.long()] = values
        assert torch.allclose(dense, u, atol=1e-6)
    # ratio 1 with masking: every entry is sent, so every velocity resets: plain SGD on the gradients
    state = TopKState(1.0, momentum=0.9, mask_momentum=True)
    for step in grads:
        idx, values = state.step(params, step)
        dense = torch.zeros(15)
        dense[idx.long()] = values
        assert torch.allclose(dense, torch.cat([g.reshape(-1) for g in step]), atol=1e-6)
    # ratio < 1 with masking: the sent entries' velocities are 0, the others m u + g
    state = TopKState(0.25, momentum=0.5, mask_momentum=True)
    state.step(params, grads[0])
    before = torch.cat([state.velocities[id(p)] for p in params]).clone()
    idx, _ = state.step(params, grads[1])
    after = torch.cat([state.velocities[id(p)] for p in params])
    expect = 0.5 * before + torch.cat([g.reshape(-1) for g in grads[1]])
    expect[idx.long()] = 0
    assert torch.allclose(after, expect, atol=1e-6)


def test_topk_state_refuses_a_bad_ratio():
    with pytest.raises(ValueError, match=r"\(got 0\)"):
        TopKState(0)
    with pytest.raises(ValueError, match=r"momentum correction must be in \[0, 1\) \(got 1.0\)"):
        TopKState(0.01, momentum=1.0)
    with pytest.raises(ValueError, match=r"Flags.topk_ratio must be a number in \(0, 1\] \(got 1.5\)"):
        Flags(topk_ratio=1.5)
