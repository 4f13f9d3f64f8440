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
- **optimizer**: the optimizer's ``step`` (step hooks); with ``step(closure)`` (LBFGS, Lightning's automatic
  optimization) the forward and backward the closure runs are their own phases, the optimizer's holds the rest;
- **other**: the rest (loss, ``zero_grad``, logging).

A step ends when the optimizer's ``step`` returns (a full-batch loop, with no loader, is cut the same way).
``sync=True`` (the breakdown mode) synchronizes CUDA at every phase boundary, so each phase holds its kernels;
without it nothing synchronizes and the host phases are as the loop sees them. On CUDA, in either mode, the
device's busy share is read from NVML (:class:`~gnnbench.measure.run.device_busy.BusySampler`) at the end of every
measured step, off the step's clock, and the classification reads it instead of the compute phases, as
``gnnbench diagnose`` does (:attr:`WatchReport.device_busy`; where NVML is missing the report says so).

The instrumentation's own cost is estimated at entry (each kind of instrumented call timed on dummies, less the
same call unpatched) and reported as a share of the step (:attr:`WatchReport.overhead`): a lower bound, printed
beside the end-to-end cost ``scripts/watch_overhead.py`` measured (``results/reference/watch-overhead/``).

With ``profile_steps`` the steps after the measured ones run under ``torch.profiler``, with the code paths of
PyG's ``GCNConv`` / ``SAGEConv`` and of dropout marked as gnnbench's own (:mod:`~gnnbench.advice.watch.paths`),
so an operator is attributed to the code that issued it, as ``gnnbench diagnose`` attributes it
(:mod:`gnnbench.advice.op_profile`).
"""

from gnnbench.advice.watch.clock import Watch, WatchDone, watch
from gnnbench.advice.watch.report import WATCH_PHASES, WatchReport
from gnnbench.advice.watch.script import ScriptError, watch_script
from gnnbench.advice.watch.verdict import IN_YOUR_LOOP

__all__ = ["watch", "watch_script", "Watch", "WatchReport", "WatchDone", "ScriptError", "IN_YOUR_LOOP", "WATCH_PHASES"]
