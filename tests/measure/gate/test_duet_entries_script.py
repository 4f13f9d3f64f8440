"""``scripts/duet_entries.py``'s choices, without timing anything: which registry entries it times in duet (those
whose only reason for a process of their own is the allocator, and that run here) and what each side's process
environment takes from its allocator."""

from __future__ import annotations

from gnnbench import process, registry
from gnnbench.process.allocators import allocator_unavailable
from gnnbench.training import RunConfig
from tests.helpers import load_script

duet_entries = load_script("duet_entries")


def test_it_times_exactly_the_allocator_entries_that_run_here():
    base = RunConfig()
    chosen = duet_entries.process_setting_entries(base)
    allocator_rows = [
        n
        for n in registry.names()
        if registry.not_applicable(base, registry.combination(n)) is None
        and registry.config_for(base, registry.combination(n)).flags.allocator != base.flags.allocator
    ]
    runnable = [
        n
        for n in allocator_rows
        if allocator_unavailable(registry.config_for(base, registry.combination(n)).flags.allocator) is None
    ]
    assert chosen == runnable
    for n in ("workers", "pipelined_loader", "workers_split", "sparse_agg"):  # producers, placement, shares
        assert n not in chosen


def test_a_sides_environment_holds_its_allocator_and_nothing_of_the_gates():
    base = RunConfig()
    env = duet_entries.allocator_env(base)
    assert env.get(process.PLACED) == base.flags.allocator and "LD_PRELOAD" not in env
    assert not {"PYTHONPATH", "OMP_NUM_THREADS", "PATH"} & set(env)
    for name in duet_entries.process_setting_entries(base):
        config = registry.config_for(base, registry.combination(name))
        got = duet_entries.allocator_env(config)
        assert got[process.PLACED] == config.flags.allocator
        assert set(got) <= set(duet_entries.ALLOCATOR_KEYS)
        assert "LD_PRELOAD" in got or any(k.startswith("MALLOC_") for k in got)
