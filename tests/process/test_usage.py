"""The measured steps' page faults and kernel time (``StepUsage``), and how ``diagnose`` reads allocation cost from
them: the finding, and the allocator entries credited with the kernel's share (driven with made-up usage, so no
test depends on a machine's timings)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gnnbench.advice.recommend import recommend
from gnnbench.advice.rules import RULES, Finding, allocation_finding
from gnnbench.process import usage as usage_mod
from gnnbench.process.usage import StepUsage, Usage
from tests.helpers import QUICK


def _fake_clock(monkeypatch, snapshots):
    it = iter(snapshots)
    monkeypatch.setattr(usage_mod, "resource_usage", lambda: next(it))


def test_step_usage_counts_measured_steps_and_leaves_out_evaluations(monkeypatch):
    snaps = [
        Usage(0, 0, 0.0, 0.0),
        Usage(100, 0, 1.0, 0.1),  # step 0: warm-up
        Usage(300, 0, 2.0, 0.3),  # step 1: 200 faults, 1.0 user, 0.2 kernel
        Usage(1300, 1, 9.0, 2.0),  # step 2: evaluated in between: left out
        Usage(1500, 1, 10.0, 2.2),
    ]  # step 3: 200 faults, 1.0 user, 0.2 kernel
    _fake_clock(monkeypatch, snaps[1:])
    u = StepUsage(warmup_steps=1)
    u.tick(0, evaluations=0)
    u.tick(1, evaluations=0)
    u.tick(2, evaluations=1)
    u.tick(3, evaluations=1)
    s = u.summary()
    assert s["steps"] == 2 and s["minor_faults_per_step"] == 200 and s["major_faults_per_step"] == 0
    assert s["kernel_seconds_per_step"] == pytest.approx(0.2) and s["kernel_share"] == pytest.approx(0.2 / 1.2)
    assert s["faulted_bytes_per_step"] == 200 * usage_mod.PAGE_BYTES


def test_no_summary_before_a_measured_step():
    assert StepUsage(warmup_steps=5).summary() is None


def test_allocation_finding_names_the_cost_only_above_the_threshold():
    heavy = {"kernel_share": 0.2, "minor_faults_per_step": 80_000, "faulted_bytes_per_step": 80_000 * 4096}
    text = allocation_finding(heavy, "glibc")
    assert "20% of their CPU time in the kernel" in text and "80,000 page faults" in text and "glibc" in text
    assert allocation_finding({"kernel_share": RULES.allocation_kernel_at / 2}, "glibc") is None
    assert allocation_finding(None, "glibc") is None
    assert "an allocator gnnbench does not set" in allocation_finding(heavy, None)


def _finding() -> Finding:
    return Finding("kernels", 0.8, None, None, 0.8, "compute phases", "test")


def _recs(usage):
    return {r.name: r for r in recommend(_finding(), {"kernels": 0.8}, 100.0, QUICK, torch.device("cpu"), usage=usage)}


def test_allocator_entries_are_credited_with_the_kernel_share():
    recs = _recs({"kernel_share": 0.25, "minor_faults_per_step": 5000.0})
    assert recs["glibc_tuned"].op_share == 0.25 and recs["glibc_tuned"].caveat is None
    assert "25% of their CPU time in the kernel" in recs["glibc_tuned"].motivation
    low = _recs({"kernel_share": 0.01, "minor_faults_per_step": 10.0})
    assert low["glibc_tuned"].caveat and "little allocation cost" in low["glibc_tuned"].caveat


def test_an_allocator_the_process_runs_already_is_not_recommended():
    config = dataclasses.replace(QUICK, flags=QUICK.flags.replace(allocator="glibc_tuned"))
    recs = recommend(
        _finding(),
        {"kernels": 0.8},
        100.0,
        config,
        torch.device("cpu"),
        usage={"kernel_share": 0.3, "minor_faults_per_step": 1.0},
    )
    assert "glibc_tuned" not in {r.name for r in recs}


def test_workers_with_the_split_carry_no_core_caveat():
    finding = Finding("sampling", 0.6, None, None, 0.3, "compute phases", "test")
    recs = {r.name: r for r in recommend(finding, {"sampling": 0.6}, 100.0, QUICK, torch.device("cpu"), cores=(2, 2))}
    assert recs["workers"].caveat and "workers_split" in recs["workers"].caveat
    assert recs["workers_split"].caveat is None
