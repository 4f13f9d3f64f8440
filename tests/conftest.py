"""What every test module shares: hypothesis profiles, the thread count, the quick training configuration,
the graphs several modules build, and the one way a test skips because a configuration cannot run here.

Import the plain values and helpers (``from tests.conftest import QUICK, skip_unless_runs``); request the
graphs as fixtures.
"""

import os

import pytest
import torch
from hypothesis import HealthCheck, settings

from gnnbench import registry
from gnnbench.flags import Flags, RunContext, format_reasons
from gnnbench.graphs import GraphSpec, generate
from gnnbench.graphs.prepare import prepare
from gnnbench.training import RunConfig, config_unavailable
from gnnbench.training.availability import reasons

# Derandomized profile for CI (reproducible failures); a faster local default.
settings.register_profile("ci", derandomize=True, max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=40, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

torch.set_num_threads(min(2, torch.get_num_threads()))

# The quick training configuration: tiny at 3,000 nodes, a small fanout and batch, one epoch of at most 6 steps
# (2 of them warm-up) with a small model. A module that needs a variant states how it differs:
# ``dataclasses.replace(QUICK, ...)``.
QUICK = RunConfig(spec=GraphSpec.preset("tiny", num_nodes=3000), flags=Flags(fanout=(5, 3), batch_size=96),
                  epochs=1, max_steps_per_epoch=6, warmup_steps=2, hidden=16)


@pytest.fixture(scope="session")
def tiny_graph():
    """The ``tiny`` preset as it is (10,000 nodes)."""
    return generate(GraphSpec.preset("tiny"))


@pytest.fixture(scope="session")
def quick_graph():
    """The graph of :data:`QUICK` (tiny at 3,000 nodes)."""
    return generate(QUICK.spec)


@pytest.fixture(scope="session")
def graph():
    """tiny at 4,000 nodes: the graph of the data-side tests (batch cache, subgraph sources, loaders, feature
    placement). A module that trains on another graph defines its own ``graph`` fixture."""
    return generate(GraphSpec.preset("tiny", num_nodes=4000))


@pytest.fixture(scope="session")
def prepared(graph):
    """:func:`graph`, prepared with its CSR kept (what the batch sources sample from)."""
    return prepare(graph, Flags(keep_csr=True))


def check_batch_edges(graph, batch) -> None:
    """Every edge of ``batch``, mapped back to global ids, is the graph's edge its ``e_id`` names."""
    assert torch.equal(graph.edge_index[:, batch.e_id], batch.n_id[batch.edge_index])


def unavailable_here(what: RunConfig | Flags | str, *, device: str | torch.device | None = None,
                     **context) -> str | None:
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
    raise TypeError(f"unavailable_here takes a RunConfig, Flags or a registry entry's name "
                    f"(got {type(what).__name__})")


def skip_unless_runs(what: RunConfig | Flags | str, *, device: str | torch.device | None = None,
                     **context) -> None:
    """Skip the calling test, with the layers' reasons, when ``what`` cannot run here (:func:`unavailable_here`,
    same arguments)."""
    __tracebackhide__ = True  # pytest reports the skip at the calling test's line
    why = unavailable_here(what, device=device, **context)
    if why is not None:
        pytest.skip(why)


def pytest_collection_modifyitems(config, items):
    """The one CUDA gate: a test marked ``cuda`` is skipped, with that reason, where no CUDA device is present
    (``scripts/gpu_check.sh`` runs ``pytest -m cuda`` on one)."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA (marked cuda)")
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)
