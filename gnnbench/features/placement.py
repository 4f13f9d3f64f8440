"""Feature placement, the layer's entry: the run's feature store from its flags, and what this device cannot run.

Placements (``Flags.feature_placement``) are the classes of :data:`~gnnbench.features.stores.PLACEMENTS`:
``host`` (the baseline: gathered on the host, copied per batch), ``device`` (resident on the device),
``hot_cold`` (the most-read rows on the device, chosen by :func:`~gnnbench.features.hot_set.hot_set_chooser`,
the rest in pinned host memory) and ``uva`` (zero-copy reads of pinned host memory). :func:`features_for`
builds the run's store from its flags (placement, pinning, storage dtype,
:func:`~gnnbench.features.stores.prefetch_features`, :func:`~gnnbench.features.pipelined.pipelined`); every
store counts the bytes it moves host -> device and its hot-hit rate
(:class:`~gnnbench.features.transfer_stats.TransferStats`). The placements other than ``host`` need CUDA:
:func:`unavailable` says so, and building one that cannot run raises
:class:`~gnnbench.flags.UnavailableError` naming the field.

Each placement, the hot set's ranking and what is counted: ``docs/data-pipeline.md``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnnbench.features.stores import PLACEMENTS, HotNodes, PlacedFeatures, field_reasons
from gnnbench.flags import Flags, RunContext, Unavailable

__all__ = ["place_features", "features_for", "unavailable", "FEATURE_DTYPES"]

# Flags.feature_dtype -> the dtype the feature table is stored in.
FEATURE_DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float16": torch.float16}


def unavailable(flags: Flags, ctx: RunContext) -> list[Unavailable]:
    """This layer's answer: which of its fields ``flags`` sets to something ``ctx.device`` cannot run."""
    out = [
        Unavailable(f, r)
        for f, r in field_reasons(flags.feature_placement, flags.pin_memory, flags.feature_prefetch, ctx.device)
    ]
    if flags.pipeline_depth and flags.feature_prefetch:
        out.append(
            Unavailable(
                "pipeline_depth",
                "the pipelined loader already gathers the next batches' features "
                "ahead; feature_prefetch does the same on a side stream: choose one",
            )
        )
    return out


def place_features(
    x: Tensor,
    device: torch.device | str,
    placement: str = "host",
    *,
    hot_nodes: HotNodes | None = None,
    pin_memory: bool = False,
    dtype: str = "float32",
) -> PlacedFeatures:
    """Put ``x`` where ``placement`` says (a key of :data:`PLACEMENTS`), stored as ``dtype``.

    Args:
        x: ``[N, F]`` host features.
        device: Where batches are computed.
        placement: A key of :data:`PLACEMENTS` (``Flags.feature_placement``).
        hot_nodes: See :class:`~gnnbench.features.stores.HotColdFeatures`.
        pin_memory: Stage host-gathered rows in pinned memory.
        dtype: Storage dtype, a key of :data:`FEATURE_DTYPES` (``Flags.feature_dtype``, default
            ``"float32"``). ``"float16"`` halves the table, the gathered rows and the bytes copied to the
            device; gathers return fp16 rows and the models upcast them to fp32 before computing
            (rounding to fp16 keeps about 3 significant digits: relative error at most 2**-11).
    """
    if placement not in PLACEMENTS:
        raise ValueError(f"unknown feature placement {placement!r}; accepted: {', '.join(PLACEMENTS)}")
    if dtype not in FEATURE_DTYPES:
        raise ValueError(f"unknown feature dtype {dtype!r}; accepted: {', '.join(FEATURE_DTYPES)}")
    limit, largest = torch.finfo(FEATURE_DTYPES[dtype]).max, float(x.abs().max()) if x.numel() else 0.0
    if largest > limit:
        raise ValueError(
            f"features do not fit feature_dtype={dtype!r}, which holds |x| <= {limit:g} (got a largest "
            f"|x| of {largest:g}); scale the features or keep 'float32'"
        )
    return PLACEMENTS[placement](x.to(FEATURE_DTYPES[dtype]), device, hot_nodes=hot_nodes, pin_memory=pin_memory)


def features_for(
    x: Tensor, flags: Flags, device: torch.device | str, *, hot_nodes: HotNodes | None = None, full_batch: bool = False
) -> PlacedFeatures:
    """The run's feature store (the layer's factory): :func:`place_features` with the flags' placement, pinning
    and storage dtype, prefetching with ``flags.feature_prefetch``.

    Args:
        x: ``[N, F]`` host features.
        flags: The run's flags.
        device: Where batches are computed.
        hot_nodes: See :class:`~gnnbench.features.stores.HotColdFeatures` (:func:`~gnnbench.features.hot_set.hot_set_chooser` makes it).
        full_batch: The run trains full batch: every step reads every row in order (host features are then
            kept on the device after the first step).
    """
    store = place_features(
        x, device, flags.feature_placement, hot_nodes=hot_nodes, pin_memory=flags.pin_memory, dtype=flags.feature_dtype
    )
    store.prefetch = flags.feature_prefetch
    store.pipeline_depth = flags.pipeline_depth
    store.full_batch = full_batch
    return store
