"""Every registered optimization: step time (with repeats: real intervals), and what a short run reports:
accuracy, peak host memory, index and transfer bytes (the step time itself is ``time_step``'s)."""

import dataclasses

from gnnbench import registry
from gnnbench.training import Trainer

from . import common


class Optimization:
    """One training step of the baseline and of each optimization.

    Two processes (``rounds``) of at least 5 timed steps each, so a plain ``asv run`` records a real
    interval (asv's ``stats_ci_99``) across processes and steps; warm-up happens in ``setup``.
    """

    params = [common.OPTIMIZATIONS]
    param_names = ["optimization"]
    timeout = 600
    number = 1  # one step per sample
    repeat = (5, 10, 4.0)  # at least 5 and at most 10 samples per process, within about 4 s
    rounds = 2  # processes per benchmark, interleaved by asv
    warmup_time = 0.0  # setup already ran the warm-up steps

    def setup(self, name):
        config = common.config_for(name)
        common.skip_if_unavailable(config, in_this_process=True)  # allocators: measured by track_* (run())
        self.trainer = Trainer(config, graph=common.graph())
        self.steps = self.trainer.steps(epochs=float("inf"))  # the one training loop, one step per call
        for _ in range(3):  # warm-up: first touch, compilation
            next(self.steps)

    def teardown(self, name):
        if hasattr(self, "trainer"):  # asv calls teardown after a skipped (NotImplementedError) setup too
            self.steps.close()
            self.trainer.close()

    def time_step(self, name):
        next(self.steps)


class OptimizationResults:
    """What a short training run with each optimization reports (all runs made once, in ``setup_cache``)."""

    params = [common.OPTIMIZATIONS]
    param_names = ["optimization"]
    timeout = 1200

    def setup_cache(self):
        results = {}
        for name in common.OPTIMIZATIONS:
            try:
                common.skip_if_unavailable(common.config_for(name))
                results[name] = common.run_result(name)
            except NotImplementedError as exc:
                results[name] = str(exc)
        return results

    def setup(self, results, name):
        if isinstance(results[name], str):
            raise NotImplementedError(results[name])
        self.result = results[name]

    def track_accuracy(self, results, name):
        """Test metric at the best validation point of a run that reached its plateau (not mid-training)."""
        return 100.0 * (self.result.get("converged") or self.result["accuracy"])["test"]

    track_accuracy.unit = "%"

    def track_index_bytes(self, results, name):
        return self.result["graph"]["index_bytes"]

    track_index_bytes.unit = "bytes"

    def track_peak_host_memory(self, results, name):
        return self.result["memory"]["host_peak_bytes"]

    track_peak_host_memory.unit = "bytes"

    def track_transfer_bytes(self, results, name):
        return self.result["transfer"]["bytes_h2d_per_batch"]

    track_transfer_bytes.unit = "bytes"


class InterleavedRatio:
    """Each optimization that can share a process with the baseline, timed against it in one process, steps
    interleaved (``gnnbench.measure.run.interleaved``): its per-step speedup, so a commit that erodes a gain shows
    as a moved ratio in asv's history rather than as a drifted absolute time. Entries that change the work per
    step, or need a process of their own, are skipped with the reason; so are commits from before the module."""

    params = [registry.names()]
    param_names = ["optimization"]
    timeout = 900
    number = 1
    repeat = 1
    rounds = 2  # two processes, construction order alternating

    def setup(self, name):
        try:
            from gnnbench.measure.run import time_pair
        except ImportError:  # a commit from before in-process pairs
            raise NotImplementedError("no gnnbench.measure.run.interleaved in this commit") from None
        opt = registry.get(name)
        if not getattr(opt, "shares_process", False):
            raise NotImplementedError(f"{name} needs a process of its own (what it does to the process)")
        if opt.changes_work:
            raise NotImplementedError(f"{name} changes the work per step: a per-step ratio says nothing")
        self.base = common.config_for(common.BASELINE)
        self.other = common.config_for(name)
        if self.other.task != self.base.task:
            self.base = dataclasses.replace(self.base, task=self.other.task)
        common.skip_if_unavailable(self.other, in_this_process=True)
        self.time_pair = time_pair

    def track_speedup(self, name):
        """Baseline step over this entry's step, both in one process, 8 blocks of 4 interleaved steps."""
        pair = self.time_pair(self.base, self.other, graph=common.graph(), blocks=8)
        return pair.interval().ratio

    track_speedup.unit = "x"


class DuetRatio:
    """Each optimization that sets its process (an allocator), timed against the baseline in duet
    (``gnnbench.measure.sweep.duet``: both processes at once, each pinned to its own core at one thread, in two
    parts with the cores swapped): its per-step speedup at one thread, so asv's history shows a moved ratio
    rather than a drifted absolute time. Entries a duet cannot time (they share a process, or need more than a
    core), a runner without two usable cores and commits from before the sweep's duet are skipped with the
    reason."""

    params = [registry.names()]
    param_names = ["optimization"]
    timeout = 900
    number = 1
    repeat = 1
    rounds = 2  # two duets, the opening core alternating

    def setup(self, name):
        try:
            from gnnbench.measure.sweep.duet import duet_pair_refusal, time_duet
        except ImportError:  # a commit from before the sweep's duet
            raise NotImplementedError("no gnnbench.measure.sweep.duet in this commit") from None
        if not getattr(registry.get(name), "duet", False):
            raise NotImplementedError(f"{name} is not timed in duet (what it does to the process)")
        self.base = common.config_for(common.BASELINE)
        self.other = common.config_for(name)
        common.skip_if_unavailable(self.other)
        refused = duet_pair_refusal(self.base, self.other)
        if refused:
            raise NotImplementedError(refused)
        self.time_duet = time_duet
        self.round = 0

    def track_speedup(self, name):
        """Baseline step over this entry's step, in duet, one epoch a side per part."""
        self.round += 1
        return self.time_duet(self.other, self.base, self.round).speedup

    track_speedup.unit = "x"
