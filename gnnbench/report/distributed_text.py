"""The text of a multi-rank configuration's figures, written once for ``gnnbench run --nproc N``, the ``compare``
table and the HTML report: communication share, bytes on the wire, scaling efficiency, the partition and halo of
partition parallelism, a gradient compression's accuracy against dense data parallel, and the distributed rules
of :func:`gnnbench.advice.distributed.distributed_advice` applied to them.

Each function reads a ``distributed`` block: a run result's, or the summary of a compare row
(:func:`gnnbench.measure.compare.distributed.distributed_summary`), and returns plain text (``n/a`` where a figure is
missing); the report escapes it.
"""

from __future__ import annotations

from typing import Any

from gnnbench.text import human_bytes, percent, pp, ratio_of, seconds

__all__ = [
    "share_text",
    "wire_text",
    "efficiency_text",
    "summary_line",
    "partition_text",
    "compression_text",
    "detail_lines",
    "advice_lines",
]


def share_text(d: dict[str, Any]) -> str:
    """The communication share of the step: ``6%``."""
    return percent(d.get("comm_share"), digits=0)


def wire_text(d: dict[str, Any]) -> str:
    """Bytes on the wire per step and rank, with the share of the dense bytes under compression:
    ``17.5 KiB (50.0% of dense)``."""
    sent, ratio = d.get("bytes_per_step"), d.get("compression_ratio")
    if sent is None:
        return "n/a"
    compressed = ratio is not None and d.get("grad_compression") not in (None, "none")
    return human_bytes(sent) + (f" ({percent(ratio)} of dense)" if compressed else "")


def efficiency_text(d: dict[str, Any]) -> str:
    """The scaling efficiency ``T1 / (N x TN)`` with its interval: ``0.60 [0.50, 0.70]``."""
    return ratio_of(d.get("scaling_efficiency"), unit="", missing="n/a")


def summary_line(d: dict[str, Any]) -> str:
    """Ranks, backend, communication share, bytes on the wire and scaling efficiency in one line."""
    return (
        f"{d['world_size']} ranks ({d.get('backend')}), communication {share_text(d)} of the step, "
        f"{wire_text(d)} per step and rank, scaling efficiency {efficiency_text(d)}"
    )


def partition_text(d: dict[str, Any]) -> str | None:
    """A partition-parallel configuration's partition and halo, and what its efficiency is against (``None`` for
    other modes)."""
    p = d.get("partition")
    if not p:
        return None
    halo = p.get("halo_rows_per_step")
    sent, grad = p.get("halo_bytes_per_step"), p.get("grad_bytes_per_step")
    text = (
        f"partition {p['method']}, {int(p['parts'])} parts in {seconds(p['seconds'])}: edge cut "
        f"{percent(p['edge_cut_fraction'])}, node balance {p['node_balance']:.2f}, edge balance "
        f"{p['edge_balance']:.2f}; per step and rank: halo {'n/a' if halo is None else f'{halo:,.0f} rows'}"
        f" ({'n/a' if sent is None else human_bytes(sent)} sent), "
        f"gradient all-reduce {'n/a' if grad is None else human_bytes(grad)}"
    )
    if "efficiency_against" not in d:  # a single run: no comparison, no efficiency
        return text
    against = d["efficiency_against"]
    return text + (
        f"; efficiency against {against}"
        if against is not None
        else "; efficiency n/a: no single-process full-batch configuration in this sweep"
    )


def compression_text(d: dict[str, Any]) -> str | None:
    """A compression configuration's test accuracy against dense data parallel (``None`` if not measured)."""
    a = d.get("accuracy_vs_dense")
    if not a:
        return None
    return (
        f"test accuracy {percent(a['test'], digits=2)} against {percent(a['dense_test'], digits=2)} with dense "
        f"{a['against']}, each at convergence: {pp(a['delta'], a['low'], a['high'])} over {a['rounds']} paired "
        f"round(s): {a['verdict']}"
    )


def detail_lines(d: dict[str, Any]) -> list[str]:
    """The partition and the compression's accuracy, where the configuration has them."""
    return [text for text in (partition_text(d), compression_text(d)) if text]


def advice_lines(d: dict[str, Any]) -> list[str]:
    """:func:`gnnbench.advice.distributed.distributed_advice` applied to ``d`` against the memory of one of its
    devices (none when the graph's size is unknown)."""
    if d.get("graph_bytes") is None:
        return []
    # imported here: the advice pulls in the training stack, which a table or the report needs only for this
    from gnnbench.advice.distributed import distributed_advice
    from gnnbench.env import device_memory_bytes

    return distributed_advice(
        d, graph_bytes=d["graph_bytes"], device_bytes=device_memory_bytes(str(d.get("device") or "cpu"))
    )
