"""The :class:`Watch` of a training loop: its options, its clocks and the phase and step bookkeeping, and its
entry and exit (the patches come from :mod:`~gnnbench.advice.watch.patches`, the verdict from
:mod:`~gnnbench.advice.watch.verdict`)."""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator

import torch
from torch.utils.data import get_worker_info

from gnnbench.advice.op_profile import OpProfile, profile_shares
from gnnbench.advice.rules import RULES, Rules
from gnnbench.advice.watch.patches import Patches
from gnnbench.advice.watch.verdict import Verdict
from gnnbench.measure.run import BusySampler
from gnnbench.process import StepUsage
from gnnbench.timing import PHASE_RANGE

# Bound once: the step's instrumented calls run between the loop's own tensor work, which leaves the caches cold,
# and there every global and attribute a call looks up costs a miss (after a 16 MB read a phase event took 17 us
# through the _timed context manager, 10 us opened and closed directly, against 1.5 and 0.7 us in a loop); the
# hot path looks up as little as it can.
_now = time.perf_counter
_thread_id = threading.get_ident


class WatchDone(BaseException):
    """Raised from the loop (at a step boundary) once ``stop_after`` steps were measured (``diagnose --script``
    stops a script this way); a ``BaseException``, like ``SystemExit``, so a loop's ``except Exception`` does not
    swallow it."""


class Watch(Patches, Verdict):
    """Times a user's training loop from the outside (see :mod:`gnnbench.advice.watch`); use :func:`watch`.

    Args:
        loader: The training loader (a ``DataLoader`` or PyG loader), or ``None`` (a full-batch loop, or every
            loader the loop iterates).
        model: The model whose top-level call is the forward phase, or ``None``: the outermost module call.
        optimizer: The optimizer whose ``step`` ends a step, or ``None``: any optimizer's.
        warmup: Steps left out of the figures (first touch, compilation, worker start-up).
        steps: Steps to measure after the warm-up (``None``: every step until the context closes).
        sync: Synchronize CUDA at phase boundaries (the breakdown mode).
        profile_steps: After the measured steps, profile this many more with ``torch.profiler`` and attribute
            the operators above 5% to the phases and code paths they ran in (0: no profile).
        stop_after: Raise :class:`WatchDone` at the step boundary after the measured (and profiled) steps.
        rules: The classification's thresholds.
    """

    def __init__(
        self,
        loader: Any = None,
        model: torch.nn.Module | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        *,
        warmup: int = 5,
        steps: int | None = None,
        sync: bool = False,
        profile_steps: int = 0,
        stop_after: bool = False,
        rules: Rules = RULES,
        device: str | torch.device | None = None,
    ) -> None:
        for name, value, low in (("warmup", warmup, 0), ("profile_steps", profile_steps, 0)):
            if not isinstance(value, int) or value < low:
                raise ValueError(f"watch: {name} must be an integer >= {low} (got {value!r})")
        if steps is not None and (not isinstance(steps, int) or steps < 2):
            raise ValueError(f"watch: steps must be None or an integer >= 2 (got {steps!r})")
        if profile_steps and steps is None:
            raise ValueError("watch: profile_steps profiles the steps after the measured ones: give steps too")
        if stop_after and steps is None:
            raise ValueError("watch: stop_after needs a number of steps to measure")
        self.loader, self.model, self.optimizer = loader, model, optimizer
        self.warmup, self.steps, self.sync = warmup, steps, sync
        self.profile_steps, self.stop_after, self.rules = profile_steps, stop_after, rules
        self._device_set = device is not None
        self.device = torch.device(device) if device is not None else self._guess_device()
        self.records: list[dict[str, float]] = []  # per measured step: phase seconds and "step"
        self.usage = StepUsage(0)  # page faults and user / kernel CPU time of the measured steps
        self.seen = 0  # steps ended (warm-up included)
        self.events = 0  # instrumented events in the current step
        self.event_counts: list[int] = []
        self.passes = 0  # calls of the patched code that passed straight through (a cheap check each)
        self.pass_counts: list[int] = []
        self.hook_calls = 0  # module calls through the watch's forward hooks (the model's, or every module's)
        self.hook_counts: list[int] = []
        self.opt_calls = 0  # optimizer steps through the watch's global step hooks (any optimizer's)
        self.opt_counts: list[int] = []
        self.loaders: list[Any] = []  # the loaders iterated while watching
        self._phase: str | None = None  # the phase now open (phases do not nest; inner calls pass through)
        self._current: dict[str, float] = {}
        self._t_step = 0.0
        self._stack: ExitStack | None = None
        self._prof: Any = None
        self._prof_shares: OpProfile | None = None
        self._path_stack: ExitStack | None = None  # the code paths marked while profiling (watch/paths.py)
        self.marked_paths: list[str] = []
        # with model=None: the outermost module called in the last step an optimizer step ended (the model that
        # trained, not a module called outside the training steps)
        self.outer_model: torch.nn.Module | None = None
        self._step_module: torch.nn.Module | None = None  # the current step's first outermost module call
        self._costs: dict[str, float] | None = None  # seconds each kind of instrumented call costs (COST_KINDS)
        self._module_hooks: tuple[Callable, Callable] | None = None  # the forward hooks, for their calibration
        self._optimizer_hooks: tuple[Callable, Callable] | None = None  # the step hooks, likewise
        self._dummy: dict[str, Any] | None = None  # what the calibration calls (:meth:`_dummies`)
        self._model_depth = 0
        self.seen_phases: dict[str, bool] = {}  # phases that occurred at all (warm-up included)
        self._inner: list[str] = []  # the loader's parts open inside the wait (sample, gather, transform)
        self._forward_opened = False  # the model's pre hook opened the forward phase (its post hook closes it)
        # per optimizer step in progress (a wrapper optimizer's step calls its inner one's: nested), whether it
        # opened the optimizer phase
        self._opt_open: list[bool] = []
        self._in_closure = 0  # closures of step(closure) running (their forward is not a new step's)
        self._prof_left = 0
        self._pending: float | None = None  # when the last optimizer step returned, until the next step begins
        self._batches = 0  # loader batches in the current step (gradient accumulation: several)
        self._range: Any = None  # the profiler range of the open phase
        self._t_phase = 0.0
        self._thread = threading.get_ident()
        self._counted: list[bool] = []  # per open module call (model=None): whether it is the model's
        self.backend: str | None = None
        # wall-clock marks of the watch's course (entered, first step, warm-up, measured, profiled, profile
        # analysed, stopped): where a diagnosis's time goes (WatchReport.wall_s)
        self.timeline: dict[str, float] = {}
        self._busy: BusySampler | None = None  # NVML's device utilization, read at measured step ends (CUDA)

    # ------------------------------------------------------------------ clocks
    def _guess_device(self) -> torch.device:
        if self.model is not None:
            p = next(iter(self.model.parameters()), None)
            if p is not None:
                return p.device
        return torch.device("cpu")

    def _sync(self) -> None:
        if self.sync and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _recording(self) -> bool:
        """Only the thread that entered the watch, in the main process, records (a producer thread of the user's
        own, or a loader worker, runs the patched code too)."""
        return self._stack is not None and _thread_id() == self._thread and get_worker_info() is None

    def _open(self, phase: str) -> bool:
        """Open ``phase`` unless one is already open (an inner call: its time belongs to the outer one); whether
        this call opened it. A phase that begins a new step first closes the one the optimizer ended."""
        if self._stack is None or _thread_id() != self._thread or get_worker_info() is not None:
            return False  # not recording (:meth:`_recording`, inlined: this runs at every phase event)
        if phase != "optimizer":
            if phase in ("wait", "forward") and not self._in_closure and self._opt_open:
                self._opt_open.clear()  # the optimizer step raised: its post hook never closed its phase
                if self._phase == "optimizer":
                    self._close()
            if self._pending is not None and self._phase is None:
                self._close_step()
        if self._phase is not None:
            self.passes += 1
            return False
        self.events += 1
        self.seen_phases[phase] = True
        if self.sync:
            self._sync()
        self._phase = phase
        if self._prof is not None:
            self._range = torch.profiler.record_function(f"{PHASE_RANGE}{phase}")
            self._range.__enter__()
        self._t_phase = _now()
        return True

    def _close(self) -> None:
        phase = self._phase
        if phase is None:
            return
        if self.sync:
            self._sync()
        current = self._current
        current[phase] = current.get(phase, 0.0) + _now() - self._t_phase
        if self._range is not None:
            self._range.__exit__(None, None, None)
            self._range = None
        self._phase = None

    @contextmanager
    def _timed(self, phase: str) -> Iterator[None]:
        """``phase`` around a block (the calls in the step open and close it directly: a generator's context
        manager costs more than the event itself)."""
        opened = self._open(phase)
        try:
            yield
        finally:
            if opened:
                self._close()

    def _step_done(self) -> None:
        """An optimizer's ``step`` returned: the step ends here unless another optimizer steps before the next
        batch or forward (several optimizers in one iteration are one step)."""
        if self._stack is None or _thread_id() != self._thread or get_worker_info() is not None:
            return  # not recording (:meth:`_recording`, inlined)
        if self.sync:
            self._sync()
        self._pending = _now()

    def _close_step(self, *, stopping: bool = True) -> None:
        """Record the step the optimizer ended (at its end time), and stop the loop when the watch is done."""
        end, self._pending = self._pending, None
        if self._step_module is not None:
            self.outer_model, self._step_module = self._step_module, None
        record = dict(self._current, step=end - self._t_step, batches=self._batches)
        self._current, self._t_step, self._batches = {}, end, 0
        events, self.events = self.events, 0
        passes, self.passes = self.passes, 0
        hooks, self.hook_calls = self.hook_calls, 0
        opt_calls, self.opt_calls = self.opt_calls, 0
        self.seen += 1
        if self.seen == 1 or self.seen == self.warmup:
            self.timeline["first step" if self.seen == 1 else "warm-up"] = end
        measuring = self.seen > self.warmup and (self.steps is None or len(self.records) < self.steps)
        # the process's page faults and kernel time per measured step (gnnbench.process.StepUsage)
        self.usage.tick(self.seen - 1 if measuring else -1)
        if measuring:
            self._sample_busy(end)
            self.records.append(record)
            self.event_counts.append(events)
            self.pass_counts.append(passes)
            self.hook_counts.append(hooks)
            self.opt_counts.append(opt_calls)
            if self.steps is not None and len(self.records) == self.steps:
                self.timeline["measured"] = _now()
                if self.profile_steps:
                    self._start_profile()
        elif self._prof is not None:
            self._prof_left -= 1
            if self._prof_left <= 0:
                self._stop_profile()
        done = self.steps is not None and len(self.records) >= self.steps and self._prof is None
        if done and self.stop_after and stopping:
            raise WatchDone(f"watched {self.steps} steps after {self.warmup} warm-up")

    def _sample_busy(self, end: float) -> None:
        """Read the device's busy share (NVML, :class:`BusySampler`) at the end of a measured step; the read is
        kept off the next step's clock (it starts when the read is over). On a CPU nothing is read."""
        t0 = _now()
        if self._busy is None:
            self._busy = BusySampler(self.device)  # the device is known by now (model=None: its first forward)
        if self._busy.reason is None:
            self._busy.sample()
            self._t_step = end + (_now() - t0)

    def _start_profile(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        from gnnbench.advice.watch.paths import mark_pyg_paths

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device.type == "cuda" else [])
        self._path_stack = ExitStack()
        self.marked_paths = mark_pyg_paths(self._path_stack, self.model if self.model is not None else self.outer_model)
        self._prof = profile(activities=activities)
        self._prof.__enter__()
        self._prof_left = self.profile_steps

    def _stop_profile(self) -> None:
        prof, self._prof = self._prof, None
        paths, self._path_stack = self._path_stack, None
        try:
            prof.__exit__(None, None, None)
        finally:
            if paths is not None:
                paths.close()
        self.timeline["profiled"] = _now()
        self._prof_shares = profile_shares(prof, self.device)
        self.timeline["profile analysed"] = _now()

    # ------------------------------------------------------------------ instrumentation
    def __enter__(self) -> "Watch":
        from gnnbench.sampling.pyg_fallback import pyg_sampling_fallback

        self._thread = threading.get_ident()
        self._phase, self._model_depth, self._inner, self._counted = None, 0, [], []
        self._opt_open, self._in_closure, self._step_module = [], 0, None
        self._stack = stack = ExitStack()
        try:
            self.backend = stack.enter_context(pyg_sampling_fallback())
            plain = self._plain_costs()  # the same calls before anything is patched
            self._patch_loaders(stack)
            self._patch_transfer(stack)
            self._patch_model(stack)
            self._patch_backward(stack)
            self._patch_optimizer(stack)
            self._costs = self._instrumentation_costs(plain)
        except BaseException:
            self._stack = None
            stack.close()
            raise
        self._t_step = time.perf_counter()
        self.timeline = {"entered": self._t_step}
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if self._stack is not None and self._pending is not None:
            self._close()
            self._close_step(stopping=False)  # the loop's last step
        stack, self._stack = self._stack, None
        self.timeline["stopped"] = _now()
        self._phase = None
        if self._prof is not None:
            self._stop_profile()
        if stack is not None:
            stack.close()
        return exc_type is WatchDone and self.stop_after


def watch(
    loader: Any = None,
    model: torch.nn.Module | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    **options: Any,
) -> Watch:
    """``with gnnbench.watch(loader, model, optimizer) as w: <the loop>`` then ``print(w.report().format())``.

    Nothing the loop computes changes (the same batches, the same updates); see :class:`Watch` for the
    options and :mod:`gnnbench.advice.watch` for how a step is cut."""
    return Watch(loader, model, optimizer, **options)
