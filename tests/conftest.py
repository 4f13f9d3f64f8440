"""What pytest itself loads for every test module: hypothesis profiles, the thread count, the graphs several
modules build (fixtures) and the CUDA gate. Plain values and helpers are in ``tests/helpers.py``.
"""

import os

import pytest
import torch
from hypothesis import HealthCheck, settings

from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec, generate
from gnnbench.graphs.prepare import prepare
from tests.helpers import QUICK

# Derandomized profile for CI (reproducible failures); a faster local default.
settings.register_profile(
    "ci", derandomize=True, max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=40, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

torch.set_num_threads(min(2, torch.get_num_threads()))


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


def pytest_collection_modifyitems(config, items):
    """The one CUDA gate: a test marked ``cuda`` is skipped, with that reason, where no CUDA device is present
    (``scripts/gpu_check.sh`` runs ``pytest -m cuda`` on one)."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA (marked cuda)")
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)
