"""The shared test helpers of tests/helpers.py: the skip helper answers exactly as the layers do."""

import dataclasses

import pytest

from gnnbench import registry
from gnnbench.flags import Flags, format_reasons
from gnnbench.training import config_unavailable
from tests.helpers import QUICK, skip_unless_runs, unavailable_here


def test_unavailable_here_is_the_layers_answer_for_configurations_flags_and_entries():
    pinned = dataclasses.replace(QUICK, flags=QUICK.flags.replace(pin_memory=True))  # QUICK is a CPU run
    assert unavailable_here(QUICK) is None
    assert "pinned" in unavailable_here(pinned) and unavailable_here(pinned) == format_reasons(
        config_unavailable(pinned)
    )
    assert unavailable_here(Flags(cached_norm=True)) is None
    assert "model 'sage' has none" in unavailable_here(Flags(cached_norm=True), model="sage")
    assert unavailable_here("pin_memory") == registry.get("pin_memory").unavailable("cpu")
    assert unavailable_here("data_parallel") is None  # on its own nproc
    assert "needs --nproc >= 2 (got 1)" in unavailable_here("data_parallel", world_size=1)
    with pytest.raises(TypeError, match="a RunConfig carries its own context"):
        unavailable_here(QUICK, model="sage")
    with pytest.raises(TypeError, match=r"\(got int\)"):
        unavailable_here(3)


def test_skip_unless_runs_skips_with_the_layers_reason():
    skip_unless_runs(QUICK)  # runs here: no skip
    with pytest.raises(pytest.skip.Exception, match="pin_memory: pinned"):
        skip_unless_runs(Flags(pin_memory=True))
