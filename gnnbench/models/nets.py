"""The networks: GCN and GraphSAGE (node classification, and link prediction through the task's decoder),
the dropout kernels, and ``torch.compile``.

Layers use PyG's ``torch_geometric.nn.Linear`` for the transforms and an
:class:`~gnnbench.models.aggregation.Aggregator` (``index_add_`` scatter or a
CSR product) for the aggregation; the split between transform and aggregation
is explicit so that the precision policy can keep the aggregation in fp32
(``partial``) or not (``full``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import Linear

from gnnbench.flags import DROPOUT_KERNELS, Flags
from gnnbench.timing import code_path

if TYPE_CHECKING:
    from gnnbench.models.aggregation import Aggregator
    from gnnbench.models.precision import Precision

__all__ = ["uniform_dropout", "DROPOUTS", "GCN", "GraphSAGE", "MODELS", "build_model", "model_for", "compile_model"]


def uniform_dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Inverted dropout whose keep-mask is one vectorized uniform draw compared with ``p``.

    ``rand_like(x) >= p`` keeps each element with probability ``1 - p``, independently: the same
    distribution as :func:`torch.nn.functional.dropout`'s mask (a different random stream, so not the same
    bits). On CPU ATen's ``bernoulli_(p)`` draws element by element, several times slower than one uniform
    draw (measured in ``docs/models.md``). CUDA's fused dropout is already vectorized, so there it gains
    nothing.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1] (got {p})")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    keep = torch.rand_like(x, dtype=torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else None) >= p
    return x * keep * (1.0 / (1.0 - p))


DROPOUTS: dict[str, Callable[..., Tensor]] = {"bernoulli": F.dropout, "uniform": uniform_dropout}


def _dropped(model: nn.Module, i: int, x: Tensor) -> Tensor:
    """Layer ``i``'s input in fp32, with dropout on hidden representations only (``i > 0``): as PyG's own
    models (``torch_geometric.nn.models.BasicGNN``) apply it, after each hidden layer's activation. Dropping the
    raw input features too slows convergence per epoch on features of few dimensions (``docs/models.md``)."""
    x = x.float()
    if i == 0:
        return x
    with code_path("dropout"):
        return model.drop(x, model.dropout, model.training)


class GCN(nn.Module):
    """Kipf & Welling's GCN: ``H' = D^-1/2 (A+I) D^-1/2 H W`` per layer.

    Each layer is split in two so that layer-wise evaluation (:mod:`gnnbench.models.inference`) can run the
    node-wise part for every node once and the aggregation a chunk of targets at a time:
    :meth:`messages` (dropout and ``H W``) and :meth:`combine` (aggregation, bias, activation).
    """

    def __init__(
        self,
        in_dim: int,
        hidden: int,
        out_dim: int,
        num_layers: int,
        dropout: float = 0.5,
        dropout_kernel: str = "bernoulli",
    ) -> None:
        super().__init__()
        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        self.lins = nn.ModuleList(
            Linear(a, b, bias=False, weight_initializer="glorot") for a, b in zip(dims[:-1], dims[1:])
        )
        self.biases = nn.ParameterList(nn.Parameter(torch.zeros(b)) for b in dims[1:])
        self.dims = tuple(dims)  # layer widths, input first
        self.dropout = dropout
        self.drop = DROPOUTS[dropout_kernel]

    @property
    def num_layers(self) -> int:
        return len(self.lins)

    def messages(self, i: int, x: Tensor, precision: Precision) -> Tensor:
        """Layer ``i``'s node-wise part: ``dropout(x) W`` (what the aggregation sums; no dropout on the raw input
        features, see :func:`_dropped`); fp16-stored input features (``Flags.feature_dtype``) are upcast here."""
        x = _dropped(self, i, x)
        with precision.linear_context(), code_path("linear"):
            return self.lins[i](x)

    def combine(self, i: int, h: Tensor, agg: Aggregator, precision: Precision) -> Tensor:
        """Layer ``i`` for ``agg``'s targets from every source's messages ``h``."""
        x = agg.gcn(h).float() + self.biases[i]
        return F.relu(x) if i < self.num_layers - 1 else x

    def forward(self, x: Tensor, agg: Aggregator, precision: Precision) -> Tensor:
        # the same computation as messages() then combine() per layer, written inline: torch.compile traces this
        # loop, and routing it through the two methods adds graph breaks and changes the compiled training step
        for i, (lin, bias) in enumerate(zip(self.lins, self.biases)):
            x = _dropped(self, i, x)  # fp16-stored features upcast (see messages)
            with precision.linear_context(), code_path("linear"):
                h = lin(x)
            x = agg.gcn(h).float() + bias
            if i < len(self.lins) - 1:
                x = F.relu(x)
        return x


class GraphSAGE(nn.Module):
    """Hamilton et al.'s GraphSAGE (mean): ``h' = W_l mean(h_N) + W_r h``.

    Split per layer like :class:`GCN`: :meth:`messages` (dropout) and :meth:`combine` (the rest).
    """

    def __init__(
        self,
        in_dim: int,
        hidden: int,
        out_dim: int,
        num_layers: int,
        dropout: float = 0.5,
        dropout_kernel: str = "bernoulli",
    ) -> None:
        super().__init__()
        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        self.lin_l = nn.ModuleList(Linear(a, b, bias=True) for a, b in zip(dims[:-1], dims[1:]))
        self.lin_r = nn.ModuleList(Linear(a, b, bias=False) for a, b in zip(dims[:-1], dims[1:]))
        self.dims = tuple(dims)  # layer widths, input first
        self.dropout = dropout
        self.drop = DROPOUTS[dropout_kernel]

    @property
    def num_layers(self) -> int:
        return len(self.lin_l)

    def messages(self, i: int, x: Tensor, precision: Precision) -> Tensor:
        """Layer ``i``'s node-wise part: ``dropout(x)`` between layers (fp16-stored input features upcast, as in
        GCN; see :func:`_dropped`)."""
        return _dropped(self, i, x)

    def combine(self, i: int, x: Tensor, agg: Aggregator, precision: Precision) -> Tensor:
        """Layer ``i`` for ``agg``'s targets from every source's (dropped-out) input ``x``."""
        neigh = agg.mean(x)
        with precision.linear_context(), code_path("linear"):
            out = self.lin_l[i](neigh) + self.lin_r[i](agg.targets(x))
        x = out.float()
        return F.relu(x) if i < self.num_layers - 1 else x

    def forward(self, x: Tensor, agg: Aggregator, precision: Precision) -> Tensor:
        # messages() then combine() per layer, inline for torch.compile (see GCN.forward)
        for i, (lin_l, lin_r) in enumerate(zip(self.lin_l, self.lin_r)):
            x = _dropped(self, i, x)  # fp16-stored features upcast (see messages)
            neigh = agg.mean(x)
            with precision.linear_context(), code_path("linear"):
                out = lin_l(neigh) + lin_r(x)
            x = out.float()
            if i < len(self.lin_l) - 1:
                x = F.relu(x)
        return x


MODELS = {"gcn": GCN, "sage": GraphSAGE}


def build_model(
    name: str,
    in_dim: int,
    hidden: int,
    out_dim: int,
    num_layers: int,
    dropout: float = 0.5,
    dropout_kernel: str = "bernoulli",
) -> nn.Module:
    """Instantiate a model by name (``gcn`` or ``sage``); ``dropout_kernel`` picks how the dropout mask is drawn
    (:data:`DROPOUTS`)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; accepted: {', '.join(MODELS)}")
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1 (got {num_layers})")
    if dropout_kernel not in DROPOUT_KERNELS:
        raise ValueError(
            f"dropout_kernel must be one of {', '.join(map(repr, DROPOUT_KERNELS))} (got {dropout_kernel!r})"
        )
    return MODELS[name](in_dim, hidden, out_dim, num_layers, dropout, dropout_kernel)


def model_for(name: str, flags: Flags, in_dim: int, hidden: int, out_dim: int) -> nn.Module:
    """The run's network (the layer's factory): one layer per hop of ``flags.fanout``, the dropout kernel of
    ``flags.dropout_kernel``; see :func:`build_model`."""
    return build_model(name, in_dim, hidden, out_dim, len(flags.fanout), dropout_kernel=flags.dropout_kernel)


def compile_model(model: nn.Module, flags: Flags) -> tuple[Callable, dict | None]:
    """``(forward, dynamo counters)``: ``torch.compile(model, dynamic=True)`` under ``flags.compile``, else the model."""
    if not flags.compile:
        return model, None
    from torch import _dynamo

    _dynamo.reset()
    _dynamo.utils.counters.clear()  # this run's graphs and breaks only (the counters are process-wide)
    return torch.compile(model, dynamic=True), _dynamo.utils.counters
