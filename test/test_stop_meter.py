"""The stop meter: an arm's stop measured on joint states split across messages."""

from __future__ import annotations

import numpy as np
import pytest

from mj_manipulator_ros.core.stop_meter import STILL_SPEED, StopMeter


def feed(meter: StopMeter, t: np.ndarray, q: np.ndarray, split: bool) -> None:
    """Joint states of arm "a" (joints j1, j2) at stamps t, positions q (M, 2); split: each
    joint in its own message (j2 first), as some drivers publish."""
    for stamp, row in zip(t, q):
        if split:
            meter.on_joint_state(["a_j2"], [row[1]], stamp)
            meter.on_joint_state(["a_j1", "other"], [row[0], 9.0], stamp)
        else:
            meter.on_joint_state(["a_j1", "a_j2", "other"], [row[0], row[1], 9.0], stamp)


@pytest.mark.parametrize("split", [False, True])
def test_travel_and_time_from_the_request(split) -> None:
    # j1 decelerates from 0.5 rad/s to rest over 0.2 s after a request at t = 1.0; j2 stands
    t = np.arange(0.0, 1.6, 0.002)
    v = np.clip(0.5 * (1.2 - t) / 0.2, 0.0, 0.5)
    q1 = np.concatenate([[0.0], np.cumsum(v[:-1] * np.diff(t))])
    q = np.column_stack([q1, np.full(t.size, 0.3)])
    meter = StopMeter({"a": ("a_j1", "a_j2")})
    feed(meter, t[t < 1.0], q[t < 1.0], split)
    meter.start(1.0)
    feed(meter, t[t >= 1.0], q[t >= 1.0], split)
    f = meter.figures("a", 1.0)
    # independent reference: the area under the velocity ramp, and where it falls below the
    # meter's threshold
    assert f.travel == pytest.approx(0.5 * 0.5 * 0.2, abs=2e-3)
    expected_time = 0.2 * (1.0 - STILL_SPEED / 0.5)
    assert f.time_s == pytest.approx(expected_time, abs=0.006)
    assert f.observed_s == pytest.approx(t[-1] - 1.0)
    assert meter.figures("a", None) is None


def test_nothing_recorded_before_a_stop_and_an_unreported_arm_has_no_figures() -> None:
    meter = StopMeter({"a": ("a_j1", "a_j2"), "b": ("b_j1",)})
    feed(meter, np.array([0.0, 0.1]), np.array([[0.0, 0.0], [0.1, 0.0]]), False)
    assert meter.figures("a", 0.0) is None           # not started: nothing kept
    meter.start(0.15)
    meter.start(5.0)                                  # the first request counts
    feed(meter, np.array([0.2, 0.3]), np.array([[0.1, 0.0], [0.1, 0.0]]), False)
    f = meter.figures("a", 0.15)
    assert f.travel == 0.0 and f.time_s == 0.0
    assert meter.figures("b", 0.15) is None
