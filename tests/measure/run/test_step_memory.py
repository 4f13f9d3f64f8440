"""The step-memory tracker (gnnbench.measure.run.step_peak) against allocations of known size."""

import pytest
import torch

from gnnbench.flags import Flags, RunContext
from gnnbench.measure.run import MEMORY_SOURCES, AllocationTracker, unavailable
from gnnbench.measure.run.step_peak import step_peak

MB = 10**6


def test_a_known_allocation_is_counted_and_freeing_it_stops_counting():
    with AllocationTracker() as tracker:
        a = torch.empty(25 * MB)  # 100 MB of float32
        assert tracker.current_bytes == 100 * MB
        del a
        assert tracker.current_bytes == 0, "a freed tensor must stop counting"
        b = torch.ones(10 * MB)  # 40 MB, after the 100 MB were freed
        assert tracker.current_bytes == 40 * MB
    assert tracker.peak_bytes >= 100 * MB and tracker.peak_bytes < 140 * MB
    del b


def test_views_and_in_place_results_are_not_counted_twice():
    with AllocationTracker() as tracker:
        a = torch.zeros(1000, 1000)
        views = [a[10:], a.view(-1), a.t(), a.add_(1), a[::2].mul_(3)]
        assert tracker.current_bytes == 4 * MB
        del a
        assert tracker.current_bytes == 4 * MB, "the storage lives while a view does"
        del views
        assert tracker.current_bytes == 0


def test_storage_from_before_the_region_is_not_counted():
    existing = torch.zeros(1000, 1000)
    with AllocationTracker() as tracker:
        existing.add_(1)
        part = existing[:500]
        part.mul_(2)
    assert tracker.peak_bytes == 0
    del part


def test_backward_allocations_are_counted():
    w = torch.randn(1000, 1000, requires_grad=True)  # 4 MB, made before the region
    with AllocationTracker() as tracker:
        torch.relu(w * 2.0).sum().backward()  # relu saves its 4 MB output for backward
    assert w.grad is not None
    assert tracker.current_bytes >= 4 * MB, "w.grad is made in backward and still alive"
    assert tracker.peak_bytes >= 8 * MB, "relu's saved output and the gradients made in backward"


def test_an_out_argument_resized_in_place_is_counted_at_its_new_size():
    src = torch.ones(1000)
    with AllocationTracker() as tracker:
        out = torch.empty(0)
        torch.cumsum(src, 0, out=out)
        assert out.numel() == 1000
        assert tracker.current_bytes == 4000


def test_only_the_tracked_device_type_counts():
    with AllocationTracker("cuda") as tracker:
        a = torch.empty(10 * MB)
    assert tracker.peak_bytes == 0
    del a


def test_step_peak_on_cpu_uses_the_tracker():
    with step_peak("cpu") as m:
        a = torch.empty(25 * MB)
        del a
        b = torch.empty(5 * MB)
    assert 100 * MB <= m.peak_bytes < 120 * MB
    assert m.source == MEMORY_SOURCES["cpu"]
    del b


def test_compiled_models_are_refused_off_cuda():
    compiled = Flags(compile=True)
    assert [u.field for u in unavailable(compiled, RunContext(device="cpu"))] == ["compile"]
    assert unavailable(compiled, RunContext(device="cuda")) == []
    assert unavailable(Flags(), RunContext(device="cpu")) == []


@pytest.mark.cuda
def test_step_peak_on_cuda_reads_the_allocator():
    dev = torch.device("cuda")
    with step_peak(dev) as m:
        a = torch.empty(25 * MB, device=dev)
        del a
    assert m.peak_bytes >= 100 * MB
    assert m.source == MEMORY_SOURCES["cuda"]
