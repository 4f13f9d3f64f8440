"""The distributed rules of thumb (``docs/rules.md``) applied to one multi-rank configuration:
:func:`distributed_advice` (gradient compression, partition or replicate).
"""

from __future__ import annotations

from gnnbench import registry
from gnnbench.advice.rules import RULES, Rules
from gnnbench.flags import Flags
from gnnbench.text import human_bytes

__all__ = ["distributed_advice"]


def distributed_advice(summary: dict, *, graph_bytes: int, device_bytes: int, rules: Rules = RULES) -> list[str]:
    """The distributed rules of thumb (``docs/rules.md``) applied to one multi-rank configuration.

    Args:
        summary: The ``distributed`` figures of a compare row (:func:`gnnbench.measure.compare.comparison.compare`) or of a run
            result: ``world_size``, ``parallel``, ``grad_compression``, ``comm_share``, ``compression_ratio``.
        graph_bytes: Bytes of the graph's structure and features (what data parallel replicates per rank).
        device_bytes: Memory of one device (GPU memory; on a CPU, the machine's).
        rules: ``compress_at`` (gradient compression pays only above this communication share) and
            ``fits_device_at`` (a graph within this share of one device is replicated, not partitioned).
    """
    out = []
    share = summary.get("comm_share")
    compression = summary.get("grad_compression") or "none"
    if share is not None:
        if summary.get("parallel") == "partition":
            p = summary.get("partition") or {}
            h, g = p.get("halo_seconds"), p.get("grad_seconds")
            split = (
                f", {h / (h + g):.0%} of it the halo exchange" if h is not None and g is not None and h + g > 0 else ""
            )
            cut = p.get("edge_cut_fraction")
            out.append(
                f"communication is {share:.0%} of the step{split}: halo rows follow the edge cut"
                + (f" ({cut:.1%} of edges here)" if cut is not None else "")
                + f", so a lower-cut partitioner ({_entries(parallel='partition', partitioner='metis')}) cuts "
                "them; gradient compression applies to data parallel's all-reduce only"
            )
        elif compression != "none":
            ratio = summary.get("compression_ratio")
            sent = f", {ratio:.1%} of the dense bytes on the wire" if ratio is not None else ""
            verdict = (
                "worth trying at this share"
                if share >= rules.compress_at
                else f"below {rules.compress_at:.0%}: by the rule of thumb not worth its complexity here"
            )
            out.append(f"communication is {share:.0%} of the step with {compression} compression{sent}; {verdict}")
        elif share >= rules.compress_at:
            out.append(
                f"communication is {share:.0%} of the step, at or above {rules.compress_at:.0%}: try gradient "
                f"compression ({_entries(parallel='data', grad_compression=lambda v: v != 'none')})"
            )
        else:
            out.append(
                f"communication is {share:.0%} of the step, below {rules.compress_at:.0%}: gradient "
                "compression is not worth its complexity here (the all-reduce is not the bottleneck)"
            )
    fits = graph_bytes <= rules.fits_device_at * device_bytes
    size = f"graph and features take {human_bytes(graph_bytes)} of one device's {human_bytes(device_bytes)}"
    if summary.get("parallel") == "partition":
        out.append(
            f"{size}: "
            + (
                f"it fits, so replicate it and train data parallel "
                f"({_entries(parallel='data', grad_compression='none')}) instead of "
                "partitioning: no halo exchange"
                if fits
                else "it does not fit one device: partitioning is the way to scale"
            )
        )
    elif summary.get("parallel") == "data" and not fits:
        out.append(f"{size}: too big to replicate on every rank; partition it ({_entries(parallel='partition')})")
    return out


def _entries(**fields) -> str:
    """The registry entries whose change, applied to the baseline, sets each field as asked (a value, or a
    predicate on the value), in registry order: advice names entries by what they do, never by a hard-coded
    name."""
    names = []
    for opt in registry.REGISTRY.values():
        flags = opt.apply(Flags())
        if all(want(getattr(flags, f)) if callable(want) else getattr(flags, f) == want for f, want in fields.items()):
            names.append(opt.name)
    return ", ".join(names)
