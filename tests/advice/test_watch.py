"""``gnnbench.watch`` on training loops gnnbench did not write: PyG's own example patterns as a user writes them
(a NeighborLoader + GraphSAGE loop, a full-batch GCN loop, a LinkNeighborLoader link-prediction loop), a loader
made slow on purpose (sampling-bound) and a model made heavy on purpose (kernel-bound). The watch must not
change what the loop computes, must restore everything it patched, and must say which sampling backend the
user's loader ran on."""

import contextlib
import statistics
import time

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.loader import LinkNeighborLoader, NeighborLoader
from torch_geometric.nn import GCN, GraphSAGE

import gnnbench
from gnnbench.advice.rules import classify
from gnnbench.advice.watch import IN_YOUR_LOOP, WatchDone
from gnnbench.sampling.pyg_fallback import FALLBACK, pyg_backend, pyg_sampling_fallback

# PyG warns that its NeighborSampler without pyg-lib is deprecated: the point here (the fallback) is known
pytestmark = pytest.mark.filterwarnings("ignore:Using 'NeighborSampler' without a 'pyg-lib':UserWarning")


def _data(n=600, e=6000, f=16, classes=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    data = Data(
        x=torch.randn(n, f, generator=g),
        edge_index=torch.randint(0, n, (2, e), generator=g),
        y=torch.randint(0, classes, (n,), generator=g),
    )
    data.train_mask = torch.rand(n, generator=g) < 0.6
    return data


def _sage_loop(data, model, opt, loader, epochs=1):
    """PyG's examples/graph_sage_unsup style node classification loop, as a user writes it."""
    for _ in range(epochs):
        model.train()
        for batch in loader:
            opt.zero_grad()
            out = model(batch.x, batch.edge_index)[: batch.batch_size]
            loss = F.cross_entropy(out, batch.y[: batch.batch_size])
            loss.backward()
            opt.step()


def _sage_setup(seed=0, **loader_kwargs):
    torch.manual_seed(seed)
    data = _data()
    loader = NeighborLoader(
        data, num_neighbors=[8, 4], batch_size=64, input_nodes=data.train_mask, shuffle=True, **loader_kwargs
    )
    model = GraphSAGE(16, 32, num_layers=2, out_channels=4)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    return data, loader, model, opt


def test_the_overhead_estimate_counts_every_kind_of_instrumented_call():
    """The printed overhead is every instrumented call's measured cost times its calls per step: phase events,
    Tensor.to pass-throughs, the model's forward hooks, the optimizer's step hooks and the loader's next(); the
    calibration leaves nothing behind (no counts, no phase, the user's optimizer and model untouched)."""
    from torch.nn.modules.module import register_module_forward_hook
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from gnnbench.advice.watch.patches import COST_KINDS

    data, loader, model, opt = _sage_setup()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    others = []  # another library's global hooks: the calibration must not make them fire
    handles = [
        register_module_forward_hook(lambda m, a, o: others.append("module")),
        register_optimizer_step_post_hook(lambda o, a, k: others.append("optimizer")),
    ]
    try:
        with gnnbench.watch(loader, model, opt, warmup=1, steps=4) as w:
            assert others == [], "entering the watch ran other code's global hooks"
            assert (w.events, w.passes, w.hook_calls, w.opt_calls, w._phase, w._model_depth) == (0, 0, 0, 0, None, 0)
            assert not opt.state and all(torch.equal(before[k], v) for k, v in model.state_dict().items())
            _sage_loop(data, model, opt, loader)
    finally:
        for h in handles:
            h.remove()
    assert set(w._costs) == set(COST_KINDS) and all(c >= 0 for c in w._costs.values())
    assert w._costs["event"] > 0, "a phase event costs something: the estimate is never a plain zero"
    assert w.hook_counts == [1] * 4 and w.opt_counts == [1] * 4  # one model call and one optimizer step a step
    assert all(r["batches"] == 1 for r in w.records)
    r = w.report()
    med = r.step_ms["median"] / 1e3
    # the estimate is exactly the sum, over the kinds of instrumented call, of its cost times its calls per step
    counts = {
        "event": w.event_counts,
        "pass": w.pass_counts,
        "hook": w.hook_counts,
        "optimizer": w.opt_counts,
        "next": [rec["batches"] for rec in w.records],
    }
    parts = {k: w._costs[k] * statistics.median(counts[k]) / med for k in COST_KINDS}
    assert r.overhead == pytest.approx(sum(parts.values()))
    assert all(parts[k] > 0 for k in ("event", "hook", "optimizer")), parts  # each kind is counted
    # (about ten phase events a step: wait, sample, gather, forward, backward, optimizer, transfer)
    assert 3 <= statistics.median(w.event_counts) <= 20, w.event_counts
    text = r.format()
    assert f"at least {r.overhead:.2%} of the step" in text and "a lower bound" in text


def test_a_watched_step_makes_few_calls_of_its_own_and_no_context_manager():
    """The instrumentation runs between the loop's tensor work, with the caches cold, where each call it makes
    costs far more than timed hot (a phase event 10 us cold against 0.7 us hot: a watch that opened phases
    through a context manager cost 2% of an 8 ms step while its estimate said 0.3%). So a step's instrumented calls open and close their phases
    directly (no generator context manager: ``_timed`` is for code outside the step) and, beside the
    ``Tensor.to`` pass-throughs, make a bounded number of Python calls into the watch: 23 a step on this loop
    (a wait, its sample and gather, a forward, a backward, an optimizer step, the step's record), 57 before."""
    import collections
    import sys

    from gnnbench.advice.watch import clock

    package = clock.__file__.rsplit("clock.py", 1)[0]
    calls: collections.Counter = collections.Counter()

    def count(frame, event, arg):
        if event == "call":
            code, caller = frame.f_code, frame.f_back.f_code if frame.f_back is not None else None
            if code.co_filename.startswith(package):
                calls[code.co_name] += 1
            elif (
                caller is not None
                and caller.co_filename.startswith(package)
                and code.co_name == "__enter__"
                and "contextlib" in code.co_filename
            ):
                calls["contextlib"] += 1  # a context manager entered by the watch

    data, loader, model, opt = _sage_setup()
    with gnnbench.watch(loader, model, opt, warmup=1) as w:
        sys.setprofile(count)  # after the entry: its calibration is not a step
        try:
            _sage_loop(data, model, opt, loader, epochs=2)
        finally:
            sys.setprofile(None)
    assert len(w.records) >= 8
    assert calls["contextlib"] == 0 and calls["_timed"] == 0, calls
    assert calls["to"] >= sum(w.pass_counts) > 0, calls  # the pass-throughs (the warm-up step's too)
    own = (sum(calls.values()) - calls["to"]) / w.seen
    assert own <= 30, f"{own:.1f} calls of the watch's own code a step: {dict(calls)}"


def test_a_neighbor_loader_graphsage_loop_is_cut_into_its_phases_and_diagnosed():
    from gnnbench.cli.parser import build_parser

    data, loader, model, opt = _sage_setup()
    with gnnbench.watch(loader, model, opt, warmup=2, steps=5) as w:
        _sage_loop(data, model, opt, loader, epochs=2)
    r = w.report()
    assert r.steps == 5 and r.warmup == 2 and len(w.records) == 5
    for phase in ("sample", "gather", "forward", "backward", "optimizer"):
        assert r.phase_ms[phase] > 0, phase
    parts = sum(v for k, v in r.phase_ms.items())
    assert parts == pytest.approx(r.step_ms["median"], rel=0.5), "the phases tile the step"
    assert r.loader["type"] == "NeighborLoader" and r.loader["num_neighbors"] == [8, 4]
    assert r.loader["sampling backend"] == (pyg_backend() if pyg_backend() != "none" else FALLBACK)
    # the bottleneck is what the rules make of the measured shares (the same classify as gnnbench diagnose)
    assert r.finding == classify(r.shares, busy_fraction=r.device_busy)
    assert r.finding.share == pytest.approx(r.shares[r.finding.bottleneck])
    assert sum(r.shares.values()) <= 1.0 + 1e-9
    assert r.data_wait_share == pytest.approx(
        sum(r.phase_ms.get(p, 0) for p in ("wait", "sample", "gather", "transform")) / r.step_ms["median"]
    )
    assert r.advice and all(a.entry in IN_YOUR_LOOP and a.setting for a in r.advice)
    assert all(a.target in (r.finding.bottleneck, r.finding.secondary) for a in r.advice)
    assert r.mode == "end_to_end" and r.overhead is not None and r.overhead > 0
    # the command that verifies the advice on a twin of the user's graph is a real gnnbench command
    assert r.reproduce.startswith("gnnbench compare --preset")
    args = build_parser().parse_args(r.reproduce.split()[1:])
    assert args.fanout == "8,4" and args.batch_size == 64 and args.model == "sage" and args.hidden == 32
    text = r.format()
    assert "bottleneck:" in text and "try, in your loop" in text and "instrumentation overhead" in text
    # laid out as gnnbench diagnose's report, from the same pieces
    from gnnbench.advice.diagnosis_text import bottleneck_line, compute_line, finding_lines

    assert bottleneck_line(r.shares) in text and compute_line(r.finding, r.data_wait_share) in text
    assert all(line in text for line in finding_lines(r.finding))
    if pyg_backend() == "none":
        assert any("gnnbench's sampler" in n for n in r.notes)


def test_watching_changes_nothing_the_loop_computes():
    """The same seed trains the same parameters with and without the watch (the sampler fallback alone stands
    in for the unwatched loop where PyG has no native backend)."""

    def train(watched):
        data, loader, model, opt = _sage_setup(seed=3)
        ctx = gnnbench.watch(loader, model, opt, warmup=1) if watched else pyg_sampling_fallback()
        with ctx:
            _sage_loop(data, model, opt, loader)
        return [p.detach().clone() for p in model.parameters()]

    for a, b in zip(train(False), train(True)):
        assert torch.equal(a, b)


def test_everything_patched_is_restored_and_hooks_removed():
    from torch_geometric.data.data import BaseData
    from torch_geometric.sampler import NeighborSampler

    before = (
        torch.utils.data.DataLoader.__dict__["__iter__"],
        BaseData.__dict__["to"],
        torch.autograd.backward,
        NeighborSampler.__dict__["_sample"],
        "to" in torch.Tensor.__dict__,
        "cuda" in torch.Tensor.__dict__,
    )
    data, loader, model, opt = _sage_setup()
    with gnnbench.watch(loader, model, opt, warmup=1) as w:
        _sage_loop(data, model, opt, loader)
    after = (
        torch.utils.data.DataLoader.__dict__["__iter__"],
        BaseData.__dict__["to"],
        torch.autograd.backward,
        NeighborSampler.__dict__["_sample"],
        "to" in torch.Tensor.__dict__,
        "cuda" in torch.Tensor.__dict__,
    )
    assert before == after
    assert not model._forward_hooks and not model._forward_pre_hooks
    assert "filter_fn" not in loader.__dict__ and "sample_from_nodes" not in loader.node_sampler.__dict__
    assert len(w.records) > 0


def test_a_full_batch_gcn_loop_is_cut_at_the_optimizer_step():
    """PyG's examples/gcn.py pattern: no loader, one step per epoch."""
    torch.manual_seed(0)
    # large enough that the kernels outweigh the loop's own Python (the loss, zero_grad) on a loaded machine
    data = _data(n=3000, e=40000)
    model = GCN(16, 64, num_layers=2, out_channels=4)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    with gnnbench.watch(None, model, opt, warmup=2, steps=6) as w:
        for _ in range(12):
            model.train()
            opt.zero_grad()
            out = model(data.x, data.edge_index)
            loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
            loss.backward()
            opt.step()
    r = w.report()
    assert r.steps == 6 and r.loader == {"type": "none (full batch)"}
    assert set(r.phase_ms) >= {"forward", "backward", "optimizer"} and "wait" not in r.phase_ms
    assert r.finding.bottleneck == "kernels"
    names = [a.entry for a in r.advice]
    assert "cached_norm" in names, "a full-batch GCN that does not cache its normalization"
    assert not {"workers", "fanout", "full_batch", "batch_cache"} & set(names), "no loader to tune"


def test_a_link_neighbor_loader_loop_is_watched_as_link_prediction():
    torch.manual_seed(0)
    data = _data(n=400, e=3000)
    loader = LinkNeighborLoader(data, num_neighbors=[5, 3], batch_size=64, neg_sampling_ratio=1.0, shuffle=True)
    model = GraphSAGE(16, 32, num_layers=2)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    with gnnbench.watch(loader, model, opt, warmup=1, steps=4) as w:
        for batch in loader:
            opt.zero_grad()
            h = model(batch.x, batch.edge_index)
            src, dst = batch.edge_label_index
            loss = F.binary_cross_entropy_with_logits((h[src] * h[dst]).sum(-1), batch.edge_label)
            loss.backward()
            opt.step()
    r = w.report()
    assert r.steps == 4 and r.loader["type"] == "LinkNeighborLoader" and r.phase_ms["sample"] > 0
    assert "--task link" in r.reproduce


def test_a_deliberately_slow_loader_is_sampling_bound_and_advised_workers():
    data, _, model, opt = _sage_setup()

    def slow(batch):  # a transform that sleeps: loader-side work, as a costly user transform is
        time.sleep(0.3)
        return batch

    loader = NeighborLoader(data, num_neighbors=[4], batch_size=64, input_nodes=data.train_mask, transform=slow)
    model = GraphSAGE(16, 8, num_layers=1, out_channels=4)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    with gnnbench.watch(loader, model, opt, warmup=1, steps=3) as w:
        _sage_loop(data, model, opt, loader)
    r = w.report()
    assert r.phase_ms["transform"] >= 290, r.phase_ms
    assert r.finding.bottleneck == "sampling", r.finding
    assert "workers" in [a.entry for a in r.advice]


def test_a_deliberately_heavy_model_is_kernel_bound():
    torch.manual_seed(0)
    data = _data(n=400, e=2000, f=256)
    loader = NeighborLoader(data, num_neighbors=[3], batch_size=32, input_nodes=data.train_mask)
    model = torch.nn.Sequential(
        *[m for _ in range(6) for m in (torch.nn.Linear(256, 256), torch.nn.ReLU())], torch.nn.Linear(256, 4)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gnnbench.watch(loader, model, opt, warmup=1, steps=3) as w:
        for batch in loader:
            opt.zero_grad()
            x = batch.x.repeat(40, 1)  # a heavy forward: many rows through six 256-wide layers
            loss = F.cross_entropy(model(x), batch.y.repeat(40))
            loss.backward()
            opt.step()
    r = w.report()
    assert r.finding.bottleneck == "kernels" and r.shares["kernels"] > 0.5, r.shares
    assert any(a.entry == "partial_amp" for a in r.advice)


def test_stop_after_ends_the_loop_cleanly_at_a_step_boundary():
    data, loader, model, opt = _sage_setup()
    with gnnbench.watch(loader, model, opt, warmup=1, steps=3, stop_after=True) as w:
        _sage_loop(data, model, opt, loader, epochs=5)
        raise AssertionError("the watch stops the loop")  # pragma: no cover
    assert len(w.records) == 3 and w.seen == 4


def test_bad_options_and_too_few_steps_say_what_is_accepted():
    with pytest.raises(ValueError, match="steps must be None or an integer >= 2"):
        gnnbench.watch(steps=1)
    with pytest.raises(ValueError, match="warmup must be an integer >= 0"):
        gnnbench.watch(warmup=-1)
    with pytest.raises(ValueError, match="profile_steps .* give steps too"):
        gnnbench.watch(profile_steps=3)
    with pytest.raises(ValueError, match="stop_after needs a number of steps"):
        gnnbench.watch(stop_after=True)
    data, loader, model, opt = _sage_setup()
    with gnnbench.watch(loader, model, opt, warmup=50) as w:
        _sage_loop(data, model, opt, loader)
    with pytest.raises(ValueError, match="measured 0 step"):
        w.report()
    # WatchDone is a BaseException, not an Exception: a loop's `except Exception` does not swallow the stop
    assert issubclass(WatchDone, BaseException) and not issubclass(WatchDone, Exception)


def test_the_profile_attributes_hot_operators_to_the_loops_phases():
    data, loader, model, opt = _sage_setup()
    with gnnbench.watch(loader, model, opt, warmup=1, steps=3, profile_steps=2) as w:
        _sage_loop(data, model, opt, loader)
    r = w.report()
    assert r.hot_ops and all(op.share >= 0.05 for op in r.hot_ops)
    from gnnbench.advice.watch import WATCH_PHASES

    # each hot operator is attributed to the loop's phases it ran in (a quiet machine puts this small loop's
    # hottest operators in the sampler, a busy one in the model: either way inside a timed phase)
    assert all(op.phases for op in r.hot_ops)
    assert any(set(op.phases) & set(WATCH_PHASES) for op in r.hot_ops), [(o.op, o.phases) for o in r.hot_ops]


def test_the_printed_overhead_cites_the_measured_end_to_end_cost():
    """The estimate is a lower bound; the report prints it as one and cites what scripts/watch_overhead.py
    measured end to end (results/reference/watch-overhead/), figure for figure."""
    import json

    from gnnbench.advice.watch.report import OVERHEAD_RESULTS, measured_overhead

    files = sorted(OVERHEAD_RESULTS.glob("*.json"))
    assert files, "the reference measurement of the watch's cost is committed"
    measured = measured_overhead()
    assert [m["preset"] for m in measured] and len(measured) == len(files)
    for m in measured:
        doc = json.loads((OVERHEAD_RESULTS / f"{m['preset']}.json").read_text())
        assert (m["ratio"], m["low"], m["high"], m["processes"]) == (
            doc["ratio"],
            doc["low"],
            doc["high"],
            doc["rounds"],
        )
        assert m["step_ms"] == pytest.approx(1e3 * statistics.median(doc["unwatched"]))
    data, loader, model, opt = _sage_setup()
    with gnnbench.watch(loader, model, opt, warmup=1, steps=3) as w:
        _sage_loop(data, model, opt, loader)
    r = w.report()
    assert r.overhead_measured == measured
    line = next(ln for ln in r.format().splitlines() if ln.startswith("instrumentation overhead"))
    assert "a lower bound" in line and "measured end to end" in line
    for m in measured:
        assert f"{m['preset']} ({m['step_ms']:.1f} ms step) {m['ratio']:.3f}x [{m['low']:.3f}, {m['high']:.3f}]" in line
    # without the result files (an installed package) it points to where the figure is documented
    r.overhead_measured = []
    assert "docs/advice.md" in r.format()
    assert measured_overhead(OVERHEAD_RESULTS / "missing") == []


def test_the_profile_attributes_a_pyg_gcn_loops_operators_by_code_path():
    """The watch marks PyG's GCNConv paths (gather, per-edge normalization, aggregation, gcn_norm) and dropout as
    gnnbench's own while it profiles, so a user's GCN loop attributes aten::mul as gnnbench diagnose does: to the
    per-edge normalization and dropout, hence sparse_agg and fast_dropout; nothing stays patched afterwards."""
    import torch_geometric.nn.conv.gcn_conv as gcn_conv

    from gnnbench.advice.op_profile import attribute_ops

    torch.manual_seed(0)
    data = _data(n=500, e=5000)
    model = GCN(16, 32, num_layers=2, out_channels=4, dropout=0.5)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    before = (gcn_conv.gcn_norm, F.dropout)
    with gnnbench.watch(None, model, opt, warmup=1, steps=2, profile_steps=2) as w:
        for _ in range(6):
            opt.zero_grad()
            out = model(data.x, data.edge_index)
            F.cross_entropy(out[data.train_mask], data.y[data.train_mask]).backward()
            opt.step()
    assert (gcn_conv.gcn_norm, F.dropout) == before
    assert not any(set(vars(m)) & {"message", "aggregate", "collect", "_collect"} for m in model.modules())
    assert {"aggregate.edge_norm", "aggregate.gather", "aggregate.scatter", "norm.build", "dropout"} <= set(
        w.marked_paths
    )
    profile = w._prof_shares
    paths = profile.paths["aten::mul"]
    assert {"aggregate.edge_norm", "dropout"} <= set(paths), paths
    mul = next(h for h in attribute_ops(profile, "node", threshold=0.0) if h.op == "aten::mul")
    from gnnbench import registry
    from gnnbench.advice.op_profile import MIN_CREDIT_OF_OP

    # the per-edge multiply is credited to sparse_agg; whether it is listed follows the rule on this profile's
    # shares (a loaded machine can shift them), not a share expected here
    assert profile.credit(registry.get("sparse_agg")).get("aten::mul", 0) > 0
    assert set(mul.entries) == {
        o.name
        for o in registry.for_task("node")
        if profile.credit(o).get("aten::mul", 0.0) >= MIN_CREDIT_OF_OP * mul.share
    }, mul
    dropout = profile.credit(registry.get("fast_dropout"))  # dropout's own multiply and its mask
    assert dropout.get("aten::mul", 0) > 0 and dropout.get("aten::bernoulli_", 0) > 0, dropout
    assert profile.credit(registry.get("sparse_agg"))["aten::mul"] == pytest.approx(
        paths["aggregate.edge_norm"] + paths.get("aggregate.gather", 0) + paths.get("aggregate.scatter", 0)
    )
    r = w.report()
    # each hot operator lists the entries the rule credits with enough of it (a loaded machine can shift the
    # shares, so which entries those are is read from this profile, not expected here)
    for h in r.hot_ops:
        assert set(h.entries) == {
            o.name for o in registry.for_task("node") if profile.credit(o).get(h.op, 0.0) >= MIN_CREDIT_OF_OP * h.share
        }, h
    assert "no entry targets it" not in next((ln for ln in r.format().splitlines() if "aten::mul " in ln), "")


def test_the_device_busy_share_is_read_at_step_ends_and_decides_the_classification(monkeypatch):
    """Where NVML answers (a stand-in here: the CPU has none), the busy share is read once per measured step,
    kept off the step's clock, reported, and read by classify as gnnbench diagnose reads it."""
    import gnnbench.advice.watch.clock as clock

    reads = []

    class FakeBusy:
        def __init__(self, device):
            self.reason, self.values = None, []

        def sample(self):
            reads.append(time.perf_counter())
            time.sleep(0.15)  # a slow read: it must not land in the next step
            self.values.append(90.0)

        def mean_fraction(self):
            return sum(self.values) / len(self.values) / 100.0

    monkeypatch.setattr(clock, "BusySampler", FakeBusy)
    data, loader, model, opt = _sage_setup()
    with gnnbench.watch(loader, model, opt, warmup=1, steps=4) as w:
        _sage_loop(data, model, opt, loader)
    r = w.report()
    assert len(reads) == 4 and r.device_busy == pytest.approx(0.9)
    assert r.finding.compute_source == "NVML" and r.finding.bottleneck == "kernels"
    assert r.finding == classify(r.shares, busy_fraction=0.9)
    # a read on the clock would put at least its 150 ms into the next step's 'other' (zero_grad and the loss,
    # a few ms, that a loaded machine can stretch to tens)
    assert all(
        rec["step"] - sum(v for k, v in rec.items() if k not in ("step", "batches")) < 0.15 for rec in w.records[1:]
    ), "the read's 150 ms are not in the next step's 'other'"
    assert "compute share 90% (NVML)" in r.format()


def test_on_a_cpu_no_busy_share_is_claimed():
    data, loader, model, opt = _sage_setup()
    with gnnbench.watch(loader, model, opt, warmup=1, steps=2) as w:
        _sage_loop(data, model, opt, loader)
    r = w.report()
    assert r.device_busy is None and r.finding.compute_source == "compute phases"


@pytest.mark.cuda
def test_the_device_busy_share_comes_from_nvml_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from gnnbench.measure.run import BusySampler

    torch.manual_seed(0)
    data = _data()
    loader = NeighborLoader(data, num_neighbors=[8, 4], batch_size=64, input_nodes=data.train_mask)
    model = GraphSAGE(16, 32, num_layers=2, out_channels=4).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    with gnnbench.watch(loader, model, opt, warmup=2, steps=4) as w:
        for batch in loader:
            batch = batch.to("cuda")
            opt.zero_grad()
            F.cross_entropy(
                model(batch.x, batch.edge_index)[: batch.batch_size], batch.y[: batch.batch_size]
            ).backward()
            opt.step()
    r = w.report()
    probe = BusySampler(torch.device("cuda"))
    if probe.reason is None:
        assert r.device_busy is not None and 0.0 <= r.device_busy <= 1.0
        assert r.finding.compute_source == "NVML" and f"({r.finding.compute_source})" in r.format()
    else:
        assert r.device_busy is None and any("no device busy share" in n for n in r.notes)


class _SlowStep(torch.optim.SGD):
    """An optimizer whose step calls its closure, then spends 40 ms on the update (a slow optimizer)."""

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        time.sleep(0.04)
        super().step()
        return loss


def test_a_closure_optimizer_step_times_its_forward_and_backward_apart_from_the_update():
    """``optimizer.step(closure)`` (LBFGS, Lightning's automatic optimization) runs the forward and backward
    inside the optimizer's step: they are their own phases, the optimizer's phase holds the update alone."""
    torch.manual_seed(0)
    data = _data(n=300, e=2000)

    class SlowForward(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gnn = GraphSAGE(16, 16, num_layers=2, out_channels=4)

        def forward(self, x, edge_index):
            time.sleep(0.03)
            return self.gnn(x, edge_index)

    model = SlowForward()
    opt = _SlowStep(model.parameters(), lr=0.01)

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(model(data.x, data.edge_index), data.y)
        loss.backward()
        return loss

    with gnnbench.watch(None, model, opt, warmup=1, steps=3) as w:
        for _ in range(5):
            opt.step(closure)
    assert len(w.records) == 3
    for rec in w.records:
        assert rec["forward"] >= 0.028 and rec["backward"] > 0, rec
        assert rec["optimizer"] >= 0.038 and rec["optimizer"] < rec["step"] - rec["forward"], rec
        assert rec["step"] - rec["forward"] - rec["backward"] - rec["optimizer"] < 0.03, rec  # not the 40 ms update
    assert w._phase is None and w._opt_open == [] and w._in_closure == 0


def test_lbfgs_with_a_closure_trains_the_same_watched_or_not():
    """LBFGS calls the closure several times per step: each call's forward and backward are timed, the step is
    one step, and the trained parameters are the same as without the watch."""

    def train(watched):
        torch.manual_seed(1)
        data = _data(n=300, e=2000)
        model = GCN(16, 16, num_layers=2, out_channels=4)
        opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=3)
        calls = []

        def closure():
            calls.append(1)
            opt.zero_grad()
            loss = F.cross_entropy(model(data.x, data.edge_index), data.y)
            loss.backward()
            return loss

        ctx = gnnbench.watch(None, model, opt, warmup=1, steps=3) if watched else contextlib.nullcontext()
        with ctx as w:
            for _ in range(5):
                opt.step(closure)
        return [p.detach().clone() for p in model.parameters()], w, len(calls)

    plain, _, _ = train(False)
    watched, w, calls = train(True)
    assert all(torch.equal(a, b) for a, b in zip(plain, watched))
    assert len(w.records) == 3 and sum(w.hook_counts) > 3, "several closure calls (forwards) a step"
    assert all(rec["forward"] > 0 and rec["backward"] > 0 and rec["optimizer"] > 0 for rec in w.records)
    r = w.report()
    assert r.finding.bottleneck == "kernels"


def test_every_registry_entry_has_a_setting_in_the_users_terms():
    from gnnbench import registry

    assert set(IN_YOUR_LOOP) == set(registry.names())


@pytest.mark.cuda
def test_the_breakdown_mode_synchronizes_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    torch.manual_seed(0)
    data = _data()
    loader = NeighborLoader(data, num_neighbors=[8, 4], batch_size=64, input_nodes=data.train_mask, pin_memory=True)
    model = GraphSAGE(16, 32, num_layers=2, out_channels=4).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    with gnnbench.watch(loader, model, opt, warmup=2, steps=4, sync=True) as w:
        for batch in loader:
            batch = batch.to("cuda", non_blocking=True)
            opt.zero_grad()
            out = model(batch.x, batch.edge_index)[: batch.batch_size]
            F.cross_entropy(out, batch.y[: batch.batch_size]).backward()
            opt.step()
    r = w.report()
    assert r.mode == "sync" and r.device.startswith("cuda") and r.phase_ms["transfer"] > 0


SCRIPT = """
import argparse
import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import GraphSAGE

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()
torch.manual_seed(0)
n = 500
data = Data(x=torch.randn(n, 16), edge_index=torch.randint(0, n, (2, 5000)), y=torch.randint(0, 4, (n,)))
loader = NeighborLoader(data, num_neighbors=[8, 4], batch_size=64, shuffle=True)
model = GraphSAGE(16, 32, num_layers=2, out_channels=4)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
for epoch in range(args.epochs):
    for batch in loader:
        optimizer.zero_grad()
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        loss = F.cross_entropy(out, batch.y[:batch.batch_size])
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} done", flush=True)
open(args.__dict__.get("marker", "/dev/null"), "a").close()
"""


def test_diagnose_script_runs_an_unmodified_script_and_stops_it_cleanly(tmp_path, capsys):
    from gnnbench.cli import main

    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    code = main(["diagnose", "--watch-steps", "3", "--watch-warmup", "1", "--script", str(script), "--epochs", "50"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "gnnbench watch: 3 measured steps after 1 warm-up" in out and "bottleneck:" in out
    assert "epoch 1 done" not in out, "stopped after 1 + 3 + 5 profiled steps, inside the first epoch"
    assert "operators above 5%" in out


def test_diagnose_script_says_which_piece_it_could_not_find(tmp_path, capsys):
    from gnnbench.cli import main

    no_step = tmp_path / "no_step.py"
    no_step.write_text(
        "import torch\nm = torch.nn.Linear(4, 2)\nfor _ in range(5):\n    m(torch.randn(3, 4)).sum().backward()\n"
    )
    assert main(["diagnose", "--script", str(no_step)]) == 1
    err = capsys.readouterr().err
    assert "never showed" in err and "an optimizer step" in err and "a model forward" not in err
    raising = tmp_path / "raising.py"
    raising.write_text("raise RuntimeError('CUDA out of memory in my loop')\n")
    assert main(["diagnose", "--script", str(raising)]) == 1
    assert "raised RuntimeError: CUDA out of memory in my loop" in capsys.readouterr().err
    assert main(["diagnose", "--script", str(tmp_path / "missing.py")]) == 1
    assert "is not a file" in capsys.readouterr().err


def test_a_loop_that_recovers_from_errors_and_steps_two_optimizers_is_cut_right():
    """A forward that raises (an out-of-memory retry, say) closes its phase; two optimizers stepped in one
    iteration end one step; the loader's transform is put back afterwards; a loop's `except Exception` does
    not swallow the watch's stop."""
    torch.manual_seed(0)
    data = _data()
    keep = lambda b: b  # noqa: E731
    loader = NeighborLoader(data, num_neighbors=[4], batch_size=64, input_nodes=data.train_mask, transform=keep)
    enc, head = GraphSAGE(16, 16, num_layers=1), torch.nn.Linear(16, 4)
    opt_a, opt_b = torch.optim.Adam(enc.parameters()), torch.optim.Adam(head.parameters())
    calls = {"n": 0}

    class Flaky(torch.nn.Module):
        def forward(self, x, ei):
            calls["n"] += 1
            if calls["n"] == 2:
                raise RuntimeError("out of memory (simulated)")
            return head(enc(x, ei))

    flaky = Flaky()
    with gnnbench.watch(loader, flaky, None, warmup=1, steps=3, stop_after=True) as w:
        for _ in range(10):
            for batch in loader:
                try:
                    out = flaky(batch.x, batch.edge_index)[: batch.batch_size]
                except RuntimeError:
                    continue
                try:
                    opt_a.zero_grad(), opt_b.zero_grad()
                    F.cross_entropy(out, batch.y[: batch.batch_size]).backward()
                    opt_a.step()
                    opt_b.step()
                except Exception:  # noqa: BLE001 - a loop that swallows its own errors
                    pytest.fail("the watch's stop must not be an Exception")
    # the batch whose forward raised belongs to the step that retried with the next one
    assert len(w.records) == 3 and [r["batches"] for r in w.records] == [2, 1, 1], w.records
    assert all(r.get("forward", 0) > 0 and r.get("optimizer", 0) > 0 for r in w.records)
    assert loader.transform is keep, "the loader's own transform is put back"
    assert w._phase is None


def test_the_reproduce_command_follows_the_fanout_when_the_model_is_deeper():
    from gnnbench.cli.parser import build_parser

    data, _, _, _ = _sage_setup()
    loader = NeighborLoader(data, num_neighbors=[6, 3], batch_size=64, input_nodes=data.train_mask)
    model = GraphSAGE(16, 24, num_layers=3, out_channels=4)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    with gnnbench.watch(loader, model, opt, warmup=1, steps=2) as w:
        _sage_loop(data, model, opt, loader)
    r = w.report()
    args = build_parser().parse_args(r.reproduce.split()[1:])
    assert args.layers == 2 and args.fanout == "6,3" and args.hidden == 24
    assert any("3 layers over a 2-hop fanout" in n for n in r.notes)


def test_a_loop_too_short_for_the_profile_says_so_and_ranks_nothing_it_did_not_measure():
    """A loop that ends before the profiled steps (here before its measured steps are all in) gets a diagnosis
    of the steps it had, a note saying how many it needed, and advice not presented in an order nothing
    measured."""
    data, loader, model, opt = _sage_setup()  # about 6 batches an epoch
    with gnnbench.watch(loader, model, opt, warmup=1, steps=20, profile_steps=3) as w:
        _sage_loop(data, model, opt, loader)
    r = w.report()
    assert r.profiled is False and r.hot_ops == []
    # where the watch's wall time went: the steps, and the report's own share
    assert {"setup and first step", "until stopped", "report"} <= set(r.wall_s) and "wall time: " in r.format()
    assert any("of the 20 asked for" in n for n in r.notes), r.notes
    assert any("no profile" in n and "it needs 24" in n for n in r.notes), r.notes
    text = r.format()
    unranked = [a for a in r.advice if not a.op_share]
    assert unranked, r.advice
    for a in unranked:  # listed, never under "in this order"
        block = text.split("not ranked:")[1]
        assert a.entry in block
    if "in this order" in text:
        ordered = text.split("in this order")[1].split("not ranked:")[0]
        assert not any(f"[{a.entry}" in ordered for a in unranked), ordered
    if r.reproduce and "--flags" in r.reproduce:
        assert not set(r.reproduce.split("--flags ")[1].split()[0].split(",")) & {a.entry for a in unranked}


def test_the_model_is_the_one_that_trained_not_a_layer_called_after_the_last_step():
    """With model=None (diagnose --script) the model is the outermost module of the steps an optimizer ended:
    a layer-wise evaluation after training (each conv called on its own) does not replace a 3-layer GraphSAGE
    by one of its layers."""
    torch.manual_seed(0)
    data = _data()
    loader = NeighborLoader(data, num_neighbors=[6, 4, 2], batch_size=64, input_nodes=data.train_mask)
    model = GraphSAGE(16, 24, num_layers=3, out_channels=4)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    with gnnbench.watch(None, None, None, warmup=1, steps=2) as w:
        _sage_loop(data, model, opt, loader)
        model.eval()
        with torch.no_grad():  # layer-wise inference, as PyG's examples write it
            x = data.x
            for conv in model.convs:
                x = conv(x, data.edge_index)
    assert w.outer_model is model
    r = w.report()
    assert not any("layers over" in n for n in r.notes), r.notes
    assert "--layers 3" in r.reproduce and "--hidden 24" in r.reproduce


@pytest.mark.slow
def test_diagnose_script_ends_a_hung_loader_with_its_state_and_exit_1(tmp_path):
    import subprocess
    import sys

    hung = tmp_path / "hung.py"
    hung.write_text(
        "import time, torch\n"
        "class Slow(torch.utils.data.Dataset):\n"
        "    def __len__(self): return 100\n"
        "    def __getitem__(self, i):\n"
        "        if i >= 8: time.sleep(3600)\n"
        "        return torch.randn(8)\n"
        "m = torch.nn.Linear(8, 2)\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for x in torch.utils.data.DataLoader(Slow(), batch_size=2):\n"
        "    opt.zero_grad(); m(x).sum().backward(); opt.step()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "gnnbench.cli", "diagnose", "--wait-bound", "2", "--script", str(hung)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "waited more than 2 s" in proc.stderr and '"type": "DataLoader"' in proc.stderr
