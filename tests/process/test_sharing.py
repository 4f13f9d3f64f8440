"""Which configurations can be timed beside another trainer in one process: the table, and every registry
entry's declared answer against it."""

from __future__ import annotations

import dataclasses

import pytest

from gnnbench import registry
from gnnbench.flags import Flags
from gnnbench.process.sharing import (
    SHARING_RULES,
    duet_refusals,
    own_process_reasons,
    paused_producers,
    shares_process,
    times_in_duet,
)


def test_the_baseline_shares_a_process():
    assert own_process_reasons(Flags()) == [] and shares_process(Flags())


@pytest.mark.parametrize(
    "change, field",
    [
        ({"allocator": "jemalloc"}, "allocator"),
        ({"thread_placement": "split", "num_workers": 1}, "thread_placement"),
        ({"batch_cache_epochs": 3}, "batch_cache_epochs"),
    ],
)
def test_each_kind_of_process_work_is_named_with_its_value(change, field):
    reasons = own_process_reasons(Flags().replace(**change))
    assert any(r.startswith(f"{field}={change[field]}: ") for r in reasons), reasons
    assert not shares_process(Flags().replace(**change))


def test_loader_workers_are_paused_instead_of_needing_a_process_of_their_own():
    flags = Flags().replace(num_workers=2, persistent_workers=True, prefetch_factor=4)
    assert own_process_reasons(flags) == [] and shares_process(flags)
    assert paused_producers(flags) == [
        "num_workers=2: its 2 loader worker process(es) suspended (SIGSTOP) while the other trainer steps, whole "
        "epochs measured"
    ]
    assert paused_producers(Flags()) == []
    # the pipelined loader's thread is held between its items (and drained), so over workers both are paused
    both = flags.replace(pipeline_depth=2)
    assert own_process_reasons(both) == [] and [r.split("=")[0] for r in paused_producers(both)] == [
        "num_workers",
        "pipeline_depth",
    ]
    placed = Flags().replace(num_workers=1, thread_placement="split")
    assert [r.split("=")[0] for r in own_process_reasons(placed)] == ["thread_placement"]
    # the workers' batches pinned by a thread of this process (CUDA): that thread cannot be suspended
    pinned = Flags().replace(num_workers=2, pin_memory=True)
    assert [r.split("=")[0] for r in own_process_reasons(pinned)] == ["pin_memory"]
    assert own_process_reasons(Flags().replace(pin_memory=True)) == []  # no workers: nothing pins meanwhile


def test_the_pipelined_loaders_thread_is_held_instead_of_needing_a_process_of_its_own():
    flags = Flags().replace(pipeline_depth=2)
    assert own_process_reasons(flags) == [] and shares_process(flags)
    assert paused_producers(flags) == [
        "pipeline_depth=2: its producer thread held while the other trainer steps (the item in progress finished "
        "on its own side's clock), whole epochs measured"
    ]


def test_without_sigstop_loader_workers_need_a_process_of_their_own(monkeypatch):
    from gnnbench.process import sharing

    monkeypatch.setattr(sharing, "can_suspend_processes", lambda: False)
    reasons = own_process_reasons(Flags().replace(num_workers=2))
    assert reasons[0].startswith("num_workers=2: runs 2 loader worker process(es)")
    assert paused_producers(Flags().replace(num_workers=2)) == []
    # a thread is held without a signal
    assert [r.split("=")[0] for r in paused_producers(Flags().replace(pipeline_depth=2))] == ["pipeline_depth"]


def test_every_rule_reads_a_real_field():
    names = {f.name for f in dataclasses.fields(Flags)}
    for rule in SHARING_RULES:
        assert rule.field in names and rule.why


@pytest.mark.parametrize("name", registry.names())
def test_every_entry_declares_what_the_table_says(name):
    opt = registry.get(name)
    reasons = own_process_reasons(opt.apply(Flags()))
    assert opt.shares_process == (not reasons and opt.nproc == 1), (name, reasons)
    # timed in duet exactly when its only reasons for a process of its own are what a duet carries (allocator)
    assert opt.duet == (bool(reasons) and not duet_refusals(opt.apply(Flags())) and opt.nproc == 1), (name, reasons)
    assert opt.duet == (bool(reasons) and all(r.startswith("allocator=") for r in reasons)), name
    if opt.overlap and opt.shares_process:  # an overlap entry shares only when its producers are held between
        flags = opt.apply(Flags())  # its own steps (or its overlap stays inside a step)
        assert not flags.feature_prefetch and (not flags.pipeline_depth or paused_producers(flags)), name


def test_only_the_allocator_is_carried_by_a_duet():
    assert times_in_duet(Flags().replace(allocator="jemalloc"))
    assert not times_in_duet(Flags()), "nothing to carry: it shares a process"
    both = Flags().replace(allocator="jemalloc", pipeline_depth=2)  # a duet side's one core: nothing to overlap on
    assert not times_in_duet(both) and [r.split("=")[0] for r in duet_refusals(both)] == ["pipeline_depth"]
    assert [r.field for r in SHARING_RULES if r.duet] == ["allocator"]
    # loader workers would share the side's one core with its steps, and nothing pauses them in a duet
    workers = Flags().replace(allocator="glibc_tuned", num_workers=2)
    assert not times_in_duet(workers) and [r.split("=")[0] for r in duet_refusals(workers)] == ["num_workers"]


def test_a_wrong_declaration_is_refused_when_the_entry_is_made():
    opt = next(o for o in registry.REGISTRY.values() if not o.shares_process)
    with pytest.raises(ValueError, match="shares_process=True but what it does to the process says it needs"):
        dataclasses.replace(opt, shares_process=True)
    opt = next(o for o in registry.REGISTRY.values() if o.shares_process)
    with pytest.raises(ValueError, match="says it can share one"):
        dataclasses.replace(opt, shares_process=False)
    with pytest.raises(ValueError, match="duet=False but what it does to the process says a duet carries it"):
        dataclasses.replace(registry.get("tcmalloc"), duet=False)
    with pytest.raises(ValueError, match="duet=True but what it does to the process says a duet cannot time it"):
        dataclasses.replace(registry.get("pipelined_loader"), duet=True)
