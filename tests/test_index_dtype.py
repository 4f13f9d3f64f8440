"""int32 end to end: with ``index_dtype="int32"`` every index that reaches a kernel of the training step
(gather, transfer, forward, backward, optimizer) is int32 -- node ids, edge ids, local edges, the batch's CSR.

Recorded at the dispatcher (``TorchDispatchMode``), so a widening anywhere in the step is caught. The one
documented exception: without ``csr`` the sparse path sorts the edges by target per batch, and
``torch.argsort`` returns an int64 permutation (that per-batch conversion is what ``csr`` removes).
"""

import collections

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gnnbench import registry
from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec
from gnnbench.training import RunConfig, Trainer

# op name -> positions of its index arguments
INDEX_ARGS = {
    "aten.index_select.default": (2,), "aten.index_add.default": (2,), "aten.index_add_.default": (2,),
    "aten.index_copy_.default": (2,), "aten.index_copy.default": (2,), "aten.index_fill_.int_Scalar": (2,),
    "aten.gather.default": (2,), "aten.scatter_add.default": (2,), "aten.scatter_add_.default": (2,),
    "aten.scatter_reduce.two": (2,), "aten.scatter_reduce_.two": (2,),
    "aten._sparse_csr_tensor_unsafe.default": (0, 1), "aten.sparse_compressed_tensor.comp_plain_value_size": (0, 1),
    "aten._sparse_compressed_tensor_unsafe.default": (0, 1), "aten.bincount.default": (0,),
}


class IndexDtypes(TorchDispatchMode):
    """Counts (op, index dtype) over every index argument dispatched."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: collections.Counter = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        for i in INDEX_ARGS.get(name, ()):
            if i < len(args) and isinstance(args[i], torch.Tensor):
                self.seen[(name, args[i].dtype)] += 1
        if name == "aten.index.Tensor":
            for t in args[1]:
                if isinstance(t, torch.Tensor) and t.dtype != torch.bool:
                    self.seen[(name, t.dtype)] += 1
        return func(*args, **(kwargs or {}))


def _step_index_dtypes(model: str, names: list[str]) -> collections.Counter:
    cfg = RunConfig(spec=GraphSpec.preset("tiny", num_nodes=3000), model=model, hidden=16, epochs=1,
                    flags=registry.flags_for(names, Flags(fanout=(5, 3), batch_size=96)))
    trainer = Trainer(cfg)
    batches = trainer.source.epoch(0)
    trainer._train_on(next(batches))  # warm-up
    batch = next(batches)
    rec = IndexDtypes()
    with rec:
        trainer._train_on(batch)  # one timed step: gather, transfer, forward, backward, optimizer
    trainer.close()
    return rec.seen


@pytest.mark.parametrize("model,names", [
    ("gcn", ["int32"]), ("sage", ["int32"]), ("gcn", ["int32", "sparse_agg", "csr"]),
    ("sage", ["int32", "sparse_agg", "csr"]), ("gcn", ["int32", "cached_norm"]),
    ("gcn", ["int32", "cached_norm", "sparse_agg", "csr"]),
])
def test_int32_reaches_every_index_kernel_of_the_step(model, names):
    seen = _step_index_dtypes(model, names)
    assert seen, "no index kernel recorded"
    widened = {op: n for (op, dtype), n in seen.items() if dtype == torch.int64}
    assert not widened, f"int64 indices in an int32 step: {widened}"
    ops = {op for op, _ in seen}
    if "sparse_agg" in names:
        assert any("sparse_c" in op for op in ops), "the CSR product ran with int32 offsets and columns"
    else:
        assert "aten.index_add.default" in ops or "aten.index_add_.default" in ops


def test_without_csr_only_the_per_batch_sort_is_int64():
    seen = _step_index_dtypes("gcn", ["int32", "sparse_agg"])
    widened = {op for (op, dtype) in seen if dtype == torch.int64}
    assert widened == {"aten.index_select.default"}, widened  # the argsort permutation, documented
    assert _step_index_dtypes("gcn", [])[("aten.index_add.default", torch.int64)] >= 1, "baseline is int64"
