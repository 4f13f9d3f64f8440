"""Change points in a benchmark's history: asv's step detection, with the step's size and interval."""

import numpy as np
import pytest

from gnnbench.measure.gate import available, change_points

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))


def test_a_known_step_is_found_at_its_commit_with_its_size():
    rng = np.random.default_rng(0)
    values = list(0.010 * np.exp(rng.normal(0, 0.01, 12))) + list(0.012 * np.exp(rng.normal(0, 0.01, 10)))
    commits = [f"c{i:02d}" for i in range(len(values))]
    (cp,) = change_points(values, commits)
    assert cp.index == 12 and cp.commit == "c12"
    assert cp.ratio == pytest.approx(1.2, rel=0.02) and cp.low < 1.2 < cp.high and cp.low > 1.1


def test_a_flat_noisy_series_has_no_change_point_and_bad_input_is_refused():
    rng = np.random.default_rng(1)
    values = list(0.010 * np.exp(rng.normal(0, 0.02, 30)))
    assert change_points(values, [str(i) for i in range(30)]) == []
    assert change_points([1.0, 2.0], ["a", "b"]) == [], "too short to segment"
    with pytest.raises(ValueError, match="one commit per value"):
        change_points([1.0, 1.0, 1.0], ["a"])
    with pytest.raises(ValueError, match="positive"):
        change_points([1.0, -1.0, 1.0], ["a", "b", "c"])
