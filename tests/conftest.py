import os

import pytest
import torch
from hypothesis import HealthCheck, settings

# Derandomized profile for CI (reproducible failures); a faster local default.
settings.register_profile("ci", derandomize=True, max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=40, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(scope="session")
def tiny_graph():
    from gnnbench.graphs import GraphSpec, generate

    return generate(GraphSpec.preset("tiny"))
