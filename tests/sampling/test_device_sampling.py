"""Sampling where the model computes (gpu_sampling, uva_sampling): the device source's batches are valid
neighbour samples that cover every seed once per epoch, on the CPU (device-agnostic) and on CUDA when present;
each entry is refused with its reason where it cannot run."""

import pytest
import torch

from gnnbench import registry
from gnnbench.flags import Flags, RunContext
from gnnbench.graphs.prepare import prepare
from gnnbench.sampling.sources import DeviceNeighborBatches, make_batch_source, unavailable

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index_dtype", ["int64", "int32"])
def test_device_batches_are_valid_samples_covering_every_seed(quick_graph, device, index_dtype):
    flags = Flags(fanout=(5, 3), batch_size=128, sampler_device="device", keep_csr=True, index_dtype=index_dtype)
    prepared = prepare(quick_graph, flags)
    source = make_batch_source(prepared, flags, device=device)
    assert isinstance(source, DeviceNeighborBatches)
    csr = prepared.neighbours()
    rowptr, col = csr.rowptr.long(), csr.col.long()
    train = quick_graph.train_mask.nonzero().view(-1)
    for epoch in range(2):
        seen = []
        batches = list(source.epoch(epoch))
        assert len(batches) == source.steps_per_epoch()
        for b in batches:
            assert b.n_id.device.type == device and b.n_id.dtype == csr.col.dtype, "never visits the host"
            seeds = b.n_id[b.target.long()].cpu().long()
            seen.append(seeds)
            src, dst = b.edge_index.cpu().long()
            gsrc, gdst = b.n_id.cpu().long()[src], b.n_id.cpu().long()[dst]
            # every sampled edge is a real in-edge of its target, at the position it names
            assert torch.equal(col[b.e_id.cpu().long()], gsrc)
            assert bool(((b.e_id.cpu().long() >= rowptr[gdst]) & (b.e_id.cpu().long() < rowptr[gdst + 1])).all())
            assert bool((dst[1:] >= dst[:-1]).all()), "edges sorted by target"
            assert torch.equal(b.rowptr.cpu().long().diff(), torch.bincount(dst, minlength=b.n_id.numel()))
            # no target draws more than its fanout, and distinct neighbours without replacement
            per = torch.bincount(dst[: b.num_sampled_edges[0]], minlength=seeds.numel())
            assert int(per.max()) <= 5
        assert torch.equal(torch.sort(torch.cat(seen)).values, train), "every seed once per epoch"
    first = [b.n_id.cpu() for b in DeviceNeighborBatches(prepared, flags, device=device).epoch(0)]
    assert all(torch.equal(a, b.n_id.cpu()) for a, b in zip(first, DeviceNeighborBatches(
        prepared, flags, device=device).epoch(0))), "the same seed, the same batches"


def test_seeds_are_checked_once_at_construction_and_batches_sample_unchecked(quick_graph, monkeypatch):
    """Per batch the device source samples without reading device values back (``check=False``); the seeds it
    draws from are checked once, when it is built."""
    flags = Flags(fanout=(5, 3), batch_size=128, sampler_device="device")
    prepared = prepare(quick_graph, flags)
    n = quick_graph.num_nodes
    with pytest.raises(ValueError, match=rf"node ids in \[0, {n - 1}\]"):
        DeviceNeighborBatches(prepared, flags, device="cpu", input_nodes=torch.tensor([0, n]))
    with pytest.raises(ValueError, match="distinct"):
        DeviceNeighborBatches(prepared, flags, device="cpu", input_nodes=torch.tensor([3, 3]))
    source = DeviceNeighborBatches(prepared, flags, device="cpu")
    checks = []
    real = source.core.sample
    monkeypatch.setattr(source.core, "sample", lambda seeds, check=True: checks.append(check) or real(seeds,
                                                                                                  check=check))
    assert len(list(source.epoch(0))) == source.steps_per_epoch() and not any(checks)


def test_device_sampling_is_refused_with_reasons_where_it_cannot_run():
    cpu = RunContext(device=torch.device("cpu"))
    reasons = {u.reason for u in unavailable(Flags(sampler_device="device"), cpu)}
    assert any("on a CPU host and device memory are the same" in r for r in reasons)
    cuda = RunContext(device=torch.device("cuda"))
    for flags, words in ((Flags(sampler_device="uva", num_workers=2), "loader workers are CPU processes"),
                         (Flags(sampler_device="device", batch_cache_epochs=3), "batch cache stores host batches"),
                         (Flags(sampler_device="device", batch_source="cluster_gcn"), "neighbour-sampled node")):
        assert any(words in u.reason for u in unavailable(flags, cuda)), (flags, words)
    assert not [u for u in unavailable(Flags(), cpu) if u.field == "sampler_device"]
    for name in ("gpu_sampling", "uva_sampling"):
        assert registry.get(name).requires == ("cuda",) and "device is cpu" in registry.get(name).unavailable("cpu")
    with pytest.raises(ValueError, match="needs the device"):
        make_batch_source(None, Flags(sampler_device="device"))


@pytest.mark.cuda
@pytest.mark.parametrize("name", ["gpu_sampling", "uva_sampling"])
def test_training_with_sampling_on_the_device(name):
    import dataclasses

    from gnnbench.measure.run import run
    from tests.helpers import QUICK

    cfg = dataclasses.replace(QUICK, device="cuda", flags=registry.flags_for([name], QUICK.flags))
    r = run(cfg)
    assert r.status == "ok", r.unavailable
    base = run(dataclasses.replace(QUICK, device="cuda"))
    assert abs(r.accuracy["test"] - base.accuracy["test"]) < 0.05
