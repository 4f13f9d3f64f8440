"""Diagnose a training loop gnnbench did not write: ``with gnnbench.watch(loader, model, optimizer) as w:``.

The loop runs unchanged; :class:`Watch` times each of its steps from the outside and, after it, says where the
step goes, what the bottleneck is (:func:`~gnnbench.advice.diagnose.classify`, the same rules as ``gnnbench
diagnose``) and which setting of the user's own loop to change, each tied to the registry entry that measures
it and the ``gnnbench`` command that verifies it on their graph.

How a step is cut (per step, on the host clock, warm-up steps excluded):

- **wait**: inside the loader's ``next()``; for a PyG ``NodeLoader`` / ``LinkLoader`` in the main process it is
  split into **sample** (the sampler), **gather** (``filter_fn``: features and labels sliced into the batch)
  and **transform** (the loader's ``transform``);
  with loader workers it is the main process's wait for the next batch;
- **transfer**: PyG ``Data.to`` / ``Tensor.to`` / ``Tensor.cuda`` calls outside the model;
- **forward**: the watched model's top-level call (forward hooks);
- **backward**: ``torch.autograd.backward`` (what ``loss.backward()`` calls);
- **optimizer**: the optimizer's ``step`` (step hooks);
- **other**: the rest (loss, ``zero_grad``, logging).

A step ends when the optimizer's ``step`` returns (a full-batch loop, with no loader, is cut the same way).
``sync=True`` (the breakdown mode) synchronizes CUDA at every phase boundary, so each phase holds its kernels;
without it nothing synchronizes, the host phases are as the loop sees them and the device's busy share comes
from NVML where it is available. The instrumentation's own cost is estimated at entry (each kind of instrumented
call timed on dummies, less the same call unpatched) and reported as a share of the step
(:attr:`WatchReport.overhead`); ``scripts/watch_overhead.py`` measures it end to end.
"""

from __future__ import annotations

import functools
import statistics
import threading
import time
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator

import torch

from gnnbench import registry
from gnnbench.advice.diagnose import HOT_OP_SHARE, RULES, Finding, HotOp, Rules, attribute_ops, classify, profile_shares
from gnnbench.advice.watch.report import WATCH_PHASES, Advice, WatchReport
from gnnbench.timing import PHASE_RANGE

__all__ = ["watch", "watch_script", "Watch", "WatchReport", "WatchDone", "ScriptError", "IN_YOUR_LOOP",
           "WATCH_PHASES"]

# watch phases -> the bottleneck groups of advice.diagnose (the loader's undivided wait counts as sampling: it
# holds the sampler and the feature gather of the workers, and the advice for it is the loader's; so does the
# user's transform, loader-side work that workers parallelize)
_GROUP_OF = {"wait": "sampling", "sample": "sampling", "transform": "sampling", "gather": "features",
             "transfer": "features",
             "forward": "kernels", "backward": "kernels", "optimizer": "kernels"}

# Registry entry -> the setting of a user's own PyG / PyTorch loop that gives it (the registry entry measures it)
IN_YOUR_LOOP = {
    "int32": "keep edge_index / the CSR as int32 where the kernels accept it (torch.sparse_csr_tensor, pyg-lib)",
    "cached_norm": "GCNConv(..., cached=True) in a full-batch loop (the normalization is computed once)",
    "csr": "build the CSR once (T.ToSparseTensor() or data.csr()) instead of converting per batch",
    "fanout": "NeighborLoader(num_neighbors=[...]) with a smaller last hop (fewer sampled nodes per batch)",
    "labor": "LABOR sampling (DGL GraphBolt's LaborSampler; in PyG, a sampler that shares one variate per "
             "source across the batch): fewer distinct vertices per batch",
    "workers": "DataLoader / NeighborLoader(num_workers=4): sampling in worker processes",
    "persistent_workers": "persistent_workers=True on the loader (workers kept between epochs)",
    "prefetch": "prefetch_factor=4 on the loader (more batches in flight per worker)",
    "pin_memory": "pin_memory=True on the loader and batch.to(device, non_blocking=True)",
    "batch_cache": "reuse each epoch's sampled batches for a few epochs (store the loader's output)",
    "cluster_gcn": "ClusterData + ClusterLoader (Cluster-GCN subgraph batches)",
    "graphsaint": "GraphSAINTRandomWalkSampler (GraphSAINT subgraph batches)",
    "full_batch": "train full batch: model(data.x, data.edge_index) on the whole graph, no loader",
    "features_on_device": "data.x moved to the device once, before the loop (the loader slices it there)",
    "fp16_features": "data.x stored as float16 (upcast inside the model): half the feature bytes gathered",
    "hot_cold": "the training nodes' features on the device, the rest in pinned host memory",
    "uva": "features in pinned host memory read by the device directly (UVA zero-copy)",
    "feature_prefetch": "copy the next batch's features on a side CUDA stream while this one trains",
    "gpu_sampling": "sample on the GPU (pyg-lib's CUDA sampler, or the CSR on the device)",
    "uva_sampling": "the CSR in pinned host memory, sampled by the device (UVA)",
    "pipelined_loader": "a producer thread that samples the next batch while this one trains",
    "sparse_agg": "a sparse adjacency instead of edge_index scatter: T.ToSparseTensor() / SparseTensor "
                  "or a torch.sparse_csr_tensor in the convolutions",
    "norm_estimator": "GraphSAINT's normalization estimates for sampled subgraphs",
    "partial_amp": "torch.autocast(device_type, dtype=torch.bfloat16) around the linear layers only, "
                   "the aggregation in float32",
    "full_amp": "torch.autocast around the whole forward (aggregation in low precision too)",
    "fast_dropout": "dropout fused into the layer (F.dropout(..., inplace=True) or a fused kernel)",
    "compile": "model = torch.compile(model)",
    "degree_negatives": "negatives drawn in proportion to node degree "
                        "(LinkNeighborLoader(neg_sampling=NegativeSampling('binary', weight=deg)))",
    "unchecked_negatives": "negatives drawn without rejecting training positives (PyG's default)",
    "data_parallel": "DistributedDataParallel over several processes, seeds split per rank",
    "topk_compression": "top-k gradient compression in DDP (a communication hook)",
    "fp16_compression": "DDP's fp16_compress_hook",
    "powersgd": "DDP's PowerSGD communication hook",
    "partition_metis": "METIS partitions, one per rank (torch_geometric.loader.ClusterData per rank)",
    "partition_degree": "degree-bucket partitions, one per rank",
}


class WatchDone(BaseException):
    """Raised from the loop (at a step boundary) once ``stop_after`` steps were measured (``diagnose --script``
    stops a script this way); a ``BaseException``, like ``SystemExit``, so a loop's ``except Exception`` does not
    swallow it."""


def _quartiles(xs: list[float]) -> dict[str, float]:
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return {"median": 1e3 * statistics.median(xs), "q1": 1e3 * q[0], "q3": 1e3 * q[2],
            "min": 1e3 * min(xs), "max": 1e3 * max(xs)}


class Watch:
    """Times a user's training loop from the outside (see the module docstring); use :func:`watch`.

    Args:
        loader: The training loader (a ``DataLoader`` or PyG loader), or ``None`` (a full-batch loop, or every
            loader the loop iterates).
        model: The model whose top-level call is the forward phase, or ``None``: the outermost module call.
        optimizer: The optimizer whose ``step`` ends a step, or ``None``: any optimizer's.
        warmup: Steps left out of the figures (first touch, compilation, worker start-up).
        steps: Steps to measure after the warm-up (``None``: every step until the context closes).
        sync: Synchronize CUDA at phase boundaries (the breakdown mode).
        profile_steps: After the measured steps, profile this many more with ``torch.profiler`` and attribute
            the operators above 5% to the phases they ran in (0: no profile).
        stop_after: Raise :class:`WatchDone` at the step boundary after the measured (and profiled) steps.
        rules: The classification's thresholds.
    """

    def __init__(self, loader: Any = None, model: torch.nn.Module | None = None,
                 optimizer: torch.optim.Optimizer | None = None, *, warmup: int = 5, steps: int | None = None,
                 sync: bool = False, profile_steps: int = 0, stop_after: bool = False, rules: Rules = RULES,
                 device: str | torch.device | None = None) -> None:
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
        self._prof_shares: tuple[dict, dict] | None = None
        self._costs: dict[str, float] | None = None  # seconds each kind of instrumented call costs (_COST_KINDS)
        self._module_hooks: tuple[Callable, Callable] | None = None  # the forward hooks, for their calibration
        self._dummy: dict[str, Any] | None = None  # what the calibration calls (:meth:`_dummies`)
        self._model_depth = 0
        self.seen_phases: dict[str, bool] = {}  # phases that occurred at all (warm-up included)
        self._inner: list[str] = []  # the loader's parts open inside the wait (sample, gather, transform)
        self._forward_opened = False  # the model's pre hook opened the forward phase (its post hook closes it)
        self._opt_opened = False
        self._prof_left = 0
        self._pending: float | None = None  # when the last optimizer step returned, until the next step begins
        self._batches = 0  # loader batches in the current step (gradient accumulation: several)
        self._range: Any = None  # the profiler range of the open phase
        self._t_phase = 0.0
        self._thread = threading.get_ident()
        self._counted: list[bool] = []  # per open module call (model=None): whether it is the model's
        self.backend: str | None = None

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
        return (self._stack is not None and threading.get_ident() == self._thread
                and torch.utils.data.get_worker_info() is None)

    def _open(self, phase: str) -> bool:
        """Open ``phase`` unless one is already open (an inner call: its time belongs to the outer one); whether
        this call opened it. A phase that begins a new step first closes the one the optimizer ended."""
        if not self._recording():
            return False
        if phase != "optimizer":
            if self._phase == "optimizer" and phase in ("wait", "forward"):
                self._close()  # the optimizer step raised: its post hook never closed it
            if self._pending is not None and self._phase is None:
                self._close_step()
        if self._phase is not None:
            self.passes += 1
            return False
        self.events += 1
        self.seen_phases[phase] = True
        self._sync()
        self._phase = phase
        if self._prof is not None:
            self._range = torch.profiler.record_function(f"{PHASE_RANGE}{phase}")
            self._range.__enter__()
        self._t_phase = time.perf_counter()
        return True

    def _close(self) -> None:
        if self._phase is None:
            return
        self._sync()
        self._current[self._phase] = self._current.get(self._phase, 0.0) + time.perf_counter() - self._t_phase
        if self._range is not None:
            self._range.__exit__(None, None, None)
            self._range = None
        self._phase = None

    @contextmanager
    def _timed(self, phase: str) -> Iterator[None]:
        opened = self._open(phase)
        try:
            yield
        finally:
            if opened:
                self._close()

    def _step_done(self) -> None:
        """An optimizer's ``step`` returned: the step ends here unless another optimizer steps before the next
        batch or forward (several optimizers in one iteration are one step)."""
        if not self._recording():
            return
        self._sync()
        self._pending = time.perf_counter()

    def _close_step(self, *, stopping: bool = True) -> None:
        """Record the step the optimizer ended (at its end time), and stop the loop when the watch is done."""
        end, self._pending = self._pending, None
        record = dict(self._current, step=end - self._t_step, batches=self._batches)
        self._current, self._t_step, self._batches = {}, end, 0
        events, self.events = self.events, 0
        passes, self.passes = self.passes, 0
        hooks, self.hook_calls = self.hook_calls, 0
        opt_calls, self.opt_calls = self.opt_calls, 0
        self.seen += 1
        measuring = self.seen > self.warmup and (self.steps is None or len(self.records) < self.steps)
        if measuring:
            self.records.append(record)
            self.event_counts.append(events)
            self.pass_counts.append(passes)
            self.hook_counts.append(hooks)
            self.opt_counts.append(opt_calls)
            if self.steps is not None and len(self.records) == self.steps and self.profile_steps:
                self._start_profile()
        elif self._prof is not None:
            self._prof_left -= 1
            if self._prof_left <= 0:
                self._stop_profile()
        done = self.steps is not None and len(self.records) >= self.steps and self._prof is None
        if done and self.stop_after and stopping:
            raise WatchDone(f"watched {self.steps} steps after {self.warmup} warm-up")

    def _start_profile(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device.type == "cuda" else [])
        self._prof = profile(activities=activities)
        self._prof.__enter__()
        self._prof_left = self.profile_steps

    def _stop_profile(self) -> None:
        prof, self._prof = self._prof, None
        prof.__exit__(None, None, None)
        self._prof_shares = profile_shares(prof, self.device)

    # ------------------------------------------------------------------ instrumentation
    def __enter__(self) -> "Watch":
        from gnnbench.sampling.pyg_fallback import pyg_sampling_fallback

        self._thread = threading.get_ident()
        self._phase, self._model_depth, self._inner, self._counted = None, 0, [], []
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
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if self._stack is not None and self._pending is not None:
            self._close()
            self._close_step(stopping=False)  # the loop's last step
        stack, self._stack = self._stack, None
        self._phase = None
        if self._prof is not None:
            self._stop_profile()
        if stack is not None:
            stack.close()
        return exc_type is WatchDone and self.stop_after

    def _patch(self, stack: ExitStack, owner: Any, name: str, wrapper: Callable) -> None:
        had = name in owner.__dict__
        original = owner.__dict__.get(name)
        setattr(owner, name, wrapper)

        def restore() -> None:
            if had:
                setattr(owner, name, original)
            else:
                delattr(owner, name)
        stack.callback(restore)

    def _patch_loaders(self, stack: ExitStack) -> None:
        """Time ``next()`` on the watched loader's iterators (every ``DataLoader``'s with ``loader=None``)."""
        loader_cls = type(self.loader) if self.loader is not None else torch.utils.data.DataLoader
        owner = next((c for c in loader_cls.__mro__ if "__iter__" in c.__dict__), None)
        if owner is None or owner is object:
            raise TypeError(f"watch: the loader ({loader_cls.__name__}) is not iterable")
        original_iter = owner.__dict__["__iter__"]
        watch_ = self

        @functools.wraps(original_iter)
        def __iter__(loader_self: Any) -> Any:
            if watch_.loader is not None and loader_self is not watch_.loader:
                return original_iter(loader_self)
            if loader_self not in watch_.loaders:  # split before the iterator binds filter_fn
                watch_.loaders.append(loader_self)
                watch_._split_pyg_loader(loader_self, stack)
            return _TimedIterator(original_iter(loader_self), watch_)

        self._patch(stack, owner, "__iter__", __iter__)

    def _split_pyg_loader(self, loader: Any, stack: ExitStack) -> None:
        """A PyG NodeLoader / LinkLoader in the main process: the sampler, ``filter_fn`` (the gather) and the
        user's ``transform`` timed apart from the rest of the wait; each restored as it was."""
        sampler = getattr(loader, "node_sampler", None) or getattr(loader, "link_sampler", None)
        if getattr(loader, "num_workers", 0) or sampler is None or not hasattr(loader, "filter_fn"):
            return
        parts = [(sampler, "sample_from_nodes", "sample"), (sampler, "sample_from_edges", "sample"),
                 (loader, "filter_fn", "gather")]
        if getattr(loader, "transform", None) is not None:
            parts.append((loader, "transform", "transform"))
        for obj, name, phase in parts:
            fn = getattr(obj, name, None)
            if fn is None:
                continue

            def timed(*args: Any, _fn: Callable = fn, _phase: str = phase, **kwargs: Any) -> Any:
                return self._inside_wait(_phase, _fn, *args, **kwargs)
            had, before = name in obj.__dict__, obj.__dict__.get(name)
            obj.__dict__[name] = timed

            def restore(_obj: Any = obj, _name: str = name, _had: bool = had, _before: Any = before) -> None:
                if _had:
                    _obj.__dict__[_name] = _before  # an instance attribute (the loader's transform): put back
                else:
                    _obj.__dict__.pop(_name, None)  # a method: the class's again
            stack.callback(restore)

    def _inside_wait(self, phase: str, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        """A part of the loader's ``next()`` timed apart: its time moves from the part that encloses it (the
        wait, or the gather around a transform) to ``phase``."""
        if self._phase != "wait" or not self._recording():
            return fn(*args, **kwargs)
        self.events += 1
        parent = self._inner[-1] if self._inner else "wait"
        self._inner.append(phase)
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            dt = time.perf_counter() - t0
            self._inner.pop()
            self._current[phase] = self._current.get(phase, 0.0) + dt
            self._current[parent] = self._current.get(parent, 0.0) - dt

    def _patch_transfer(self, stack: ExitStack) -> None:
        from torch_geometric.data.data import BaseData

        self._unpatched_to = torch.Tensor.to
        for owner, name in ((BaseData, "to"), (torch.Tensor, "to"), (torch.Tensor, "cuda")):
            original = getattr(owner, name)

            def to(obj: Any, *args: Any, _original: Callable = original, **kwargs: Any) -> Any:
                if self._phase is not None or not self._recording():
                    self.passes += 1  # a call passed through (inside the model): it still costs a check
                    return _original(obj, *args, **kwargs)
                with self._timed("transfer"):
                    return _original(obj, *args, **kwargs)
            self._patch(stack, owner, name, functools.wraps(original)(to))

    def _patch_model(self, stack: ExitStack) -> None:
        """The forward phase: the watched model's call (with ``model=None``, the outermost call of a module
        with parameters: a loss module is not the model). ``always_call`` closes it when the model raises."""
        def pre(module: Any, args: Any) -> None:
            self.hook_calls += 1
            if self.model is None and self._model_depth == 0:
                p = next(iter(module.parameters()), None)
                if p is None:  # a parameterless module called outside the model (a loss): not the forward
                    self._counted.append(False)
                    return
                if self.device.type == "cpu" and not self._device_set:
                    self.device = p.device
            self._counted.append(True)
            self._model_depth += 1
            if self._model_depth == 1:
                self._forward_opened = self._open("forward")

        def post(module: Any, args: Any, output: Any) -> None:
            if not self._counted or not self._counted.pop():
                return
            self._model_depth -= 1
            if self._model_depth == 0 and self._forward_opened:
                self._forward_opened = False
                self._close()

        self._module_hooks = (pre, post)
        if self.model is not None:
            handles = [self.model.register_forward_pre_hook(pre),
                       self.model.register_forward_hook(post, always_call=True)]
        else:
            from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

            handles = [register_module_forward_pre_hook(pre), register_module_forward_hook(post, always_call=True)]
        for h in handles:
            stack.callback(h.remove)

    def _patch_backward(self, stack: ExitStack) -> None:
        original = torch.autograd.backward

        @functools.wraps(original)
        def backward(*args: Any, **kwargs: Any) -> Any:
            with self._timed("backward"):
                return original(*args, **kwargs)
        self._patch(stack, torch.autograd, "backward", backward)

    def _patch_optimizer(self, stack: ExitStack) -> None:
        def mine(opt: Any) -> bool:
            return self.optimizer is None or opt is self.optimizer

        def pre(opt: Any, args: Any, kwargs: Any) -> None:
            self.opt_calls += 1
            if mine(opt):
                self._opt_opened = self._open("optimizer")

        def post(opt: Any, args: Any, kwargs: Any) -> None:
            if not mine(opt):
                return
            if self._opt_opened:
                self._opt_opened = False
                self._close()
            self._step_done()

        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        for h in (register_optimizer_step_pre_hook(pre), register_optimizer_step_post_hook(post)):
            stack.callback(h.remove)

    def _dummies(self) -> dict[str, Any]:
        """Objects the calibration calls (never the user's): a parameterless module, an optimizer of one
        gradient-free tensor (its step does nothing), a one-element tensor, a list to iterate."""
        if self._dummy is None:
            self._dummy = {"module": torch.nn.Identity(), "x": torch.zeros(1),
                           "optimizer": torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.0),
                           "items": [None] * _CALIBRATION_CALLS}
        return self._dummy

    def _plain_costs(self) -> dict[str, float]:
        """Seconds per call of a module, an optimizer step and a list iterator's ``next()``, unpatched."""
        d = self._dummies()
        it = iter(d["items"])
        return {"hook": _per_call(lambda: d["module"](d["x"])), "optimizer": _per_call(d["optimizer"].step),
                "next": _per_call(lambda: next(it))}

    def _instrumentation_costs(self, plain: dict[str, float]) -> dict[str, float]:
        """Seconds each kind of instrumented call adds (:data:`_COST_KINDS`), measured on the calibration's
        dummies with the patches in place and then forgotten: a phase event (opened and closed, as recorded),
        a pass-through of the patched ``Tensor.to`` inside an open phase, a module call through the forward
        hooks, an optimizer step through the step hooks and a loader ``next()`` through the timed iterator (the
        last three with recording off, so their phase event is counted once, as an event), each less the same
        call unpatched (:meth:`_plain_costs`)."""
        d = self._dummies()
        costs = {"event": _per_call(self._dummy_event)}
        x, original = d["x"], self._unpatched_to
        plain_to = _per_call(lambda: original(x, "cpu"))
        with self._timed("other"):  # inside an open phase the patched Tensor.to passes through
            costs["pass"] = max(0.0, _per_call(lambda: x.to("cpu")) - plain_to)
        stack, self._stack = self._stack, None  # recording off: the hooks' and the iterator's own cost only
        handles = []
        try:
            if self.model is not None and self._module_hooks is not None:  # global hooks reach the dummy anyway
                pre, post = self._module_hooks
                handles = [d["module"].register_forward_pre_hook(pre),
                           d["module"].register_forward_hook(post, always_call=True)]
            costs["hook"] = max(0.0, _per_call(lambda: d["module"](x)) - plain["hook"])
            costs["optimizer"] = max(0.0, _per_call(d["optimizer"].step) - plain["optimizer"])
            timed = _TimedIterator(iter(d["items"]), self)
            costs["next"] = max(0.0, _per_call(lambda: next(timed)) - plain["next"])
        finally:
            for h in handles:
                h.remove()
            self._stack = stack
        self._current, self.events, self.passes, self.seen_phases = {}, 0, 0, {}
        self.hook_calls, self.opt_calls, self._batches = 0, 0, 0
        return costs

    def _dummy_event(self) -> None:
        with self._timed("other"):
            pass

    # ------------------------------------------------------------------ the verdict
    def report(self) -> WatchReport:
        """The diagnosis of the measured steps (see :class:`WatchReport`)."""
        from gnnbench.advice.diagnose import PHASE_GROUPS

        if len(self.records) < 2:
            raise ValueError(f"watch measured {len(self.records)} step(s) after {self.warmup} warm-up (the loop "
                             f"ended {self.seen} steps in); a diagnosis needs at least 2: run more steps or lower "
                             "warmup")
        steps = [r["step"] for r in self.records]
        phases = {p: statistics.median(r.get(p, 0.0) for r in self.records) for p in WATCH_PHASES if p != "other"
                  if any(p in r for r in self.records)}
        other = statistics.median(r["step"] - sum(v for k, v in r.items() if k in WATCH_PHASES)
                                  for r in self.records)
        phases["other"] = max(other, 0.0)
        med = statistics.median(steps)
        shares = {g: 0.0 for g in PHASE_GROUPS}
        for p, v in phases.items():
            if p in _GROUP_OF:
                shares[_GROUP_OF[p]] += v / med
        finding = classify(shares, rules=self.rules)
        report = WatchReport(len(self.records), self.warmup, "sync" if self.sync and self.device.type == "cuda"
                             else "end_to_end", str(self.device), _quartiles(steps),
                             {p: 1e3 * v for p, v in phases.items()}, shares, finding)
        report.loader = self._loader_facts()
        if self._prof_shares is not None:
            report.hot_ops = attribute_ops(*self._prof_shares, self._task(), threshold=HOT_OP_SHARE)
        report.advice = self._advice(finding, report.hot_ops)
        if self._costs is not None:
            counts = {"event": self.event_counts, "pass": self.pass_counts, "hook": self.hook_counts,
                      "optimizer": self.opt_counts, "next": [r.get("batches", 0) for r in self.records]}
            report.overhead = sum(self._costs[k] * statistics.median(counts[k]) for k in _COST_KINDS) / med
        report.reproduce = self._reproduce(report)
        if self.backend and self.backend.startswith("gnnbench"):
            report.notes.append(f"PyG's NeighborSampler ran on {self.backend}: its sampling times are gnnbench's "
                                "sampler's, not pyg-lib's")
        per_step = statistics.median(r.get("batches", 0) for r in self.records)
        if per_step > 1:
            report.notes.append(f"{per_step:g} loader batches per optimizer step (gradient accumulation): a step "
                                "here is one optimizer step")
        if "wait" in phases and "sample" not in phases and report.loader.get("workers"):
            report.notes.append("the loader samples in worker processes: 'wait' is the main process's wait for "
                                "the next batch (the workers' own time overlaps the step)")
        return report

    def _loader_facts(self) -> dict[str, Any]:
        if not self.loaders:
            return {"type": "none (full batch)"} if self.records else {}
        loader = self.loaders[0]
        facts: dict[str, Any] = {"type": type(loader).__name__, "workers": getattr(loader, "num_workers", 0),
                                 "batch_size": getattr(loader, "batch_size", None)}
        for name in ("persistent_workers", "pin_memory", "prefetch_factor"):
            if hasattr(loader, name):
                facts[name] = getattr(loader, name)
        sampler = getattr(loader, "node_sampler", None) or getattr(loader, "link_sampler", None)
        if sampler is not None and hasattr(sampler, "num_neighbors"):
            facts["num_neighbors"] = list(sampler.num_neighbors.get_mapped_values())
            facts["sampling backend"] = self.backend
        return facts

    def _task(self) -> str:
        from torch_geometric.loader import LinkLoader

        return "link" if any(isinstance(ld, LinkLoader) for ld in self.loaders) else "node"

    def _convs(self) -> list[Any]:
        from torch_geometric.nn import GCNConv, SAGEConv

        return [m for m in (self.model.modules() if self.model is not None else [])
                if isinstance(m, (GCNConv, SAGEConv))]

    def _not_here(self) -> set[str]:
        """Entries that do not apply to this loop, or that it already uses."""
        from torch_geometric.loader import ClusterLoader, GraphSAINTSampler
        from torch_geometric.nn import GCNConv

        facts = self._loader_facts()
        out = {name for name in IN_YOUR_LOOP if registry.get(name).nproc > 1}
        if self.device.type != "cuda":
            out |= _CUDA_ONLY
        if facts.get("workers"):
            out.add("workers")
        else:
            out |= {"persistent_workers", "prefetch"}  # they need workers first
        if facts.get("persistent_workers"):
            out.add("persistent_workers")
        if facts.get("pin_memory"):
            out.add("pin_memory")
        if not self.loaders:  # a full-batch loop: no loader to tune, no sampled neighbourhood
            out |= {"full_batch", "workers", "persistent_workers", "prefetch", "pin_memory", "batch_cache",
                    "pipelined_loader", "fanout", "cluster_gcn", "graphsaint", "norm_estimator", "feature_prefetch",
                    "gpu_sampling", "uva_sampling", "hot_cold", "uva"}
        if "num_neighbors" not in facts:
            out |= {"fanout", "labor"}
        from torch_geometric.loader import LinkLoader, NodeLoader

        if self.loaders and not any(isinstance(ld, (NodeLoader, LinkLoader, ClusterLoader, GraphSAINTSampler))
                                    for ld in self.loaders):  # a plain DataLoader (graph batches, say)
            out |= _GRAPH_SAMPLING
        data = getattr(self.loaders[0], "data", None) if self.loaders else None
        x = getattr(data, "x", None)
        if isinstance(x, torch.Tensor) and x.device.type != "cpu":
            out.add("features_on_device")
        if isinstance(x, torch.Tensor) and x.dtype in (torch.float16, torch.bfloat16):
            out.add("fp16_features")
        if not (not self.loaders and any(isinstance(m, GCNConv) and not m.cached for m in self._convs())):
            out.add("cached_norm")  # only a full-batch GCN caches its normalization
        if not any(isinstance(ld, GraphSAINTSampler) for ld in self.loaders):
            out.add("norm_estimator")
        if any(isinstance(ld, ClusterLoader) for ld in self.loaders):
            out.add("cluster_gcn")
        if any(isinstance(ld, GraphSAINTSampler) for ld in self.loaders):
            out.add("graphsaint")
        if type(self.model).__name__ == "OptimizedModule":  # torch.compile(model) already
            out.add("compile")
        out.add("unchecked_negatives")  # PyG's link loaders never check their negatives: already the case
        return out

    def _advice(self, finding: Finding, hot_ops: list[HotOp]) -> list[Advice]:
        """Entries for the bottleneck (then the runner-up) in the user's terms, less what does not apply to the
        loop or it already does; entries whose operators were hot in the profile first."""
        skip = self._not_here()
        credit: dict[str, float] = {}
        for op in hot_ops:
            for name in op.entries:
                credit[name] = credit.get(name, 0.0) + op.share
        out: list[Advice] = []
        for group in (finding.bottleneck, finding.secondary):
            if group is None:
                continue
            for opt in registry.for_task(self._task()):
                if group in opt.targets and opt.name not in skip and opt.name in IN_YOUR_LOOP \
                        and not any(a.entry == opt.name for a in out):
                    out.append(Advice(opt.name, IN_YOUR_LOOP[opt.name], group, opt.costs_accuracy,
                                      credit.get(opt.name)))
        out.sort(key=lambda a: (a.target != finding.bottleneck, a.costs_accuracy, -(a.op_share or 0.0)))
        return out

    def _model_options(self) -> tuple[list[str], str | None]:
        """gnnbench options for the watched model (``--model --hidden --layers``), or why there are none."""
        convs = self._convs()
        from torch_geometric.nn import SAGEConv

        if not convs:
            return [], "the model has no GCNConv or SAGEConv layer: the twin trains gnnbench's default model"
        kinds = {type(c) for c in convs}
        if len(kinds) > 1:
            return [], "the model mixes convolution types: the twin trains gnnbench's default model"
        name = "sage" if SAGEConv in kinds else "gcn"
        hops = len(self._loader_facts().get("num_neighbors") or []) or len(convs)
        options = ["--model", name, "--layers", str(hops)]
        if len(convs) > 1:  # a one-layer model's width is its class count
            options[2:2] = ["--hidden", str(convs[0].out_channels)]
        note = None
        if hops != len(convs):
            note = (f"the model has {len(convs)} layers over a {hops}-hop fanout; gnnbench's models have one layer "
                    f"per hop, so the twin trains {hops}")
        return options, note

    def _reproduce(self, report: WatchReport) -> str | None:
        """``gnnbench compare`` on a synthetic twin of the watched loader's graph with the first three entries
        of the advice: their time to accuracy against the baseline, measured."""
        loader = self.loaders[0] if self.loaders else None
        data = getattr(loader, "data", None)
        if data is None or not hasattr(data, "num_nodes"):
            report.notes.append("no graph to mimic (the loader holds no PyG Data): gnnbench compare --preset "
                                "small measures the same entries on a synthetic graph")
            return None
        from gnnbench.graphs.container import Graph
        from gnnbench.graphs.twin import closest_preset

        try:
            twin = closest_preset(Graph.from_pyg(data))
        except (ValueError, TypeError, AttributeError, RuntimeError) as exc:
            report.notes.append(f"no synthetic twin of the loader's graph ({exc})")
            return None
        parts = ["gnnbench compare", twin["cli"]]
        model, why = self._model_options()
        parts += model
        if why:
            report.notes.append(why)
        facts = report.loader
        if facts.get("num_neighbors"):
            parts.append("--fanout " + ",".join(str(k) for k in facts["num_neighbors"]))
            if not model:
                parts.append(f"--layers {len(facts['num_neighbors'])}")
        if facts.get("batch_size"):
            parts.append(f"--batch-size {facts['batch_size']}")
        if self._task() == "link":
            parts.append("--task link")
        if report.advice:
            parts.append("--flags " + ",".join(a.entry for a in report.advice[:3]))
        if self.device.type == "cuda":
            parts.append("--device cuda")
        return " ".join(parts)


# entries of node-level graph sampling (a plain DataLoader of small graphs has none of them)
_GRAPH_SAMPLING = {"labor", "fanout", "cluster_gcn", "graphsaint", "full_batch", "batch_cache", "gpu_sampling",
                   "uva_sampling", "norm_estimator", "hot_cold", "uva", "features_on_device", "feature_prefetch",
                   "fp16_features", "int32", "csr", "pipelined_loader"}
_CUDA_ONLY = {"pin_memory", "features_on_device", "hot_cold", "uva", "feature_prefetch", "gpu_sampling",
              "uva_sampling"}


_CALIBRATION_CALLS = 1000  # calls per kind when the instrumentation's costs are measured at entry
# The kinds of instrumented call the overhead estimate counts per step: phase events, pass-throughs of the patched
# Tensor.to, module calls through the forward hooks, optimizer steps through the step hooks, loader next() calls.
_COST_KINDS = ("event", "pass", "hook", "optimizer", "next")


def _per_call(fn: Callable[[], Any], n: int = _CALIBRATION_CALLS) -> float:
    """Seconds per call of ``fn`` over ``n`` calls."""
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


class _TimedIterator:
    """A loader iterator whose ``next()`` is the ``wait`` phase."""

    def __init__(self, it: Any, watch_: Watch) -> None:
        self._it, self._watch = it, watch_

    def __iter__(self) -> "_TimedIterator":
        return self

    def __next__(self) -> Any:
        with self._watch._timed("wait"):
            item = next(self._it)
        if self._watch._recording():
            self._watch._batches += 1
        return item

    def __len__(self) -> int:
        return len(self._it)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._it, name)


class ScriptError(Exception):
    """A watched script that raised, or that could not be instrumented (with the piece that was missing)."""


def watch_script(argv: list[str], *, steps: int = 30, warmup: int = 5, sync: bool = False, profile_steps: int = 5,
                 device: str | None = None) -> WatchReport:
    """Run the unmodified script ``argv[0]`` (with ``argv[1:]`` as its arguments) as ``__main__`` under a
    :class:`Watch` of every loader, the outermost module call and every optimizer; stop it cleanly after
    ``warmup + steps + profile_steps`` steps and diagnose them (``gnnbench diagnose --script``).

    Raises:
        ScriptError: the script is missing, raised an error, or ended before two measured steps; the message
            names the pieces of a training step that were never seen (loader, forward, backward, optimizer).
    """
    import os
    import runpy
    import sys

    if not argv:
        raise ScriptError("--script needs the path of a training script")
    path = argv[0]
    if not os.path.isfile(path):
        raise ScriptError(f"--script {path!r} is not a file")
    w = Watch(None, None, None, warmup=warmup, steps=steps, sync=sync, profile_steps=profile_steps,
              stop_after=True, device=device)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        with w:
            runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise ScriptError(f"{path} exited with status {exc.code} after {w.seen} step(s)") from None
    except Exception as exc:  # the script's own error: reported, with how far it got
        raise ScriptError(f"{path} raised {type(exc).__name__}: {exc} (after {w.seen} step(s))") from exc
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    if len(w.records) < 2:
        missing = [piece for piece, seen in (("a loader iterated", bool(w.loaders) or w.seen > 0),
                                              ("a model forward", w.seen_phases.get("forward", False)),
                                              ("loss.backward()", w.seen_phases.get("backward", False)),
                                              ("an optimizer step", w.seen > 0)) if not seen]
        what = (f"it never showed {', '.join(missing)}" if missing else
                f"it ended after {w.seen} step(s), {w.warmup} of them warm-up")
        raise ScriptError(f"{path} could not be diagnosed: {what}; gnnbench watches torch DataLoader / PyG loader "
                          "iteration, nn.Module calls, torch.autograd.backward and torch.optim optimizer steps")
    return w.report()


def watch(loader: Any = None, model: torch.nn.Module | None = None, optimizer: torch.optim.Optimizer | None = None,
          **options: Any) -> Watch:
    """``with gnnbench.watch(loader, model, optimizer) as w: <the loop>`` then ``print(w.report().format())``.

    Nothing the loop computes changes (the same batches, the same updates); see :class:`Watch` for the
    options and the module docstring for how a step is cut."""
    return Watch(loader, model, optimizer, **options)
