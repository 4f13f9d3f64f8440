"""Sampling where the model computes (gpu_sampling, uva_sampling): the device source's batches are valid
neighbour samples that cover every seed once per epoch, on the CPU (device-agnostic) and on CUDA when present;
with ``sampler="labor"`` they are the host's LABOR sample of the same batch key; each entry is refused with its
reason where it cannot run."""

import pytest
import torch

from gnnbench import registry
from gnnbench.flags import Flags, RunContext
from gnnbench.graphs.prepare import prepare
from gnnbench.sampling.device_sampling import DeviceNeighborBatches
from gnnbench.sampling.labor import LaborSampleCore
from gnnbench.sampling.sources import make_batch_source, unavailable

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
    assert all(
        torch.equal(a, b.n_id.cpu())
        for a, b in zip(first, DeviceNeighborBatches(prepared, flags, device=device).epoch(0))
    ), "the same seed, the same batches"


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
    monkeypatch.setattr(
        source.core, "sample", lambda seeds, check=True: checks.append(check) or real(seeds, check=check)
    )
    assert len(list(source.epoch(0))) == source.steps_per_epoch() and not any(checks)


def test_device_sampling_is_refused_with_reasons_where_it_cannot_run():
    cpu = RunContext(device=torch.device("cpu"))
    reasons = {u.reason for u in unavailable(Flags(sampler_device="device"), cpu)}
    assert any("on a CPU host and device memory are the same" in r for r in reasons)
    cuda = RunContext(device=torch.device("cuda"))
    for flags, words in (
        (Flags(sampler_device="uva", num_workers=2), "loader workers are CPU processes"),
        (Flags(sampler_device="device", batch_cache_epochs=3), "batch cache stores host batches"),
        (Flags(sampler_device="device", batch_source="cluster_gcn"), "neighbour-sampled node"),
    ):
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
    assert abs(r.accuracy.test - base.accuracy.test) < 0.05


def assert_labor_batches_are_the_host_sample(
    graph, monkeypatch, *, device: str, sampler_device: str, index_dtype: str
) -> None:
    """The device source's LABOR batches, checked against the host's sample of the same key.

    The variates are keyed (:func:`~gnnbench.sampling.labor.keyed_uniform`): a sample is a function of the
    seeds, the CSR and one 64-bit batch key, whatever the device. The key itself is drawn from the sampler's
    generator on its device, and CUDA's generator is not the CPU's, so the same seed gives another key there:
    the test records each batch's key on the device and replays it on a host :class:`LaborSampleCore` over the
    same CSR, which must give the batch exactly (nodes, edges, edge ids, weights). The layout is checked too:
    edges sorted by target, the batch's CSR, real in-edges, and each edge's weight ``1 / min(1, k / d)`` of its
    target's degree ``d`` and its hop's fanout ``k``.
    """
    flags = Flags(
        fanout=(5, 3),
        batch_size=128,
        sampler="labor",
        sampler_device=sampler_device,
        keep_csr=True,
        index_dtype=index_dtype,
    )
    prepared = prepare(graph, flags)
    source = make_batch_source(prepared, flags, device=device)
    assert isinstance(source, DeviceNeighborBatches) and isinstance(source.core, LaborSampleCore)
    keys = []
    draw = source.core._batch_key
    monkeypatch.setattr(source.core, "_batch_key", lambda: keys.append(draw()) or keys[-1])
    csr = prepared.neighbours()
    host = LaborSampleCore(csr.rowptr.cpu(), csr.col.cpu(), flags.fanout)
    rowptr, col = csr.rowptr.cpu().long(), csr.col.cpu().long()
    deg = rowptr.diff()
    batches = list(source.epoch(0))
    assert len(keys) == len(batches) == source.steps_per_epoch()
    for b, key in zip(batches, keys):
        assert key.device.type == device, "the batch key never visits the host"
        assert b.n_id.device.type == device and b.n_id.dtype == csr.col.dtype
        n_id, (src, dst), e_id = b.n_id.cpu().long(), b.edge_index.cpu().long(), b.e_id.cpu().long()
        weight = b.edge_weight.cpu()
        # the layout: real in-edges, sorted by target, with the batch's CSR
        assert torch.equal(col[e_id], n_id[src])
        assert bool(((e_id >= rowptr[n_id[dst]]) & (e_id < rowptr[n_id[dst] + 1])).all())
        assert bool((dst[1:] >= dst[:-1]).all()), "edges sorted by target"
        assert torch.equal(b.rowptr.cpu().long().diff(), torch.bincount(dst, minlength=n_id.numel()))
        # each edge's Horvitz-Thompson weight: 1 / min(1, k / d) of its target, k its hop's fanout
        k = torch.tensor(flags.fanout).repeat_interleave(torch.tensor(b.num_sampled_edges))
        d = deg[n_id[dst]].clamp_min(1).double()
        assert torch.allclose(weight.double(), 1.0 / (k / d).clamp_max(1.0), rtol=1e-6)
        # the host's sample of the same seeds and key
        seeds = n_id[b.target.cpu().long()]
        monkeypatch.setattr(host, "_batch_key", lambda key=key: key.cpu())
        h = host.sample(seeds)
        assert torch.equal(h.node.long(), n_id) and torch.equal(h.edge.long(), e_id)
        assert torch.equal(torch.stack([h.row, h.col]).long(), torch.stack([src, dst]))
        assert torch.equal(h.weight, weight) and h.num_sampled_nodes == b.num_sampled_nodes
        assert h.num_sampled_edges == b.num_sampled_edges


@pytest.mark.parametrize("index_dtype", ["int64", "int32"])
def test_labor_batches_of_the_device_source_are_the_host_sample_on_the_cpu(quick_graph, monkeypatch, index_dtype):
    """The device source's LABOR path (the source, its core, the weights it hands on) with the CPU as the
    device: device-agnostic torch, so the same code CUDA runs (below, marked cuda)."""
    assert_labor_batches_are_the_host_sample(
        quick_graph, monkeypatch, device="cpu", sampler_device="device", index_dtype=index_dtype
    )


@pytest.mark.cuda
@pytest.mark.parametrize("index_dtype", ["int64", "int32"])
@pytest.mark.parametrize("sampler_device", ["device", "uva"])
def test_labor_batches_sampled_on_cuda_are_the_host_sample(quick_graph, monkeypatch, sampler_device, index_dtype):
    """LABOR with gpu_sampling (the CSR on the device) and uva_sampling (the CSR pinned, read by the device):
    for the same batch key the device's batch is the host's sample exactly (float64 ``k / d`` and the 53-bit
    variates are computed bit for bit alike on both)."""
    assert_labor_batches_are_the_host_sample(
        quick_graph, monkeypatch, device="cuda", sampler_device=sampler_device, index_dtype=index_dtype
    )


@pytest.mark.cuda
@pytest.mark.parametrize("name", ["gpu_sampling", "uva_sampling"])
def test_training_with_labor_sampled_on_the_device(name):
    """``labor`` with a device source trains: the run is ok, its batches carry LABOR's weights into the step
    (a batch computes fewer distinct vertices than the neighbour sampler's on the device), and its accuracy is
    near the host LABOR run's."""
    import dataclasses

    from gnnbench.measure.run import run
    from tests.helpers import QUICK

    on_cuda = dataclasses.replace(QUICK, device="cuda")
    labor = run(dataclasses.replace(on_cuda, flags=registry.flags_for(["labor", name], QUICK.flags)))
    assert labor.status == "ok", labor.unavailable or labor.error
    assert labor.sampled["nodes_per_hop"][0] == QUICK.flags.batch_size
    neighbour = run(dataclasses.replace(on_cuda, flags=registry.flags_for([name], QUICK.flags)))
    assert labor.sampled["nodes_per_batch"] < neighbour.sampled["nodes_per_batch"]
    host = run(dataclasses.replace(on_cuda, flags=registry.flags_for(["labor"], QUICK.flags)))
    assert host.status == "ok" and abs(labor.accuracy.test - host.accuracy.test) < 0.05
