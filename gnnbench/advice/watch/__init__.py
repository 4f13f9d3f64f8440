"""Diagnose a training loop gnnbench did not write: ``with gnnbench.watch(loader, model, optimizer) as w:``.

The loop runs unchanged; :class:`Watch` times each of its steps from the outside and, after it, says where the
step goes, what the bottleneck is (:func:`~gnnbench.advice.rules.classify`, the same rules as ``gnnbench
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

from gnnbench.advice.watch.clock import Watch, WatchDone, watch
from gnnbench.advice.watch.report import WATCH_PHASES, WatchReport
from gnnbench.advice.watch.script import ScriptError, watch_script
from gnnbench.advice.watch.verdict import IN_YOUR_LOOP

__all__ = ["watch", "watch_script", "Watch", "WatchReport", "WatchDone", "ScriptError", "IN_YOUR_LOOP",
           "WATCH_PHASES"]
