"""The text primitives (gnnbench.text) and the one distributed formatter (gnnbench.report.distributed_text) that the
run table, the compare table and the report share."""

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gnnbench.text import (
    ONE_ROUND,
    absent,
    human_bytes,
    milliseconds,
    noise_floor,
    percent,
    pp,
    ratio,
    ratio_of,
    seconds,
)

NAN = float("nan")


def test_absent_is_none_or_nan():
    assert absent(None) and absent(NAN)
    assert not absent(0.0) and not absent(0) and not absent(math.inf)


@pytest.mark.parametrize(
    "n,text",
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (1.5 * 2**20, "1.5 MiB"),
        (3 * 2**30, "3.0 GiB"),
        (5 * 2**40, "5120.0 GiB"),
        (-2048, "-2.0 KiB"),
    ],
)
def test_human_bytes_picks_the_binary_unit(n, text):
    assert human_bytes(n) == text


@given(st.integers(min_value=1024, max_value=2**50))
def test_human_bytes_rounds_to_a_tenth_of_its_unit(n):
    value, unit = human_bytes(n).split()
    scale = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[unit]
    assert float(value) >= 1.0
    assert abs(float(value) * scale - n) <= 0.05 * scale + 1e-9 * n


def test_percent_and_its_missing_case():
    assert percent(0.1234) == "12.3%" and percent(0.1234, digits=0) == "12%" and percent(0.8, digits=2) == "80.00%"
    assert percent(None) == "n/a" and percent(NAN) == "n/a"
    assert percent(None, missing="n/a (no NVML)") == "n/a (no NVML)"


def test_ratio_with_its_interval_one_round_and_missing():
    assert ratio(1.234, 1.1, 1.38) == "1.23x [1.10, 1.38]"
    assert ratio(1.234) == "1.23x" and ratio(1.234, NAN, NAN) == "1.23x", "one round: the ratio alone"
    assert ratio(1.234, NAN, NAN, one_round=True) == f"1.23x {ONE_ROUND}" == "1.23x (one round: no interval)"
    assert ratio(1.234, 1.1, 1.38, one_round=True) == "1.23x [1.10, 1.38]"
    assert ratio(None) == "-" and ratio(NAN, 1.0, 2.0) == "-" and ratio(None, missing="n/a") == "n/a"
    assert ratio(3.94, 3.46, 4.4, digits=1) == "3.9x [3.5, 4.4]"
    assert ratio(0.6, 0.5, 0.7, unit="") == "0.60 [0.50, 0.70]"


def test_ratio_of_reads_a_paired_ratio():
    d = {"ratio": 1.49, "low": 1.33, "high": 1.67, "significant": True, "rounds": 5}
    assert ratio_of(d) == "1.49x [1.33, 1.67]"
    assert ratio_of({"ratio": 1.06, "low": NAN, "high": NAN}, one_round=True) == "1.06x (one round: no interval)"
    assert ratio_of(None) == "-" and ratio_of({}) == "-" and ratio_of(None, missing="n/a") == "n/a"
    assert ratio_of({"ratio": 0.6, "low": 0.5, "high": 0.7}, unit="") == "0.60 [0.50, 0.70]"
    from gnnbench.measure.compare import PairedRatio  # a compare row's ratio: read by attribute

    assert (
        ratio_of(PairedRatio(ratio=1.49, low=1.33, high=1.67, significant=True, rounds=5, p=0.01, log_ratios=[]))
        == "1.49x [1.33, 1.67]"
    )


def test_pp_is_a_signed_delta_in_points_with_its_interval():
    assert pp(-0.0012, -0.004, 0.0016) == "-0.12 pp [-0.40, +0.16]"
    assert pp(0.0005, -0.0018, 0.0028, unit="") == "+0.05 [-0.18, +0.28]"
    assert pp(0.0) == "+0.00 pp" and pp(-0.0254, NAN, NAN) == "-2.54 pp"
    assert pp(0.031, digits=1) == "+3.1 pp"


def test_noise_floor_is_a_percentage_either_way():
    assert noise_floor(1.04) == "+-4.0%" and noise_floor(1.176) == "+-17.6%"
    assert noise_floor(NAN) == "n/a" and noise_floor(None) == "n/a"
    assert noise_floor(NAN, missing="not estimable") == "not estimable"


def test_durations():
    assert seconds(1.234) == "1.23 s" and seconds(0.0456, digits=3) == "0.046 s"
    assert milliseconds(0.01234) == "12.3 ms" and milliseconds(1.5, digits=0) == "1500 ms"


# ------------------------------------------------------------------ the distributed formatter
def _block(**extra) -> dict:
    return {
        "world_size": 2,
        "backend": "gloo",
        "parallel": "data",
        "grad_compression": "topk",
        "comm_share": 0.4,
        "bytes_per_step": 736.0,
        "dense_bytes_per_step": 35880.0,
        "compression_ratio": 736 / 35880,
        "scaling_efficiency": {"ratio": 0.6, "low": 0.5, "high": 0.7},
        **extra,
    }


PARTITION = {
    "method": "metis",
    "parts": 2,
    "seconds": 1.5,
    "edge_cut_fraction": 0.25,
    "node_balance": 1.01,
    "edge_balance": 1.1,
    "halo_rows_per_step": 1200.0,
    "halo_bytes_per_step": 4096.0,
    "grad_bytes_per_step": 2048.0,
}


def test_distributed_figures():
    from gnnbench.report.distributed_text import efficiency_text, share_text, summary_line, wire_text

    d = _block()
    assert share_text(d) == "40%" and wire_text(d) == "736 B (2.1% of dense)"
    assert efficiency_text(d) == "0.60 [0.50, 0.70]"
    assert summary_line(d) == (
        "2 ranks (gloo), communication 40% of the step, 736 B (2.1% of dense) per step and "
        "rank, scaling efficiency 0.60 [0.50, 0.70]"
    )
    dense = _block(
        grad_compression="none",
        bytes_per_step=35880.0,
        compression_ratio=1.0,
        comm_share=None,
        scaling_efficiency={"ratio": 0.58, "low": NAN, "high": NAN},
    )
    assert wire_text(dense) == "35.0 KiB" and share_text(dense) == "n/a"
    assert efficiency_text(dense) == "0.58", "one round: no interval, and never 'nan'"
    assert wire_text(_block(bytes_per_step=None)) == "n/a" and efficiency_text(_block(scaling_efficiency=None)) == "n/a"


def test_partition_text_says_what_its_efficiency_is_against():
    from gnnbench.report.distributed_text import partition_text

    assert partition_text(_block()) is None
    run = partition_text(_block(partition=PARTITION))  # a single run: no comparison, no efficiency clause
    assert run == (
        "partition metis, 2 parts in 1.50 s: edge cut 25.0%, node balance 1.01, edge balance 1.10; per "
        "step and rank: halo 1,200 rows (4.0 KiB sent), gradient all-reduce 2.0 KiB"
    )
    assert (
        partition_text(_block(partition=PARTITION, efficiency_against="whole graph"))
        == run + "; efficiency against whole graph"
    )
    assert partition_text(_block(partition=PARTITION, efficiency_against=None)).endswith(
        "; efficiency n/a: no single-process full-batch configuration in this sweep"
    )
    missing = partition_text(_block(partition={**PARTITION, "halo_rows_per_step": None, "halo_bytes_per_step": None}))
    assert "halo n/a (n/a sent)" in missing


def test_compression_text():
    from gnnbench.report.distributed_text import compression_text

    assert compression_text(_block()) is None
    a = {
        "against": "dp",
        "delta": -0.001,
        "low": -0.004,
        "high": 0.002,
        "rounds": 3,
        "verdict": "no accuracy cost",
        "test": 0.8,
        "dense_test": 0.801,
    }
    assert compression_text(_block(accuracy_vs_dense=a)) == (
        "test accuracy 80.00% against 80.10% with dense dp, each at convergence: -0.10 pp [-0.40, +0.20] over 3 "
        "paired round(s): no accuracy cost"
    )
    one = compression_text(_block(accuracy_vs_dense={**a, "low": NAN, "high": NAN, "rounds": 1}))
    assert "-0.10 pp over 1 paired round(s)" in one


def test_run_compare_and_report_show_the_same_distributed_figures():
    """One formatter: the run's block, the compare table and the report print the same share, bytes and details."""
    from gnnbench.cli.distributed import format_ranks
    from gnnbench.cli.tables import format_distributed
    from gnnbench.measure.compare import Comparison, ComparisonRow
    from gnnbench.report.distributed_text import partition_text, share_text, wire_text
    from gnnbench.report.sections.table import distributed_html

    d = _block(
        partition=PARTITION,
        efficiency_against="whole graph",
        payload_formula="8 k",
        per_rank=[
            {"rank": 0, "step_median": 0.0123, "compute_median": 0.01, "allreduce_median": 0.002, "comm_share": 0.16},
            {"rank": 1, "step_median": None},
        ],
    )
    run = format_ranks(d)
    assert run.splitlines() == [
        "ranks: 2 (gloo), parallel=data, grad_compression=topk",
        "  rank 0: step 12.3 ms, compute 10.0 ms, all-reduce 2.0 ms (16% of the step)",
        "  rank 1: no measured steps",
        "  bytes on the wire per step and rank: 736 B (2.1% of dense); 8 k",
        "  communication share of the step (mean over ranks): 40%",
    ]
    row = ComparisonRow(label="topk", distributed=d)
    compare = "\n".join(format_distributed([row]))
    html = distributed_html(Comparison([row], 1, None, "", {}))
    for figure in (share_text(d), wire_text(d)):
        assert figure in run and figure in compare and figure in html
    assert partition_text(d) in compare and partition_text(d) in html
    assert re.search(r"<td>40%</td><td>736 B \(2\.1% of dense\)</td><td>0\.60 \[0\.50, 0\.70\]</td>", html)
