import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnbench.graphs.norm import GCNNorm, gcn_norm
from gnnbench.models.aggregation import Aggregator
from gnnbench.models.nets import build_model
from gnnbench.models.precision import Precision
from tests.graphs_strategies import random_edges


@settings(max_examples=30)
@given(random_edges(max_nodes=40, max_edges=200), st.integers(1, 8))
def test_sparse_aggregation_equals_scatter(edges, width):
    edge_index, n = edges
    h = torch.randn(n, width, generator=torch.Generator().manual_seed(n))
    a = Aggregator(edge_index, n, mode="scatter")
    b = Aggregator(edge_index, n, mode="sparse")
    torch.testing.assert_close(b.gcn(h), a.gcn(h), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(b.mean(h), a.mean(h), rtol=1e-5, atol=1e-5)


def test_sparse_aggregation_gradients_match():
    g = torch.Generator().manual_seed(0)
    edge_index = torch.randint(0, 50, (2, 400), generator=g)
    outs = []
    for mode in ("scatter", "sparse"):
        h = torch.randn(50, 6, generator=torch.Generator().manual_seed(1)).requires_grad_()
        agg = Aggregator(edge_index, 50, mode=mode)
        (agg.gcn(h).square().sum() + agg.mean(h).sum()).backward()
        outs.append(h.grad)
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-5, atol=1e-5)


def test_cached_weights_equal_recomputed_on_the_full_graph():
    g = torch.Generator().manual_seed(2)
    edge_index = torch.randint(0, 60, (2, 300), generator=g)
    h = torch.randn(60, 4, generator=g)
    cached = gcn_norm(edge_index, 60)
    a = Aggregator(edge_index, 60, gcn_weights=lambda: GCNNorm(cached.edge_weight, cached.self_weight))
    b = Aggregator(edge_index, 60)
    torch.testing.assert_close(a.gcn(h), b.gcn(h))


def _run_model(name, mode):
    torch.manual_seed(0)
    edge_index = torch.randint(0, 30, (2, 120), generator=torch.Generator().manual_seed(3))
    x = torch.randn(30, 8)
    model = build_model(name, 8, 16, 3, num_layers=2)
    record: list = []
    linear_dtypes: list = []
    for m in model.modules():
        if isinstance(m, torch.nn.Linear) or m.__class__.__name__ == "Linear":
            m.register_forward_hook(lambda mod, inp, out: linear_dtypes.append(out.dtype))
    precision = Precision(mode, "cpu")
    agg = Aggregator(edge_index, 30, dtype=precision.aggregation_dtype, record=record)
    out = model(x, agg, precision)
    return out, record, linear_dtypes


@pytest.mark.parametrize("name", ["gcn", "sage"])
def test_partial_precision_keeps_aggregation_in_fp32(name):
    out, record, linear_dtypes = _run_model(name, "partial")
    assert record and all(d == torch.float32 for d in record), record
    assert linear_dtypes and all(d == torch.bfloat16 for d in linear_dtypes), linear_dtypes
    assert out.dtype == torch.float32


@pytest.mark.parametrize("name", ["gcn", "sage"])
def test_full_precision_aggregates_in_low_precision(name):
    _, record, linear_dtypes = _run_model(name, "full")
    assert record and all(d == torch.bfloat16 for d in record)
    assert all(d == torch.bfloat16 for d in linear_dtypes)


@pytest.mark.parametrize("name", ["gcn", "sage"])
def test_off_is_fp32_everywhere_and_modes_agree_roughly(name):
    ref, record, linear_dtypes = _run_model(name, "off")
    assert all(d == torch.float32 for d in record + linear_dtypes)
    for mode in ("partial", "full"):
        out, _, _ = _run_model(name, mode)
        torch.testing.assert_close(out, ref, rtol=0.1, atol=0.1)


def test_precision_policy_per_device():
    assert Precision("full", "cuda").low_dtype == torch.float16 and Precision("full", "cuda").needs_grad_scaler
    assert Precision("full", "cpu").low_dtype == torch.bfloat16 and not Precision("full", "cpu").needs_grad_scaler
    assert not Precision("off", "cuda").needs_grad_scaler
    with pytest.raises(ValueError, match="precision must be one of 'off', 'full', 'partial' \\(got 'half'\\)"):
        Precision("half")


def test_model_and_aggregation_errors():
    with pytest.raises(ValueError, match="unknown model 'gat'; accepted: gcn, sage"):
        build_model("gat", 4, 4, 2, 2)
    with pytest.raises(ValueError, match="aggregation must be one of"):
        Aggregator(torch.zeros(2, 0, dtype=torch.long), 3, mode="dense")


def test_uniform_dropout_has_dropouts_distribution_and_gradient():
    from gnnbench.models.nets import uniform_dropout

    torch.manual_seed(0)
    x = torch.ones(200_000, requires_grad=True)
    for p in (0.1, 0.5, 0.9):
        y = uniform_dropout(x, p, True)
        kept = (y != 0).float().mean().item()
        sd = ((1 - p) * p / x.numel()) ** 0.5
        assert abs(kept - (1 - p)) < 5 * sd, (p, kept)  # Bernoulli(1 - p) keep rate
        assert torch.allclose(y[y != 0], torch.full_like(y[y != 0], 1 / (1 - p)))  # inverted scaling
        assert abs(y.mean().item() - 1.0) < 5 * sd / (1 - p)  # expectation preserved
        (g,) = torch.autograd.grad(y.sum(), x)
        assert torch.equal(g, y.detach())  # gradient = mask / (1 - p), the same mask
    assert uniform_dropout(x, 0.5, False) is x and uniform_dropout(x, 0.0, True) is x
    assert torch.count_nonzero(uniform_dropout(x, 1.0, True)) == 0
    with pytest.raises(ValueError, match="got 1.5"):
        uniform_dropout(x, 1.5, True)
    with pytest.raises(ValueError, match="dropout_kernel must be one of"):
        build_model("gcn", 4, 4, 2, 2, dropout_kernel="fast")


def test_fast_dropout_trains_to_the_baselines_accuracy():
    from gnnbench import registry
    from gnnbench.graphs import GraphSpec
    from gnnbench.measure.run import run
    from gnnbench.training import RunConfig

    accs = {}
    for names in ([], ["fast_dropout"]):
        for seed in (0, 1):
            cfg = RunConfig(
                spec=GraphSpec.preset("tiny"),
                flags=registry.flags_for(names),
                epochs=3,
                seed=seed,
                hidden=32,
                warmup_steps=1,
            )
            accs.setdefault(tuple(names), []).append(run(cfg).accuracy.test)
    base, fast = (sum(v) / len(v) for v in accs.values())
    assert abs(base - fast) < 0.05, accs  # same model, same mask distribution: a tolerance, not bit equality


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_sampler_csr_backward_shares_one_transposed_csr_per_batch(dtype):
    """With the batch's CSR, the backward uses A^T built once per batch (one sort), shared by every layer,
    and gives the scatter path's gradients."""
    from gnnbench.models.aggregation import Aggregator

    torch.manual_seed(0)
    n, e = 60, 400
    src, dst = torch.randint(0, n, (e,)), torch.sort(torch.randint(0, n, (e,)))[0]
    ei = torch.stack([src, dst]).to(dtype)
    rowptr = torch.zeros(n + 1, dtype=dtype)
    rowptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
    h_ref = torch.randn(n, 8, requires_grad=True)
    h = h_ref.detach().clone().requires_grad_()
    ref_agg, agg = Aggregator(ei, n, mode="scatter"), Aggregator(ei, n, mode="sparse", rowptr=rowptr)
    out_ref = ref_agg.mean(ref_agg.gcn(h_ref))  # two layers share the batch
    out = agg.mean(agg.gcn(h))
    assert agg._t is None  # nothing transposed in the forward
    g = torch.randn_like(out)
    out_ref.backward(g)
    out.backward(g)
    assert torch.allclose(out, out_ref, atol=1e-5) and torch.allclose(h.grad, h_ref.grad, atol=1e-5)
    built = agg._t
    # the permutation keeps the product's index dtype: on CPU MKL's int32 (an int64 batch CSR is cast once per
    # batch, counted in narrowed_bytes, instead of by ATen inside every product)
    assert built is not None and built[2].dtype == torch.int32
    assert agg.narrowed_bytes == (0 if dtype == torch.int32 else rowptr.numel() * 4 + e * 4)
    agg.gcn(h).sum().backward()
    assert agg._t is built  # reused, not rebuilt


def test_mean_degree_is_bincount_with_a_static_shape():
    import torch

    from gnnbench.models.aggregation import Aggregator

    for dtype in (torch.int64, torch.int32):
        edge_index = torch.tensor([[0, 1, 2, 3, 4, 1], [1, 1, 0, 3, 3, 1]], dtype=dtype)
        deg = Aggregator(edge_index, 6, mode="scatter").degree()
        assert deg.dtype == torch.int64 and torch.equal(deg, torch.bincount(edge_index[1].long(), minlength=6))
