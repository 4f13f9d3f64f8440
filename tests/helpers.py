"""What test modules import: the quick training configuration, the batch-edge check and the one way a test
skips because a configuration cannot run here (``from tests.helpers import QUICK, skip_unless_runs``).
Fixtures and pytest hooks live in ``tests/conftest.py``, which pytest loads itself.
"""

import dataclasses
from pathlib import Path

import pytest
import torch

from gnnbench import registry
from gnnbench.flags import Flags, RunContext, format_reasons
from gnnbench.graphs import GraphSpec
from gnnbench.measure.run import GraphInfo, Memory, Point, RunResult, StepCounts, Transfer
from gnnbench.training import RunConfig, config_unavailable
from gnnbench.training.availability import reasons

ROOT = Path(__file__).resolve().parents[1]  # the repository
DATA = ROOT / "tests" / "data"  # files the tests read (recorded results, old schemas)

# The quick training configuration: tiny at 3,000 nodes, a small fanout and batch, one epoch of at most 6 steps
# (2 of them warm-up) with a small model. A module that needs a variant states how it differs:
# ``dataclasses.replace(QUICK, ...)``.
QUICK = RunConfig(
    spec=GraphSpec.preset("tiny", num_nodes=3000),
    flags=Flags(fanout=(5, 3), batch_size=96),
    epochs=1,
    max_steps_per_epoch=6,
    warmup_steps=2,
    hidden=16,
)


def check_batch_edges(graph, batch) -> None:
    """Every edge of ``batch``, mapped back to global ids, is the graph's edge its ``e_id`` names."""
    assert torch.equal(graph.edge_index[:, batch.e_id], batch.n_id[batch.edge_index])


def unavailable_here(
    what: RunConfig | Flags | str, *, device: str | torch.device | None = None, **context
) -> str | None:
    """Why ``what`` cannot run here, in the layers' words, or ``None`` when it can.

    The answer is the layers' own (:func:`gnnbench.training.availability.check`): the one the trainer refuses
    with, ``run()`` reports and the registry shows.

    Args:
        what: A :class:`RunConfig` (on its own device, task, model, graph size and ``nproc``), a :class:`Flags`
            (in ``RunContext(device, **context)``), or a registry entry's name (applied to ``Flags()``, on its
            own task and ``nproc``: :meth:`~gnnbench.registry.Optimization.unavailable`).
        device: Where it would run. Default: the configuration's device; ``"cpu"`` for flags and entries.
        **context: For flags, further :class:`RunContext` fields (``task``, ``model``, ``world_size``, ...);
            for an entry, ``world_size``. A configuration carries its own.
    """
    if isinstance(what, RunConfig):
        if context:
            raise TypeError(f"a RunConfig carries its own context (got {sorted(context)})")
        found = config_unavailable(what, None if device is None else torch.device(device))
        return format_reasons(found) if found else None
    if isinstance(what, Flags):
        found = reasons(what, RunContext(device="cpu" if device is None else device, **context))
        return format_reasons(found) if found else None
    if isinstance(what, str):
        return registry.get(what).unavailable("cpu" if device is None else device, **context)
    raise TypeError(f"unavailable_here takes a RunConfig, Flags or a registry entry's name (got {type(what).__name__})")


def skip_unless_runs(what: RunConfig | Flags | str, *, device: str | torch.device | None = None, **context) -> None:
    """Skip the calling test, with the layers' reasons, when ``what`` cannot run here (:func:`unavailable_here`,
    same arguments)."""
    __tracebackhide__ = True  # pytest reports the skip at the calling test's line
    why = unavailable_here(what, device=device, **context)
    if why is not None:
        pytest.skip(why)


def load_script(name: str):
    """The module of ``scripts/<name>.py`` (scripts are not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def result_of(d: dict) -> RunResult:
    """A typed result from a test's hand-built result dict, which names only the figures the test is about: a
    block given in part is completed with neutral values (a summary's quartiles and extremes at its median, over
    as many values as ``step_seconds_all`` holds; missing sizes and bytes 0; an accuracy's ``val`` its
    ``test``), and an empty ``graph`` block is none. Everything it does give goes through
    :meth:`RunResult.from_dict`, the schema the files are read with."""
    d = dict(d)
    n = len(d.get("step_seconds_all") or []) or 1

    def summary(s: dict) -> dict:
        med = s.get("median", float("nan"))
        return {"median": med, "q1": med, "q3": med, "min": med, "max": med, "n": n} | s

    def filled(cls: type, block: dict, zero: object = 0) -> dict:
        required = [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING]
        return {k: zero for k in required} | block

    if d.get("step_seconds") is not None:
        d["step_seconds"] = summary(d["step_seconds"])
    for key in ("phases", "device_phase_ms", "worker_phases"):
        if d.get(key) is not None:
            d[key] = {p: summary(v) for p, v in d[key].items()}
    if d.get("accuracy") is not None:
        acc = d["accuracy"]
        d["accuracy"] = {"metric": "accuracy", "val": acc.get("test"), "test": None} | acc
    if d.get("graph") == {}:
        d["graph"] = None
    for key, cls in (("graph", GraphInfo), ("transfer", Transfer), ("steps", StepCounts), ("memory", Memory)):
        if d.get(key) is not None:
            d[key] = filled(cls, d[key])
    if d.get("converged") is not None:
        d["converged"] = filled(Point, d["converged"], float("nan"))
    d["curve"] = [filled(Point, p, float("nan")) for p in d.get("curve") or []]
    d.setdefault("config", {})
    d.setdefault("status", "ok")
    return RunResult.from_dict(d)
