"""``gnnbench diagnose --script train.py --verify``: the advice applied to an unmodified script from the outside
and measured there (``gnnbench/advice/watch/changes.py``, ``child.py``, ``verify.py``).

The statistics are tested on runs whose step times are given (``run_once`` replaced), the changes on the objects
a script builds, in this process; the child processes run in the tests marked slow."""

import math
import sys
import textwrap

import pytest
import torch
from torch_geometric.nn import GraphSAGE

from gnnbench.advice.watch import changes as ch
from gnnbench.advice.watch import verify as vf
from gnnbench.advice.watch.changes import ScriptChange, change_for, worker_change
from gnnbench.advice.watch.verify_text import format_verification
from tests.helpers import ROOT

LOADER = {"type": "NeighborLoader", "workers": 0, "batch_size": 64}


def test_each_entry_maps_to_a_change_or_a_reason():
    workers = change_for("workers", loader=LOADER, cores=2)
    assert workers.loader == {"num_workers": 1, "persistent_workers": True} and workers.intra_op == 1
    assert any("torch.set_num_threads(1)" in e and "2 usable cores - 1 workers" in e for e in workers.edit)
    assert change_for("workers", loader=LOADER, cores=16).loader["num_workers"] == 4
    split = change_for("workers_split", loader=LOADER, cores=4)
    assert split.pin_workers and split.loader["num_workers"] == 1 and split.intra_op == 3
    assert "full-batch" in change_for("workers", loader={"type": "none (full batch)"})
    assert "4 workers already" in change_for("workers", loader={**LOADER, "workers": 4})
    assert "needs loader workers" in change_for("prefetch", loader=LOADER)
    assert change_for("prefetch", loader={**LOADER, "workers": 2}).loader == {"prefetch_factor": 4}
    assert "CPU" in change_for("pin_memory", loader=LOADER, device="cpu")
    assert change_for("sparse_agg", loader=LOADER).sparse and "batch.adj_t" in change_for("sparse_agg").edit[0]
    assert "cached=True" in change_for("cached_norm")  # refused with the reason, never a no-op
    assert "compare" in change_for("labor", loader=LOADER)
    amp = change_for("full_amp")
    assert amp.precision == "full" and amp.numerics and "torch.bfloat16" in amp.edit[0]
    assert "torch.float16" in change_for("partial_amp", device="cuda:0").edit[0]
    assert change_for("compile").compile
    tuned = change_for("glibc_tuned")
    assert tuned.allocator == "glibc_tuned" and "MALLOC_MMAP_THRESHOLD_=1073741824" in tuned.edit[0]
    both = worker_change(1, cores=2).combined(tuned)
    assert both.loader["num_workers"] == 1 and both.allocator == "glibc_tuned" and len(both.edit) == 3
    assert ScriptChange.from_dict(both.to_dict()) == both


def test_loader_settings_are_set_at_construction_and_put_back():
    from contextlib import ExitStack

    from torch.utils.data import DataLoader

    before = DataLoader.__init__
    change = worker_change(1, cores=2)
    threads = torch.get_num_threads()
    with ExitStack() as stack:
        counts = ch.applied(stack, change)
        loader = DataLoader(list(range(8)), batch_size=2)
        assert loader.num_workers == 1 and loader.persistent_workers
        assert torch.get_num_threads() == 1
    assert DataLoader.__init__ is before and torch.get_num_threads() == threads
    assert counts.loaders == 1 and ch.not_applied(change, counts) is None
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader, NodeLoader

    data = Data(x=torch.randn(20, 4), edge_index=torch.randint(0, 20, (2, 60)))
    pyg_init = NodeLoader.__init__
    with ExitStack() as stack:
        ch.applied(stack, change)
        pyg = NeighborLoader(data, num_neighbors=[2], batch_size=4)
    assert pyg.num_workers == 1 and pyg.filter_per_worker is True and NodeLoader.__init__ is pyg_init
    assert "no DataLoader" in ch.not_applied(change, ch._Applied())


def test_low_precision_wraps_the_outer_model_or_its_linear_layers_at_its_first_training_call():
    from contextlib import ExitStack

    torch.manual_seed(0)
    x, ei = torch.randn(30, 8), torch.randint(0, 30, (2, 90))
    for precision in ("partial", "full"):
        model = GraphSAGE(8, 16, num_layers=2, out_channels=3)
        with ExitStack() as stack:
            counts = ch.applied(stack, ScriptChange(precision, (), precision=precision))
            with torch.no_grad():
                model(x, ei)  # an evaluation call: not the training forward, nothing applied
            assert counts.models == 0
            model(x, ei)
            out = model(x, ei)
        assert counts.models == 1
        if precision == "partial":
            assert counts.linears > 0 and out.dtype == torch.float32  # each layer's output back in float32
        else:
            assert out.dtype == torch.bfloat16 and "forward" in vars(model)
    assert "no module" in ch.not_applied(ScriptChange("c", (), compile=True), ch._Applied())


def test_fast_dropout_is_applied_from_the_outside_to_the_training_calls_of_f_dropout():
    """The script's F.dropout (and nn.Dropout, which calls it) gets the fast_dropout entry's kernel while
    training: the same keep rate and scale, another random stream; evaluation and in-place calls pass through,
    F.dropout is restored after, and a script with no dropout fails its run with the reason."""
    from contextlib import ExitStack

    import torch.nn.functional as F

    change = ch.change_for("fast_dropout")
    assert isinstance(change, ScriptChange) and change.dropout and change.numerics and "rand_like" in change.edit[0]
    original = F.dropout
    x = torch.ones(200, 50)
    with ExitStack() as stack:
        counts = ch.applied(stack, change)
        assert F.dropout is not original
        out = torch.nn.Dropout(0.5).train()(x)
        kept = out != 0
        assert 0.4 < kept.float().mean().item() < 0.6 and torch.all(out[kept] == 2.0)
        assert torch.equal(F.dropout(x, 0.5, training=False), x) and counts.dropouts == 1
        F.dropout(x.clone(), 0.5, True, True)  # in place: ATen's own
        assert counts.dropouts == 1
    assert F.dropout is original
    assert "no dropout" in ch.not_applied(change, ch._Applied())
    combined = change.combined(ch.change_for("full_amp"))
    assert combined.dropout and combined.precision == "full"
    assert vf._kind(change) == ("dropout",)


def _fake_runs(monkeypatch, per_label, *, fail=()):
    """run_once replaced: each configuration's step times scaled from a per-round base (the rounds drift, as a
    loaded machine's do), losses equal to the baseline's but for ``numerics`` variants."""
    calls = []

    def run_once(argv, change, *, steps, warmup, seed, folder, wait_bound_s, timeout_s):
        calls.append((change.label, seed))
        if change.label in fail:
            raise vf.RunFailed("not applied: the script built no DataLoader")
        drift = 1.0 + 0.05 * (seed % 3)
        factor = per_label.get(change.label, 1.0)
        jitter = 1.0 + 0.002 * ((hash((change.label, seed)) % 5) - 2)
        losses = [1.0 - 0.01 * i + (0.003 if change.numerics else 0.0) for i in range(warmup + steps)]
        return {
            "step_s": [0.1 * drift * factor * jitter] * steps,
            "losses": losses,
            "seen": warmup + steps,
            "warmup_s": 30.0 if change.compile else 1.0,
        }

    monkeypatch.setattr(vf, "run_once", run_once)
    return calls


def test_verify_pairs_rounds_holm_across_variants_and_combines_what_pays(monkeypatch):
    loader = worker_change(1, cores=2)
    alloc = (
        change_for("glibc_tuned")
        if isinstance(change_for("glibc_tuned"), ScriptChange)
        else ScriptChange("glibc_tuned", ("glibc_tuned",), allocator="glibc_tuned", edit=("MALLOC_...",))
    )
    amp = change_for("full_amp")
    calls = _fake_runs(monkeypatch, {"workers": 0.8, "glibc_tuned": 0.9, "full_amp": 1.6, "workers+glibc_tuned": 0.72})
    lines = []
    v = vf.verify_script(
        ["train.py"], [loader, alloc, amp], refused={"sparse_agg": "why"}, rounds=4, steps=5, warmup=2, log=lines.append
    )
    # every round runs every configuration once, seeded alike, in a rotated order
    first = [label for label, seed in calls[:16]]
    assert [first[i * 4] for i in range(4)] == ["baseline", "workers", "glibc_tuned", "full_amp"]
    assert all(len({s for label, s in calls[i * 4 : (i + 1) * 4]}) == 1 for i in range(4))
    by = {o.change.label: o for o in v.outcomes}
    assert by["workers"].pays and by["glibc_tuned"].pays and not by["full_amp"].pays
    assert by["workers"].ratio.ratio == pytest.approx(1 / 0.8, rel=0.02)
    assert by["full_amp"].significant and by["full_amp"].ratio.ratio < 1  # slower here, said so
    assert by["full_amp"].loss["diff"] == pytest.approx(0.003) and not by["full_amp"].loss["identical"]
    assert by["workers"].loss["identical"]
    assert v.combination is not None and v.combination.change.entries == ("workers", "glibc_tuned")
    assert v.combination.pays and math.isfinite(v.floor)
    text = format_verification(v)
    assert "slower here: does not pay" in text and "sparse_agg: why" in text
    assert "the change to make in your script:" in text and "torch.set_num_threads(1)" in text
    assert "noise floor" in text and "Holm" in text
    assert lines and all("min left" in ln for ln in lines) and "round 4/4" in lines[15]
    # a compiled variant's compilation is reported apart from its step ratio
    _fake_runs(monkeypatch, {"compile": 0.9})
    v = vf.verify_script(["train.py"], [change_for("compile")], rounds=2, steps=3, warmup=1, log=lambda s: None)
    assert "warm-up with compilation 30.0 s (3 steps) against the baseline's 1.0 s (1 steps)" in format_verification(v)


def test_a_failed_variant_is_reported_not_judged_and_a_failed_baseline_stops(monkeypatch):
    _fake_runs(monkeypatch, {"workers": 0.8}, fail=("workers",))
    v = vf.verify_script(["t.py"], [worker_change(1, cores=2)], rounds=2, steps=3, warmup=1, log=lambda s: None)
    assert v.outcomes[0].error and not v.outcomes[0].pays
    assert "not measured: not applied: the script built no DataLoader" in format_verification(v)
    _fake_runs(monkeypatch, {}, fail=("baseline",))
    with pytest.raises(vf.RunFailed, match="baseline run failed"):
        vf.verify_script(["t.py"], [worker_change(1, cores=2)], rounds=2, steps=3, warmup=1, log=lambda s: None)
    with pytest.raises(ValueError, match="at least 2 rounds"):
        vf.verify_script(["t.py"], [], rounds=1)


def test_rounds_until_decided_stop_a_variant_once_decided_and_the_budget_ends_the_rest(monkeypatch):
    """Above ``rounds``, each round is a look of compare's stopping rule: a clear gain stops as significant at the
    first look, a change within the rounds' jitter stops as futile, and neither receives later rounds; the
    baseline runs every round while a variant is open. A budget that ends first leaves the open variant judged at
    the last look's level, said in its verdict."""
    calls = []

    def run_once(argv, change, *, steps, warmup, seed, folder, wait_bound_s, timeout_s):  # no hash(): the
        calls.append((change.label, seed))  # same rounds whatever PYTHONHASHSEED
        drift = 1.0 + 0.05 * (seed % 3)
        factor = {"workers": 0.5, "glibc_tuned": 1.0 + 0.004 * (-1) ** seed}.get(change.label, 1.0)
        return {"step_s": [0.1 * drift * factor] * steps, "losses": [1.0] * (warmup + steps), "seen": warmup + steps}

    monkeypatch.setattr(vf, "run_once", run_once)
    loader = worker_change(1, cores=2)
    alloc = ScriptChange("glibc_tuned", ("glibc_tuned",), allocator="glibc_tuned", edit=("MALLOC_...",))
    v = vf.verify_script(["t.py"], [loader, alloc], rounds=3, max_rounds=12, combine=False, log=lambda s: None)
    by = {o.change.label: o for o in v.outcomes}
    assert by["workers"].pays and by["workers"].stop["reason"] == "significant" and by["workers"].stop["look"] == 3
    assert by["glibc_tuned"].stop["reason"] in ("futile", "max rounds") and not by["glibc_tuned"].significant
    assert by["workers"].stop["level"] < 0.05  # the level of a look before the last: alpha split over the looks
    ran = [label for label, seed in calls]
    assert ran.count("workers") == 3 and ran.count("baseline") == v.rounds == len(v.base_ms)
    assert ran.count("glibc_tuned") == by["glibc_tuned"].stop["look"] <= 12
    text = format_verification(v)
    assert "3 to 12" in text and "decided after 3 rounds" in text
    assert v.to_dict()["max_rounds"] == 12 and v.to_dict()["outcomes"][0]["stop"]["reason"] == "significant"

    # a budget of 50 s on a clock where every run takes tens of seconds: the rounds end after the first 2
    class Clock:
        now = 0.0

        def perf_counter(self):
            Clock.now += 5.0  # every reading of the clock: runs take tens of seconds on it
            return Clock.now

    monkeypatch.setattr(vf.time, "perf_counter", Clock().perf_counter)

    def run_once(argv, change, *, steps, warmup, seed, folder, wait_bound_s, timeout_s):  # 0% and 6% by turns
        step = 0.1 if change.label == "baseline" or seed % 2 == 0 else 0.1 / 1.06
        return {"step_s": [step] * steps, "losses": [1.0] * (warmup + steps), "seen": warmup + steps}

    monkeypatch.setattr(vf, "run_once", run_once)
    v = vf.verify_script(["t.py"], [alloc], rounds=2, max_rounds=20, budget_s=50.0, combine=False, log=lambda s: None)
    o = v.outcomes[0]
    assert v.rounds == 2 and o.stop == {"reason": "budget", "look": 2, "level": vf._rule(2, 20).look_alpha(2)}
    assert not o.significant and "the budget ended its rounds after 2" in format_verification(v)
    with pytest.raises(ValueError, match="max rounds"):
        vf.verify_script(["t.py"], [alloc], rounds=4, max_rounds=3)
    with pytest.raises(ValueError, match="budget"):
        vf.verify_script(["t.py"], [alloc], rounds=2, max_rounds=3, budget_s=0)


def test_the_rounds_are_planned_from_the_budget_at_the_diagnosed_step():
    class R:
        step_ms = {"median": 100.0}
        wall_s = {"setup and first step": 1.1}

    changes = [worker_change(1, cores=2), change_for("full_amp")]
    _, per_round = vf.estimate_s(R(), changes, rounds=1, steps=20, warmup=3)
    assert per_round == pytest.approx((3 + 2) * (vf.START_S + 1.0 + 23 * 0.1))
    assert vf.plan_rounds(R(), changes, rounds=4, steps=20, warmup=3, budget_s=10 * per_round) == 10
    assert vf.plan_rounds(R(), changes, rounds=4, steps=20, warmup=3, budget_s=per_round) == 4  # never below
    assert vf.plan_rounds(R(), changes, rounds=4, steps=20, warmup=3, budget_s=1e9) == vf.MAX_ROUNDS
    assert vf.plan_rounds(R(), changes, rounds=4, steps=20, warmup=3, budget_s=None) == 4


def test_the_plan_takes_the_top_applicable_advice_and_the_workers_curve():
    from gnnbench.advice.watch.report import Advice

    class R:
        device, loader, profiled = "cpu", LOADER, True
        advice = [
            Advice("sparse_agg", "", "kernels", False, 0.5),
            Advice("full_amp", "", "kernels", True, 0.3),
            Advice("cached_norm", "", "kernels", False, 0.1),
            Advice("workers", "", "sampling", False, 0.1),
            Advice("compile", "", "kernels", False, 0.05),
            Advice("glibc_tuned", "", "kernels", False, 0.01),
        ]

    changes, refused, notes = vf.verify_plan(R(), top=3, workers_curve=True, cores=2)
    assert [c.label for c in changes] == ["sparse_agg", "full_amp", "workers", "workers=2", "workers=3"]
    assert set(refused) == {"cached_norm"}
    assert [c.intra_op for c in changes[3:]] == [1, 1] and any("workers curve" in n for n in notes)
    R.profiled = False  # a loop too short for its profile: only what was measured is taken
    R.advice = [Advice("full_amp", "", "kernels", True, None), Advice("glibc_tuned", "", "kernels", False, 0.2)]
    changes, _, notes = vf.verify_plan(R(), top=3)
    assert [c.label for c in changes] == ["glibc_tuned"] and "not measured" in notes[0]


TRAIN = textwrap.dedent("""
    import sys
    import torch
    import torch.nn.functional as F
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader
    from torch_geometric.nn import GraphSAGE

    n = 400
    g = torch.Generator().manual_seed(0)
    data = Data(x=torch.randn(n, 16, generator=g), edge_index=torch.randint(0, n, (2, 3000), generator=g),
                y=torch.randint(0, 4, (n,), generator=g))
    loader = NeighborLoader(data, num_neighbors=[5, 3], batch_size=64, shuffle=True)
    model = GraphSAGE(16, 32, num_layers=2, out_channels=4)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for epoch in range(int(sys.argv[1]) if len(sys.argv) > 1 else 5):
        for batch in loader:
            opt.zero_grad()
            out = model(batch.x, batch.edge_index)[:batch.batch_size]
            F.cross_entropy(out, batch.y[:batch.batch_size]).backward()
            opt.step()
""")


@pytest.mark.slow
def test_a_neighbor_loader_graphsage_script_is_verified_in_child_processes(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    changes = [worker_change(1, cores=2), change_for("partial_amp")]
    v = vf.verify_script([str(script)], changes, rounds=2, steps=3, warmup=1, log=lambda s: None)
    by = {o.change.label: o for o in v.outcomes}
    assert not any(o.error for o in v.outcomes), [o.error for o in v.outcomes]
    assert len(v.base_ms) == 2 and all(len(o.step_ms) == 2 for o in v.outcomes)
    assert by["partial_amp"].loss is not None and by["partial_amp"].loss["steps"] >= 4


@pytest.mark.slow
def test_a_full_batch_script_refuses_loader_changes_and_a_hung_loader_ends_the_run(tmp_path):
    full = tmp_path / "full.py"
    full.write_text(
        textwrap.dedent("""
        import torch
        m = torch.nn.Linear(8, 2)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        x = torch.randn(64, 8)
        for _ in range(20):
            opt.zero_grad(); m(x).pow(2).mean().backward(); opt.step()
    """)
    )
    with pytest.raises(vf.RunFailed, match="no DataLoader"):
        vf.run_once([str(full)], worker_change(1, cores=2), steps=3, warmup=1, seed=0, folder=str(tmp_path))
    hung = tmp_path / "hung.py"
    hung.write_text(
        textwrap.dedent("""
        import time, torch
        class Slow(torch.utils.data.Dataset):
            def __len__(self): return 100
            def __getitem__(self, i):
                if i >= 8: time.sleep(3600)
                return torch.randn(8)
        m = torch.nn.Linear(8, 2)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for x in torch.utils.data.DataLoader(Slow(), batch_size=2):
            opt.zero_grad(); m(x).sum().backward(); opt.step()
    """)
    )
    with pytest.raises(vf.RunFailed, match=r"waited more than 2 s .*loader: \{'type': 'DataLoader'"):
        vf.run_once(
            [str(hung)], vf.BASELINE, steps=5, warmup=1, seed=0, folder=str(tmp_path), wait_bound_s=2, timeout_s=120
        )
    assert sys.executable


def test_a_small_dev_shm_refuses_workers_before_any_run_and_memory_growth_is_reported(monkeypatch, tmp_path):
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(64 * 2**20, 0, 64 * 2**20))
    assert "64 MiB free" in vf.shm_shortage() and "--shm-size" in vf.shm_shortage()
    from gnnbench.advice.watch.report import Advice

    class R:
        device, loader, profiled = "cpu", LOADER, True
        advice = [Advice("workers", "", "sampling", False, 0.4), Advice("glibc_tuned", "", "kernels", False, 0.1)]

    changes, refused, _ = vf.verify_plan(R(), top=3, workers_curve=True, cores=2)
    assert [c.label for c in changes] == ["glibc_tuned"] and "/dev/shm" in refused["workers"]
    assert "/dev/shm" in refused["workers curve"]
    mib = 2**20
    assert vf.memory_growth([500 * mib] * 12, 2) is None
    assert "grew 180 MiB over 10 steps" in vf.memory_growth(
        [500 * mib] * 2 + [(500 + 20 * i) * mib for i in range(1, 11)], 2
    )
    # pools filling over the first steps, then a plateau (measured: PyG's NeighborLoader + GraphSAGE on small,
    # 682 -> 742 MiB in 10 steps, flat for the next 10): not growth
    plateau = [564, 663, 683, 682, 702, 682, 702, 663, 683, 702, 722, 722, 741, 742] + [742] * 9
    assert vf.memory_growth([x * mib + (0 if x < 700 else 40 * mib) for x in plateau], 3) is None


def test_host_memory_growth_names_the_variant_it_grew_under():
    """Growth seen only under a variant is the variant's, not the script's (seen under autocast: the note blamed
    the script); growth in the baseline's runs is the script's."""
    fact = "host memory grew 180 MiB over 10 steps"
    (only,) = vf.growth_notes({"full_amp": fact})
    assert only.startswith("full_amp: host memory grew") and "only under full_amp" in only
    assert "the change keeps something each step, not the script" in only
    both = vf.growth_notes({"baseline": fact, "full_amp": fact})
    assert "the script keeps something each step" in both[0] and both[0].startswith("baseline:")
    assert "the baseline grew too" in both[1]
    assert vf.growth_notes({}) == []


def test_a_sparse_adjacency_is_passed_where_every_convolution_takes_one_and_refused_for_gat():
    """GraphSAGE gets its edge_index as a CSR adj_t at every training call and computes what it computed (the
    edges without duplicates); a GAT model is refused with the reason, the exception not one a script's
    ``except Exception`` swallows."""
    from contextlib import ExitStack

    from torch_geometric.nn import GAT
    from torch_geometric.utils import coalesce

    torch.manual_seed(0)
    x, ei = torch.randn(40, 8), coalesce(torch.randint(0, 40, (2, 200)))
    model = GraphSAGE(8, 16, num_layers=2, out_channels=3)
    expected = model(x, ei)
    seen = []
    hook = model.convs[0].register_forward_pre_hook(lambda m, a: seen.append(a[1].layout))
    with ExitStack() as stack:
        counts = ch.applied(stack, change_for("sparse_agg"))
        first, second = model(x, ei), model(x, ei)
    hook.remove()
    assert counts.models == 1 and seen == [torch.sparse_csr, torch.sparse_csr]
    assert torch.allclose(first, expected, atol=1e-5) and torch.allclose(second, expected, atol=1e-5)
    from torch_geometric.nn import GCN
    from torch_geometric.utils import remove_self_loops

    gcn = GCN(8, 16, num_layers=2, out_channels=3)
    no_loops = remove_self_loops(ei)[0]
    expected = gcn(x, no_loops)
    with ExitStack() as stack:
        ch.applied(stack, change_for("sparse_agg"))
        assert torch.allclose(gcn(x, no_loops), expected, atol=1e-5)  # GCN agrees on a graph without self-loops
        with pytest.raises(ch.SparseRefused, match="self-loops in the graph"):
            gcn(x, torch.cat([no_loops, torch.tensor([[3], [3]])], 1))
    gat = GAT(8, 16, num_layers=2, out_channels=3)
    with ExitStack() as stack:
        ch.applied(stack, change_for("sparse_agg"))
        with pytest.raises(ch.SparseRefused, match="GATConv weighs each edge by an attention coefficient"):
            gat(x, ei)
    assert issubclass(ch.SparseRefused, BaseException) and not issubclass(ch.SparseRefused, Exception)


SAMPLING_BOUND = (ROOT / "scripts" / "user_loops" / "sampling_bound.py").read_text()  # a loop docs/your-own.md cites


@pytest.mark.slow
def test_a_sampling_bound_script_is_measured_to_pay_with_a_worker(tmp_path):
    """A loop whose loader sleeps 30 ms a batch in its transform: one worker overlaps the sleep with the step, and
    --verify measures the gain in the script itself, significant across 8 rounds on a loaded machine too (with 5,
    a runner busy with a second test suite measured 1.89x [0.95, 3.76]: the gain, but not resolved)."""
    script = tmp_path / "train.py"
    script.write_text(SAMPLING_BOUND)
    v = vf.verify_script([str(script)], [worker_change(1, cores=2)], rounds=8, steps=8, warmup=3, log=lambda s: None)
    o = v.outcomes[0]
    assert o.error is None and o.ratio.ratio > 1.1 and o.pays, format_verification(v)


GAT_SCRIPT = textwrap.dedent("""
    import torch
    import torch.nn.functional as F
    from torch_geometric.data import Data
    from torch_geometric.nn import GAT

    n = 300
    g = torch.Generator().manual_seed(0)
    data = Data(x=torch.randn(n, 8, generator=g), edge_index=torch.randint(0, n, (2, 1500), generator=g),
                y=torch.randint(0, 3, (n,), generator=g))
    model = GAT(8, 16, num_layers=2, out_channels=3)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(30):  # full batch
        opt.zero_grad()
        try:
            F.cross_entropy(model(data.x, data.edge_index), data.y).backward()
        except Exception:  # a loop that swallows its own errors must not swallow the refusal
            continue
        opt.step()
""")


@pytest.mark.slow
def test_a_gat_script_refuses_the_sparse_adjacency_with_its_reason_in_the_child(tmp_path):
    script = tmp_path / "gat.py"
    script.write_text(GAT_SCRIPT)
    with pytest.raises(vf.RunFailed, match="refused: GATConv weighs each edge"):
        vf.run_once([str(script)], change_for("sparse_agg"), steps=3, warmup=1, seed=0, folder=str(tmp_path))
    result = vf.run_once([str(script)], change_for("full_amp"), steps=3, warmup=1, seed=0, folder=str(tmp_path))
    assert result["applied"]["models"] == 1 and len(result["step_s"]) == 3


LINK_SCRIPT = textwrap.dedent("""
    import torch
    import torch.nn.functional as F
    from torch_geometric.data import Data
    from torch_geometric.loader import LinkNeighborLoader
    from torch_geometric.nn import GraphSAGE

    n = 400
    g = torch.Generator().manual_seed(0)
    data = Data(x=torch.randn(n, 16, generator=g), edge_index=torch.randint(0, n, (2, 3000), generator=g))
    loader = LinkNeighborLoader(data, num_neighbors=[5, 3], batch_size=64, neg_sampling_ratio=1.0, shuffle=True)
    model = GraphSAGE(16, 32, num_layers=2)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for epoch in range(5):
        for batch in loader:
            opt.zero_grad()
            h = model(batch.x, batch.edge_index)
            src, dst = batch.edge_label_index
            score = (h[src] * h[dst]).sum(-1)
            F.binary_cross_entropy_with_logits(score, batch.edge_label).backward()
            opt.step()
""")


@pytest.mark.slow
def test_a_link_neighbor_loader_script_gets_its_loader_settings_and_the_cli_prints_the_verification(tmp_path, capsys):
    import json

    from gnnbench.cli import main

    script = tmp_path / "link.py"
    script.write_text(LINK_SCRIPT)
    result = vf.run_once([str(script)], worker_change(1, cores=2), steps=3, warmup=1, seed=0, folder=str(tmp_path))
    assert result["applied"]["loaders"] == 1 and result["loader"]["workers"] == 1
    assert result["loader"]["type"] == "LinkNeighborLoader" and result["threads"]["intra_op"] == 1
    code = main(
        [
            "diagnose",
            "--json",
            "--verify",
            "--verify-rounds",
            "2",
            "--verify-budget",
            "0",
            "--verify-steps",
            "3",
            "--verify-warmup",
            "1",
            "--watch-steps",
            "3",
            "--watch-warmup",
            "1",
            "--top",
            "2",
            "--script",
            str(script),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = json.loads(captured.out)
    verify = out["verify"]
    assert verify["rounds"] == 2 and len(verify["base_ms"]) == 2 and verify["outcomes"], verify
    assert "[verify] round 2/2" in captured.err and "min left" in captured.err


def test_the_time_of_a_verification_is_estimated_before_it_starts():
    class R:
        step_ms = {"median": 2000.0}
        wall_s = {"setup and first step": 12.0}

    changes = [worker_change(1, cores=2), change_for("full_amp"), change_for("glibc_tuned")]
    runs, seconds = vf.estimate_s(R(), changes, rounds=4, steps=10, warmup=3)
    assert runs == 4 * 4 + 8
    assert seconds == pytest.approx(runs * (vf.START_S + 10.0 + 13 * 2.0))
