"""scripts/verdict_replay.py on the committed reference's stored rounds: the paired floors stop no real effect as
noise, and three rounds that agree by chance do not settle a row."""

import importlib.util

import pytest

from tests.helpers import ROOT

REFERENCE = ROOT / "results" / "reference" / "compare-small-cpu-0671164"  # the previous reference, run under the rule before


def _script():
    spec = importlib.util.spec_from_file_location("verdict_replay", ROOT / "scripts" / "verdict_replay.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_reference_replayed_under_the_paired_floors():
    table = _script().replay(REFERENCE, 0.10)
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in table.splitlines() if line.startswith("| ")}
    # as it ran: full_amp and prefetch stopped below the floor although their intervals exclude 1
    assert rows["full_amp"][1].startswith("below the floor") and rows["prefetch"][1].startswith("below the floor")
    assert rows["workers"][1].startswith("significant (slower) after round 3")
    # now: neither is stopped as noise, full_amp is judged per step (its steps equivalent), workers stays open
    for label in ("full_amp", "prefetch", "workers"):
        assert rows[label][2].startswith("open after round 3"), rows[label]
    assert rows["full_amp"][3].startswith("time per step x the baseline's steps")
    assert rows["fast_dropout"][3].startswith("measured time to accuracy")
    assert rows["sparse_agg"][2].startswith("significant (faster)")


@pytest.mark.slow
def test_interpolation_removes_quantization_on_the_reference_curves():
    text = _script().quantization(REFERENCE)
    first = float(text.split("first evaluation at or above: mean ")[1].split("rms ")[1].split()[0])
    interp = float(text.split("interpolated:")[1].split("rms ")[1].split()[0])
    assert interp < first
