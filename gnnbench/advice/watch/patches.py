"""The instrumentation of a watch: the patches that time the loop's loaders, transfers, model, backward and
optimizer, and the calibration of their own cost at entry; :class:`Watch` gets them from :class:`Patches`."""

from __future__ import annotations

import functools
import time
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, Callable

import torch

from gnnbench.timing import CODE_PATHS, code_path

_now = time.perf_counter  # bound once (see clock.py: the step's calls run with cold caches)
_profiler_enabled = torch.autograd._profiler_enabled

if TYPE_CHECKING:
    from gnnbench.advice.watch.clock import Watch


_CALIBRATION_CALLS = 1000  # calls per kind when the instrumentation's costs are measured at entry
# The kinds of instrumented call the overhead estimate counts per step: phase events, pass-throughs of the patched
# Tensor.to, module calls through the forward hooks, optimizer steps through the step hooks, loader next() calls.
COST_KINDS = ("event", "pass", "hook", "optimizer", "next")


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
        watch_ = self._watch
        opened = watch_._open("wait")
        try:
            item = next(self._it)
        finally:
            if opened:
                watch_._close()
        if opened or watch_._recording():
            watch_._batches += 1
        return item

    def __len__(self) -> int:
        return len(self._it)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._it, name)


class Patches:
    """The patches and their calibration; a base of :class:`~gnnbench.advice.watch.clock.Watch`, whose clocks
    (``_open``, ``_close``, ``_timed``, ``_recording``) they call."""

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
        parts = [
            (sampler, "sample_from_nodes", "sample"),
            (sampler, "sample_from_edges", "sample"),
            (loader, "filter_fn", "gather"),
        ]
        if getattr(loader, "transform", None) is not None:
            parts.append((loader, "transform", "transform"))
        for obj, name, phase in parts:
            fn = getattr(obj, name, None)
            if fn is None:
                continue
            had, before = name in obj.__dict__, obj.__dict__.get(name)
            obj.__dict__[name] = self._inside_wait(phase, fn)

            def restore(_obj: Any = obj, _name: str = name, _had: bool = had, _before: Any = before) -> None:
                if _had:
                    _obj.__dict__[_name] = _before  # an instance attribute (the loader's transform): put back
                else:
                    _obj.__dict__.pop(_name, None)  # a method: the class's again

            stack.callback(restore)

    def _inside_wait(self, phase: str, fn: Callable) -> Callable:
        """``fn``, a part of the loader's ``next()``, timed apart: its time moves from the part that encloses it
        (the wait, or the gather around a transform) to ``phase``; the sampler and the gather run inside their
        code paths while a profiler records."""
        marked = phase in CODE_PATHS

        def part(*args: Any, **kwargs: Any) -> Any:
            if self._phase != "wait" or not self._recording():
                return fn(*args, **kwargs)
            self.events += 1
            inner = self._inner
            parent = inner[-1] if inner else "wait"
            inner.append(phase)
            t0 = _now()
            try:
                if marked and _profiler_enabled():
                    with code_path(phase):
                        return fn(*args, **kwargs)
                return fn(*args, **kwargs)
            finally:
                dt = _now() - t0
                inner.pop()
                current = self._current
                current[phase] = current.get(phase, 0.0) + dt
                current[parent] = current.get(parent, 0.0) - dt

        return part

    def _patch_transfer(self, stack: ExitStack) -> None:
        from torch_geometric.data.data import BaseData

        self._unpatched_to = torch.Tensor.to
        for owner, name in ((BaseData, "to"), (torch.Tensor, "to"), (torch.Tensor, "cuda")):
            original = getattr(owner, name)

            def to(*args: Any, _original: Callable = original, **kwargs: Any) -> Any:
                # args[0] is the tensor or data object: the arguments are passed on as they came (a pass-through
                # runs tens of times a step, and rebuilding them cost it a third of its time)
                if self._phase is not None or not self._recording():
                    self.passes += 1  # a call passed through (inside the model): it still costs a check
                    return _original(*args, **kwargs)
                opened = self._open("transfer")
                try:
                    return _original(*args, **kwargs)
                finally:
                    if opened:
                        self._close()

            self._patch(stack, owner, name, functools.wraps(original)(to))

    def _patch_model(self, stack: ExitStack) -> None:
        """The forward phase: the watched model's call (with ``model=None``, the outermost call of a module
        with parameters: a loss module is not the model). ``always_call`` closes it when the model raises."""

        def pre(module: Any, args: Any) -> None:
            self.hook_calls += 1
            outermost = self.model is None and self._model_depth == 0
            if outermost:
                p = next(iter(module.parameters()), None)
                if p is None:  # a parameterless module called outside the model (a loss): not the forward
                    self._counted.append(False)
                    return
                if self.device.type == "cpu" and not self._device_set:
                    self.device = p.device
            self._counted.append(True)
            self._model_depth += 1
            if self._model_depth == 1:
                self._forward_opened = self._open("forward")  # (closes the step an optimizer ended first)
            if outermost and self._step_module is None and self._recording():
                # the step's first outermost module: it becomes the model when an optimizer step ends the step
                # (an evaluation after the last step, a layer-wise inference over model.convs, never does)
                self._step_module = module

        def post(module: Any, args: Any, output: Any) -> None:
            if not self._counted or not self._counted.pop():
                return
            self._model_depth -= 1
            if self._model_depth == 0 and self._forward_opened:
                self._forward_opened = False
                self._close()

        self._module_hooks = (pre, post)
        if self.model is not None:
            handles = [
                self.model.register_forward_pre_hook(pre),
                self.model.register_forward_hook(post, always_call=True),
            ]
        else:
            from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

            handles = [register_module_forward_pre_hook(pre), register_module_forward_hook(post, always_call=True)]
        for h in handles:
            stack.callback(h.remove)

    def _patch_backward(self, stack: ExitStack) -> None:
        original = torch.autograd.backward

        @functools.wraps(original)
        def backward(*args: Any, **kwargs: Any) -> Any:
            opened = self._open("backward")
            try:
                return original(*args, **kwargs)
            finally:
                if opened:
                    self._close()

        self._patch(stack, torch.autograd, "backward", backward)

    def _patch_optimizer(self, stack: ExitStack) -> None:
        def pre(opt: Any, args: Any, kwargs: Any) -> tuple[Any, Any] | None:
            self.opt_calls += 1
            if self.optimizer is not None and opt is not self.optimizer:  # not the watched optimizer
                return None
            self._opt_open.append(self._open("optimizer"))
            at = 1 if args and args[0] is opt else 0  # torch passes the step's own arguments, self first
            closure = kwargs.get("closure", args[at] if len(args) > at else None)
            if closure is None or not callable(closure) or not self._recording():
                return None
            if "closure" in kwargs:  # step(closure=...): Lightning's automatic optimization
                return args, {**kwargs, "closure": self._pausing(closure)}
            return (*args[:at], self._pausing(closure), *args[at + 1 :]), kwargs  # step(closure): LBFGS

        def post(opt: Any, args: Any, kwargs: Any) -> None:
            if self.optimizer is not None and opt is not self.optimizer:
                return
            if self._opt_open and self._opt_open.pop():
                self._close()
            if not self._opt_open:  # the outermost step returned (a wrapper's inner step does not end it)
                self._step_done()

        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        self._optimizer_hooks = (pre, post)
        for h in (register_optimizer_step_pre_hook(pre), register_optimizer_step_post_hook(post)):
            stack.callback(h.remove)

    def _pausing(self, closure: Callable) -> Callable:
        """The closure an optimizer's ``step(closure)`` calls (LBFGS, Lightning's automatic optimization), with
        the optimizer's phase paused while it runs: the forward and backward inside it are their own phases,
        the optimizer's phase holds the update alone (the step is still one step, ended when ``step`` returns)."""

        @functools.wraps(closure)
        def paused(*args: Any, **kwargs: Any) -> Any:
            owner = (
                next((i for i, opened in enumerate(self._opt_open) if opened), None)
                if self._phase == "optimizer"
                else None
            )
            if owner is not None:
                self._close()
                self._opt_open[owner] = False
            self._in_closure += 1
            try:
                return closure(*args, **kwargs)
            finally:
                self._in_closure -= 1
                if owner is not None and owner < len(self._opt_open) and self._phase is None:
                    self._opt_open[owner] = self._open("optimizer")

        return paused

    def _dummies(self) -> dict[str, Any]:
        """What the calibration passes to the watch's own hook functions and iterator (never the user's objects):
        a parameterless module, a stand-in optimizer, a one-element tensor, a list to iterate."""
        if self._dummy is None:
            self._dummy = {
                "module": torch.nn.Identity(),
                "optimizer": object(),
                "x": torch.zeros(1),
                "items": [None] * _CALIBRATION_CALLS,
            }
        return self._dummy

    def _plain_costs(self) -> dict[str, float]:
        """Seconds per ``next()`` of a list iterator, unpatched (what the timed iterator adds to)."""
        it = iter(self._dummies()["items"])
        return {"next": _per_call(lambda: next(it))}

    def _instrumentation_costs(self, plain: dict[str, float]) -> dict[str, float]:
        """Seconds each kind of instrumented call adds (:data:`COST_KINDS`), measured at entry and then
        forgotten: a phase event (opened and closed, as recorded); a pass-through of the patched ``Tensor.to``
        inside an open phase, less the unpatched call; the watch's forward hooks and optimizer step hooks,
        called directly on dummies (no module or optimizer runs, so no other code's global hooks fire; torch's
        own hook dispatch is not in it); a loader ``next()`` through the timed iterator, less a plain one. The
        last three with recording off, so their phase event is counted once, as an event."""
        d = self._dummies()
        costs = {"event": _per_call(self._dummy_event)}
        x, original = d["x"], self._unpatched_to
        plain_to = _per_call(lambda: original(x, "cpu"))
        with self._timed("other"):  # inside an open phase the patched Tensor.to passes through
            costs["pass"] = max(0.0, _per_call(lambda: x.to("cpu")) - plain_to)
        stack, self._stack = self._stack, None  # recording off: the hooks' and the iterator's own cost only
        try:
            module, opt, args = d["module"], d["optimizer"], (x,)
            pre, post = self._module_hooks
            costs["hook"] = _per_call(lambda: (pre(module, args), post(module, args, x)))
            opre, opost = self._optimizer_hooks
            costs["optimizer"] = _per_call(lambda: (opre(opt, (), {}), opost(opt, (), {})))
            timed = _TimedIterator(iter(d["items"]), self)
            costs["next"] = max(0.0, _per_call(lambda: next(timed)) - plain["next"])
        finally:
            self._stack = stack
        self._current, self.events, self.passes, self.seen_phases = {}, 0, 0, {}
        self.hook_calls, self.opt_calls, self._batches = 0, 0, 0
        return costs

    def _dummy_event(self) -> None:
        """A phase event as the step's calls make one: opened and closed directly."""
        if self._open("other"):
            self._close()
