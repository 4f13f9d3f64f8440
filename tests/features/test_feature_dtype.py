"""fp16 feature storage (Flags.feature_dtype): half the bytes, the model computing in fp32, within tolerance."""

import pytest
import torch

from gnnbench.features.placement import place_features
from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec
from gnnbench.models.aggregation_policy import AggregationPolicy
from gnnbench.models.nets import build_model
from gnnbench.models.precision import Precision
from gnnbench.training import RunConfig, Trainer


def test_fp16_store_gathers_half_the_bytes_within_fp16_rounding():
    x = torch.randn(500, 16)
    ids = torch.randint(0, 500, (200,))
    full = place_features(x, "cpu").gather(ids)
    half = place_features(x, "cpu", dtype="float16").gather(ids)
    assert full.dtype == torch.float32 and half.dtype == torch.float16
    assert half.nbytes * 2 == full.nbytes
    torch.testing.assert_close(half.float(), full, rtol=2**-11, atol=2**-24)


def test_bad_feature_dtypes_are_refused_with_the_accepted_ones():
    with pytest.raises(ValueError, match=r"feature_dtype must be one of 'float32', 'float16' \(got 'int8'\)"):
        Flags(feature_dtype="int8")
    with pytest.raises(ValueError, match=r"unknown feature dtype 'bfloat16'; accepted: float32, float16"):
        place_features(torch.zeros(3, 2), "cpu", dtype="bfloat16")
    with pytest.raises(ValueError, match=r"holds \|x\| <= 65504 \(got a largest \|x\| of 1e\+06\)"):
        place_features(torch.full((3, 2), 1e6), "cpu", dtype="float16")


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_model_output_from_fp16_features_matches_fp32(tiny_graph, model):
    g = tiny_graph
    torch.manual_seed(0)
    net = build_model(model, g.num_features, 32, int(g.y.max()) + 1, 2).eval()
    ids = torch.arange(g.num_nodes)
    policy = AggregationPolicy()
    agg = policy.for_graph(g.edge_index, g.num_nodes)
    exact = net(place_features(g.x, "cpu").gather(ids), agg, Precision())
    stored = place_features(g.x, "cpu", dtype="float16").gather(ids)
    out = net(stored, agg, Precision())  # the model takes the fp16 rows and computes in fp32
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, exact, rtol=1e-2, atol=1e-3)


def test_training_on_fp16_features_stays_within_tolerance(tiny_graph):
    spec = GraphSpec.preset("tiny")
    results = {}
    for dtype in ("float32", "float16"):
        flags = Flags(feature_dtype=dtype, fanout=(10, 5), batch_size=512)
        trainer = Trainer(RunConfig(spec=spec, epochs=2, flags=flags), tiny_graph)
        losses = [s.loss for s in trainer.steps()]
        results[dtype] = losses, trainer.evaluate()[0]["test"]
        trainer.close()
    (loss32, acc32), (loss16, acc16) = results["float32"], results["float16"]
    assert loss16 == pytest.approx(loss32, abs=2e-3), "per-step losses drift apart"
    assert abs(acc16 - acc32) < 0.01, f"test accuracy moved by {100 * (acc16 - acc32):+.2f} pp"
