"""int32 end to end: with ``index_dtype="int32"`` every index that reaches a kernel of the training step
(gather, transfer, forward, backward, optimizer) is int32 -- node ids, edge ids, local edges, the batch's CSR.

Recorded at the dispatcher (``TorchDispatchMode``), so a widening anywhere in the step is caught. The
documented exceptions:

- without ``csr`` the sparse path sorts the edges by target per batch, and ``torch.argsort`` returns an
  int64 permutation (that per-batch conversion is what ``csr`` removes);
- on CPU the scatter path widens its source and target ids once per batch (``models.scatter_index``):
  ATen's CPU ``index_add_``, also ``index_select``'s backward, is serial for int32 indices. Those two
  casts, of exactly the batch's edge count, are the only int64 indices of such a step.
"""

import collections
import dataclasses

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gnnbench import registry
from gnnbench.training import Trainer
from tests.helpers import QUICK

# op name -> positions of its index arguments
INDEX_ARGS = {
    "aten.index_select.default": (2,),
    "aten.index_add.default": (2,),
    "aten.index_add_.default": (2,),
    "aten.index_copy_.default": (2,),
    "aten.index_copy.default": (2,),
    "aten.index_fill_.int_Scalar": (2,),
    "aten.gather.default": (2,),
    "aten.scatter_add.default": (2,),
    "aten.scatter_add_.default": (2,),
    "aten.scatter_reduce.two": (2,),
    "aten.scatter_reduce_.two": (2,),
    "aten._sparse_csr_tensor_unsafe.default": (0, 1),
    "aten.sparse_compressed_tensor.comp_plain_value_size": (0, 1),
    "aten._sparse_compressed_tensor_unsafe.default": (0, 1),
    "aten.bincount.default": (0,),
}


class IndexDtypes(TorchDispatchMode):
    """Counts (op, index dtype) over every index argument dispatched."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: collections.Counter = collections.Counter()
        self.int64_sizes: collections.Counter = collections.Counter()  # op -> numel of its int64 indices
        self.widenings: list[int] = []  # numel of every int32 -> int64 conversion

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        for i in INDEX_ARGS.get(name, ()):
            if i < len(args) and isinstance(args[i], torch.Tensor):
                self.seen[(name, args[i].dtype)] += 1
                if args[i].dtype == torch.int64:
                    self.int64_sizes[(name, args[i].numel())] += 1
        if (
            name == "aten._to_copy.default"
            and args
            and isinstance(args[0], torch.Tensor)
            and args[0].dtype == torch.int32
            and (kwargs or {}).get("dtype") == torch.int64
        ):
            self.widenings.append(args[0].numel())
        if name == "aten.index.Tensor":
            for t in args[1]:
                if isinstance(t, torch.Tensor) and t.dtype != torch.bool:
                    self.seen[(name, t.dtype)] += 1
        return func(*args, **(kwargs or {}))


def _step_index_dtypes(model: str, names: list[str]) -> tuple[IndexDtypes, int]:
    """The index dtypes of one timed step, and the batch's edge count."""
    cfg = dataclasses.replace(
        QUICK, model=model, flags=registry.flags_for(names, QUICK.flags), max_steps_per_epoch=None, warmup_steps=3
    )
    trainer = Trainer(cfg)
    batches = trainer.pipeline.batches.epoch(0)
    trainer.step(next(batches), None, trainer.timer)  # warm-up
    batch = next(batches)
    rec = IndexDtypes()
    with rec:
        trainer.step(batch, None, trainer.timer)  # one timed step: gather, transfer, forward, backward, optimizer
    trainer.close()
    return rec, batch.edge_index.size(1)


SCATTER_OPS = {"aten.index_select.default", "aten.index_add.default", "aten.index_add_.default"}


@pytest.mark.parametrize(
    "model,names",
    [
        ("gcn", ["int32"]),
        ("sage", ["int32"]),
        ("gcn", ["int32", "sparse_agg", "csr"]),
        ("sage", ["int32", "sparse_agg", "csr"]),
        ("gcn", ["int32", "cached_norm"]),
        ("gcn", ["int32", "cached_norm", "sparse_agg", "csr"]),
    ],
)
def test_int32_reaches_every_index_kernel_of_the_step(model, names):
    rec, num_edges = _step_index_dtypes(model, names)
    seen = rec.seen
    assert seen, "no index kernel recorded"
    ops = {op for op, _ in seen}
    if "sparse_agg" in names:
        widened = {op: n for (op, dtype), n in seen.items() if dtype == torch.int64}
        assert not widened, f"int64 indices in an int32 step: {widened}"
        assert not rec.widenings, f"int32 indices widened in a sparse step: {rec.widenings}"
        assert any("sparse_c" in op for op in ops), "the CSR product ran with int32 offsets and columns"
    else:
        # CPU scatter path: the only int64 indices are the two per-batch widenings of the edge ids
        # (source, target), each of exactly the batch's edge count, used by index_select / index_add_.
        assert sorted(rec.widenings) == [num_edges, num_edges], rec.widenings
        stray = {key: n for key, n in rec.int64_sizes.items() if key[0] not in SCATTER_OPS or key[1] != num_edges}
        assert not stray, f"int64 indices beyond the documented scatter widening: {stray}"
        assert any(dtype == torch.int32 for (_, dtype) in seen), "int32 reaches the gather and normalization"
        assert "aten.index_add.default" in ops or "aten.index_add_.default" in ops


def test_without_csr_only_the_per_batch_sort_is_int64():
    rec, _ = _step_index_dtypes("gcn", ["int32", "sparse_agg"])
    widened = {op for (op, dtype) in rec.seen if dtype == torch.int64}
    assert widened == {"aten.index_select.default"}, widened  # the argsort permutation, documented
    base, _ = _step_index_dtypes("gcn", [])
    assert base.seen[("aten.index_add.default", torch.int64)] >= 1, "baseline is int64"
    assert not base.widenings


def test_scatter_index_widens_int32_on_cpu_only():
    from gnnbench.models.aggregation import Aggregator, scatter_index

    idx = torch.tensor([2, 0, 1], dtype=torch.int32)
    assert scatter_index(idx).dtype == torch.int64 and scatter_index(idx).tolist() == [2, 0, 1]
    long_idx = idx.long()
    assert scatter_index(long_idx) is long_idx
    ei = torch.tensor([[0, 1, 2], [1, 2, 0]], dtype=torch.int32)
    assert Aggregator(ei, 3, mode="scatter").widened_bytes == 2 * 3 * 8
    assert Aggregator(ei, 3, mode="sparse").widened_bytes == 0
    h = torch.randn(3, 4)
    assert torch.equal(Aggregator(ei, 3).gcn(h), Aggregator(ei.long(), 3).gcn(h))
